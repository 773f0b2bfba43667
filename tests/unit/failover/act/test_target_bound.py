"""The verification's bound on the promoted cluster (issue 43): B's end offsets, journaled once just before the
promote step grants writes. By either route, a record of B at or beyond them that matches no source record was
written after the promotion and is counted after the cut-off, never unexpected, whatever its timestamp (an
unmodified client on the client endpoint delivers after the switch records it created while A was gone, stamped
before the cut-off); one that matches a source record (a copy recovery wrote) still counts as that copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dr.failover.act.integrity as integrity
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import mark_writable
from dr.kafka.client import Endpoint
from tests.unit.failover_helpers import new_journal
from verification import routes
from verification.audit_state import Fingerprint
from verification.from_audit import compare
from verification.link_ref import LinkRef
from verification.report import render_html
from verification.result import VerificationResult
from verification.route import AuditStart, FromAuditRequest, VerifyRequest
from verification.sides import KafkaSide, beyond

ZEROS = {c: 0 for c in ("missing", "unexpected", "duplicated", "corrupted")}
UNTIL = {"orders": {0: 40, 1: 7}}


def test_an_offset_is_beyond_the_bound_of_its_partition_only() -> None:
    assert not beyond(None, "orders", 0, 10**9), "no bound: nothing is beyond it"
    assert beyond(UNTIL, "orders", 0, 40) and not beyond(UNTIL, "orders", 0, 39), "at the bound is beyond it"
    assert not beyond(UNTIL, "payments", 0, 10**9), "a topic the bound does not list is not bounded"
    assert beyond(UNTIL, "orders", 2, 0), "a partition created after the bound holds nothing before it"


def _fp(partition: int, offset: int, key: int, ts: int = 100) -> Fingerprint:
    return Fingerprint("orders", partition, offset, ts, key, key * 7)


def test_the_audit_route_counts_late_deliveries_after_the_cut_off_and_matches_recovered_copies() -> None:
    source = [_fp(0, 0, 1), _fp(0, 1, 2), _fp(0, 2, 3)]
    # B: a copy of record 1 below the bound; beyond it (offsets 40+) a recovered copy of record 2, and a
    # record the endpoint's producer created while A was gone (key 9, stamped before the cut-off)
    target = [_fp(0, 5, 1), _fp(0, 40, 2), _fp(0, 41, 9)]
    bounded = compare(source, target, cutoff_ms=1000, until=UNTIL)
    assert [f.key_hash for f in bounded.missing] == [3], "the recovered copy matches; record 3 is missing"
    assert bounded.target_unmatched == [], "the late delivery is not offending"
    assert bounded.after_cutoff["orders"]["target"] == 1 and bounded.compared["orders"]["target"] == 2
    plain = compare(source, target, cutoff_ms=1000)
    assert [f.key_hash for f in plain.target_unmatched] == [9], "without a bound (drctl verify) it offends, as before"


def test_the_side_describes_its_bound_for_the_report_never_a_password() -> None:
    ep = Endpoint("b:9092", "admin", "pw-b")
    plain = KafkaSide(endpoint=ep, name="B").describe()
    assert "read_until" not in plain, "drctl verify without a bound reports as before"
    bounded = KafkaSide(endpoint=ep, name="B", until=UNTIL).describe()
    assert bounded["read_until"] == {"orders": {"0": 40, "1": 7}}
    assert "pw-b" not in str(bounded)


def test_the_cut_off_is_journaled_with_the_bound_once_and_a_resumed_run_reads_neither_again(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    reads: list[int] = []

    def read() -> dict[str, int]:
        reads.append(1)
        return {"orders:0": 40, "orders:1": 7}

    first = mark_writable(j, read)
    again = Journal.load(tmp_path)
    assert again is not None and again.measurements.writable_from_ms == first
    assert again.target_until() == UNTIL
    # the run resumed after the grant: B's ends have grown by the applications' writes, the bound must not move
    assert mark_writable(again, lambda: {"orders:0": 99}) == first
    assert again.target_until() == UNTIL and reads == [1]


def test_b_unreadable_before_the_grant_journals_no_bound_and_a_resumed_run_takes_none_later(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    first = mark_writable(j, lambda: None)
    assert j.target_until() is None and j.measurements.writable_from_ms == first
    assert mark_writable(j, lambda: {"orders:0": 99}) == first
    assert j.target_until() is None, "a bound read after the grant would hide nothing written before it, or worse"


def test_a_journal_from_before_the_bound_loads_without_one(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    j.measure(writable_from_ms=1_700_000_000_500)
    assert j.target_until() is None and j.cutoff_ms() == 1_700_000_000_499


def test_verify_hands_the_bound_to_the_target_side_of_the_one_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[VerifyRequest] = []

    def run(request: VerifyRequest, *, progress: Any = None) -> VerificationResult:
        seen.append(request)
        return VerificationResult({"verdict": "clean", "topics": {}, "totals": ZEROS}, tmp_path)

    monkeypatch.setattr(integrity, "_topics_to_verify", lambda s, t, topics: topics)
    monkeypatch.setattr(routes, "run", run)
    a, b = Endpoint("a:9092", "admin", "pw-a"), Endpoint("b:9092", "admin", "pw-b")
    common: dict[str, Any] = {"source": a, "target": b, "out_dir": tmp_path, "topics": ["orders"], "cutoff_ms": 7}
    integrity.verify(**common, target_until=UNTIL)
    integrity.verify(**common)
    assert seen[0].target.until == UNTIL and seen[0].source.until is None, "only the target is bounded"
    assert seen[1].target.until is None, "without a bound the target is read to its end, as before"


def test_both_routes_read_the_bounded_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The full job gets the request's sides as they are; the check started from the audit gets them too."""
    import verification.from_audit as from_audit
    import verification.job as job

    got: dict[str, Any] = {}

    def full(**kw: Any) -> VerificationResult:
        got["job"] = kw["target"]
        return VerificationResult({"verdict": "clean", "topics": {}, "totals": ZEROS}, Path(kw["out_dir"]))

    def audit(request: FromAuditRequest, *, progress: Any = None) -> VerificationResult:
        got["audit"] = request.target
        return VerificationResult({"verdict": "clean", "topics": {}, "totals": ZEROS}, request.out_dir)

    monkeypatch.setattr(job, "run_verification", full)
    monkeypatch.setattr(from_audit, "run", audit)
    a, b = Endpoint("a:9092", "admin", "pw-a"), Endpoint("b:9092", "admin", "pw-b")
    target = KafkaSide(endpoint=b, name="B", until=UNTIL)
    request = VerifyRequest(source=KafkaSide(endpoint=a, name="A"), target=target, out_dir=tmp_path, topics=["orders"])
    routes.run(request)
    start = AuditStart(state_dir=tmp_path, ref=LinkRef(stack="s", link="A-to-B", source="A", target="B"))
    routes.run(request.model_copy(update={"audit": start}))
    assert got["job"] is target and got["audit"] is target


