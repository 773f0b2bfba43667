"""The active-active drill's result, its grade and its text: pure, typed (what ``drill.json`` holds).

:mod:`dr.failover.kinds.active_active.drill` runs the drill and fills a :class:`RegionDrillResult`;
:func:`grade_region_drill` turns its figures into checks and :func:`render_region_drill` into the
text ``drctl drill`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import Field

from dr.base.types import Model as _Model
from dr.failover.drill.grade import Aim, Finding, graded
from dr.failover.drill.render import restart_lines
from dr.failover.drill.result import ApplicationRto, Check, ConsumerReport, LinkRestart
from dr.failover.frame.render import seconds_text
from dr.failover.frame.summary import FailoverSummary

__all__ = [
    "DEFAULT_REGION_AIMS",
    "AppTraffic",
    "RegionDrillResult",
    "RejoinFigures",
    "RejoinWrites",
    "grade_region_drill",
    "longest_pause",
    "loop_topics",
    "region_checks",
    "render_region_drill",
]

DEFAULT_REGION_AIMS: dict[str, float] = {"rto_s": 10.0, "survivor_pause_s": 5.0, "rejoin_gap_s": 2.0}
"""Application RTO of the moving applications; the longest pause the survivor's own applications may see;
the returning applications' write gap in the rejoin (last write acknowledged on B → first on A)."""


class AppTraffic(_Model):
    """One producing application's traffic in the drill."""

    application: str
    home: str
    topic: str
    moved: bool
    acked_on_home: int
    acked_on_survivor: int
    """Moved applications: writes acknowledged by the survivor after the move."""
    not_acknowledged: int
    acked_during_failover: int
    longest_pause_s: float | None
    """The longest gap between two acknowledged writes (or records read) while the region failover ran."""
    reads_during_failover: int | None = None
    """The application's consumer group: records read while the region failover ran (None: no group)."""


class RejoinWrites(_Model):
    """One returning application's writes through the rejoin: its write gap and what was refused."""

    application: str
    acked_on_peer: int
    """Writes acknowledged by the peer B while the rejoin ran."""
    acked_on_home: int
    """Writes acknowledged by the rejoined A after its client configuration was published."""
    refused: int
    """Writes a broker refused while the rejoin ran (e.g. ``TOPIC_AUTHORIZATION_FAILED``): the product's order
    of grant, publication and removal is wrong if any is."""
    unanswered: int = 0
    """Writes left without an answer within the producer's message timeout (a slow or starved cluster):
    never counted as written, reported, not a refusal."""
    refused_why: dict[str, int] = Field(default_factory=dict)
    """The refused and unanswered writes by reason and cluster (``"TOPIC_AUTHORIZATION_FAILED on A" → 12``)."""
    gap: ApplicationRto
    """Last write acknowledged on B → first write acknowledged on A."""


class RejoinFigures(_Model):
    """The rejoin of the region (``drctl failover --region A --rejoin``) under its applications' traffic."""

    summary: FailoverSummary | None = None
    seconds: float | None = None
    writes: list[RejoinWrites] = Field(default_factory=list)
    moved_within_s: float | None = None
    """A's client configuration published → B's writes removed (the rejoin-release step's figure)."""
    consumers: list[ConsumerReport] = Field(default_factory=list)
    """The returning groups: read on B (``read_on_source``) and at home on A after the rejoin began."""
    positions: str = ""
    """The rejoin-consumer-groups step's summary."""


class RegionDrillResult(_Model):
    """The graded active-active drill."""

    stack: str
    architecture: str = "active-active"
    mode: str
    out: str
    region: str = ""
    survivor: str = ""
    provision_s: dict[str, float] | None = None
    failover: FailoverSummary | None = None
    failover_s: float | None = None
    traffic: list[AppTraffic] = Field(default_factory=list)
    application_rto: list[ApplicationRto] = Field(default_factory=list)
    consumers: list[ConsumerReport] = Field(default_factory=list)
    never_reached_survivor: int | None = None
    """Records of the region's topics that were not in their remote copies when the integrity step compared."""
    listed_by_verification: int = 0
    verification_exact: bool = False
    replayed: int = 0
    lost_after_recovery: int | None = None
    loops: list[str] = Field(default_factory=list)
    preview_after_failover: dict[str, int] | None = None
    rejoin: RejoinFigures | None = None
    """The fail-back under the returning applications' traffic (None: not reached)."""
    checks: list[Check] = Field(default_factory=list)
    link_restarts: list[LinkRestart] = Field(default_factory=list)
    """Links whose watchdog restarted them during the drill, after a task died."""
    grade: str = "INCOMPLETE"
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return self.grade.startswith("PASS")

    def to_json(self) -> dict[str, Any]:
        """``drill.json``."""
        return self.model_dump(mode="json")


