"""The Python reference checksum agrees with Spark's built-in one, and distinguishes what it must."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from verification.fingerprint import checksum, fingerprint, key_hash, record_hash
from verification.sources import CANONICAL_SCHEMA


def test_spark_and_reference_agree_on_edge_records(spark):
    rows = [
        ("t", 0, 0, 0, None, None, None),
        ("t", 0, 1, 1, b"", b"", []),
        ("t", 0, 2, 2, b"k", b"x" * 1000, [("h", None), ("h", b""), ("\u00e9\u4e2d", b"\x00\xff")]),
        ("\u00fc-topic", 1, 3, -5, b"\x00", b"y" * 31, [("a", b"b" * 33)]),
    ]
    df = fingerprint(spark.createDataFrame(rows, CANONICAL_SCHEMA)).collect()
    for (topic, _p, _o, _ts, key, value, headers), got in zip(rows, df, strict=True):
        assert got.key_hash == key_hash(topic, key)
        assert got.checksum == checksum(value, headers)
        assert got.record_hash == record_hash(got.key_hash, got.checksum)


_bytes = st.one_of(st.none(), st.binary(max_size=80))
_header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=40)))
_record = st.tuples(
    st.sampled_from(["orders", "payments", "é-topic"]),
    _bytes,
    _bytes,
    st.one_of(st.none(), st.lists(_header, max_size=4)),
)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_record, min_size=200, max_size=200))
def test_reference_checksum_equals_spark_on_generated_records(spark, records):
    rows = [(t, 0, i, i, k, v, h) for i, (t, k, v, h) in enumerate(records)]
    got = (
        fingerprint(spark.createDataFrame(rows, CANONICAL_SCHEMA))
        .orderBy("offset")
        .select("key_hash", "checksum", "record_hash")
        .collect()
    )
    assert len(got) == 200
    for (t, k, v, h), g in zip(records, got, strict=True):
        assert g.key_hash == key_hash(t, k)
        assert g.checksum == checksum(v, h)
        assert g.record_hash == record_hash(g.key_hash, g.checksum)


def test_fingerprint_carries_no_payload(spark):
    df = fingerprint(spark.createDataFrame([("t", 0, 0, 0, b"k", b"secret-payload", None)], CANONICAL_SCHEMA))
    assert "value" not in df.columns and "headers" not in df.columns
    assert df.where(F.col("checksum") == checksum(b"secret-payload", None)).count() == 1
