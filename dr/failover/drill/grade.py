"""The drill's grade: the checks a game day must pass, computed from one cycle's typed result."""

from __future__ import annotations

from dr.failover.drill.result import Check, DrillCycle

__all__ = ["DEFAULT_AIMS", "checks", "grade"]

DEFAULT_AIMS: dict[str, float] = {"rto_s": 10.0, "a_b_c_s": 120.0}
"""Application RTO and A→B→C aims, in seconds."""


def checks(cycle: DrillCycle, aims: dict[str, float], *, planned: bool) -> list[tuple[str, bool | None]]:
    """Each check's name and outcome (None: does not apply)."""
    s, consumer = cycle.failover, cycle.consumer
    A, B = cycle.source, cycle.target
    found: list[tuple[str, bool | None]] = [
        (
            f"application RTO ≤ {aims['rto_s']:.0f}s ({r.application} {r.kind}: {r.rto_s}s)",
            r.rto_s is not None and r.rto_s <= aims["rto_s"],
        )
        for r in cycle.application_rto
    ]
    found += [
        (
            f"{A}→{B}→{s.standby or '—'} ≤ {aims['a_b_c_s']:.0f}s"
            + (f" ({s.a_b_c_s:.1f}s)" if s.a_b_c_s is not None else " (not measured)"),
            s.a_b_c_s is not None and s.a_b_c_s <= aims["a_b_c_s"],
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
    return found + crash_checks(cycle) + endpoint_checks(cycle, aims)


def crash_checks(cycle: DrillCycle) -> list[tuple[str, bool | None]]:
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


def endpoint_checks(cycle: DrillCycle, aims: dict[str, float]) -> list[tuple[str, bool | None]]:
    """The unmodified clients' checks (issue 31): none without a client endpoint."""
    e = cycle.endpoint_clients
    if e is None:
        return []
    found: list[tuple[str, bool | None]] = [
        (
            f"unmodified client RTO ≤ {aims['rto_s']:.0f}s ({e.producer} writes on the endpoint: {_secs(e.writes_rto_s)})",
            e.writes_rto_s is not None and e.writes_rto_s <= aims["rto_s"],
        ),
        (f"endpoint clients: no acknowledged record lost ({e.acknowledged_lost})", e.acknowledged_lost == 0),
    ]
    if e.group is not None:
        found += [
            (
                f"unmodified client RTO ≤ {aims['rto_s']:.0f}s ({e.group} reads on the endpoint: {_secs(e.reads_rto_s)})",
                e.reads_rto_s is not None and e.reads_rto_s <= aims["rto_s"],
            ),
            (f"endpoint consumer skipped no record ({e.skipped})", e.skipped == 0),
        ]
    return found


def grade(cycle: DrillCycle, aims: dict[str, float], *, planned: bool) -> None:
    """Set the cycle's checks and its grade: PASS, or FAIL with the number of failed checks."""
    cycle.checks = [
        Check(check=name, result="n/a" if ok is None else ("PASS" if ok else "FAIL"))
        for name, ok in checks(cycle, aims, planned=planned)
    ]
    failed = sum(1 for c in cycle.checks if c.result == "FAIL")
    cycle.grade = "PASS" if not failed else f"FAIL ({failed} of {len(cycle.checks)} checks)"


def _secs(value: float | None) -> str:
    return "not measured" if value is None else f"{value}s"