def loop_topics(topics: Iterable[str], clusters: Iterable[str]) -> list[str]:
    """Topics named like a remote copy of a remote copy (``A.B.orders``): a replication loop's trace."""
    names = set(clusters)
    out = []
    for t in topics:
        parts = t.split(".")
        if len(parts) > 2 and parts[0] in names and parts[1] in names:
            out.append(t)
    return sorted(out)


def longest_pause(times: Iterable[float], start: float, end: float) -> float | None:
    """The longest stretch of ``[start, end]`` without an event of ``times`` (epoch seconds), or None
    when the window is empty or inverted."""
    if end <= start:
        return None
    inside = sorted(t for t in times if start <= t <= end)
    edges = [start, *inside, end]
    return round(max(b - a for a, b in pairwise(edges)), 3)


def region_checks(r: RegionDrillResult, aims: dict[str, float]) -> list[Finding]:
    """Each check: a correctness check's name and outcome (None: does not apply), or a timing aim."""
    A, B = r.region, r.survivor
    found: list[Finding] = [
        Aim.of(
            f"application RTO ≤ {aims['rto_s']:.0f}s ({x.application} {x.kind}: {seconds_text(x.rto_s)})",
            x.rto_s,
            aims["rto_s"],
        )
        for x in r.application_rto
    ]
    moved = [t for t in r.traffic if t.moved]
    stayed = [t for t in r.traffic if not t.moved]
    s = r.failover
    found += [
        (f"region failover completed ({A} decommissioned)", s is not None and s.status == "completed"),
        (
            f"{B}'s own applications wrote during the failover ("
            + ", ".join(f"{t.application} {t.acked_during_failover}" for t in stayed)
            + ")",
            None if not stayed else all(t.acked_during_failover > 0 for t in stayed),
        ),
        Aim(
            f"{B}'s own applications never interrupted (longest pause ≤ {aims['survivor_pause_s']:.0f}s: "
            + ", ".join(f"{t.application} {seconds_text(t.longest_pause_s)}" for t in stayed)
            + ")",
            tuple(t.longest_pause_s for t in stayed),
            aims["survivor_pause_s"],
        ),
        (
            f"{A}'s applications write on {B} after the move",
            None if not moved else all(t.acked_on_survivor > 0 for t in moved),
        ),
        (f"verification listed exactly the records that never reached {A}.<topic> on {B}", r.verification_exact),
        ("no acknowledged record lost after recovery", r.lost_after_recovery == 0),
        (
            "moved consumers skipped no record",
            None if not r.consumers else all(c.skipped == 0 and c.read_on_target > 0 for c in r.consumers),
        ),
        ("no replication loop (no <peer>.<peer>.<topic> topic)", not r.loops),
        ("`pulumi preview` proposes no change after the failover", r.preview_after_failover == {}),
    ]
    if r.mode == "planned":
        found.append((f"planned: every record of {A} reached {B} before the move", r.never_reached_survivor == 0))
    return found + rejoin_checks(r, aims)


def rejoin_checks(r: RegionDrillResult, aims: dict[str, float]) -> list[Finding]:
    """The rejoin's checks: it completed; the returning applications' writes never refused and their write
    gap within the aim; their groups skipped nothing at home."""
    A, j = r.region, r.rejoin
    if j is None:
        return [(f"{A} rejoined (fail-back under its applications' traffic)", False)]
    found: list[Finding] = [
        (
            f"{A} rejoined ({A} active again, its applications home)",
            j.summary is not None and j.summary.status == "completed",
        )
    ]
    found += [
        Aim.of(
            f"rejoin write gap ≤ {aims['rejoin_gap_s']:.0f}s ({w.application}: {seconds_text(w.gap.rto_s)}, "
            f"{w.gap.measured})",
            w.gap.rto_s,
            aims["rejoin_gap_s"],
        )
        for w in j.writes
    ]
    found += [
        (
            f"rejoin: no write of {A}'s applications refused ("
            + ", ".join(
                f"{w.application} {w.refused}"
                + (f", {w.unanswered} unanswered" if w.unanswered else "")
                + _why(w.refused_why)
                for w in j.writes
            )
            + ")",
            None if not j.writes else all(w.refused == 0 and w.acked_on_home > 0 for w in j.writes),
        ),
        (
            f"returning consumers skipped no record on {A}",
            None if not j.consumers else all(c.skipped == 0 and c.read_on_target > 0 for c in j.consumers),
        ),
    ]
    return found


