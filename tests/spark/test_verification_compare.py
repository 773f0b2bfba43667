"""Multiset comparison on small in-memory DataFrames: every class, exact, no false positives."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

from verification.compare import (
    SOURCE,
    TARGET,
    TimeGrid,
    bucket_summary,
    classify,
    compact_fingerprints,
    find_differences,
    identity_differences,
    records_in_differing_windows,
    resolve_target_only,
    select_differing,
    window_bounds,
)
from verification.fingerprint import checksum, fingerprint
from verification.sources import CANONICAL_SCHEMA


def rows_of(spark, source, target):
    """Fingerprinted rows of both sides; records are (partition, offset, ts, key, value[, headers])."""

    def side(records, marker, topic="t"):
        data = [(topic, p, o, ts, k, v, h[0] if h else None) for p, o, ts, k, v, *h in records]
        return fingerprint(spark.createDataFrame(data, CANONICAL_SCHEMA)).withColumn("side", F.lit(marker))

    return side(source, SOURCE).unionByName(side(target, TARGET))


def offending(spark, source, target):
    out = classify(rows_of(spark, source, target)).orderBy("class", "side", "partition", "offset").collect()
    return [(r["class"], r["side"], r["partition"], r["offset"]) for r in out]


def test_same_multiset_with_other_offsets_and_partitions_is_clean(spark):
    src = [(0, 0, 10, b"a", b"1"), (1, 0, 11, b"b", b"2"), (1, 1, 12, None, b"3"), (0, 1, 13, b"a", b"1")]
    tgt = [(2, 70, 10, b"a", b"1"), (2, 71, 13, b"a", b"1"), (0, 5, 11, b"b", b"2"), (1, 9, 12, None, b"3")]
    assert offending(spark, src, tgt) == []


def test_missing_names_the_source_coordinates(spark):
    src = [(0, 0, 10, b"a", b"1"), (0, 1, 11, b"b", b"2"), (1, 0, 12, None, b"n")]
    tgt = [(0, 40, 10, b"a", b"1")]
    assert offending(spark, src, tgt) == [("missing", "source", 0, 1), ("missing", "source", 1, 0)]


def test_missing_copies_of_a_repeated_record_are_the_latest_ones(spark):
    src = [(0, 0, 10, b"a", b"1"), (0, 1, 20, b"a", b"1"), (0, 2, 30, b"a", b"1")]
    tgt = [(0, 0, 10, b"a", b"1")]
    assert offending(spark, src, tgt) == [("missing", "source", 0, 1), ("missing", "source", 0, 2)]


def test_duplicated_counts_only_the_extra_copies(spark):
    src = [(0, 0, 10, b"a", b"1"), (0, 1, 11, b"b", b"2")]
    tgt = [(0, 0, 10, b"a", b"1"), (0, 1, 11, b"b", b"2"), (0, 2, 10, b"a", b"1"), (1, 0, 10, b"a", b"1")]
    assert offending(spark, src, tgt) == [("duplicated", "target", 0, 2), ("duplicated", "target", 1, 0)]


def test_corrupted_is_same_key_with_a_checksum_the_source_lacks(spark):
    src = [(0, 0, 10, b"a", b"1")]
    tgt = [(0, 0, 10, b"a", b"1"), (0, 1, 50, b"a", b"other")]
    assert offending(spark, src, tgt) == [("corrupted", "target", 0, 1)]


def test_header_change_is_corruption_not_a_match(spark):
    src = [(0, 0, 10, b"a", b"1", [("h", b"x")])]
    tgt = [(0, 0, 10, b"a", b"1", [("h", b"y")])]
    assert offending(spark, src, tgt) == [("corrupted", "target", 0, 0), ("missing", "source", 0, 0)]


def test_unexpected_is_a_key_the_source_never_had(spark):
    src = [(0, 0, 10, b"a", b"1")]
    tgt = [(0, 0, 10, b"a", b"1"), (0, 1, 11, b"zz", b"1"), (0, 2, 12, None, b"1")]
    assert offending(spark, src, tgt) == [("unexpected", "target", 0, 1), ("unexpected", "target", 0, 2)]


def test_more_than_two_surplus_copies_are_ranked_over_their_rows(spark):
    # five source copies, one on the target: the four latest source copies are missing
    src = [(p, o, 10 * (o + 1) + p, b"a", b"1") for p, o in ((0, 0), (1, 0), (0, 1), (1, 1), (0, 2))]
    tgt = [(3, 7, 11, b"a", b"1")]
    out = offending(spark, src, tgt)
    assert out == [
        ("missing", "source", 0, 1),
        ("missing", "source", 0, 2),
        ("missing", "source", 1, 0),
        ("missing", "source", 1, 1),
    ]
    # three target copies of a record the source holds once: the two latest are duplicates
    tgt3 = [(0, 0, 10, b"b", b"2"), (1, 0, 30, b"b", b"2"), (2, 0, 20, b"b", b"2")]
    assert offending(spark, [(0, 0, 10, b"b", b"2")], tgt3) == [
        ("duplicated", "target", 1, 0),
        ("duplicated", "target", 2, 0),
    ]


def test_offending_rows_carry_timestamp_key_and_checksum(spark):
    out = classify(rows_of(spark, [(4, 9, 1234, b"k", b"v")], [])).collect()
    assert [(r["timestamp"], r["key"], r["checksum"], r["partition"], r["offset"]) for r in out] == [
        (1234, b"k", checksum(b"v"), 4, 9)
    ]


def test_two_copies_with_equal_timestamps_are_told_apart_by_offset(spark):
    src = [(0, 5, 10, b"a", b"1"), (0, 6, 10, b"a", b"1")]
    assert offending(spark, src, [(0, 0, 10, b"a", b"1")]) == [("missing", "source", 0, 6)]
    assert offending(spark, src, []) == [("missing", "source", 0, 5), ("missing", "source", 0, 6)]


def test_complete_topics_are_settled_and_the_others_left_for_lookup(spark):
    def side(records, marker, topic):
        data = [(topic, p, o, ts, k, v, None) for p, o, ts, k, v in records]
        return fingerprint(spark.createDataFrame(data, CANONICAL_SCHEMA)).withColumn("side", F.lit(marker))

    rows = (
        side([(0, 0, 10, b"a", b"1")], SOURCE, "x")
        .unionByName(side([(0, 0, 10, b"a", b"2")], TARGET, "x"))
        .unionByName(side([(0, 0, 10, b"a", b"1")], SOURCE, "y"))
        .unionByName(side([(0, 0, 10, b"a", b"2")], TARGET, "y"))
    )
    got = sorted((r["topic"], r["class"]) for r in classify(rows, complete={"x"}).collect())
    assert got == [("x", "corrupted"), ("x", "missing"), ("y", "missing"), ("y", "target_only")]


def test_target_only_records_are_settled_against_the_whole_source(spark):
    # pass-2 rows hold only the differing buckets: the source copies of b and a live elsewhere
    rows = rows_of(
        spark,
        [(0, 0, 10, b"a", b"1")],
        [(0, 0, 10, b"a", b"1"), (0, 1, 11, b"b", b"2"), (0, 2, 12, b"a", b"9"), (0, 3, 13, b"c", b"3")],
    )
    off = classify(rows, complete=False)
    assert sorted(r["class"] for r in off.collect()) == ["target_only"] * 3
    whole = rows_of(spark, [(0, 0, 10, b"a", b"1"), (1, 5, 1, b"b", b"2")], []).where(F.col("side") == SOURCE)
    got = sorted((r["key"], r["class"]) for r in resolve_target_only(off, whole).collect())
    assert got == [(b"a", "corrupted"), (b"b", "duplicated"), (b"c", "unexpected")]


def test_bucket_summary_finds_exactly_the_differing_window_and_spans(spark):
    src = [(p, o, 1000 + 10 * o + p, f"k{p}-{o}".encode(), b"v") for p in (0, 1) for o in range(100)]
    tgt = [(p, o + 7, ts, k, v) for p, o, ts, k, v in src if not (p == 1 and o == 95)]
    rows = rows_of(spark, src, tgt)
    grid = TimeGrid.spanning({"t": (1000, 1999)}, windows=10)
    pdf = bucket_summary(rows, grid=grid, cutoff_ms=None).toPandas()
    diff = find_differences(pdf)
    assert diff.windows == {"t": [9]}
    assert diff.read == {SOURCE: {"t": {0: 100, 1: 100}}, TARGET: {"t": {0: 100, 1: 99}}}
    assert records_in_differing_windows(pdf, diff) == 10 + 10 + 10 + 9  # window 9 of both partitions, both sides
    # only the tail window of each partition is read again (target offsets shifted by 7)
    assert diff.spans[SOURCE]["t"] == {0: (90, 100), 1: (90, 100)}
    assert diff.spans[TARGET]["t"] == {0: (97, 107), 1: (97, 107)}


def test_records_after_the_cutoff_are_counted_apart_and_not_compared(spark):
    src = [(0, 0, 100, b"a", b"1")]
    tgt = [(0, 0, 100, b"a", b"1"), (0, 1, 500, b"late", b"x"), (0, 2, 501, b"a", b"1")]
    rows = rows_of(spark, src, tgt)
    grid = TimeGrid.spanning({"t": (100, 501)}, windows=4)
    diff = find_differences(bucket_summary(rows, grid=grid, cutoff_ms=200).toPandas())
    assert not diff.any
    assert diff.after_cutoff == {TARGET: {"t": 2}}


def test_a_sum_collision_needs_equal_counts_and_both_halves(spark):
    # same count, different content: the (lo, hi) sums must differ
    assert checksum(b"x", None) != checksum(b"y", None)
    rows = rows_of(spark, [(0, 0, 1, b"a", b"x")], [(0, 0, 1, b"a", b"y")])
    pdf = bucket_summary(rows, grid=TimeGrid.spanning({"t": (1, 1)}, 1), cutoff_ms=None).toPandas()
    assert find_differences(pdf).any


@pytest.mark.parametrize("cutoff", [None, 10_000])
def test_rto_probe_records_are_never_compared(spark, cutoff):
    from dr.kafka.client import PROBE_KEY

    src = [(0, 0, 100, b"a", b"1")]
    tgt = [(0, 0, 100, b"a", b"1"), (0, 1, 150, PROBE_KEY, b"probe"), (0, 2, 160, b"b", b"2")]
    rows = rows_of(spark, src, tgt)
    grid = TimeGrid.spanning({"t": (100, 160)}, windows=4)
    diff = find_differences(bucket_summary(rows, grid=grid, cutoff_ms=cutoff).toPandas())
    assert diff.any, "the record without a source copy is still found"
    assert diff.after_cutoff == {TARGET: {"t": 1}}, "the probe record is set apart, not compared"


def test_compact_fingerprints_give_the_same_summary_and_pass2_rows(spark):
    src = [(p, o, 1000 + 10 * o + p, f"k{p}-{o}".encode(), b"v") for p in (0, 1) for o in range(100)]
    tgt = [(p, o + 7, ts, k, v) for p, o, ts, k, v in src if not (p == 1 and o in (3, 95))]
    tgt.append((0, 500, 1999, b"late", b"after the cut-off"))
    rows = rows_of(spark, src, tgt)
    grid = TimeGrid.spanning({"t": (1000, 1999)}, windows=10)
    compact = compact_fingerprints(rows, grid, 1995)
    assert compact.columns == ["side", "topic", "partition", "offset", "ts", "key", "key_hash", "checksum", "window"]

    def ordered(pdf):
        return pdf.sort_values(["side", "partition", "window"]).reset_index(drop=True)

    from_compact = ordered(bucket_summary(compact, grid=grid, cutoff_ms=1995).toPandas())
    pd.testing.assert_frame_equal(from_compact, ordered(bucket_summary(rows, grid=grid, cutoff_ms=1995).toPandas()))
    diff = find_differences(from_compact)
    assert diff.windows == {"t": [0, 9]} and window_bounds(diff) == (0, 9)
    assert diff.after_cutoff == {TARGET: {"t": 1}}
    picked = select_differing(spark, compact, diff).collect()
    # windows 0 and 9 of both partitions, both sides
    assert len(picked) == records_in_differing_windows(from_compact, diff) == 20 + 19 + 20 + 19
    assert all(r["window"] in (0, 9) for r in picked)
    found = identity_differences(select_differing(spark, compact, diff)).collect()
    assert sorted((r["class"], r["c0"] & 0xFFFF) for r in found) == [("missing", 3), ("missing", 95)]
