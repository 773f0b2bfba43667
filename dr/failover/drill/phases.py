"""Where a drill's time went: its phases (provisioning, each cycle's warm-up, failover, proof, reads,
the teardown), timed as they run and kept in ``drill.json`` (``phases``) and the printed summary.

A game day that takes longer than expected shows here which part did: the estate coming up, the link
syncing the traffic's consumer group, the failover itself, the verification, or the teardown.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from dr.base.types import Model

__all__ = ["Phase", "PhaseClock", "phases_text"]


class Phase(Model):
    """One phase of a drill and the wall-clock seconds it took."""

    name: str
    seconds: float


class PhaseClock:
    """Times the phases of one drill, in the order they ran (a phase cut short by an error is kept too)."""

    def __init__(self) -> None:
        self.phases: list[Phase] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as phase ``name``."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.phases.append(Phase(name=name, seconds=round(time.monotonic() - t0, 3)))


def phases_text(phases: list[Phase]) -> str | None:
    """One line for the printed summary (pure): each phase and its seconds; None when none was timed."""
    if not phases:
        return None
    return "time per phase: " + " · ".join(f"{p.name} {p.seconds:.1f}s" for p in phases)
