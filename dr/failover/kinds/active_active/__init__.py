"""Active-active: peers replicate both ways; a region's applications move to a surviving peer
(``--region``), and the rebuilt region rejoins (``--region --rejoin``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from dr.base.errors import ConfigError
from dr.failover.kind import Confirmation, Request
from dr.topology.active_active import LOST_SITE

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

__all__ = ["KIND", "ActiveActive"]


class ActiveActive:
    """The :class:`~dr.failover.kind.FailoverKind` of an active-active stack: every run names a region."""

    site_flag: str | None = LOST_SITE.flag  # as the topology declares it (``drctl status`` names it too)

    def refusal(self, ref: StackRef, topology: Topology, request: Request) -> DRError | None:
        """A failover of an active-active stack moves one region: refused without one."""
        if request.site is not None:
            return None
        from dr.topology.active_active import peers

        return ConfigError(
            f"stack '{ref.name}' is active-active: a failover moves one region's applications to a peer.",
            f"name the region that fails: `drctl failover --stack {ref.name} --region <{'|'.join(peers(topology))}>`",
        )

    def plan(self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions) -> FailoverPlan:
        """The region failover's plan, or the rejoin's."""
        region = _region(request)
        if request.rejoin:
            from dr.failover.kinds.active_active.rejoin import plan_region_rejoin

            return plan_region_rejoin(ref, region, stack)
        from dr.failover.kinds.active_active.run import plan_region_failover

        return plan_region_failover(ref, region, options=options, stack=stack)

    def confirmation(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions
    ) -> Confirmation:
        """Always asked: the region's applications move."""
        region = _region(request)
        if request.rejoin:
            return Confirmation(
                question=f"Rebuild region {region} of stack '{ref.name}' and move its applications home?",
                refusal=f"refusing to bring region {region} of stack '{ref.name}' back without confirmation.",
                look_at=f"`drctl failover --stack {ref.name} --region {region} --rejoin --dry-run`",
            )
        return Confirmation(
            question=f"Move region {region}'s applications of stack '{ref.name}' to a surviving peer?",
            refusal=f"refusing to fail region {region} of stack '{ref.name}' over without confirmation.",
            look_at=f"`drctl failover --stack {ref.name} --region {region} --dry-run`",
        )

    def run(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions, progress: Progress
    ) -> FailoverSummary:
        """The region failover (:mod:`~dr.failover.kinds.active_active.run`), or the rejoin."""
        region = _region(request)
        if request.rejoin:
            from dr.failover.kinds.active_active.rejoin import run_region_rejoin

            return run_region_rejoin(ref, region, options=options, progress=progress, stack=stack)
        from dr.failover.kinds.active_active.run import run_region_failover

        return run_region_failover(ref, region, options=options, progress=progress, stack=stack)

    def recover(self, ref: StackRef, site: str, *, progress: Progress) -> SiteRecovery:
        """Replay the region's records that never reached the survivor."""
        from dr.failover.kinds.active_active.run import recover_region

        return recover_region(ref, site, progress=progress)

    def site_copies(self, ref: StackRef, estate: Estate, site: str, topics: list[str] | None) -> SiteCopies:
        """A region is compared with its copies by its own failover (``--region``), not by ``drctl verify``."""
        raise ConfigError(
            f"stack {ref.name!r} is {estate.topology.architecture}: --edge compares an edge of a hub-spoke stack.",
            "compare two clusters with --source and --target",
        )

    def drill(
        self, ref: StackRef, topology: Topology, options: DrillOptions, *, progress: Progress, as_json: bool
    ) -> tuple[DrillReport, str]:
        """Traffic on every peer, the first peer's region failed over, graded."""
        from dr.failover.kinds.active_active.drill import run_region_drill
        from dr.failover.kinds.active_active.drill_result import render_region_drill

        result = run_region_drill(ref, topology, options, progress)
        return result, json.dumps(result.to_json(), indent=2) if as_json else render_region_drill(result)


def _region(request: Request) -> str:
    """The region a request names (:meth:`ActiveActive.refusal` refused one without)."""
    if request.site is None:
        raise ConfigError("an active-active failover names its region.", "pass --region <the failed peer>")
    return request.site


KIND = ActiveActive()
"""This architecture\'s entry of :data:`dr.failover.kinds.KINDS` (found there by the folder\'s name)."""
