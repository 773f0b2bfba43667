"""The active-active drill's grade and text: pure functions of its typed result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.failover.drill.frame import DrillOptions
from dr.failover.drill.result import ApplicationRto, ConsumerReport
from dr.failover.drill.traffic import unanswered
from dr.failover.frame.summary import FailoverSummary, StepLine
from dr.failover.kinds.active_active.drill import region_drill_refusal
from dr.failover.kinds.active_active.drill_result import (
    AppTraffic,
    RegionDrillResult,
    RejoinFigures,
    RejoinWrites,
    grade_region_drill,
    longest_pause,
    loop_topics,
    render_region_drill,
)
from dr.topology import load_stack_file
from tests import REPO_ROOT


def _rto(kind: str, seconds: float | None) -> ApplicationRto:
    return ApplicationRto(
        application="shop-a",
        kind=kind,  # type: ignore[arg-type]
        source="A",
        target="B",
        last_on_source=100.0,
        first_on_target=None if seconds is None else 100.0 + seconds,
        measured="last write acknowledged on A → first write acknowledged on B",
        rto_s=seconds,
    )


def _result(**changes: Any) -> RegionDrillResult:
    steps = [StepLine(name="move", status="done", seconds=1.5, attempts=1, summary="links stopped")]
    r = RegionDrillResult(
        stack="aa",
        mode="planned",
        out="/tmp/out",
        region="A",
        survivor="B",
        failover=FailoverSummary.model_construct(status="completed", steps=steps),
        failover_s=30.2,
        traffic=[
            AppTraffic(
                application="shop-a",
                home="A",
                topic="orders",
                moved=True,
                acked_on_home=900,
                acked_on_survivor=400,
                not_acknowledged=3,
                acked_during_failover=500,
                longest_pause_s=4.1,
                reads_during_failover=300,
            ),
            AppTraffic(
                application="shop-b",
                home="B",
                topic="orders",
                moved=False,
                acked_on_home=1500,
                acked_on_survivor=0,
                not_acknowledged=0,
                acked_during_failover=700,
                longest_pause_s=0.4,
                reads_during_failover=650,
            ),
        ],
        application_rto=[_rto("writes", 2.5), _rto("reads", 6.0)],
        consumers=[
            ConsumerReport(
                group="shop-a", read_on_source=800, read_on_target=900, read_twice=40, skipped=0, records_on_target=1700
            )
        ],
        never_reached_survivor=0,
        listed_by_verification=0,
        verification_exact=True,
        lost_after_recovery=0,
        loops=[],
        preview_after_failover={},
        rejoin=_rejoin(),
    )
    return r.model_copy(update=changes)


def _rejoin(
    gap: float | None = 0.06, refused: int = 0, skipped: int = 0, unanswered: int = 0, why: dict[str, int] | None = None
) -> RejoinFigures:
    steps = [StepLine(name="rejoin-release", status="done", seconds=5.2, attempts=1, summary="removed")]
    return RejoinFigures(
        summary=FailoverSummary.model_construct(status="completed", steps=steps),
        seconds=31.0,
        writes=[
            RejoinWrites(
                application="shop-a",
                acked_on_peer=2000,
                acked_on_home=400,
                refused=refused,
                unanswered=unanswered,
                refused_why=why or {},
                gap=ApplicationRto(
                    application="shop-a",
                    kind="writes",
                    source="B",
                    target="A",
                    last_on_source=200.0,
                    first_on_target=None if gap is None else 200.0 + gap,
                    measured="last write acknowledged on B → first write acknowledged on A",
                    rto_s=gap,
                ),
            )
        ],
        moved_within_s=4.4,
        consumers=[
            ConsumerReport(
                group="shop-a",
                read_on_source=900,
                read_on_target=500,
                read_twice=12,
                skipped=skipped,
                records_on_target=3000,
            )
        ],
        positions="1 groups positioned on A before the move",
    )


def _failed(r: RegionDrillResult, *, strict: bool = True) -> list[str]:
    """The checks that FAIL (strict: a missed timing aim too, as ``drctl drill --strict-aims`` grades it)."""
    grade_region_drill(r, strict=strict)
    return [c.check for c in r.checks if c.result == "FAIL"]


def test_a_clean_planned_drill_passes_every_check() -> None:
    r = _result()
    assert _failed(r) == []
    assert r.grade == "PASS" and r.passed
    names = [c.check for c in r.checks]
    assert "application RTO ≤ 10s (shop-a writes: 2.5s)" in names
    assert "application RTO ≤ 10s (shop-a reads: 6.0s)" in names
    assert "B's own applications never interrupted (longest pause ≤ 5s: shop-b 0.4s)" in names
    assert "planned: every record of A reached B before the move" in names


@pytest.mark.parametrize(
    ("changes", "failing"),
    [
        ({"application_rto": [_rto("writes", 12.0), _rto("reads", None)]}, "application RTO ≤ 10s"),
        (
            {
                "consumers": [
                    ConsumerReport(
                        group="shop-a", read_on_source=1, read_on_target=5, read_twice=0, skipped=2, records_on_target=9
                    )
                ]
            },
            "moved consumers skipped no record",
        ),
        ({"lost_after_recovery": 1}, "no acknowledged record lost after recovery"),
        ({"lost_after_recovery": None}, "no acknowledged record lost after recovery"),
        ({"loops": ["A.B.orders"]}, "no replication loop"),
        ({"preview_after_failover": {"update": 1}}, "`pulumi preview` proposes no change"),
        ({"preview_after_failover": None}, "`pulumi preview` proposes no change"),
        ({"verification_exact": False}, "verification listed exactly"),
        ({"never_reached_survivor": 3}, "planned: every record of A reached B"),
        ({"failover": None}, "region failover completed"),
        ({"rejoin": None}, "A rejoined"),
        ({"rejoin": _rejoin(gap=2.5)}, "rejoin write gap ≤ 2s"),
        ({"rejoin": _rejoin(gap=None)}, "rejoin write gap ≤ 2s"),
        ({"rejoin": _rejoin(refused=3)}, "rejoin: no write of A's applications refused"),
        ({"rejoin": _rejoin(skipped=1)}, "returning consumers skipped no record on A"),
    ],
)
def test_each_failure_fails_its_own_check(changes: dict[str, Any], failing: str) -> None:
    r = _result(**changes)
    failed = _failed(r)
    assert failed and all(f.startswith(failing) for f in failed), failed
    assert r.grade == f"FAIL ({len(failed)} of {len(r.checks)} checks)" and not r.passed


def test_writes_left_unanswered_by_a_starved_cluster_are_reported_not_graded_as_refused() -> None:
    why = {"_MSG_TIMED_OUT on B": 128}
    r = _result(rejoin=_rejoin(unanswered=128, why=why))
    assert _failed(r) == []
    check = next(c.check for c in r.checks if c.check.startswith("rejoin: no write"))
    assert check == "rejoin: no write of A's applications refused (shop-a 0, 128 unanswered — 128 _MSG_TIMED_OUT on B)"
    assert "0 refused, 128 unanswered — 128 _MSG_TIMED_OUT on B" in render_region_drill(r)
    refused = _result(rejoin=_rejoin(refused=2, why={"TOPIC_AUTHORIZATION_FAILED on B": 2}))
    assert _failed(refused) == [
        "rejoin: no write of A's applications refused (shop-a 2 — 2 TOPIC_AUTHORIZATION_FAILED on B)"
    ]


@pytest.mark.parametrize(
    ("why", "left_unanswered"),
    [
        ("_MSG_TIMED_OUT on B", True),
        ("REQUEST_TIMED_OUT on A", True),
        ("_TRANSPORT on B", True),
        ("local queue full on A", True),
        ("TOPIC_AUTHORIZATION_FAILED on B", False),
        ("SASL_AUTHENTICATION_FAILED on A", False),
        ("NOT_ENOUGH_REPLICAS on A", False),
    ],
)
def test_a_ledger_reason_is_unanswered_only_for_timeouts_and_lost_connections(why: str, left_unanswered: bool) -> None:
    assert unanswered(why) is left_unanswered


def test_a_missed_aim_is_graded_missed_and_passes_unless_strict() -> None:
    r = _result(application_rto=[_rto("writes", 12.0), _rto("reads", 6.0)], rejoin=_rejoin(gap=2.5))
    assert _failed(r, strict=False) == []
    missed = [c.check for c in r.checks if c.result == "MISSED"]
    assert missed == ["application RTO ≤ 10s (shop-a writes: 12.0s)", missed[1]] and missed[1].startswith(
        "rejoin write gap ≤ 2s"
    )
    assert all(c.aim for c in r.checks if c.result == "MISSED")
    assert r.grade == "PASS (2 timing aims missed)" and r.passed
    assert len(_failed(r, strict=True)) == 2 and r.grade.startswith("FAIL (2 of") and not r.passed


def test_an_aim_not_measured_fails_even_when_not_strict() -> None:
    r = _result(application_rto=[_rto("writes", None), _rto("reads", 6.0)])
    assert _failed(r, strict=False) == ["application RTO ≤ 10s (shop-a writes: —)"] and not r.passed


def test_the_survivor_is_interrupted_when_it_paused_or_wrote_nothing() -> None:
    slow = _result()
    slow.traffic[1].longest_pause_s = 7.5
    assert _failed(slow) == ["B's own applications never interrupted (longest pause ≤ 5s: shop-b 7.5s)"]
    idle = _result()
    idle.traffic[1].acked_during_failover = 0
    assert _failed(idle, strict=False) == ["B's own applications wrote during the failover (shop-b 0)"]
    unmeasured = _result()
    unmeasured.traffic[1].longest_pause_s = None
    assert len(_failed(unmeasured)) == 1


def test_a_moved_application_that_never_wrote_on_the_survivor_fails() -> None:
    r = _result()
    r.traffic[0].acked_on_survivor = 0
    assert _failed(r) == ["A's applications write on B after the move"]


def test_aims_are_overridable_and_unplanned_drops_the_planned_check() -> None:
    r = _result(mode="unplanned", never_reached_survivor=120, listed_by_verification=120, replayed=120)
    grade_region_drill(r, {"rto_s": 3.0, "a_b_c_s": 1.0}, strict=True)
    failed = [c.check for c in r.checks if c.result == "FAIL"]
    assert failed == ["application RTO ≤ 3s (shop-a reads: 6.0s)"], failed
    assert not any(c.check.startswith("planned:") for c in r.checks)


def test_a_drill_that_stopped_says_so_in_its_grade() -> None:
    r = _result(error="survivor B is not fit")
    grade_region_drill(r)
    assert r.grade == "FAIL (the drill stopped: survivor B is not fit)" and not r.passed


def test_an_estate_with_no_survivor_application_marks_that_check_not_applicable() -> None:
    r = _result()
    r.traffic = r.traffic[:1]
    grade_region_drill(r)
    [check] = [c for c in r.checks if "never interrupted" in c.check]
    assert check.result == "n/a" and r.passed


def test_loop_topics_are_remote_copies_of_remote_copies() -> None:
    topics = ["orders", "A.orders", "B.orders", "A.B.orders", "B.A.orders", "A.x.y", "team.A.orders", "B.B.pay"]
    assert loop_topics(topics, ["A", "B"]) == ["A.B.orders", "B.A.orders", "B.B.pay"]
    assert loop_topics(["A.orders"], ["A", "B"]) == []


def test_longest_pause_spans_the_window_edges() -> None:
    assert longest_pause([1.0, 2.0, 5.0], 0.0, 6.0) == 3.0
    assert longest_pause([0.5, 1.0, 1.5], 0.0, 10.0) == 8.5, "silent until the end"
    assert longest_pause([-5.0, 20.0], 0.0, 4.0) == 4.0, "events outside the window do not count"
    assert longest_pause([1.0], 3.0, 3.0) is None


def test_the_text_carries_the_grade_checks_and_figures() -> None:
    r = _result()
    grade_region_drill(r)
    text = render_region_drill(r)
    lines = text.splitlines()
    assert lines[0] == "DRILL (planned, active-active) on stack aa: region A → B — PASS"
    for c in r.checks:
        assert f"[{c.result:>4}] {c.check}" in text
    assert "  shop-a writes: 2.5s (last write acknowledged on A → first write acknowledged on B)" in lines
    assert (
        "  shop-a (home A, moved): 900 acknowledged on A, 400 on B after the move; during the failover 500 "
        "written, 300 read, longest pause 4.1s; 3 not acknowledged (refused or unanswered around the move: never "
        "counted as written)"
    ) in lines
    assert "  consumer group shop-a: 800 read on A, 900 on B, 40 read twice, 0 skipped" in lines
    # the rejoin's figures: the write gap graded against its aim (issue 34)
    assert "rejoin write gap ≤ 2s (shop-a: 0.1s, last write acknowledged on B → first write acknowledged on A)" in [
        c.check for c in r.checks
    ]
    assert "rejoin of A (back from B) 31.0s: rejoin-release 5.2s" in lines
    assert (
        "  shop-a: 2000 acknowledged on B and 400 on A while it ran, 0 refused, 0 unanswered; write gap 0.1s (last write "
        "acknowledged on B → first write acknowledged on A); A's file published 4.4s before the removal of B's "
        "writes began"
    ) in lines
    assert "  consumer group shop-a: 900 read on B, 500 at home on A, 12 read twice, 0 skipped" in lines
    assert (
        "records of A never in A.<topic> on B: 0 (verification listed 0, replayed 0); acknowledged and lost "
        "after recovery: 0"
    ) in lines
    assert "region failover 30.2s: move 1.5s" in lines
    assert lines[-1] == "drill result: /tmp/out/drill.json (0s)"


def test_the_region_drill_refuses_cycles_and_runs_the_example_as_is(tmp_path: Path) -> None:
    topology = load_stack_file(REPO_ROOT / "Pulumi.active-active.yaml")
    assert region_drill_refusal(DrillOptions(stack="active-active", out=tmp_path), topology) is None
    refusal = region_drill_refusal(DrillOptions(stack="active-active", out=tmp_path, cycles=2), topology)
    assert refusal is not None and "--cycles" in refusal.problem and "--rejoin" in refusal.problem
    assert refusal.exit_code == 2 and "without --cycles" in str(refusal)
