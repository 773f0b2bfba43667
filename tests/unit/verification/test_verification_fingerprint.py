"""The Python reference checksum: published xxh64 vectors, and it distinguishes what it must (its
agreement with Spark's built-in one is in tests/spark/test_verification_fingerprint.py)."""

from __future__ import annotations

import random

import pytest

from verification.fingerprint import checksum, key_hash, xxh64, xxh64_reference


@pytest.mark.parametrize("impl", [xxh64, xxh64_reference], ids=["C", "reference"])
def test_xxh64_matches_published_vectors(impl):
    assert impl(b"", 0) == 0xEF46DB3751D8E999
    assert impl(b"a", 0) == 0xD24EC4F1A98C6E5B
    assert impl(b"abc", 0) == 0x44BC2CF5AD770999


def test_the_c_xxh64_equals_the_reference_at_every_length_and_seed():
    rng = random.Random(7)
    # every tail length (0-31 bytes after the 32-byte stripes) and the seeds the chaining produces:
    # Spark's 42, zero, all bits set and negative (signed) values folded to 64 bits
    for n in [*range(0, 70), 200, 1000, 4099]:
        data = rng.randbytes(n)
        for seed in (0, 42, (1 << 64) - 1, -5, rng.getrandbits(64)):
            assert xxh64(data, seed) == xxh64_reference(data, seed), (n, seed)


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
