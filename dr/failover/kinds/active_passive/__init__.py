"""Active-passive: A fails over to its passive copy B, and the standby C becomes B's passive."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr.base.errors import ConfigError
from dr.failover.kind import Confirmation, Request

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

__all__ = ["KIND", "ActivePassive"]


class ActivePassive:
    """The :class:`~dr.failover.kind.FailoverKind` of an active-passive stack (and of a hub's failover)."""

    site_flag: str | None = None

    def refusal(self, ref: StackRef, topology: Topology, request: Request) -> DRError | None:
        """Nothing to refuse before the run: its own checks come first in it."""
        return None

    def plan(self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions) -> FailoverPlan:
        """The failover's plan (:func:`~dr.failover.kinds.active_passive.run.plan_failover`)."""
        from dr.failover.kinds.active_passive import run

        return run.plan_failover(ref, options=options, stack_file=stack)

    def confirmation(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions
    ) -> Confirmation:
        """Asked unless the failover already finished (running it again changes nothing)."""
        from dr.failover.frame.journal import Journal
        from dr.failover.frame.run import already_finished

        name = ref.name
        return Confirmation(
            question=f"Fail over stack '{name}' ({options.mode or 'planned'})? Applications will move clusters",
            refusal=f"refusing to fail over stack '{name}' without confirmation.",
            look_at="`drctl failover --dry-run`",
            needless=already_finished(Journal.load(ref.failover_home), stack),
        )

    def run(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions, progress: Progress
    ) -> FailoverSummary:
        """The failover A→B→C (:func:`~dr.failover.kinds.active_passive.run.run_failover`)."""
        from dr.failover.kinds.active_passive import run

        return run.run_failover(ref, options=options, progress=progress, stack=stack)

    def recover(self, ref: StackRef, site: str, *, progress: Progress) -> SiteRecovery:
        """An active-passive failover has no lost site to replay: ``drctl recover`` replays its records."""
        raise ConfigError(
            f"stack '{ref.name}' has no lost site: --recover replays the records of a region or an edge.",
            f"replay what the verification listed with `drctl recover --stack {ref.name}`",
        )

    def site_copies(self, ref: StackRef, estate: Estate, site: str, topics: list[str] | None) -> SiteCopies:
        """An active-passive stack has no edge whose copies a verification compares."""
        raise ConfigError(
            f"stack {ref.name!r} is {estate.topology.architecture}: --edge compares an edge of a hub-spoke stack.",
            "compare two clusters with --source and --target",
        )

    def drill(
        self, ref: StackRef, topology: Topology, options: DrillOptions, *, progress: Progress, as_json: bool
    ) -> tuple[DrillReport, str]:
        """The game day A→B→C (:func:`~dr.failover.kinds.active_passive.drill.run_drill`)."""
        from dr.failover.drill.render import render_drill
        from dr.failover.kinds.active_passive import drill

        refusal = drill.external_refusal(options, topology)
        if refusal is not None:
            raise refusal
        result = drill.run_drill(ref, topology, options, progress)
        return result, drill.dump(result) if as_json else render_drill(result)


KIND = ActivePassive()
"""This architecture\'s entry of :data:`dr.failover.kinds.KINDS` (found there by the folder\'s name)."""