def test_the_jobs_late_deliveries_leave_the_offending_records_and_count_after_the_cut_off(spark: Any) -> None:
    """Pass 2's offending records beyond the target's bound (any class but missing, on the target) are taken
    out and counted after the cut-off; the missing records and those below the bound stay."""
    from verification import job
    from verification.sides import PartitionBounds

    b = Endpoint("b:9092", "admin", "pw-b")
    rows = [
        ("missing", "source", "orders", 0, 3, 100, b"k3", 3, 21),
        ("unexpected", "target", "orders", 0, 41, 100, b"k9", 9, 63),  # beyond: a late delivery
        ("unexpected", "target", "orders", 1, 2, 100, b"k8", 8, 56),  # below the bound: offends
        ("duplicated", "target", "orders", 2, 0, 100, b"k1", 1, 7),  # a partition created after the bound
    ]
    cols = "class string, side string, topic string, partition int, offset long, timestamp long, key binary, "
    offending = spark.createDataFrame(rows, cols + "key_hash long, checksum long")
    found = {("orders", "missing"): 1, ("orders", "unexpected"): 2, ("orders", "duplicated"): 1}

    def run(until: Any) -> tuple[dict[tuple[str, str], int], Any]:
        r = job._Run(
            source=KafkaSide(endpoint=b),
            target=KafkaSide(endpoint=b, until=until),
            cutoff_ms=1000,
            spark=spark,
            master=None,
            kafka_options=None,
            say=lambda _m: None,
            reuse=False,
            storage="MEMORY_ONLY",
        )
        bounds = {"orders": {p: PartitionBounds(0, 50) for p in (0, 1, 2)}}
        scope = job._Scope(["orders"], ["orders"], {}, {}, bounds, 0, 1, {}, None)  # type: ignore[arg-type]
        p2 = job._Pass2(counts={}, offending=offending)
        left = r.beyond_bound(scope, p2, dict(found))
        r.unpersist()
        return left, p2

    left, p2 = run(UNTIL)
    assert left == {("orders", "missing"): 1, ("orders", "unexpected"): 1}
    assert p2.beyond == {"orders": 2}
    assert sorted(r["offset"] for r in p2.offending.collect()) == [2, 3]
    same, plain = run(None)
    assert same == found and plain.beyond == {} and plain.offending is offending, "no bound: nothing changes"


def test_the_reports_cut_off_line_says_what_the_bound_did() -> None:
    from tests.unit.verification.test_verification_report import hand_summary

    bounded = hand_summary()
    bounded["target"] = {**bounded["target"], "read_until": {"orders": {"0": 40}}}
    page = render_html(bounded, chart_png=b"")
    said = "at or beyond its end offsets at the promotion (written after it) that match no source record"
    assert said in page
    assert "end offsets at the promotion" not in render_html(hand_summary(), chart_png=b"")
