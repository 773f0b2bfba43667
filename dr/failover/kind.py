"""What varies with the architecture, declared once: :class:`FailoverKind`.

The frame (lock, journal, resume, progress, summary: :mod:`dr.failover.frame.run`) is written once and
never asks which architecture it runs. Each architecture is one :class:`FailoverKind` in
:data:`dr.failover.kinds.KINDS`: its runs (a failover, the loss of one of its sites, a rejoin), their
plans, the recovery of a lost site's records, and its drill. ``drctl`` looks the kind up once, by the
stack's architecture, and asks it — passing the stack resolved once (:class:`~dr.base.stackref.StackRef`)
and its stack file read once (:class:`~dr.topology.StackFile`), which no layer under it reads again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

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
    from dr.topology import StackFile, Topology

__all__ = ["Confirmation", "DrillReport", "FailoverKind", "Request"]


@dataclass(frozen=True)
class Request:
    """Which run of a stack: its failover (``site`` None), the loss of ``site``, or (``rejoin``) its return."""

    site: str | None = None
    rejoin: bool = False


@dataclass(frozen=True)
class Confirmation:
    """How a run is confirmed: ``question`` asked on a terminal; without one, refused as ``refusal`` naming
    the dry run to ``look_at`` first; not asked at all when ``needless`` (a finished run changes nothing)."""

    question: str
    refusal: str
    look_at: str
    needless: bool = False


class DrillReport(Protocol):
    """A drill's graded result, whichever the architecture."""

    @property
    def passed(self) -> bool:
        """Every check passed."""

    grade: str
    out: str


class FailoverKind(Protocol):
    """One architecture's failover: its runs, their plans, its recovery and its drill."""

    site_flag: str | None
    """The ``drctl failover`` flag naming a lost site of this architecture (``region``, ``edge``), if any."""

    def refusal(self, ref: StackRef, topology: Topology, request: Request) -> DRError | None:
        """Why ``request`` cannot run on this stack, before anything is read or changed (None: it can)."""

    def plan(self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions) -> FailoverPlan:
        """What the run would do, from the stack file as read (``stack``); changes nothing."""

    def confirmation(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions
    ) -> Confirmation:
        """How the run is confirmed."""

    def run(
        self, ref: StackRef, stack: StackFile, request: Request, *, options: FailoverOptions, progress: Progress
    ) -> FailoverSummary:
        """Run it (or resume it) from the stack file as read (``stack``): the one summary of every run."""

    def recover(self, ref: StackRef, site: str, *, progress: Progress) -> SiteRecovery:
        """Replay the records of the lost ``site`` that never reached its peer: the one recovery report
        (:class:`dr.failover.frame.site_loss.SiteRecovery`)."""

    def site_copies(self, ref: StackRef, estate: Estate, site: str, topics: list[str] | None) -> SiteCopies:
        """``drctl verify --<site_flag> <site>``: the site's topics (those of ``topics``, else all its link
        carries) against their copies ``<site>.<topic>`` on the cluster its link feeds."""

    def drill(
        self, ref: StackRef, topology: Topology, options: DrillOptions, *, progress: Progress, as_json: bool
    ) -> tuple[DrillReport, str]:
        """Run the game day on a copy of the stack ``ref``, whose topology is ``topology`` (both as the command
        resolved and read them, once): its graded result and its text (JSON with ``as_json``)."""
