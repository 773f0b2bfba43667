"""The controller's readers of what the product keeps (:mod:`dr.controller.readings`) and the feed that turns
them into metrics (:mod:`dr.controller.feed`): lag in seconds, RPO estimate, audits, last drill,
certificates and the endpoint's target."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from dr.controller.readings import (
    EndHistory,
    audit_reading,
    copied_positions,
    drill_reading,
    lag_seconds,
    rpo_reading,
)
from dr.failover.drill.last import last_drill, last_drill_path, record_last_drill, summary_of
from dr.failover.drill.result import DrillResult
from verification.audit_state import AuditState, Fingerprint
from verification.link_ref import LinkRef

T0, T1 = ("t", 0), ("t", 1)


def test_lag_in_seconds_counts_from_the_first_time_the_source_held_the_oldest_uncopied_record() -> None:
    history = [(100.0, {T0: 10, T1: 5}), (110.0, {T0: 12, T1: 5}), (120.0, {T0: 15, T1: 9})]
    now = 125.0
    # nothing lags: 0
    assert lag_seconds(history, {T0: 15, T1: 9}, {T0: 15, T1: 9}, now) == 0.0
    # T0's next record to copy is offset 11: first held at 110 (end 12 > 11); T1's is 5: first held at 120
    assert lag_seconds(history, {T0: 11, T1: 5}, {T0: 15, T1: 9}, now) == pytest.approx(15.0)
    # a record older than the history (offset 3 was there at its start): counts from the start, a lower bound
    assert lag_seconds(history, {T0: 3, T1: 9}, {T0: 15, T1: 9}, now) == pytest.approx(25.0)
    # a record the history never saw (read this pass, not yet remembered): 0 s, not a guess
    assert lag_seconds(history, {T0: 15, T1: 9}, {T0: 16, T1: 9}, now) == 0.0


def test_the_end_history_keeps_changes_only_and_at_most_its_bound() -> None:
    h = EndHistory(keep=2)
    h.observe("A", 1.0, {T0: 1})
    h.observe("A", 2.0, {T0: 1})  # unchanged: the first sighting stays the one that counts
    h.observe("A", 3.0, {T0: 2})
    assert h.of("A") == [(1.0, {T0: 1}), (3.0, {T0: 2})]
    h.observe("A", 4.0, {T0: 3})
    assert [at for at, _ in h.of("A")] == [3.0, 4.0] and h.of("B") == []


def test_copied_positions_are_the_source_end_minus_the_link_lag() -> None:
    assert copied_positions({T0: 10, T1: 4}, {"t:0": 3}) == {T0: 7, T1: 4}


def test_the_rpo_is_the_live_lag_while_the_source_answers_else_the_failover_estimate() -> None:
    never: Any = lambda: pytest.fail("the link's positions are read only when the source is lost")  # noqa: E731
    live = rpo_reading(7, snapshot=(None, None), target_end=None, copied=never, write_rate=None, now=0)
    assert (live.records, live.basis) == (7, "live link lag")
    lost = rpo_reading(
        None, snapshot=(90.0, {T0: 10, T1: 5}), target_end={T0: 4, T1: 5}, copied=lambda: None, write_rate=2.0, now=100
    )
    assert (lost.records, lost.upper_bound) == (6, 6 + 20)  # 10 s since the snapshot at 2 records/s
    assert "target end offsets" in lost.basis
    committed = rpo_reading(
        None, snapshot=(90.0, {T0: 10}), target_end={T0: 9}, copied=lambda: {T0: 8}, write_rate=None, now=100
    )
    assert committed.records == 2 and "committed source positions" in committed.basis
    assert (
        rpo_reading(None, snapshot=(None, None), target_end={}, copied=lambda: None, write_rate=None, now=1).records
        is None
    )
    both = rpo_reading(None, snapshot=(1.0, {T0: 1}), target_end=None, copied=never, write_rate=None, now=2)
    assert both.records is None and "do not answer" in both.basis


def _audit_doc(source_residue: list[Fingerprint], frontier: dict[str, dict[int, int]]) -> dict[str, Any]:
    state = AuditState(ref=LinkRef(stack="s", link="A-to-B", source="A", target="B"), source_id="ida", target_id="idb")
    state.frontier, state.source_residue = frontier, source_residue
    state.runs, state.updated_ms = 3, 1_700_000_000_000
    return dict(state.to_dict())


def test_the_audit_verdict_is_read_from_its_state_missing_below_the_frontier() -> None:
    in_flight = Fingerprint("t", 0, 9, 1, 1, 1)
    clean = audit_reading(_audit_doc([in_flight], {"t": {0: 5}}))
    assert clean is not None and (clean.verdict, clean.missing, clean.in_flight) == ("clean", 0, 1)
    assert (clean.at, clean.runs) == (1_700_000_000.0, 3)
    skipped = Fingerprint("t", 0, 2, 1, 2, 2)
    missing = audit_reading(_audit_doc([skipped, in_flight], {"t": {0: 5}}))
    assert missing is not None and (missing.verdict, missing.missing) == ("missing", 1)
    assert audit_reading(None) is None
    assert audit_reading({"version": 1, "stack": "s"}) is None  # damaged: drctl audit names it, no figure here


def test_a_drill_records_its_grade_rto_and_time_in_the_stack_state(tmp_path: Path) -> None:
    result = DrillResult(stack="s", mode="planned", out=str(tmp_path / "out"))
    result.conclude(1)  # no cycle ran: INCOMPLETE
    before = time.time()
    record_last_drill(tmp_path, result)
    doc = last_drill(tmp_path)
    assert doc is not None and doc["grade"] == "INCOMPLETE" and doc["passed"] is False and doc["rto_s"] is None
    assert doc["finished_at"] >= before - 0.01 and doc["result"] == str(tmp_path / "out" / "drill.json")
    assert last_drill_path(tmp_path).stat().st_mode & 0o777 == 0o600
    reading = drill_reading(doc)
    assert reading is not None and (reading.grade, reading.passed, reading.rto_s) == ("INCOMPLETE", False, None)
    assert summary_of(result, finished_at=5.0)["rto_basis"] == "not measured"
    graded = drill_reading({"grade": "PASS (1 timing aim missed)", "passed": True, "rto_s": 4.2, "finished_at": 9})
    assert graded is not None and (graded.grade, graded.passed, graded.rto_s, graded.at) == ("PASS", True, 4.2, 9.0)
    assert (
        drill_reading({"grade": "PASS"}) is None and drill_reading(None) is None and last_drill(tmp_path / "x") is None
    )


class _NoLink:
    """An estate whose links do not run here (the feed then estimates from the target's end offsets)."""

    def copied_positions(self, link_name: str) -> None:
        return None


def test_the_feed_serves_lag_seconds_rpo_audit_drill_certificates_and_the_endpoint(tmp_path: Path) -> None:
    from dr.controller.feed import StatusFeed
    from dr.controller.metrics import ControllerMetrics
    from dr.failover.act.snapshots import record_offsets
    from dr.failover.status import ClusterStatus, LinkStatus, StatusReport
    from dr.topology import Kind, Role, load_stack_file
    from dr.topology.kinds import Engine, LinkState
    from tests.conftest import copy_stack

    def edit(doc: dict[str, Any]) -> None:
        doc["config"]["kafka-dr:failoverPolicy"] = {"maxRpoRecords": 1000}

    topology = load_stack_file(copy_stack("local", tmp_path / "Pulumi.s.yaml", edit=edit))
    state = tmp_path / "state"
    (state / "audit").mkdir(parents=True)
    (state / "audit" / "A-to-B.json").write_text(
        json.dumps(_audit_doc([Fingerprint("t", 0, 2, 1, 2, 2)], {"t": {0: 5}}))
    )
    (state / "drills").mkdir()
    (state / "drills" / "last.json").write_text(
        json.dumps({"grade": "FAIL (cycle 1 of 1)", "passed": False, "rto_s": 3.5, "finished_at": time.time() - 60})
    )
    metrics = ControllerMetrics("s", "B", "manual")
    feed = StatusFeed(metrics, topology, "s", state)
    link = LinkStatus(
        name="A-to-B", source="A", target="B", state=LinkState.RUNNING, engine=Engine.MIRRORMAKER2,
        lag={"orders:0": 2}, total_lag=2,
    )  # fmt: skip

    def report(a_ends: dict[str, int] | None, lagging: LinkStatus) -> StatusReport:
        clusters = [ClusterStatus(name="B", role=Role.PASSIVE, kind=Kind.LOCAL, end_offsets={"orders:0": 8})]
        if a_ends is not None:
            clusters.append(ClusterStatus(name="A", role=Role.ACTIVE, kind=Kind.LOCAL, end_offsets=a_ends))
        return StatusReport(
            stack="s", failover_done=False, clusters=clusters, links=[lagging], consumer_groups=[],
            last_failover=None, problems=[], endpoint={"points_at": ["A"], "active": "A"},
        )  # fmt: skip

    estate: Any = _NoLink()
    feed.ends.observe("A", time.time() - 30, {("orders", 0): 8})  # a pass 30 s ago saw offset 7 on A
    feed.update(report({"orders:0": 9}, link), estate)  # B has copied up to offset 7 (exclusive): lag 2
    feed.update(report({"orders:0": 10}, link.model_copy(update={"lag": {"orders:0": 3}, "total_lag": 3})), estate)
    text = generate_latest(metrics.registry).decode()

    def value(sample: str) -> float:
        line = next(ln for ln in text.splitlines() if ln.startswith(sample + " "))
        return float(line.rsplit(" ", 1)[1])

    labels = 'link="A-to-B",source="A",target="B"'
    assert 29 <= value(f"kdr_link_lag_seconds{{{labels}}}") < 60  # offset 7 seen on A since the pass 30 s ago
    assert value(f"kdr_rpo_estimate_records{{{labels}}}") == 3  # the live lag
    assert value("kdr_rpo_budget_records") == 1000
    assert value('kdr_audit_verdict{link="A-to-B",verdict="missing"}') == 1
    assert value('kdr_audit_missing_records{link="A-to-B"}') == 1
    assert value('kdr_audit_age_seconds{link="A-to-B"}') > 0
    assert value('kdr_drill_grade{grade="FAIL"}') == 1 and value('kdr_drill_grade{grade="PASS"}') == 0
    assert value("kdr_drill_rto_seconds") == 3.5 and value("kdr_drill_passed") == 0
    assert 59 <= value("kdr_drill_age_seconds") < 3600
    assert value('kdr_endpoint_target{cluster="A"}') == 1
    assert 'kdr_automatic_failovers_total{outcome="started"} 0.0' in text and "kdr_self_fence_total 0.0" in text

    # A lost: its lag in seconds is unknown (not served); the RPO comes from A's last snapshot against B's ends
    record_offsets(state, "A", {("orders", 0): 12}, at=time.time() - 5)
    feed.update(report(None, link.model_copy(update={"lag": None, "total_lag": None})), estate)
    text = generate_latest(metrics.registry).decode()
    assert "kdr_link_lag_seconds{" not in text
    assert value(f"kdr_rpo_estimate_records{{{labels}}}") == 4  # 12 last seen on A, 8 on B


def test_the_feed_lists_each_certificate_with_the_days_it_has_left(tmp_path: Path) -> None:
    from dr.controller.feed import StatusFeed
    from dr.controller.metrics import ControllerMetrics
    from dr.runtime.certificates import make_ca
    from dr.topology import load_stack_file
    from tests.conftest import copy_stack

    def edit(doc: dict[str, Any]) -> None:
        doc["config"]["kafka-dr:clusters"][0]["local_tls"] = True

    topology = load_stack_file(copy_stack("local", tmp_path / "Pulumi.s.yaml", edit=edit))
    state = tmp_path / "state"
    (state / "tls").mkdir(parents=True)
    (state / "tls" / "local-ca.pem").write_bytes(make_ca("kdr test CA", days=10).certificate_pem)
    metrics = ControllerMetrics("s", "A", "manual")
    StatusFeed(metrics, topology, "s", state)._certificates()
    served = [s for f in metrics.registry.collect() if f.name == "kdr_certificate_days_left" for s in f.samples]
    assert len(served) == 1, served
    assert served[0].labels["cluster"] == "(estate)" and served[0].labels["use"] == "local CA"
    assert served[0].labels["subject"] == "CN=kdr test CA"
    assert 9.8 <= served[0].value <= 10.0


def test_the_feed_starts_its_memory_from_the_snapshots_drctl_status_kept(tmp_path: Path) -> None:
    from dr.controller.feed import StatusFeed
    from dr.controller.metrics import ControllerMetrics
    from dr.failover.act.snapshots import record_offsets
    from dr.topology import load_stack_file
    from tests.conftest import copy_stack

    topology = load_stack_file(copy_stack("local", tmp_path / "Pulumi.s.yaml"))
    record_offsets(tmp_path, "A", {T0: 8}, at=100.0)
    record_offsets(tmp_path, "A", {T0: 9}, at=120.0)
    feed = StatusFeed(ControllerMetrics("s", "B", "manual"), topology, "s", tmp_path)
    assert feed.ends.of("A") == [(100.0, {T0: 8}), (120.0, {T0: 9})] and feed.ends.of("B") == []


def test_a_hub_drill_keeps_its_worst_application_rto() -> None:
    from dr.failover.drill.result import ApplicationRto
    from dr.failover.kinds.hub_spoke.drill import HubDrillResult

    def rto(seconds: float | None) -> ApplicationRto:
        return ApplicationRto(
            application="app", kind="writes", source="H", target="P", last_on_source=None, first_on_target=None,
            measured="last ack on H → first ack on P", rto_s=seconds,
        )  # fmt: skip

    hub = HubDrillResult(stack="s", mode="unplanned", out="/o", application_rto=[rto(2.5), rto(None), rto(4.0)])
    hub.grade = "PASS"
    kept = summary_of(hub, finished_at=7.0)
    assert (kept["grade"], kept["passed"], kept["rto_s"], kept["rto_basis"]) == (
        "PASS",
        True,
        4.0,
        "worst application RTO",
    )
    assert (kept["mode"], kept["result"], kept["finished_at"]) == ("unplanned", "/o/drill.json", 7.0)
