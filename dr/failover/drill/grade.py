"""The drill's grade: the checks a game day must pass, computed from one cycle's typed result.

One timing policy for every kind of drill: a check is a correctness check (PASS/FAIL) or a timing aim
(:class:`Aim`). An aim whose figure was measured and is over its bound is MISSED — printed and kept in
``drill.json`` — and fails the drill only in strict mode (``drctl drill --strict-aims``, the benchmarks); an
aim whose figure was not measured FAILs, since then something did not happen. :func:`graded` turns either
into :class:`Check` rows and the grade.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dr.failover.drill.result import Check, DrillCycle

__all__ = ["DEFAULT_AIMS", "UNATTENDED_AIM_S", "Aim", "checks", "grade", "graded"]

DEFAULT_AIMS: dict[str, float] = {"rto_s": 10.0, "a_b_c_s": 120.0}
"""Application RTO and A→B→C aims, in seconds."""

UNATTENDED_AIM_S = 60.0
"""An automatic drill's aim: the application writes on B within a minute of the site's loss, nobody awake
(detection included, so the application RTO aim is this one there)."""


@dataclass(frozen=True)
class Aim:
    """A timing aim: ``figures`` (seconds; None where not measured) each at most ``bound``."""

    name: str
    figures: tuple[float | None, ...]
    bound: float

    @classmethod
    def of(cls, name: str, figure: float | None, bound: float) -> Aim:
        """An aim on one figure."""
        return cls(name, (figure,), bound)


Finding = tuple[str, bool | None] | Aim
"""A correctness check's name and outcome (None: does not apply), or a timing aim."""


def _row(found: Finding, *, strict: bool) -> Check:
    if isinstance(found, Aim):
        if not found.figures:
            return Check(check=found.name, result="n/a", aim=True)
        if any(f is None for f in found.figures):
            return Check(check=found.name, result="FAIL", aim=True)  # not measured: something did not happen
        met = all(f is not None and f <= found.bound for f in found.figures)
        return Check(check=found.name, result="PASS" if met else ("FAIL" if strict else "MISSED"), aim=True)
    name, ok = found
    return Check(check=name, result="n/a" if ok is None else ("PASS" if ok else "FAIL"))


def graded(found: Iterable[Finding], *, strict: bool = False) -> tuple[list[Check], str]:
    """The check rows and the grade: PASS (naming the timing aims missed, if any), or FAIL with the number
    of failed checks."""
    rows = [_row(f, strict=strict) for f in found]
    failed = sum(1 for c in rows if c.result == "FAIL")
    missed = sum(1 for c in rows if c.result == "MISSED")
    if failed:
        return rows, f"FAIL ({failed} of {len(rows)} checks)"
    if missed:
        return rows, f"PASS ({missed} timing aim{'s' if missed > 1 else ''} missed)"
    return rows, "PASS"


def checks(cycle: DrillCycle, aims: dict[str, float], *, planned: bool) -> list[Finding]:
    """Each check: a correctness check's name and outcome (None: does not apply), or a timing aim."""
    s, consumer = cycle.failover, cycle.consumer
    A, B = cycle.source, cycle.target
    rto = aims["rto_s"] if cycle.unattended is None else aims.get("unattended_rto_s", UNATTENDED_AIM_S)
    found: list[Finding] = [
        Aim.of(f"application RTO ≤ {rto:.0f}s ({r.application} {r.kind}: {r.rto_s}s)", r.rto_s, rto)
        for r in cycle.application_rto
    ]
    found += [
        Aim.of(
            f"{A}→{B}→{s.standby or '—'} ≤ {aims['a_b_c_s']:.0f}s"
            + (f" ({s.a_b_c_s:.1f}s)" if s.a_b_c_s is not None else " (not measured)"),
            s.a_b_c_s,
            aims["a_b_c_s"],
        ),
        (f"failover completed ({A} decommissioned)", s.status == "completed"),
        (f"verification listed exactly the records that never reached {B}", cycle.verification_exact),
        ("no acknowledged record lost after recovery", cycle.lost_after_recovery == 0),
        (f"the application writes on {B} after the move", cycle.producer.acked_on_target > 0),
        (f"the consumer group resumed on {B}", None if consumer is None else consumer.read_on_target > 0),
        ("consumers skipped no record", None if consumer is None else consumer.skipped == 0),
        ("`pulumi preview` proposes no change after the failover", not cycle.preview_after_failover),
    ]
    if planned:
        found.append(("planned: no acknowledged record lost", cycle.lost_before_recovery == 0))
    return found + crash_checks(cycle) + endpoint_checks(cycle, aims) + unattended_checks(cycle, aims)


