"""The loss of an edge, run (:func:`run_edge_failover`, through the frame), and its recovery (``--recover``)."""

from __future__ import annotations

from dr.base.errors import FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal
from dr.failover.frame.run import OnStep
from dr.failover.frame.site_loss import SiteRecovery, recover_site, resumed_topologies, run_site_loss
from dr.failover.frame.step import FailoverOptions
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.hub_spoke.steps import EDGE_STEPS, EdgeContext
from dr.topology import Topology, load_stack_file, load_topology
from dr.topology.hub_spoke import (
    after_edge_loss,
    check_lost_edge,
    is_hub_spoke,
)

__all__ = ["recover_edge", "run_edge_failover"]


# ---------------------------------------------------------------------------------- running


def _topologies(ref: StackRef, journal: Journal | None, edge: str) -> tuple[Topology, Topology, str, bool]:
    """``(original, desired, hub, resuming)``: from the journal of an unfinished loss of ``edge``, else
    from the stack file."""
    current = load_stack_file(ref.stack_file)
    if journal is not None and not journal.finished:
        if journal.record.source != edge:
            raise FailoverError(
                f"failover {journal.failover_id} of {journal.record.source} is unfinished.",
                f"finish it first (`drctl failover --stack {ref.name} ...` with its own flags; "
                f"{journal.path} names it), then move edge {edge}",
            )
        return *resumed_topologies(ref, journal, current), journal.record.target, True
    if not is_hub_spoke(current):
        raise FailoverError(
            f"stack '{ref.name}' is {current.architecture}: --edge moves the applications of a lost edge of a "
            "hub-spoke stack.",
            f"run `drctl failover --stack {ref.name}` without --edge",
        )
    return current, after_edge_loss(current, edge), current.active().name, False


def run_edge_failover(
    ref: StackRef,
    edge: str,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
) -> FailoverSummary:
    """Move the applications of edge ``edge`` of the hub-spoke stack ``ref`` to their fallbacks (or resume)."""
    stack = ref.name

    def title(ctx: EdgeContext) -> str:
        moves = ", ".join(f"{a} → {t}" for a, t in ctx.moves.items()) or "no application"
        return f"loss of edge {edge} ({ctx.journal.failover_id}) of stack {stack}: {moves}"

    return run_site_loss(
        EdgeContext,
        ref,
        edge,
        EDGE_STEPS,
        lambda journal: _topologies(ref, journal, edge),
        title=title,
        options=options,
        converger=converger,
        progress=progress,
        on_step=on_step,
    )


def recover_edge(ref: StackRef, edge: str, progress: Progress = lambda _m: None) -> SiteRecovery:
    """Replay into ``<edge>.<topic>`` on the hub the records of ``edge`` never replicated.

    The comparison runs again first, so a second run writes nothing. Records keep their key, value,
    headers, timestamp and partition.
    """
    journal = Journal.load(ref.made_failover_home())
    original = load_topology(ref.name, journal.record.original_config) if journal is not None else None
    if journal is None or original is None or journal.record.source != edge or not is_hub_spoke(original):
        raise FailoverError(
            f"no loss of edge {edge} in stack '{ref.name}' to recover.",
            f"run `drctl failover --stack {ref.name} --edge {edge}` first",
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
