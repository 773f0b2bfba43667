"""The whole job on Parquet archives (real Spark, no Kafka): exact classes, cut-off, narrowing of pass 2,
one read of each side (pass 2 and the source lookup work on the persisted fingerprints)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import verification.job as job
from dr.base.errors import ConfigError, VerificationFailed, exit_codes_by_code
from verification import ArchiveSide, run_verification
from verification.archive import write_records

T0 = 1_760_000_000_000
CUTOFF = T0 + 1_600_000


ARCHIVES = ("source.parquet", "target.parquet")


def verify_archives(spark, d, out, *, names=("s.parquet", "t.parquet"), **kw):
    """``run_verification`` of the source and target archives ``names`` in ``d``, report in ``out``."""
    return run_verification(
        source=ArchiveSide(path=d / names[0]), target=ArchiveSide(path=d / names[1]), out_dir=out, spark=spark, **kw
    )


def offending_rows(out):
    """The offending records of a report, sorted, as tuples."""
    return sorted(tuple(r.values()) for r in pq.read_table(out / "offending.parquet").to_pylist())


def rec(topic, partition, offset, ts, key, value, headers=None):
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": ts,
        "key": key,
        "value": value,
        "headers": headers,
    }


def source_records():
    out = []
    for i in range(1600):  # orders: 4 partitions, keys repeat (several versions per key)
        hdrs = [("trace", f"t{i}".encode()), ("empty", None)] if i % 7 == 0 else None
        value = None if i % 97 == 0 else f"order value {i}".encode()
        out.append(rec("orders", i % 4, i // 4, T0 + i * 1000, f"order-{i % 1300}".encode(), value, hdrs))
    out.append(rec("orders", 0, 400, CUTOFF + 5000, b"order-late", b"after the cut-off"))
    for j in range(200):  # payments: 2 partitions
        out.append(rec("payments", j % 2, j // 2, T0 + j * 8000, f"pay-{j}".encode(), f"amount {j}".encode()))
    return out


SCATTERED = {100, 500, 900}


def replicate(records, *, drop=lambda r: False):
    """What MirrorMaker 2 would have written: same content, other offsets."""
    return [{**r, "offset": r["offset"] + 1000} for r in records if not drop(r)]


def index(r):
    return r["offset"] * 4 + r["partition"]


def seeded_target(src):
    orders = [r for r in src if r["topic"] == "orders" and r["timestamp"] <= CUTOFF]
    payments = [r for r in src if r["topic"] == "payments"]
    tgt = replicate(orders, drop=lambda r: index(r) >= 1590 or index(r) in SCATTERED)
    tgt.append({**orders[10], "offset": 5000})  # duplicated
    tgt.append(rec("orders", 3, 5001, T0 + 1_500_000, orders[3]["key"], b"tampered"))  # corrupted, key seen early
    tgt += replicate(payments, drop=lambda r: r["key"] in (b"pay-31", b"pay-50"))  # pay-31 missing
    tgt.append({**payments[50], "offset": 7000, "value": b"changed in transit"})  # pay-50: missing + corrupted
    tgt.append(rec("payments", 1, 7001, T0 + 9000, b"ghost", b"never on the source"))  # unexpected
    for n in range(5):  # after the cut-off: ignored
        tgt.append(
            rec(
                "orders",
                n % 4,
                6000 + n,
                CUTOFF + 1 + n,
                orders[n]["key"] if n < 3 else b"new",
                orders[n]["value"] if n < 2 else b"app write",
            )
        )
    return tgt


@pytest.fixture(scope="module")
def seeded(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("seeded")
    src = source_records()
    write_records(src, d / "source.parquet")
    write_records(seeded_target(src), d / "target.parquet")
    result = verify_archives(spark, d, d / "report", cutoff_ms=CUTOFF, pass2_from="fingerprints", names=ARCHIVES)
    return src, result


def test_every_class_is_counted_exactly(seeded):
    _, result = seeded
    assert result.counts("orders") == {"missing": 13, "unexpected": 0, "duplicated": 1, "corrupted": 1}
    assert result.counts("payments") == {"missing": 2, "unexpected": 1, "duplicated": 0, "corrupted": 1}
    assert not result.clean and result.exit_code == 1


def test_missing_records_carry_their_source_coordinates(seeded):
    src, result = seeded
    table = pq.read_table(result.out_dir / "offending.parquet").to_pylist()
    missing = {(r["topic"], r["partition"], r["offset"]) for r in table if r["class"] == "missing"}
    orders = [r for r in src if r["topic"] == "orders" and r["timestamp"] <= CUTOFF]
    expected = {("orders", r["partition"], r["offset"]) for r in orders if index(r) >= 1590 or index(r) in SCATTERED}
    expected |= {("payments", 1, 15), ("payments", 0, 25)}
    assert missing == expected
    assert {r["side"] for r in table if r["class"] == "missing"} == {"source"}
    assert {r["side"] for r in table if r["class"] != "missing"} == {"target"}
    dup = [r for r in table if r["class"] == "duplicated"]
    assert [(d["partition"], d["offset"]) for d in dup] == [(2, 5000)]  # the copy, not the original


def test_cutoff_records_are_ignored_on_both_sides_and_counted(seeded):
    _, result = seeded
    orders = result.summary["topics"]["orders"]
    assert orders["target_after_cutoff"] == 5 and orders["source_after_cutoff"] == 1
    assert orders["source_compared"] == 1600 and orders["source_read"] == 1601


def test_target_only_key_seen_earlier_is_looked_up_in_the_whole_source(seeded):
    _, result = seeded
    assert result.summary["method"]["pass2b"] is True
    table = pq.read_table(result.out_dir / "offending.parquet").to_pylist()
    assert {(r["topic"], r["offset"]) for r in table if r["class"] == "corrupted"} == {
        ("orders", 5001),
        ("payments", 7000),
    }


def test_raise_for_verdict_is_exit_code_1(seeded):
    _, result = seeded
    with pytest.raises(VerificationFailed) as info:
        result.raise_for_verdict()
    assert info.value.exit_code == 1 and "missing" in str(info.value)


def test_clean_sides_skip_pass_two(spark, tmp_path):
    src = [r for r in source_records() if r["timestamp"] <= CUTOFF]
    write_records(src, tmp_path / "s.parquet")
    write_records(replicate(src), tmp_path / "t.parquet")
    result = verify_archives(spark, tmp_path, tmp_path / "r")
    assert result.clean and result.exit_code == 0
    assert result.summary["method"]["pass2_offsets"] == 0
    assert pq.read_table(tmp_path / "r" / "offending.parquet").num_rows == 0
    result.raise_for_verdict()  # no exception when clean


def test_tail_loss_rereads_only_the_tail(spark, tmp_path):
    src = [r for r in source_records() if r["topic"] == "orders" and r["timestamp"] <= CUTOFF]
    write_records(src, tmp_path / "s.parquet")
    write_records(replicate(src, drop=lambda r: index(r) >= 1596), tmp_path / "t.parquet")
    result = verify_archives(spark, tmp_path, tmp_path / "r", windows=100, pass2_from="fingerprints")
    assert result.counts()["missing"] == 4 and sum(result.counts().values()) == 4
    method = result.summary["method"]
    assert method["pass2_offsets"] == 0 and method["kafka_reads_per_side"] == 1  # nothing read again
    assert 0 < method["pass2_compared_records"] <= 2 * 4 * 5  # one window: ~4 records per partition per side
    old = verify_archives(spark, tmp_path, tmp_path / "old", windows=100, pass2_from="kafka")
    assert old.counts() == result.counts() and old.summary["method"]["kafka_reads_per_side"] == 2
    assert 0 < old.summary["method"]["pass2_offsets"] <= 2 * 4 * 5  # the former design re-read only the tail


def test_topic_absent_on_the_target_is_all_missing(spark, tmp_path):
    src = [r for r in source_records() if r["timestamp"] <= CUTOFF]
    write_records(src, tmp_path / "s.parquet")
    write_records(replicate([r for r in src if r["topic"] == "orders"]), tmp_path / "t.parquet")
    result = verify_archives(spark, tmp_path, tmp_path / "r")
    assert result.summary["topics"]["payments"]["target_absent"] is True
    assert result.counts("payments")["missing"] == 200 and result.counts("orders")["missing"] == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["verdict"] == "differences" and summary["exit_code"] == 1
    assert summary["exit_codes"] == exit_codes_by_code(), "the one exit-code table (dr.base.errors), not a copy"


def test_large_reports_are_written_by_spark_with_the_same_content(spark, seeded, tmp_path):
    _, small = seeded
    d = small.out_dir.parent
    big = verify_archives(spark, d, tmp_path / "r", cutoff_ms=CUTOFF, collect_limit=0, names=ARCHIVES)
    assert big.summary["totals"] == small.summary["totals"]

    assert offending_rows(big.out_dir) == offending_rows(small.out_dir)
    html = (big.out_dir / "report.html").read_text()
    assert "Sample of missing records" in html


def test_a_record_held_three_times_reports_its_latest_missing_copies(spark, tmp_path):
    same = [rec("t", 0, o, T0 + 1000 * o, b"k", b"same value") for o in range(3)]
    other = [rec("t", 1, o, T0 + 500 + 1000 * o, b"k%d" % o, b"v") for o in range(3)]
    write_records(same + other, tmp_path / "s.parquet")
    write_records([{**same[0], "offset": 40}, *other], tmp_path / "t.parquet")
    result = verify_archives(spark, tmp_path, tmp_path / "r")
    assert result.counts() == {"missing": 2, "unexpected": 0, "duplicated": 0, "corrupted": 0}
    table = pq.read_table(result.out_dir / "offending.parquet").to_pylist()
    assert sorted((r["partition"], r["offset"]) for r in table) == [(0, 1), (0, 2)]


def test_each_side_is_read_once_whatever_pass_2_and_the_lookup_need(spark, seeded, tmp_path, monkeypatch):
    _, fingerprints = seeded
    d = fingerprints.out_dir.parent
    reads = []
    real = job.read_side

    def counting(spark_, side, ranges, **kw):
        reads.append((side.path.name, {t: dict(p) for t, p in ranges.items()}))
        return real(spark_, side, ranges, **kw)

    monkeypatch.setattr(job, "read_side", counting)
    sides = {"source": ArchiveSide(path=d / "source.parquet"), "target": ArchiveSide(path=d / "target.parquet")}
    kafka = run_verification(**sides, out_dir=tmp_path / "kafka", cutoff_ms=CUTOFF, spark=spark)  # the default
    # the former design read the source three times (pass 1, pass 2, the lookup of target-only keys)
    assert [name for name, _ in reads].count("source.parquet") == 3
    reads.clear()
    again = run_verification(**sides, out_dir=tmp_path / "fp", cutoff_ms=CUTOFF, spark=spark, pass2_from="fingerprints")
    assert sorted(name for name, _ in reads) == ["source.parquet", "target.parquet"]
    assert again.summary["method"]["pass2b"] is True and again.summary["method"]["kafka_reads_per_side"] == 1

    for other in (kafka, again):  # same verdict, same offending records (coordinates, keys) either way
        assert other.summary["totals"] == fingerprints.summary["totals"]
        assert offending_rows(other.out_dir) == offending_rows(fingerprints.out_dir)


def test_persisted_fingerprints_are_measured_and_dropped(spark, seeded):
    _, result = seeded
    stored = result.summary["method"]["fingerprints"]
    assert stored["columns"] == ["side", "topic", "partition", "offset", "ts", "key", "key_hash", "checksum", "window"]
    assert stored["disk_bytes"] > 0 and stored["memory_bytes"] == 0
    assert 0 < stored["bytes_per_record"] < 200
    assert spark.sparkContext._jsc.getPersistentRDDs().isEmpty(), "nothing left on the executors' disks"


def test_an_unknown_pass_2_source_is_a_config_error(spark, tmp_path, monkeypatch):
    monkeypatch.setenv(job.PASS2_FROM_ENV, "tape")
    with pytest.raises(ConfigError, match="tape"):
        verify_archives(spark, tmp_path, tmp_path / "r")
