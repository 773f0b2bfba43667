"""``drctl failover --region A --dry-run``: the region failover's plan; changes nothing."""

from __future__ import annotations

from dr.base.stackref import StackRef
from dr.failover.frame.plan import FailoverPlan, plan_lines
from dr.failover.frame.site_loss import named_steps, plan_site_loss
from dr.failover.frame.step import FailoverOptions
from dr.failover.kinds.active_active.run import topologies
from dr.failover.kinds.active_active.steps import REGION_STEPS
from dr.topology import StackFile
from dr.topology.active_active import (
    moving_applications,
)

__all__ = ["RegionPlan", "plan_region_failover"]


class RegionPlan(FailoverPlan):
    """What ``drctl failover --region A --dry-run`` shows: the steps, who moves, and the stack-file diff."""

    mode: str
    region: str
    survivor: str
    moving: list[str]
    links_stopped: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str

    def render(self) -> str:
        """The plan for a person."""
        lines = [
            f"{self.mode} region failover of stack {self.stack}: {self.region} → {self.survivor}",
            f"applications moving: {', '.join(self.moving) or 'none'}",
            f"links stopped: {', '.join(self.links_stopped) or 'none'}",
            *plan_lines(self.steps, self.stack_file_diff),
        ]
        return "\n".join(lines)


def plan_region_failover(
    ref: StackRef, region: str, *, options: FailoverOptions, stack: StackFile | None = None
) -> RegionPlan:
    """The plan of a region failover (``stack``: the stack file as the command read it); changes nothing."""
    original, _desired, survivor, diff = plan_site_loss(
        ref, lambda journal, read: topologies(ref, read, journal, region), stack
    )
    return RegionPlan(
        stack=ref.name,
        mode=options.mode or "planned",
        region=region,
        survivor=survivor,
        moving=moving_applications(original, region),
        links_stopped=[lk.name for lk in original.links if region in (lk.source, lk.target)],
        steps=named_steps(REGION_STEPS, A=region, B=survivor),
        stack_file_diff=diff,
    )
