"""The first audit on Spark, its pure parts: residue from offending rows, the frontier read back, the choice."""

from __future__ import annotations

import random

import pytest

from dr.base.errors import ConfigError
from verification.audit import _first_on_spark
from verification.audit_spark import SPARK_FIRST_ABOVE, frontier_outside, residue_from_offending
from verification.audit_state import Fingerprint, match_increment


def reader(log: list[Fingerprint], calls: list[dict] | None = None):
    """``read`` over an in-memory source log (the records a consumer would return for the ranges)."""

    def read(ranges: dict[str, dict[int, tuple[int, int]]]) -> list[Fingerprint]:
        if calls is not None:
            calls.append(ranges)
        return [
            f
            for f in log
            if f.partition in ranges.get(f.topic, {})
            and ranges[f.topic][f.partition][0] <= f.offset < ranges[f.topic][f.partition][1]
        ]

    return read


def test_residue_splits_offending_rows_by_side() -> None:
    rows = [
        {
            "class": "missing",
            "side": "source",
            "topic": "t",
            "partition": 1,
            "offset": 7,
            "timestamp": 5,
            "key": b"k",
            "key_hash": -3,
            "checksum": 9,
        },
        {
            "class": "unexpected",
            "side": "target",
            "topic": "t",
            "partition": 0,
            "offset": 2,
            "timestamp": 6,
            "key": None,
            "key_hash": 4,
            "checksum": -1,
        },
    ]
    src, dst = residue_from_offending(rows)
    assert src == [Fingerprint("t", 1, 7, 5, -3, 9)]
    assert dst == [Fingerprint("t", 0, 2, 6, 4, -1)]


def test_frontier_is_the_highest_record_outside_the_residue_not_the_last_offset() -> None:
    # offsets 0..9 hold records except 8 (a transaction marker) and 9 (a failover probe, never returned)
    log = [Fingerprint("t", 0, o, o, o, o) for o in range(8)]
    residue = [f for f in log if f.offset >= 5]  # 5..7 not copied yet
    assert frontier_outside(reader(log), {("t", 0): (0, 10)}, residue, first_chunk=2) == {"t": {0: 4}}


def test_partition_wholly_in_the_residue_or_empty_has_no_frontier() -> None:
    log = [Fingerprint("t", 0, o, o, o, o) for o in range(5)]
    calls: list[dict] = []
    got = frontier_outside(reader(log, calls), {("t", 0): (0, 5), ("t", 1): (3, 3)}, log, first_chunk=2)
    assert got == {}
    # chunks grow fourfold from the end: [3, 5), then [0, 3); the empty partition is never read
    assert [c["t"][0] for c in calls] == [(3, 5), (0, 3)] and all(1 not in c["t"] for c in calls)


@pytest.mark.parametrize("seed", range(25))
def test_split_equals_the_python_first_audit_on_generated_links(seed: int) -> None:
    """Random logs: gaps, a link that dropped some records and has not copied a tail, identical records
    written twice. Residue from the unmatched records + frontier read back = the Python audit's split."""
    rnd = random.Random(seed)
    src: list[Fingerprint] = []
    for p in range(3):
        o = rnd.randrange(0, 50)
        for _ in range(rnd.randrange(0, 120)):
            o += 1 + (rnd.random() < 0.1) * rnd.randrange(1, 5)  # compaction gaps, markers
            content = rnd.randrange(0, 40) if rnd.random() < 0.2 else rnd.getrandbits(40)
            src.append(Fingerprint("t", p, o, o * 10, content, content + 1))
    tails = {p: rnd.randrange(0, 15) for p in range(3)}
    last = {p: max((f.offset for f in src if f.partition == p), default=0) for p in range(3)}
    copied = [f for f in src if rnd.random() > 0.05 and f.offset <= last[f.partition] - tails[f.partition]]
    dst = [f._replace(offset=i) for i, f in enumerate(copied)]
    dst += [Fingerprint("t", 0, 10_000 + i, 1, rnd.getrandbits(40), 0) for i in range(rnd.randrange(0, 3))]
    python = match_increment(src, dst, {})
    residue = [*python.in_flight, *python.missing]
    bounds = {("t", p): (0, last[p] + 1 + rnd.randrange(0, 3)) for p in range(3)}
    frontier = frontier_outside(reader(src), bounds, residue, first_chunk=rnd.choice([1, 4, 256]))
    assert frontier == {t: ps for t, ps in python.frontier.items() if ps}
    missing = [f for f in residue if f.offset < frontier.get(f.topic, {}).get(f.partition, -1)]
    assert sorted(missing) == python.missing


def test_auto_takes_spark_above_the_threshold_only() -> None:
    half = SPARK_FIRST_ABOVE // 2
    small = ({("t", 0): (0, half)}, {("t", 0): (0, half)})
    big = ({("t", 0): (10, half + 11)}, {("t", 0): (0, half)})
    assert not _first_on_spark("auto", small) and _first_on_spark("auto", big)
    assert _first_on_spark("spark", small) and not _first_on_spark("python", big)
    with pytest.raises(ConfigError, match="--first-run 'cluster'"):
        _first_on_spark("cluster", small)
