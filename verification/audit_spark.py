"""The first (full) audit of a link on Spark: one verification of everything, turned into audit state.

A first audit reads both sides from their earliest offsets. In one Python process that costs about
11 µs and 600 bytes of memory per record of both sides, so a topic of a billion records cannot be
audited on one machine. On Spark it is the verification job over exactly the offsets fixed now
(:func:`verification.job.run_verification`, on ``--master``: ``local[2]`` or a cluster), and the
audit state follows from its result:

* **bounds** — the offsets the verification fixed, source first and then target, as the audit does;
* **residue** — its offending records: on the source side the records without a copy (in flight or
  missing), on the target side the records without a source record;
* **frontier** — per source partition, the highest offset of a record that is not in the source
  residue, read back from the partition's end with confluent-kafka (a few hundred records, more only
  when the link is far behind), so "in flight" and "missing" are told apart exactly as a Python
  first audit tells them apart;
* **max_ts** — the newest timestamp the brokers report per partition, at or after the newest record
  read (the integrity check started from an audit needs an upper bound).

Counts equal those of a Python first audit. Which copy of identical records (same topic, key and
checksum, written more than once) is left in the residue may differ: the verification keeps the
latest by timestamp, the audit's matching the latest by offset.

The verification's report is kept next to the state file (``<link>.first-audit/``).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dr.base.types import Reporter
from dr.kafka.client import Endpoint
from verification.audit_state import Fingerprint, Increment, Offsets, split_by_frontier
from verification.cluster import kafka_bounds
from verification.report import OFFENDING_DIR
from verification.sides import KafkaSide

__all__ = [
    "FIRST_RUN_CHOICES",
    "SPARK_FIRST_ABOVE",
    "SparkFirstRun",
    "first_run_on_spark",
    "frontier_outside",
    "residue_from_offending",
]

#: ``--first-run`` choices: where the first (full) audit of a link runs.
FIRST_RUN_CHOICES = ("auto", "spark", "python")
#: ``--first-run auto`` audits on Spark when the first run would read more offsets than this (both sides).
#: Measured (``benchmarks/verify_bench.py --profiles audit``): 1M + 1M records took 22.7 s in one Python
#: process and 17.8 s on ``local[2]``; 5M + 5M 123.5 s and 26.7 s. Spark's fixed cost makes it the
#: slower below about 1.5M offsets, and the Python audit's memory (~500 B per record) is under 1 GB here.
SPARK_FIRST_ABOVE = 2_000_000

#: (topic, partition) → (earliest, end)
Now = dict[tuple[str, int], tuple[int, int]]


@dataclass(frozen=True)
class SparkFirstRun:
    """What the verification established, in the audit's terms."""

    src_now: Now
    dst_now: Now
    read_source: int
    read_target: int
    max_ts: dict[str, int]
    inc: Increment
    report_dir: Path


def residue_from_offending(rows: list[dict[str, Any]]) -> tuple[list[Fingerprint], list[Fingerprint]]:
    """Offending records (``offending.parquet`` rows) → (source residue, target residue)."""
    src: list[Fingerprint] = []
    dst: list[Fingerprint] = []
    for r in rows:
        fp = Fingerprint(
            str(r["topic"]),
            int(r["partition"]),
            int(r["offset"]),
            int(r["timestamp"]),
            int(r["key_hash"]),
            int(r["checksum"]),
        )
        (src if r["side"] == "source" else dst).append(fp)
    return sorted(src), sorted(dst)


