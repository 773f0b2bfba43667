"""Hub-and-spoke: the hub fails over as an active-passive pair (this kind wraps
:mod:`dr.failover.kinds.active_passive`, its edges' links resuming into the new hub), and a lost edge's
applications move to their fallbacks (``--edge``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr.failover.kind import Confirmation, Request
from dr.failover.kinds.active_passive import KIND as ACTIVE_PASSIVE
from dr.topology.hub_spoke import LOST_SITE

if TYPE_CHECKING:
    from dr.base.errors import DRError
    from dr.base.stackref import StackRef
    from dr.base.types import Reporter as Progress
    from dr.estate.estate import Estate
    from dr.failover.act.edge_resume import SiteCopies
    from dr.failover.drill.frame import DrillOptions
    from dr.failover.frame.plan import FailoverPlan
    from dr.failover.frame.site_loss import SiteRecovery
    from dr.failover.frame.step import FailoverOptions
    from dr.failover.frame.summary import FailoverSummary
    from dr.failover.kind import DrillReport
    from dr.topology import StackFile, Topology

__all__ = ["KIND", "HubSpoke"]


class HubSpoke:
    """The :class:`~dr.failover.kind.FailoverKind` of a hub-and-spoke stack: the hub's failover (the
    active-passive one), or an edge's loss."""

    site_flag: str | None = LOST_SITE.flag  # as the topology declares it (``drctl status`` names it too)

    def refusal(self, ref: StackRef, topology: Topology, request: Request) -> DRError | None:
        """Nothing to refuse before the run: its own checks come first in it."""
        return None

    def plan(self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions) -> FailoverPlan:
        """The hub failover's plan, or the edge's loss's."""
        if request.site is None:
            return ACTIVE_PASSIVE.plan(ref, stack, request, options=options)
        from dr.failover.kinds.hub_spoke.run import plan_edge_failover

        return plan_edge_failover(ref, request.site, options=options, stack=stack)

    def confirmation(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions
    ) -> Confirmation:
        """The hub failover's, or the edge's: its applications move."""
        if request.site is None:
            return ACTIVE_PASSIVE.confirmation(ref, stack, request, options=options)
        edge = request.site
        return Confirmation(
            question=f"Move edge {edge}'s applications of stack '{ref.name}' to their fallbacks?",
            refusal=f"refusing to move edge {edge}'s applications of stack '{ref.name}' without confirmation.",
            look_at=f"`drctl failover --stack {ref.name} --edge {edge} --dry-run`",
        )

    def run(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions, progress: Progress
    ) -> FailoverSummary:
        """The hub failover, or the loss of an edge (:mod:`~dr.failover.kinds.hub_spoke.run`)."""
        if request.site is None:  # the hub's failover: the active-passive one, with its edges' links around it
            from dr.failover.kinds.active_passive.run import run_failover
            from dr.failover.kinds.hub_spoke.steps import HUB_STEPS

            return run_failover(ref, options=options, progress=progress, steps=HUB_STEPS, stack=stack)
        from dr.failover.kinds.hub_spoke.run import run_edge_failover

        return run_edge_failover(ref, request.site, options=options, progress=progress, stack=stack)

    def recover(self, ref: StackRef, site: str, *, progress: Progress) -> SiteRecovery:
        """Replay the edge's records that never reached the hub."""
        from dr.failover.kinds.hub_spoke.run import recover_edge

        return recover_edge(ref, site, progress=progress)

    def site_copies(self, ref: StackRef, estate: Estate, site: str, topics: list[str] | None) -> SiteCopies:
        """Edge ``site`` against the hub's copies (:func:`~dr.failover.kinds.hub_spoke.run.edge_copies`)."""
        from dr.failover.kinds.hub_spoke.run import edge_copies

        return edge_copies(ref, estate, site, topics)

    def drill(
        self, ref: StackRef, topology: Topology, options: DrillOptions, *, progress: Progress, as_json: bool
    ) -> tuple[DrillReport, str]:
        """A hub failover under edge traffic, graded per edge and per hub application."""
        from dr.failover.kinds.hub_spoke.drill import dump_hub, run_hub_drill

        result = run_hub_drill(ref, topology, options, progress)
        return result, dump_hub(result) if as_json else result.render()


KIND = HubSpoke()
"""This architecture\'s entry of :data:`dr.failover.kinds.KINDS` (found there by the folder\'s name)."""
