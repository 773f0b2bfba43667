"""The integrity step started from the last audit (verification/from_audit.py), Kafka I/O in memory.

The exactness test audits random logs at random moments while a fake link copies, drops and
lags, then checks that starting from the audit finds, identity by identity, the missing records
of a full multiset comparison of everything.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dr.base.errors import ConfigError
from dr.failover.act import integrity
from verification import audit as audit_mod
from verification import from_audit
from verification.audit_state import AuditState, Fingerprint, StateIdentity, load_state
from verification.fingerprint import checksum, key_hash
from verification.link_ref import LinkRef
from verification.recover import SourceRecord
from verification.report import load_summary
from verification.result import VerificationResult
from verification.sides import KafkaSide

STACK, LINK = "s", "A-to-B"


def fp(topic: str, partition: int, offset: int, ts: int, key: int, value: int = 0) -> Fingerprint:
    return Fingerprint(topic, partition, offset, ts, key, value)


# ---------------------------------------------------------------------------------------- pure parts
def link_state(**fields: Any) -> AuditState:
    """The audit state of LINK (clusters A → B, ids a and b) with ``fields``."""
    return AuditState(
        ref=LinkRef(stack=STACK, link=LINK, source="A", target="B"), source_id="a", target_id="b", **fields
    )


def test_plan_reads_past_the_audited_bounds_and_keeps_the_residue(tmp_path: Path) -> None:
    state = link_state(
        source_bounds={"orders": {0: 100, 1: 40}, "other": {0: 7}},
        target_bounds={"orders": {0: 95, 1: 40}},
        source_residue=[fp("orders", 0, 97, 1, 1), fp("other", 0, 3, 1, 2)],
        target_residue=[fp("orders", 1, 39, 1, 3)],
        runs=3,
    )
    now_s = {("orders", 0): (0, 130), ("orders", 1): (45, 50), ("orders", 2): (0, 8), ("other", 0): (0, 9)}
    now_t = {("orders", 0): (0, 120), ("orders", 1): (0, 48)}
    p = from_audit.plan(state, now_s, now_t, topics=["orders"], state_file=tmp_path / "x.json")
    assert p.source_ranges == {"orders": {0: (100, 130), 1: (45, 50), 2: (0, 8)}}  # new partition: from earliest
    assert p.target_ranges == {"orders": {0: (95, 120), 1: (40, 48)}}
    assert (p.skipped_source, p.skipped_target) == (100, 95 + 40)
    assert (p.lost_source, p.lost_target) == (5, 0)  # orders-1 40..44 removed before anyone read them
    assert p.source_residue == [fp("orders", 0, 97, 1, 1)]  # 'other' is not verified here
    assert p.target_residue == [fp("orders", 1, 39, 1, 3)]
    assert p.to_read == 30 + 5 + 8 + 25 + 8


def test_plan_refuses_a_bound_past_the_end(tmp_path: Path) -> None:
    state = link_state(
        source_bounds={"orders": {0: 100}},
    )
    with pytest.raises(ConfigError, match="re-created"):
        from_audit.plan(state, {("orders", 0): (0, 10)}, {}, topics=["orders"], state_file=tmp_path / "x.json")


def test_worth_it() -> None:
    assert from_audit.worth_it(from_audit.SMALL_INCREMENT, 0)
    assert from_audit.worth_it(5_000_000, 21_000_000) and not from_audit.worth_it(5_000_000, 20_000_000)


def test_compare_counts_every_unmatched_source_record_missing_and_leaves_out_late_ones() -> None:
    src = [fp("t", 0, 0, 10, 1), fp("t", 0, 1, 11, 2), fp("t", 0, 2, 12, 3), fp("t", 0, 3, 99, 4)]
    dst = [fp("t", 0, 0, 11, 2), fp("t", 0, 1, 98, 9), fp("u", 0, 0, 200, 5)]
    c = from_audit.compare(src, dst, cutoff_ms=50)
    assert c.matched == 1 and c.target_unmatched == []
    assert [f.offset for f in c.missing] == [0, 2]  # offset 2 is past the "frontier": still missing, link stopped
    assert c.compared == {"t": {"source": 3, "target": 1}, "u": {"source": 0, "target": 0}}
    assert c.after_cutoff == {"t": {"source": 1, "target": 1}, "u": {"source": 0, "target": 1}}
    assert from_audit.compare(src, dst, None).target_unmatched  # without a cut-off the late copies count


def test_offending_rows_carry_the_key_read_back_and_notice_a_changed_source() -> None:
    f = Fingerprint("t", 0, 5, 77, key_hash("t", b"k"), checksum(b"v", []))
    gone = Fingerprint("t", 0, 6, 78, 1, 2)
    rec = SourceRecord("t", 0, 5, 77, b"k", b"v", None)
    rows, n_gone, changed = from_audit.offending_rows([f, gone], {("t", 0, 5): rec})
    assert (n_gone, changed) == (1, None)
    assert rows == [
        {
            "class": "missing",
            "side": "source",
            "topic": "t",
            "partition": 0,
            "offset": 5,
            "timestamp": 77,
            "key": b"k",
            "key_hash": f.key_hash,
            "checksum": f.checksum,
        }
    ]
    _rows, _g, changed = from_audit.offending_rows([f], {("t", 0, 5): replace(rec, value=b"other")})
    assert changed == f


# ---------------------------------------------------------------------------------------- in-memory link
class Logs:
    """Source and target logs of real records; ``copy`` plays MirrorMaker 2 (in order, may drop)."""

    def __init__(self) -> None:
        self.logs: dict[str, dict[tuple[str, int], list[SourceRecord]]] = {"A": {}, "B": {}}
        self.start: dict[str, dict[tuple[str, int], int]] = {"A": {}, "B": {}}
        self.copied: dict[tuple[str, int], int] = {}
        self.reads: list[int] = []

    def write(
        self, n: int, topic: str = "orders", partition: int = 0, *, ts: int | None = None, keys: int | None = None
    ) -> None:
        log = self.logs["A"].setdefault((topic, partition), [])
        for _ in range(n):
            i = len(log)
            k = i if keys is None else i % keys
            log.append(
                SourceRecord(topic, partition, i, 1000 + i if ts is None else ts, b"k%d" % k, b"v%d" % (k % 3), None)
            )

    def copy(
        self, n: int | None = None, *, drop: frozenset[int] = frozenset(), topic: str = "orders", partition: int = 0
    ) -> None:
        src = self.logs["A"].get((topic, partition), [])
        done = self.copied.get((topic, partition), 0)
        upto = len(src) if n is None else min(len(src), done + n)
        dst = self.logs["B"].setdefault((topic, partition), [])
        for r in src[done:upto]:
            if r.offset not in drop:
                dst.append(replace(r, offset=len(dst)))
        self.copied[(topic, partition)] = upto

    def install(self, mp: pytest.MonkeyPatch) -> None:
        def connected_admin(ep, *_a, **_k):  # noqa: ANN001, ANN202
            parts = self.logs[ep.name]
            topics = {
                t: SimpleNamespace(error=None, partitions={p: None for (tt, p) in parts if tt == t})
                for (t, _p) in parts
            }
            return ep.name, SimpleNamespace(topics=topics)

        def offsets(admin, _ep, topics):  # noqa: ANN001, ANN202
            return {
                (t, p): (self.start[admin].get((t, p), 0), len(self.logs[admin].get((t, p), [])))
                for t, n in topics.items()
                for p in range(n)
            }

        def read(ep, ranges):  # noqa: ANN001, ANN202
            out = [
                Fingerprint(t, p, r.offset, r.timestamp, key_hash(t, r.key), checksum(r.value, r.headers or []))
                for t, ps in ranges.items()
                for p, (s, e) in ps.items()
                for r in self.logs[ep.name].get((t, p), [])[max(s, self.start[ep.name].get((t, p), 0)) : e]
            ]
            self.reads.append(len(out))
            return out

        def fetch(ep, wanted):  # noqa: ANN001, ANN202
            return {
                (t, p, o): self.logs[ep.name][(t, p)][o]
                for (t, p), offs in wanted.items()
                for o in offs
                if o >= self.start[ep.name].get((t, p), 0)
            }

        import dr.kafka.client
        import verification.recover

        mp.setattr(dr.kafka.client, "connected_admin", connected_admin)
        mp.setattr(audit_mod, "cluster_id", lambda admin, _ep: f"id-{admin}")
        mp.setattr(audit_mod, "_offsets", offsets)
        mp.setattr(audit_mod, "read_fingerprints", read)
        mp.setattr(verification.recover, "_fetch_kafka", fetch)


def endpoint(name: str) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        bootstrap=f"{name.lower()}:9092",
        username="admin",
        password="x",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
    )


A, B = endpoint("A"), endpoint("B")


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Logs:
    fake = Logs()
    fake.install(monkeypatch)
    return fake


def audit(path: Path) -> audit_mod.AuditResult:
    return audit_mod.audit_endpoints(A, B, path=path, stack=STACK, link=LINK, source_cluster="A", target_cluster="B")


def start(
    path: Path, out: Path, cutoff: int | None = None, topics: tuple[str, ...] = ("orders",)
) -> from_audit.FromAudit:
    return from_audit.verify_from_audit(
        source=KafkaSide(endpoint=A, name="A", stack=STACK),
        target=KafkaSide(endpoint=B, name="B", stack=STACK),
        out_dir=out,
        topics=list(topics),
        cutoff_ms=cutoff,
        state_file=path,
        stack=STACK,
        link=LINK,
        source_cluster="A",
        target_cluster="B",
        context={"failover_id": "f1", "mode": "planned"},
    )


def saved(path: Path) -> AuditState:
    """The state an audit of the link between the fake clusters left in ``path``."""
    state = load_state(
        path,
        StateIdentity(ref=LinkRef(stack=STACK, link=LINK, source="A", target="B"), source_id="id-A", target_id="id-B"),
    )
    assert state is not None
    return state


def integrity_verify(out: Path, state_dir: Path) -> integrity.Verdict:
    """``dr.failover.act.integrity.verify`` of topic orders from A to B, starting from the audit of LINK."""
    return integrity.verify(
        source=A,
        target=B,
        out_dir=out,
        topics=["orders"],
        cutoff_ms=None,
        stack=STACK,
        source_name="A",
        target_name="B",
        audit_link=LINK,
        state_dir=state_dir,
    )


def test_from_audit_reads_only_the_increment_and_lists_exactly_the_dropped_records(logs: Logs, tmp_path: Path) -> None:
    state = tmp_path / "audit" / "A-to-B.json"
    logs.write(100)
    logs.copy()
    logs.write(10, partition=1)  # in flight at the audit: the residue
    assert audit(state).in_flight == 10
    logs.copy(partition=1, drop=frozenset({2, 3}))  # two of the residue never arrive, the rest does
    logs.write(30)
    logs.copy(drop=frozenset({105, 120}))
    logs.write(5)  # written after the cut-off: left out on both sides
    for r in logs.logs["A"][("orders", 0)][130:]:
        logs.logs["A"][("orders", 0)][r.offset] = replace(r, timestamp=9_999)
    logs.reads.clear()
    done = start(state, tmp_path / "report", cutoff=5_000)
    assert done.result is not None, done.started_from
    assert logs.reads == [35, 36]  # only past the bounds: 30 + 5 on A, 28 + 8 on B
    origin = done.started_from
    assert origin["audit"] and origin["audit_runs"] == 1 and origin["bounds"]["source"]["orders"] == {"0": 100, "1": 10}
    assert (origin["skipped_source"], origin["skipped_target"], origin["residue_source"]) == (110, 100, 10)
    missing = integrity.missing_records(done.result.out_dir)
    assert sorted((m["topic"], m["partition"], m["offset"], m["key"]) for m in missing) == [
        ("orders", 0, 105, b"k105"),
        ("orders", 0, 120, b"k120"),
        ("orders", 1, 2, b"k2"),
        ("orders", 1, 3, b"k3"),
    ]
    summary = load_summary(done.result.out_dir)
    assert summary["verdict"] == "differences" and summary["totals"]["missing"] == 4
    assert summary["totals"]["source_after_cutoff"] == 5 and summary["method"]["from_audit"]["link"] == LINK
    assert summary["offsets"]["target"]["orders"]["0"]["end"] == 128  # where `drctl recover` scans from
    html = (done.result.out_dir / "report.html").read_text()
    assert "started from" in html and "audit run 1 of link A-to-B" in html and "Failover f1" in html
    assert json.loads(state.read_text())["runs"] == 1  # the check does not change the audit's memory


def test_clean_when_everything_arrived(logs: Logs, tmp_path: Path) -> None:
    state = tmp_path / "a.json"
    logs.write(20)
    logs.copy()
    audit(state)
    logs.write(5)
    logs.copy()
    done = start(state, tmp_path / "r")
    assert done.result.clean and done.result.summary["totals"]["source_compared"] == 5
    assert "verified by the audits of link A-to-B" in (done.result.out_dir / "report.html").read_text()


@pytest.mark.parametrize("damage", ["truncated", "foreign", "recreated", "absent", "topic_recreated"])
def test_unusable_state_falls_back_to_the_full_verification(
    logs: Logs, tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "audit" / "A-to-B.json"
    logs.write(20)
    logs.copy()
    audit(state)
    if damage == "truncated":
        state.write_text(state.read_text()[:30])
    elif damage == "foreign":
        data = json.loads(state.read_text())
        data["stack"] = "other"
        state.write_text(json.dumps(data))
    elif damage == "recreated":
        monkeypatch.setattr(audit_mod, "cluster_id", lambda admin, _ep: f"new-{admin}")
    elif damage == "absent":
        state.unlink()
    else:
        del logs.logs["A"][("orders", 0)][5:]
    done = start(state, tmp_path / "r")
    assert done.result is None and not done.started_from["audit"]
    assert str(state) in done.started_from["reason"] or "does not exist" in done.started_from["reason"]
    assert not (tmp_path / "r").exists()


def test_target_records_matching_nothing_read_now_fall_back(logs: Logs, tmp_path: Path) -> None:
    state = tmp_path / "a.json"
    logs.write(10)
    logs.copy()
    audit(state)
    logs.logs["B"][("orders", 0)].append(replace(logs.logs["A"][("orders", 0)][3], offset=10))  # a duplicate
    done = start(state, tmp_path / "r")
    assert done.result is None and "duplicated" in done.started_from["reason"]


def _full_missing(logs: Logs, cutoff: int | None) -> Counter:
    """The missing records of a full multiset comparison, per identity."""

    def ident(r: SourceRecord) -> tuple:
        return (r.topic, r.key, r.value)

    def ok(r: SourceRecord) -> bool:
        return cutoff is None or r.timestamp <= cutoff

    src = Counter(ident(r) for log in logs.logs["A"].values() for r in log if ok(r))
    dst = Counter(ident(r) for log in logs.logs["B"].values() for r in log if ok(r))
    return src - dst


@pytest.mark.parametrize("seed", range(8))
def test_starting_from_the_audit_finds_what_the_full_comparison_finds(logs: Logs, tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    state = tmp_path / "a.json"
    parts = [("orders", 0), ("orders", 1), ("payments", 0)]
    for _ in range(rnd.randint(1, 4)):
        for t, p in parts:
            logs.write(rnd.randint(0, 40), t, p, keys=rnd.choice([None, 5]))
            done = logs.copied.get((t, p), 0)
            total = len(logs.logs["A"].get((t, p), []))
            logs.copy(
                rnd.randint(0, total - done),
                topic=t,
                partition=p,
                drop=frozenset(rnd.sample(range(done, total), min(2, total - done))),
            )
        audit(state)
    for t, p in parts:  # the failover: last records, the link drains and stops; then writes after the cut-off
        logs.write(rnd.randint(0, 20), t, p, keys=rnd.choice([None, 5]))
        logs.write(rnd.randint(0, 5), t, p, keys=5, ts=50_000)
        logs.copy(topic=t, partition=p, drop=frozenset({rnd.randint(0, 200)}))
    cutoff = rnd.choice([None, 10_000])
    done = start(state, tmp_path / "r", cutoff=cutoff, topics=("orders", "payments"))
    assert done.result is not None, done.started_from
    found = Counter(
        (m["topic"], m["key"], b"v%d" % (int(m["key"][1:]) % 3)) for m in integrity.missing_records(done.result.out_dir)
    )
    assert found == _full_missing(logs, cutoff)


def test_integrity_verify_runs_the_full_job_when_the_state_is_damaged(
    logs: Logs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dr.kafka.offsets
    import verification.job

    logs.write(10)
    logs.copy()
    path = audit_mod.state_file(tmp_path / "state", LINK)
    audit(path)
    path.write_text("not json")
    monkeypatch.setattr(dr.kafka.offsets, "end_offsets", lambda ep, topics: {("orders", 0): 10})
    ran = []

    def full(**kw):  # noqa: ANN003, ANN202
        ran.append(kw["topics"])
        zeros = {c: 0 for c in ("missing", "unexpected", "duplicated", "corrupted")}
        return VerificationResult({"verdict": "clean", "topics": {}, "totals": zeros}, Path(kw["out_dir"]))

    monkeypatch.setattr(verification.job, "run_verification", full)
    v = integrity_verify(tmp_path / "r", tmp_path / "state")
    assert ran == [["orders"]] and v.clean
    assert v.started_from["audit"] is False and str(path) in v.started_from["reason"]
    assert "damaged" in v.started_from["reason"]

    audit(path.with_name("ok.json"))  # a valid state: no full job
    path.unlink()
    path.with_name("ok.json").rename(path)
    v = integrity_verify(tmp_path / "r2", tmp_path / "state")
    assert ran == [["orders"]] and v.clean and v.started_from["audit"] and v.report_dir.endswith("r2")
    assert saved(path).runs == 1


def test_an_audit_that_read_records_after_the_cutoff_is_not_the_start(logs: Logs, tmp_path: Path) -> None:
    """A pair the audit matched across the cut-off could hide a missing record: the full job runs."""
    state = tmp_path / "a.json"
    logs.write(10, keys=2)
    logs.copy(drop=frozenset({0}))
    assert audit(state).verified == 9
    assert from_audit.audited_after_cutoff(saved(state), None) is None
    done = start(state, tmp_path / "r", cutoff=1_005)
    assert done.result is None and "after the cut-off" in done.started_from["reason"]
    data = json.loads(state.read_text())
    del data["max_ts"]  # a file written before max_ts existed
    state.write_text(json.dumps(data))
    done = start(state, tmp_path / "r", cutoff=2_000)
    assert done.result is None and "--reset" in done.started_from["reason"]
    assert start(state, tmp_path / "r", cutoff=None).result is not None  # no cut-off: every pair counts
