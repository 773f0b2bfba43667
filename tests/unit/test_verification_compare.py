"""Multiset comparison on small in-memory DataFrames: every class, exact, no false positives."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from verification.compare import SOURCE, TARGET, after_cutoff, classify, identity_differences
from verification.fingerprint import checksum, fingerprint
from verification.session import spark_session
from verification.sources import CANONICAL_SCHEMA


@pytest.fixture(scope="module")
def spark():
    return spark_session()


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
    assert out == [("missing", "source", 0, 1), ("missing", "source", 0, 2), ("missing", "source", 1, 0),
                   ("missing", "source", 1, 1)]
    # three target copies of a record the source holds once: the two latest are duplicates
    tgt3 = [(0, 0, 10, b"b", b"2"), (1, 0, 30, b"b", b"2"), (2, 0, 20, b"b", b"2")]
    assert offending(spark, [(0, 0, 10, b"b", b"2")], tgt3) == [
        ("duplicated", "target", 1, 0), ("duplicated", "target", 2, 0)]


def test_offending_rows_carry_timestamp_key_and_checksum(spark):
    out = classify(rows_of(spark, [(4, 9, 1234, b"k", b"v")], [])).collect()
    assert [(r["timestamp"], r["key"], r["checksum"], r["partition"], r["offset"]) for r in out] == [
        (1234, b"k", checksum(b"v"), 4, 9)]


def test_two_copies_with_equal_timestamps_are_told_apart_by_offset(spark):
    src = [(0, 5, 10, b"a", b"1"), (0, 6, 10, b"a", b"1")]
    assert offending(spark, src, [(0, 0, 10, b"a", b"1")]) == [("missing", "source", 0, 6)]
    assert offending(spark, src, []) == [("missing", "source", 0, 5), ("missing", "source", 0, 6)]


def test_records_after_the_cutoff_are_left_out_by_the_filter(spark):
    rows = rows_of(spark, [(0, 0, 100, b"a", b"1")], [(0, 0, 100, b"a", b"1"), (0, 1, 500, b"late", b"x")])
    kept = rows.where(~after_cutoff(200))
    assert kept.count() == 2 and classify(kept).count() == 0
    assert classify(rows).count() == 1  # without the cut-off the late record is unexpected


def test_only_differing_identities_leave_the_aggregation(spark):
    src = [(0, i, i, b"k%d" % i, b"v") for i in range(50)]
    tgt = [(1, i + 3, i, b"k%d" % i, b"v") for i in range(50) if i != 17]
    ident = identity_differences(rows_of(spark, src, tgt)).collect()
    assert [(r["key"], r["class"], r["n"], r["d"], r["c0"]) for r in ident] == [(b"k17", "missing", 1, 1, 17)]
