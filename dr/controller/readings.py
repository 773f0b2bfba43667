"""What the controller reads for its metrics from what the product already keeps — each a small function.

Nothing here asks a cluster anything the status report has not: the audits' state (``drctl audit``:
``<state>/audit/<link>.json``, or the team database's row), the last drill (``<state>/drills/last.json``,
:mod:`dr.failover.drill.last`), the certificates ``drctl certificates`` lists, the end-offset snapshots
the unplanned failover estimates its RPO from, and the controller's own memory of the source's end
offsets (lag in seconds). No secret is read into a label: a certificate is named by cluster, use, subject
and serial, never by its key or PEM.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dr.failover.record.metrics import Offsets, decode_offsets, rpo_estimate

__all__ = [
    "AuditReading",
    "DrillReading",
    "EndHistory",
    "RpoReading",
    "age",
    "audit_reading",
    "copied_positions",
    "drill_reading",
    "lag_seconds",
    "read_audit",
    "rpo_reading",
]


# ------------------------------------------------------------------------------------------- lag in seconds
def lag_seconds(history: list[tuple[float, Offsets]], copied: Offsets, source_end: Offsets, now: float) -> float:
    """How long the oldest record the target lacks has been on the source, at least: ``now`` minus the first
    time the controller saw the source's end offset pass the link's copied position, over the lagging
    partitions (0 when none lags).

    ``history``: ``(seen_at, source end offsets)`` in time order; ``copied``: per source partition, the
    next offset the link copies (the source's end minus the link's lag). The record at that offset was
    written at or before the first snapshot that holds it, so the figure is a lower bound, late by at most
    one pass; a record older than the whole history counts from the history's start (still a lower bound).
    """
    oldest: float | None = None
    for tp, end in source_end.items():
        position = copied.get(tp, 0)
        if end <= position:
            continue
        seen = next((at for at, ends in history if ends.get(tp, 0) > position), None)
        seen = now if seen is None else seen
        oldest = seen if oldest is None else min(oldest, seen)
    return 0.0 if oldest is None else max(0.0, now - oldest)


class EndHistory:
    """The source clusters' end offsets as the controller saw them, pass after pass (only changes are kept,
    at most ``keep`` of them per cluster: the lag in seconds of a link behind longer counts from the oldest)."""

    def __init__(self, keep: int = 2000) -> None:
        self._seen: dict[str, deque[tuple[float, Offsets]]] = {}
        self._keep = keep

    def observe(self, cluster: str, at: float, ends: Offsets) -> None:
        """Remember ``ends``, the end offsets of ``cluster`` read at ``at``, when they changed."""
        seen = self._seen.setdefault(cluster, deque(maxlen=self._keep))
        if not seen or seen[-1][1] != ends:
            seen.append((at, dict(ends)))

    def of(self, cluster: str) -> list[tuple[float, Offsets]]:
        """What was seen of ``cluster``, oldest first."""
        return list(self._seen.get(cluster, ()))


def copied_positions(source_end: Offsets, lag_per_partition: Mapping[str, int]) -> Offsets:
    """The next offset the link copies, per source partition: its end minus the link's lag (``drctl status``'s
    ``"topic:partition"`` → records)."""
    lags = decode_offsets(dict(lag_per_partition))
    return {tp: end - lags.get(tp, 0) for tp, end in source_end.items()}


# ------------------------------------------------------------------------------------------------ RPO
@dataclass(frozen=True)
class RpoReading:
    """The records the target would lack if the source were lost now, as the unplanned failover estimates them."""

    records: int | None
    upper_bound: int | None
    basis: str


def rpo_reading(
    live_lag: int | None,
    *,
    snapshot: tuple[float | None, Offsets | None],
    target_end: Offsets | None,
    copied: Callable[[], Offsets | None],
    write_rate: float | None,
    now: float,
) -> RpoReading:
    """The unplanned failover's figure (its ``preflight`` step): the link's live lag while the source answers;
    when it does not, :func:`~dr.failover.record.metrics.rpo_estimate` of the source's last snapshot against
    the link's committed positions (``copied``, read only then; the target's end offsets when it has none).
    ``records`` is None when neither can be known (no snapshot, or the target does not answer either)."""
    if live_lag is not None:
        return RpoReading(live_lag, live_lag, "live link lag")
    at, last = snapshot
    if target_end is None:
        return RpoReading(None, None, "the source and the target do not answer")
    estimate = rpo_estimate(last, target_end, snapshot_at=at, failed_at=now, write_rate=write_rate, copied=copied())
    return RpoReading(estimate["records"], estimate["upper_bound"], estimate["basis"])


# ---------------------------------------------------------------------------------------------- audit
@dataclass(frozen=True)
class AuditReading:
    """A link's audits so far: ``verdict`` (``clean`` or ``missing``), records missing and in flight, when the
    last one ran (epoch seconds) and how many ran."""

    verdict: str
    missing: int
    in_flight: int
    at: float
    runs: int


def audit_reading(doc: Any) -> AuditReading | None:
    """The verdict of an audit state document (``drctl audit``'s, :class:`verification.audit_state.AuditState`):
    its source residue below the frontier is missing (the link passed those records), the rest in flight.
    None when no audit ran (no document) or the document does not parse (``drctl audit`` names that problem)."""
    from verification.audit_state import AuditState, split_by_frontier

    if doc is None:
        return None
    try:
        state = AuditState.from_dict(doc)
    except (ValueError, KeyError, TypeError):
        return None
    missing, in_flight = split_by_frontier(state.source_residue, state.frontier)
    return AuditReading(
        verdict="missing" if missing else "clean",
        missing=len(missing),
        in_flight=len(in_flight),
        at=state.updated_ms / 1000,
        runs=state.runs,
    )


def read_audit(state: Path, stack: str, link: str) -> AuditReading | None:
    """:func:`audit_reading` of ``link``'s audit state: the team database's row with a ``postgres://`` backend,
    else ``<state>/audit/<link>.json``."""
    import json

    from verification import audit_state
    from verification.audit import state_file

    store = audit_state.team_store_hook()
    if store is not None:
        return audit_reading(store.load_audit(stack, link))
    try:
        doc = json.loads(state_file(state, link).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return audit_reading(doc)


# ---------------------------------------------------------------------------------------------- drill
@dataclass(frozen=True)
class DrillReading:
    """The stack's last drill: its grade's first word (``PASS``, ``FAIL``, ``INCOMPLETE``), whether it passed,
    its RTO (seconds, None when not measured) and when it finished (epoch seconds)."""

    grade: str
    passed: bool
    rto_s: float | None
    at: float


def drill_reading(doc: Any) -> DrillReading | None:
    """A :func:`dr.failover.drill.last.last_drill` summary as a reading; None when there is none or it is damaged."""
    if not isinstance(doc, dict):
        return None
    grade, at, rto = doc.get("grade"), doc.get("finished_at"), doc.get("rto_s")
    if not isinstance(grade, str) or not grade or not isinstance(at, int | float):
        return None
    return DrillReading(
        grade=grade.split()[0],
        passed=bool(doc.get("passed")),
        rto_s=float(rto) if isinstance(rto, int | float) else None,
        at=float(at),
    )


def age(at: float, now: float | None = None) -> float:
    """Seconds since ``at`` (never negative)."""
    return max(0.0, (time.time() if now is None else now) - at)
