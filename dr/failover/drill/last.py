"""The stack's last drill, kept in its state directory (``<state>/drills/last.json``) for the controller.

A drill writes its full result to ``<out>/drill.json`` wherever ``--out`` says (a directory of the
operator's choosing); the controller (``kdr_drill_*`` metrics) and the ``KdrNoRecentDrill`` alert need
one known place per stack, so every drill also records there its grade, its worst application RTO and
when it finished — nothing else, no secret.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol, cast

from dr.base.files import write_json
from dr.failover.drill.result import ApplicationRto
from dr.failover.frame.summary import FailoverSummary

__all__ = ["DrillOutcome", "last_drill", "last_drill_path", "record_last_drill", "summary_of"]


def last_drill_path(state: Path) -> Path:
    """``<state>/drills/last.json``."""
    return Path(state) / "drills" / "last.json"


class Graded(Protocol):
    """A graded drill or one of its cycles: an active-passive cycle, a hub-and-spoke or an active-active drill."""

    @property
    def application_rto(self) -> list[ApplicationRto]:
        """Each application's measured outage."""

    @property
    def failover(self) -> FailoverSummary | None:
        """The failover the drill made (its RTO probe)."""


class DrillOutcome(Protocol):
    """What every drill result has (:class:`~dr.failover.drill.result.DrillResult` and the hub-and-spoke and
    active-active ones)."""

    @property
    def stack(self) -> str:
        """The stack drilled."""

    @property
    def mode(self) -> str:
        """``planned`` or ``unplanned``."""

    @property
    def out(self) -> str:
        """The directory of its ``drill.json``."""

    @property
    def grade(self) -> str:
        """``PASS ...``, ``FAIL ...`` or ``INCOMPLETE ...``."""

    @property
    def passed(self) -> bool:
        """The drill passed."""


def summary_of(result: DrillOutcome, *, finished_at: float) -> dict[str, Any]:
    """What is kept of ``result``: stack, mode, grade, passed, the worst application RTO over its cycles (an
    active-passive drill's; the drill itself for the others), the failover's own RTO probe when no application
    RTO was measured, where the full result is, and when."""
    cycles = getattr(result, "cycles", None)  # an active-passive drill grades each of its cycles
    graded: list[Graded] = list(cycles) if cycles is not None else [cast(Graded, result)]  # hub, active-active
    app = [a.rto_s for g in graded for a in g.application_rto if a.rto_s is not None]
    probe = [g.failover.rto_s for g in graded if g.failover is not None and g.failover.rto_s is not None]
    return {
        "stack": result.stack,
        "mode": result.mode,
        "grade": result.grade,
        "passed": result.passed,
        "rto_s": max(app) if app else (max(probe) if probe else None),
        "rto_basis": "worst application RTO" if app else ("failover RTO probe" if probe else "not measured"),
        "result": str(Path(result.out) / "drill.json"),
        "finished_at": round(finished_at, 3),
    }


def record_last_drill(state: Path, result: DrillOutcome) -> None:
    """Keep the summary of ``result`` as the stack's last drill (written atomically, 0600)."""
    write_json(last_drill_path(state), summary_of(result, finished_at=time.time()))


def last_drill(state: Path) -> dict[str, Any] | None:
    """The stack's last drill summary, or None when none was recorded (or the file is unreadable)."""
    try:
        data = json.loads(last_drill_path(state).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