def _why(reasons: dict[str, int]) -> str:
    return f" — {', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))}" if reasons else ""


def rejoin_lines(r: RegionDrillResult) -> list[str]:
    """The rejoin's figures as text."""
    j = r.rejoin
    if j is None:
        return [f"rejoin of {r.region}: not reached"]
    steps = ", ".join(f"{s.name} {seconds_text(s.seconds)}" for s in j.summary.steps) if j.summary else "—"
    lines = [f"rejoin of {r.region} (back from {r.survivor}) {seconds_text(j.seconds)}: {steps}"]
    lines += [
        f"  {w.application}: {w.acked_on_peer} acknowledged on {r.survivor} and {w.acked_on_home} on {r.region} "
        f"while it ran, {w.refused} refused, {w.unanswered} unanswered{_why(w.refused_why)}; "
        f"write gap {seconds_text(w.gap.rto_s)} ({w.gap.measured}); {r.region}'s file published "
        f"{seconds_text(j.moved_within_s)} before the removal of {r.survivor}'s writes began"
        for w in j.writes
    ]
    lines += [
        f"  consumer group {c.group}: {c.read_on_source} read on {r.survivor}, {c.read_on_target} at home on "
        f"{r.region}, {c.read_twice} read twice, {c.skipped} skipped"
        for c in j.consumers
    ]
    if j.positions:
        lines.append(f"  positions: {j.positions}")
    return lines


def grade_region_drill(r: RegionDrillResult, aims: dict[str, float] | None = None, *, strict: bool = False) -> None:
    """Set the checks and the grade (:func:`dr.failover.drill.grade.graded`; the run's error first)."""
    known = {**DEFAULT_REGION_AIMS, **{k: v for k, v in (aims or {}).items() if k in DEFAULT_REGION_AIMS}}
    r.checks, grade = graded(region_checks(r, known), strict=strict)
    r.grade = f"FAIL (the drill stopped: {r.error})" if r.error is not None else grade


def render_region_drill(r: RegionDrillResult) -> str:
    """The graded active-active drill as text: the grade, each check, then the figures behind them."""
    lines = [
        f"DRILL ({r.mode}, active-active) on stack {r.stack}: region {r.region} → {r.survivor} — {r.grade}",
        *(f"  [{k.result:>4}] {k.check}" for k in r.checks),
        "application RTO (each moving application, on its own traffic):",
    ]
    lines += [f"  {x.application} {x.kind}: {seconds_text(x.rto_s)} ({x.measured})" for x in r.application_rto] or [
        "  none measured"
    ]
    lines.append("traffic:")
    for t in r.traffic:
        where = f"{t.acked_on_home} acknowledged on {t.home}" + (
            f", {t.acked_on_survivor} on {r.survivor} after the move" if t.moved else ""
        )
        reads = "" if t.reads_during_failover is None else f", {t.reads_during_failover} read"
        lines.append(
            f"  {t.application} (home {t.home}{', moved' if t.moved else ''}): {where}; during the failover "
            f"{t.acked_during_failover} written{reads}, longest pause {seconds_text(t.longest_pause_s)}; "
            f"{t.not_acknowledged} not acknowledged"
            + (" (refused or unanswered around the move: never counted as written)" if t.moved else "")
        )
    for c in r.consumers:
        lines.append(
            f"  consumer group {c.group}: {c.read_on_source} read on {r.region}, {c.read_on_target} on "
            f"{r.survivor}, {c.read_twice} read twice, {c.skipped} skipped"
        )

    def n(v: int | None) -> str:
        return "—" if v is None else str(v)

    lines.append(
        f"records of {r.region} never in {r.region}.<topic> on {r.survivor}: {n(r.never_reached_survivor)} "
        f"(verification listed {r.listed_by_verification}, replayed {r.replayed}); acknowledged and lost after "
        f"recovery: {n(r.lost_after_recovery)}"
    )
    steps = ", ".join(f"{s.name} {seconds_text(s.seconds)}" for s in r.failover.steps) if r.failover else "—"
    lines.append(f"region failover {seconds_text(r.failover_s)}: {steps}")
    lines.append(f"loop topics: {', '.join(r.loops) or 'none'}; preview after the failover: {r.preview_after_failover}")
    lines += rejoin_lines(r)
    lines += restart_lines(r.link_restarts)
    if r.error:
        lines.append(f"the drill stopped: {r.error}")
    lines.append(f"drill result: {Path(r.out) / 'drill.json'} ({r.seconds:.0f}s)")
    return "\n".join(lines)
