"""``drctl failover --edge E --dry-run``: the plan of an edge's loss; changes nothing."""

from __future__ import annotations

from dr.base.stackref import StackRef
from dr.failover.frame.plan import FailoverPlan, plan_lines
from dr.failover.frame.site_loss import named_steps, plan_site_loss
from dr.failover.frame.step import FailoverOptions
from dr.failover.kinds.hub_spoke.run import topologies
from dr.failover.kinds.hub_spoke.steps import EDGE_STEPS
from dr.topology import StackFile
from dr.topology.hub_spoke import (
    check_lost_edge,
    edge_applications,
    fallback_of,
)
from dr.topology.topics import remote_topic

__all__ = ["EdgePlan", "plan_edge_failover"]


class EdgePlan(FailoverPlan):
    """What ``drctl failover --edge E --dry-run`` shows: the steps, who moves where, the stack-file diff."""

    mode: str
    edge: str
    hub: str
    moves: dict[str, str]
    link_stopped: str
    copies_kept: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str

    def render(self) -> str:
        """The plan for a person."""
        lines = [
            f"{self.mode} loss of edge {self.edge} of stack {self.stack} (hub {self.hub})",
            "applications moving: " + (", ".join(f"{a} → {t}" for a, t in self.moves.items()) or "none"),
            f"link stopped: {self.link_stopped}",
            f"copies kept on {self.hub} and its passive copy: {', '.join(self.copies_kept) or 'none'}",
            *plan_lines(self.steps, self.stack_file_diff),
        ]
        return "\n".join(lines)


def plan_edge_failover(
    ref: StackRef, edge: str, *, options: FailoverOptions, stack: StackFile | None = None
) -> EdgePlan:
    """The plan of the loss of ``edge`` (``stack``: the stack file as the command read it); changes nothing."""
    original, _desired, hub, diff = plan_site_loss(
        ref, lambda journal, read: topologies(ref, read, journal, edge), stack
    )
    link = check_lost_edge(original, edge)

    return EdgePlan(
        stack=ref.name,
        mode=options.mode or "planned",
        edge=edge,
        hub=hub,
        moves={app.name: fallback_of(original, app) for app in edge_applications(original, edge)},
        link_stopped=link.name,
        copies_kept=[remote_topic(edge, t.name) for t in original.topics_for(link)],
        steps=named_steps(EDGE_STEPS, E=edge, H=hub),
        stack_file_diff=diff,
    )
