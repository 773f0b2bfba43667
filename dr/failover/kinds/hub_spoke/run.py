"""The loss of an edge, run (:func:`run_edge_failover`, through the frame), its recovery (``--recover``), and
the comparison of an edge with its copies on the hub (:func:`edge_copies`, ``drctl verify --edge``).

Its plan — ``drctl failover --edge E --dry-run``: the plan of an edge's loss; changes nothing.
"""

from __future__ import annotations

from dr.base.errors import ConfigError, FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.failover.act.edge_resume import SiteCopies
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal
from dr.failover.frame.plan import FailoverPlan, plan_lines
from dr.failover.frame.run import OnStep
from dr.failover.frame.site_loss import (
    Found,
    SiteRecovery,
    lost_site,
    named_steps,
    plan_site_loss,
    recover_site,
    run_site_loss,
    site_topologies,
)
from dr.failover.frame.step import FailoverOptions
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.hub_spoke.steps import EDGE_STEPS, EdgeContext
from dr.topology import StackFile, Topology
from dr.topology.hub_spoke import (
    after_edge_loss,
    check_lost_edge,
    edge_applications,
    edge_link,
    edges,
    fallback_of,
    is_hub_spoke,
    lost_edges,
)
from dr.topology.topics import remote_topic

__all__ = ["EdgePlan", "edge_copies", "plan_edge_failover", "recover_edge", "run_edge_failover", "topologies"]


# ---------------------------------------------------------------------------------- running


def topologies(ref: StackRef, read: StackFile, journal: Journal | None, edge: str) -> Found:
    """``(original, desired, hub, resuming)`` of the loss of ``edge`` (:func:`site_topologies`)."""

    def unfinished(journal: Journal) -> FailoverError | None:
        if journal.record.source == edge:
            return None
        return FailoverError(
            f"failover {journal.failover_id} of {journal.record.source} is unfinished.",
            f"finish it first (`drctl failover --stack {ref.name} ...` with its own flags; "
            f"{journal.path} names it), then move edge {edge}",
        )

    def fresh(current: Topology) -> tuple[Topology, str]:
        if not is_hub_spoke(current):
            raise FailoverError(
                f"stack '{ref.name}' is {current.architecture}: --edge moves the applications of a lost edge of a "
                "hub-spoke stack.",
                f"run `drctl failover --stack {ref.name}` without --edge",
            )
        return after_edge_loss(current, edge), current.active().name

    return site_topologies(ref, read, journal, unfinished=unfinished, fresh=fresh)


def run_edge_failover(
    ref: StackRef,
    edge: str,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """Move the applications of edge ``edge`` of the hub-spoke stack ``ref`` to their fallbacks (or resume);
    ``stack``: its stack file as the command read it (None: read once the lock is held)."""

    def title(ctx: EdgeContext) -> str:
        moves = ", ".join(f"{a} → {t}" for a, t in ctx.moves.items()) or "no application"
        return f"loss of edge {edge} ({ctx.journal.failover_id}) of stack {ref.name}: {moves}"

    return run_site_loss(
        EdgeContext,
        ref,
        edge,
        EDGE_STEPS,
        lambda journal, read: topologies(ref, read, journal, edge),
        title=title,
        options=options,
        converger=converger,
        progress=progress,
        on_step=on_step,
        stack=stack,
    )


def recover_edge(ref: StackRef, edge: str, progress: Progress = lambda _m: None) -> SiteRecovery:
    """Replay into ``<edge>.<topic>`` on the hub the records of ``edge`` never replicated.

    The comparison runs again first, so a second run writes nothing. Records keep their key, value,
    headers, timestamp and partition.
    """
    journal, original = lost_site(
        ref,
        edge,
        is_loss=lambda _journal, original: is_hub_spoke(original),
        refusal=FailoverError(
            f"no loss of edge {edge} in stack '{ref.name}' to recover.",
            f"run `drctl failover --stack {ref.name} --edge {edge}` first",
        ),
    )
    estate = Estate(original, ref.state_dir)
    a_ep, hub_ep = estate.endpoint(edge), estate.endpoint(journal.record.target)
    topics = [t.name for t in original.topics_for(check_lost_edge(original, edge))]
    done = recover_site(
        a_ep,
        hub_ep,
        edge,
        topics,
        rerun=f"rerun `drctl failover --stack {ref.name} --edge {edge} --recover` (it writes only what is still missing)",
        progress=progress,
    )
    progress(f"replayed {done.replayed} records of {edge} into {edge}.<topic> on {journal.record.target}")
    return done


# ---------------------------------------------------------------------------------- drctl verify --edge


def edge_copies(ref: StackRef, estate: Estate, edge: str, topics: list[str] | None = None) -> SiteCopies:
    """Edge ``edge`` of the hub-and-spoke stack ``ref`` against the hub's copies ``<edge>.<topic>``
    (:func:`dr.failover.act.edge_resume.edge_copy_report`, with the ``hub`` and the ``topics`` compared): the topics
    its link carries, or those of them named in ``topics``."""
    from dr.failover.act.edge_resume import edge_copy_report  # looked up when called (tests stub it)

    topology = estate.topology
    link = edge_link(topology, edge) if edge in {c.name for c in edges(topology)} else None
    if link is None:
        lost = edge in {c.name for c in lost_edges(topology)}
        raise ConfigError(
            f"stack {ref.name!r} has "
            + (f"lost edge {edge!r}: no link of it feeds the hub." if lost else f"no edge {edge!r} with a link."),
            f"its loss compares it with its copies: `drctl failover --stack {ref.name} --edge {edge}`"
            if lost
            else f"use one of: {', '.join(c.name for c in edges(topology)) or '(none)'}",
        )
    carried = [t.name for t in topology.topics_for(link)]
    unknown = sorted(set(topics or ()) - set(carried))
    if unknown:
        raise ConfigError(
            f"link {link.name} does not carry {', '.join(unknown)}.",
            f"name topics it carries ({', '.join(carried) or 'none'}), or leave --topics out",
        )
    compared = topics or carried
    report = edge_copy_report(edge, estate.endpoint(edge), estate.endpoint(link.target), compared)
    return SiteCopies(**report, hub=link.target, topics=compared)


# ---------------------------------------------------------------------------------- its plan (--dry-run)
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
