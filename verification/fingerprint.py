"""Per-record fingerprints: the Spark columns (JVM built-ins only) and a pure-Python reference.

Every record gets three 64-bit values, all computed by Spark's built-in ``xxhash64`` (XXH64 with
seed 42, fields chained: each field is hashed with the previous result as seed, null fields skipped):

* ``key_hash``  = xxhash64(topic, key IS NULL, key) — which key a record belongs to;
* ``checksum``  = xxhash64(value IS NULL, value, size(headers),
  transform(headers, h -> struct(h.key, h.value IS NULL, h.value))) — the content: value and
  headers in order. The explicit null flags and the header count make the chaining unambiguous
  (a null value differs from an empty one; fields cannot shift between value and headers);
  records without headers hash the same whether the column holds ``null`` or ``[]``;
* ``record_hash`` = xxhash64(key_hash, checksum) — used for per-bucket (count, sum) summaries.

The Python functions below reproduce the same numbers byte for byte (the unit tests check it on
generated records against a real Spark session); recovery, the incremental audit and the
integrity check started from an audit use them to fingerprint records read with confluent-kafka.
They hash with the C XXH64 of the ``xxhash`` package (15x faster per record than
:func:`xxh64_reference`, the pure-Python algorithm kept to check it against:
``benchmarks/fingerprint_bench.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import xxhash
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = [
    "SPARK_SEED",
    "checksum",
    "checksum_col",
    "fingerprint",
    "key_hash",
    "key_hash_col",
    "record_hash",
    "record_hash_col",
    "xxh64",
    "xxh64_reference",
]

#: The seed Spark's ``xxhash64`` starts from.
SPARK_SEED = 42

_M = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5

Header = tuple[str, bytes | None]


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _merge(acc: int, v: int) -> int:
    return (((acc ^ _round(0, v)) * _P1) + _P4) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` with ``seed`` (unsigned 64-bit result), the algorithm Spark uses (C)."""
    return xxhash.xxh64_intdigest(data, seed & _M)


def xxh64_reference(data: bytes, seed: int = 0) -> int:
    """XXH64 in pure Python, step by step as the specification writes it: what :func:`xxh64` is checked against."""
    seed &= _M
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M
        limit = n - 32
        while i <= limit:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = ((_rotl(h ^ _round(0, k), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = ((_rotl(h ^ ((k * _P1) & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


# Spark's hash of each SQL type, chained through the seed (``HashExpression`` semantics).
def _h_bool(b: bool, seed: int) -> int:
    return xxh64(struct.pack("<i", 1 if b else 0), seed)


def _h_int(v: int, seed: int) -> int:
    return xxh64(struct.pack("<i", v), seed)


def _h_long(v: int, seed: int) -> int:
    return xxh64(struct.pack("<q", v), seed)


def _h_bytes(b: bytes | None, seed: int) -> int:
    return seed if b is None else xxh64(b, seed)


def _h_str(s: str | None, seed: int) -> int:
    return seed if s is None else xxh64(s.encode("utf-8"), seed)


def key_hash(topic: str, key: bytes | None) -> int:
    """Reference of :func:`key_hash_col` (signed 64-bit, as Spark returns it)."""
    h = _h_str(topic, SPARK_SEED)
    h = _h_bool(key is None, h)
    return _signed(_h_bytes(key, h))


def checksum(value: bytes | None, headers: Iterable[Header] | None = None) -> int:
    """Reference of :func:`checksum_col`: the content checksum of a value and its headers."""
    hdrs: Sequence[Header] = list(headers or ())
    h = _h_bool(value is None, SPARK_SEED)
    h = _h_bytes(value, h)
    h = _h_int(len(hdrs), h)
    for hkey, hval in hdrs:
        h = _h_str(hkey, h)
        h = _h_bool(hval is None, h)
        h = _h_bytes(hval, h)
    return _signed(h)


def record_hash(key_hash_value: int, checksum_value: int) -> int:
    """Reference of :func:`record_hash_col`."""
    return _signed(_h_long(checksum_value, _h_long(key_hash_value, SPARK_SEED)))


# ----------------------------------------------------------------------------- Spark columns
def key_hash_col(topic: str = "topic", key: str = "key") -> Column:
    """``xxhash64(topic, key IS NULL, key)``."""
    return F.xxhash64(F.col(topic), F.col(key).isNull(), F.col(key))


def checksum_col(value: str = "value", headers: str = "headers") -> Column:
    """Content checksum of value + headers (order kept), JVM built-ins only."""
    hdrs = F.col(headers)
    n = F.coalesce(F.size(hdrs), F.lit(0))
    # ``transform`` is interpreted (no codegen): evaluate it only for records that have headers.
    # A null array and an empty one hash alike, so the guard does not change any checksum.
    per_header = F.when(n > 0, F.transform(hdrs, lambda h: F.struct(h["key"], h["value"].isNull(), h["value"])))
    return F.xxhash64(F.col(value).isNull(), F.col(value), n, per_header)


def record_hash_col(key_hash_name: str = "key_hash", checksum_name: str = "checksum") -> Column:
    """``xxhash64(key_hash, checksum)``: one number per record for bucket sums."""
    return F.xxhash64(F.col(key_hash_name), F.col(checksum_name))


def fingerprint(records: DataFrame) -> DataFrame:
    """Canonical records → topic, partition, offset, ts, key, key_hash, checksum, record_hash.

    ``records`` has the canonical columns of :mod:`verification.sources` (value and headers are
    dropped here, so nothing downstream carries payloads).
    """
    return records.select(
        "topic", "partition", "offset", "ts", "key", key_hash_col().alias("key_hash"), checksum_col().alias("checksum")
    ).withColumn("record_hash", record_hash_col())
