"""The Python reference checksum: published xxh64 vectors, and it distinguishes what it must (its
agreement with Spark's built-in one is in tests/spark/test_verification_fingerprint.py)."""

from __future__ import annotations

from verification.fingerprint import checksum, key_hash, xxh64


def test_xxh64_matches_published_vectors():
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert xxh64(b"a", 0) == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc", 0) == 0x44BC2CF5AD770999


def test_checksum_separates_null_empty_and_shifted_fields():
    assert checksum(None, None) != checksum(b"", None)
    # without null flags these two would chain the same bytes ("x", "a")
    assert checksum(None, [("x", b"a")]) != checksum(b"x", [("a", None)])
    assert checksum(b"v", [("k", None)]) != checksum(b"v", [("k", b"")])
    assert checksum(b"v", [("a", b"1"), ("b", b"2")]) != checksum(b"v", [("b", b"2"), ("a", b"1")])
    # Kafka cannot tell "no headers" from "empty headers": neither can the checksum
    assert checksum(b"v", None) == checksum(b"v", [])
    assert key_hash("t", None) != key_hash("t", b"")
    assert key_hash("t1", b"k") != key_hash("t2", b"k")