def unattended_checks(cycle: DrillCycle, aims: dict[str, float]) -> list[Finding]:
    """An automatic drill's checks: a controller made the failover, no write was acknowledged by the lost
    site after the promotion, and the unattended RTO's aim; none otherwise."""
    u = cycle.unattended
    if u is None:
        return []
    bound = aims.get("unattended_rto_s", UNATTENDED_AIM_S)
    found: list[Finding] = [
        (f"the failover was made by a controller, nobody typed it ({u.acted_by or 'nobody'})", bool(u.acted_by)),
        (
            f"no write acknowledged by {cycle.source} after {cycle.target}'s promotion "
            f"({u.writes_on_source_after_promotion})",
            u.promotion_s is not None and u.writes_on_source_after_promotion == 0,
        ),
        Aim.of(
            f"unattended RTO ≤ {bound:.0f}s (site lost → first write on {cycle.target}: {_secs(u.unattended_rto_s)})",
            u.unattended_rto_s,
            bound,
        ),
    ]
    if cycle.endpoint_clients is not None:
        found.append(
            Aim.of(
                f"unattended RTO ≤ {bound:.0f}s through the client endpoint (site lost → first write through it: "
                f"{_secs(u.endpoint_unattended_rto_s)})",
                u.endpoint_unattended_rto_s,
                bound,
            )
        )
    return found


def crash_checks(cycle: DrillCycle) -> list[Finding]:
    """With ``--kill-replicator``: the killed link left no record twice on the target (the failover's
    verification counts them). An at-least-once link is expected to fail it."""
    crash = cycle.replicator_crash
    if crash is None:
        return []
    twice = "not verified" if crash.duplicated is None else str(crash.duplicated)
    return [
        (
            f"replicator SIGKILLed mid-copy ({crash.killed}, {crash.delivery.value}): no record twice on "
            f"{cycle.target} ({twice})",
            crash.duplicated == 0,
        )
    ]


def endpoint_checks(cycle: DrillCycle, aims: dict[str, float]) -> list[Finding]:
    """The unmodified clients' checks (issue 31): none without a client endpoint."""
    e = cycle.endpoint_clients
    if e is None:
        return []
    found: list[Finding] = [
        Aim.of(
            f"unmodified client RTO ≤ {aims['rto_s']:.0f}s ({e.producer} writes on the endpoint: {_secs(e.writes_rto_s)})",
            e.writes_rto_s,
            aims["rto_s"],
        ),
        (f"endpoint clients: no acknowledged record lost ({e.acknowledged_lost})", e.acknowledged_lost == 0),
    ]
    if e.group is not None:
        found += [
            Aim.of(
                f"unmodified client RTO ≤ {aims['rto_s']:.0f}s ({e.group} reads on the endpoint: {_secs(e.reads_rto_s)})",
                e.reads_rto_s,
                aims["rto_s"],
            ),
            (f"endpoint consumer skipped no record ({e.skipped})", e.skipped == 0),
        ]
    return found


def grade(cycle: DrillCycle, aims: dict[str, float], *, planned: bool, strict: bool = False) -> None:
    """Set the cycle's checks and its grade (:func:`graded`)."""
    cycle.checks, cycle.grade = graded(checks(cycle, aims, planned=planned), strict=strict)


def _secs(value: float | None) -> str:
    return "not measured" if value is None else f"{value}s"