def frontier_outside(
    read: Callable[[dict[str, dict[int, tuple[int, int]]]], list[Fingerprint]],
    bounds: Now,
    residue: list[Fingerprint],
    *,
    first_chunk: int = 256,
) -> Offsets:
    """Per partition, the highest offset of a record in ``bounds`` that ``residue`` does not hold.

    ``read`` returns the fingerprints of ``{topic: {partition: (start, end)}}`` (failover probes left
    out: they are never matched). Reads backwards from each partition's end, in chunks that grow
    fourfold, all partitions at once; a partition without such a record is absent from the result.
    """
    held: dict[tuple[str, int], set[int]] = defaultdict(set)
    for f in residue:
        held[(f.topic, f.partition)].add(f.offset)
    todo = {k: (s, e) for k, (s, e) in bounds.items() if e > s}
    frontier: Offsets = {}
    step = first_chunk
    while todo:
        chunks = {k: (max(s, e - step), e) for k, (s, e) in todo.items()}
        ranges: dict[str, dict[int, tuple[int, int]]] = {}
        for (t, p), r in chunks.items():
            ranges.setdefault(t, {})[p] = r
        best: dict[tuple[str, int], int] = {}
        for f in read(ranges):
            k = (f.topic, f.partition)
            if f.offset not in held[k] and f.offset > best.get(k, -1):
                best[k] = f.offset
        left: Now = {}
        for k, (s, _e) in todo.items():
            if k in best:
                frontier.setdefault(k[0], {})[k[1]] = best[k]
            elif chunks[k][0] > s:
                left[k] = (s, chunks[k][0])
        todo, step = left, step * 4
    return frontier


def _now(offsets: dict[str, dict[str, dict[str, int]]]) -> Now:
    return {(t, int(p)): (int(v["start"]), int(v["end"])) for t, ps in offsets.items() for p, v in ps.items()}


def _newest(endpoint: Endpoint, topics: list[str]) -> int:
    return max((b.max_ts for ps in kafka_bounds(endpoint, topics).values() for b in ps.values()), default=-1)


def first_run_on_spark(
    src_ep: Endpoint,
    dst_ep: Endpoint,
    topics: list[str],
    *,
    report_dir: Path,
    master: str | None,
    progress: Reporter,
    names: tuple[str, str],
    read_back: Callable[[dict[str, dict[int, tuple[int, int]]]], list[Fingerprint]],
) -> SparkFirstRun:
    """Verify ``topics`` of the link on Spark and derive the first audit's bounds, residue and frontier.

    ``read_back`` returns the source's fingerprints of ``{topic: {partition: (start, end)}}`` (the
    audit's own reader), which the frontier is read back with."""
    # Loaded here, not at the top: the audit's Python runs must not pay for pyspark and pyarrow.
    import pyarrow.parquet as pq

    from verification.job import run_verification
    from verification.session import DEFAULT_MASTER

    shutil.rmtree(report_dir, ignore_errors=True)
    report_dir.mkdir(mode=0o700, parents=True)
    result = run_verification(
        source=KafkaSide(endpoint=src_ep, name=names[0]),
        target=KafkaSide(endpoint=dst_ep, name=names[1]),
        out_dir=report_dir,
        topics=topics,
        master=master or DEFAULT_MASTER,
        progress=progress,
    )
    summary = result.summary
    src_now, dst_now = _now(summary["offsets"]["source"]), _now(summary["offsets"]["target"])
    off_dir = report_dir / OFFENDING_DIR
    rows = pq.read_table(off_dir).to_pylist() if any(off_dir.glob("*.parquet")) else []
    src_res, dst_res = residue_from_offending(rows)
    per_topic = summary["topics"].values()
    read_source = sum(int(v["source_compared"]) for v in per_topic)
    read_target = sum(int(v["target_compared"]) for v in per_topic)
    progress(f"first audit on Spark: reading back the end of {len(src_now):,} source partitions for the frontier")
    frontier = frontier_outside(read_back, src_now, src_res)
    missing, in_flight = split_by_frontier(src_res, frontier)
    inc = Increment(
        matched=read_source - len(src_res),
        in_flight=in_flight,
        missing=missing,
        target_unmatched=dst_res,
        frontier=frontier,
    )
    on_target = sorted({t for t, _p in dst_now})
    max_ts = {"source": _newest(src_ep, topics), "target": _newest(dst_ep, on_target) if on_target else -1}
    return SparkFirstRun(src_now, dst_now, read_source, read_target, max_ts, inc, report_dir)
