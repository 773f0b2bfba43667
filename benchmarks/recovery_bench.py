"""Benchmark of a lost site's recovery (``drctl failover --region A --recover``, ``--edge E --recover``), not a test.

On two local clusters (1 broker each), A holds topics of N records (default 10,000 and 100,000; 12
partitions; 200-byte values, a header on every third record) and B holds, for each path, the copy a
link made before the loss: the first ``--copied`` records of each topic (default 10 %), as
``A.<topic>`` (region path) and ``E1.<topic>`` (edge path). Everything else is missing. Measured:

* ``new``: :func:`dr.failover.frame.site_loss.recover_site`, what both paths run — the comparison, then each
  partition's missing offsets read once by one consumer and written in batches by one idempotent
  producer; then a second run, which must write nothing;
* ``old``: the former code (kept here as the baseline): the same comparison, then one consumer per
  missing record (assign at its offset, poll one record) and one producer — on ``--old-records``
  missing records (default 1,000; its cost per record is flat), in the same run, on the same clusters.

Printed: seconds and records/s of each run (comparison included), and new / old in records/s.
Usage::

    .venv/bin/python benchmarks/recovery_bench.py                      # 10k and 100k, both paths
    .venv/bin/python benchmarks/recovery_bench.py --sizes 10000 --old-records 300 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dr.failover.frame.site_loss import compare_region, recover_site  # noqa: E402
from dr.kafka.client import SILENT, Endpoint  # noqa: E402
from dr.kafka.offsets import end_offsets  # noqa: E402
from dr.runtime.cluster import ClusterSpec, LocalCluster  # noqa: E402
from tests.integration.ports import windows  # noqa: E402

PARTITIONS = 12
PATHS = {"region": "A", "edge": "E1"}  # the path → the lost site's name (its copies are <site>.<topic>)


def _topic(cluster: LocalCluster, name: str) -> None:
    admin = AdminClient(cluster.endpoint().config(**SILENT))
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=30)


def _write(endpoint: Endpoint, topic: str, first: int, count: int) -> None:
    """Records ``first`` .. ``first + count - 1`` of the benchmark's sequence (record i in partition i % 12)."""
    producer = Producer(endpoint.config(**{**SILENT, "acks": "all", "linger.ms": 20, "enable.idempotence": True}))
    pad = b"x" * 180
    for i in range(first, first + count):
        headers = [("trace", f"t{i}".encode())] if i % 3 == 0 else None
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k{i}".encode(),
                    value=f"{i:>20}".encode() + pad,
                    headers=headers,
                    partition=i % PARTITIONS,
                )
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise SystemExit(f"could not write {topic}")


def _read_one(ep: Endpoint, topic: str, partition: int, offset: int) -> Message | None:
    """The former per-record read (dr/failover/frame/site_loss.py before issue 34): one consumer per record."""
    consumer = Consumer(ep.config(**{"group.id": f"kdr-recover-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is not None and got.error() is None:
                return got
    finally:
        consumer.close()
    return None


def _old_recover(a_ep: Endpoint, b_ep: Endpoint, site: str, topics: list[str]) -> int:
    """The former recovery of a region or edge: comparison, then a consumer per missing record."""
    found = compare_region(a_ep, b_ep, site, topics)
    wanted = sorted({(m["topic"], m["partition"], m["offset"]) for m in found["missing"]})
    producer = Producer(b_ep.config(**{"acks": "all", "enable.idempotence": True}))
    for topic, partition, offset in wanted:
        msg = _read_one(a_ep, topic, partition, offset)
        if msg is None:
            raise SystemExit(f"could not read {topic}-{partition}@{offset}")
        producer.produce(
            f"{site}.{topic}",
            key=msg.key(),
            value=msg.value(),
            headers=msg.headers(),
            timestamp=msg.timestamp()[1],
            partition=partition,
        )
    if producer.flush(120):
        raise SystemExit("the old recovery's writes were not acknowledged")
    return len(wanted)


def _prepare(a: LocalCluster, b: LocalCluster, topic: str, records: int, copied: int, sites: list[str]) -> None:
    _topic(a, topic)
    _write(a.endpoint(), topic, 0, records)
    for site in sites:
        _topic(b, f"{site}.{topic}")
        _write(b.endpoint(), f"{site}.{topic}", 0, copied)


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"partitions": PARTITIONS, "runs": []}
    with tempfile.TemporaryDirectory(prefix="kdr-recovery-bench-") as tmp, windows(2) as (port_a, port_b):
        a = LocalCluster(ClusterSpec("RA", brokers=1, base_port=port_a), Path(tmp))
        b = LocalCluster(ClusterSpec("RB", brokers=1, base_port=port_b), Path(tmp))
        try:
            a.start()
            b.start()
            a_ep, b_ep = a.endpoint(), b.endpoint()
            # the baseline: the former per-record path, on the same clusters, same record shape
            old_copied = args.old_records // 10
            _prepare(a, b, "old", args.old_records + old_copied, old_copied, ["A"])
            t0 = time.monotonic()
            n = _old_recover(a_ep, b_ep, "A", ["old"])
            old_s = time.monotonic() - t0
            figures["old"] = {"records": n, "seconds": round(old_s, 2), "records_per_s": _rate(n, old_s)}
            print(f"old  (one consumer per record)  {n:>8,} records  {old_s:8.1f} s  {_rate(n, old_s):>10,.0f} rec/s")
            for size in args.sizes:
                copied = int(size * args.copied)
                topic = f"bench{size}"
                _prepare(a, b, topic, size + copied, copied, list(PATHS.values()))
                for path, site in PATHS.items():
                    t0 = time.monotonic()
                    done = recover_site(a_ep, b_ep, site, [topic], rerun="rerun the benchmark")
                    s = time.monotonic() - t0
                    ends = end_offsets(b_ep, [f"{site}.{topic}"])
                    t1 = time.monotonic()
                    again = recover_site(a_ep, b_ep, site, [topic], rerun="rerun the benchmark")
                    rerun_s = time.monotonic() - t1
                    if done["replayed"] != size or again["replayed"] or end_offsets(b_ep, [f"{site}.{topic}"]) != ends:
                        raise SystemExit(f"{path} {size}: replayed {done['replayed']}, then {again['replayed']}")
                    row = {
                        "path": path,
                        "records": size,
                        "seconds": round(s, 2),
                        "records_per_s": _rate(size, s),
                        "ratio_vs_old": round(_rate(size, s) / figures["old"]["records_per_s"], 1),
                        "rerun_seconds": round(rerun_s, 2),
                        "rerun_written": again["replayed"],
                    }
                    figures["runs"].append(row)
                    print(
                        f"new  {path:<6} {size:>17,} records  {s:8.1f} s  {row['records_per_s']:>10,.0f} rec/s  "
                        f"× {row['ratio_vs_old']} vs old; rerun {rerun_s:.1f} s, wrote 0"
                    )
        finally:
            a.destroy()
            b.destroy()
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="missing records per run")
    ap.add_argument("--copied", type=float, default=0.1, help="records already on B, as a fraction of the size")
    ap.add_argument("--old-records", type=int, default=1_000, help="missing records for the former per-record path")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    args = ap.parse_args()
    figures = run(args)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
