"""MirrorMaker 2 throughput: a dedicated process vs a Kafka Connect cluster of one and of two workers.

    .venv/bin/python benchmarks/connect_bench.py [--records 1000000] [--partitions 6] [--json]

The same data for every variant: ``--records`` records (100 bytes) are written once to topic
``orders`` of a source cluster A, with no link running. Then, for each variant, a fresh target
cluster receives them through the link started at that moment: the figure is the time from the
start of the link (process or connectors created) until the target holds every record, and the
largest lag seen while it catches up (sampled every 0.5 s). The dedicated process is the baseline;
ratios are variant throughput / baseline throughput, measured in this one run. ``tasks.max`` is
the partition count, so the source connector's tasks cover every partition.

On 2 cores no speed-up is expected from the second worker (both share the cores with the brokers).

Measured here (2 cores, quiet machine, one run, 1M records):

    variant                       seconds  records/s  vs dedicated
    dedicated (tasks.max=2)         18.78     53,239          1.0x
    dedicated, tasks.max=6          20.46     48,879         0.92x
    connect-1-worker                14.31     69,904         1.31x
    connect-2-workers               17.41     57,439         1.08x

Under load (other suites running) the same variants gave 23,005 / (stalled: 384 MB heap) / 31,100 /
32,473 records/s. Workers need heap for their tasks' buffers: at 384 MB a worker ran out of heap.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.connect import ConnectSpec, LocalConnectCluster
from dr.runtime.mirrormaker import MirrorMaker, grant_replicator
from dr.runtime.perf import producer_perf
from dr.topology import Cluster, Link, Role, Topic, Topology
from stacks.links.connect_config import connector_configs

BASE = 24500  # below the ephemeral range; windows of 100 ports per cluster (24500-24999)


def _topology(source: LocalCluster, target: LocalCluster, partitions: int) -> Topology:
    return Topology(
        name="bench",
        clusters=[
            Cluster(name=source.name, role=Role.ACTIVE, base_port=source.spec.base_port, brokers=1),
            Cluster(name=target.name, role=Role.PASSIVE, base_port=target.spec.base_port, brokers=1),
        ],
        topics=[Topic(name="orders", partitions=partitions, replication_factor=1)],
        links=[Link(name=f"{source.name}-to-{target.name}", source=source.name, target=target.name)],
    )


def _copy_time(source: LocalCluster, target: LocalCluster, records: int, start: Any) -> dict[str, Any]:
    """Start the link (``start()``), wait until ``target`` holds ``records`` records of ``orders``."""
    t0 = time.monotonic()
    start()
    max_lag, done, last, moved_at = records, 0, -1, time.monotonic()
    while time.monotonic() - moved_at < 120:  # a link that copies nothing for 2 minutes has stalled
        done = sum(end_offsets(target.endpoint(), ["orders"]).values()) if _has_topic(target) else 0
        max_lag = max(max_lag, records - done) if done else max_lag
        if done >= records:
            break
        if done != last:
            last, moved_at = done, time.monotonic()
        time.sleep(0.5)
    seconds = time.monotonic() - t0
    return {
        "seconds": round(seconds, 2),
        "records": done,
        "records_per_s": round(done / seconds),
        "max_lag": max_lag,
        "complete": done >= records,
    }


def _has_topic(cluster: LocalCluster) -> bool:
    return "orders" in AdminClient(cluster.endpoint().config()).list_topics(timeout=10).topics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kdr-connect-bench-") as tmp:
        state = Path(tmp)
        a = LocalCluster(ClusterSpec("SA", brokers=1, base_port=BASE), state)
        running: list[Any] = [a]
        try:
            a.start()
            admin = AdminClient(a.endpoint().config())  # kept referenced until the future resolves
            admin.create_topics([NewTopic("orders", args.partitions, 1)])["orders"].result(timeout=30)
            producer_perf(a.endpoint(), "orders", args.records, record_size=100, acks="1")
            # The product's dedicated process runs 2 source tasks (mm2_properties); the same process with
            # tasks.max = partitions separates the engine from the task count.
            variants = [
                ("dedicated", None),
                ("dedicated-tasks=partitions", 0),
                ("connect-1-worker", 1),
                ("connect-2-workers", 2),
            ]
            for n, (label, workers) in enumerate(variants, start=1):
                b = LocalCluster(ClusterSpec(f"T{n}", brokers=1, base_port=BASE + 100 * n), state)
                b.start()
                running.append(b)
                grant_replicator(a, b)
                if not workers:
                    extra = {"tasks.max": str(args.partitions)} if workers == 0 else None
                    # 6 tasks in one JVM need the heap a Connect worker gets (384 MB ran out of heap)
                    mm = MirrorMaker(
                        a,
                        b,
                        state,
                        topics="orders",
                        groups="none",
                        grant=False,
                        extra=extra,
                        heap_mb=768 if workers == 0 else 384,
                    )
                    running.append(mm)
                    results[label] = _copy_time(a, b, args.records, lambda mm=mm: mm.start())
                    mm.stop()
                    continue
                connect = LocalConnectCluster(
                    ConnectSpec(f"bench{n}", workers=workers, base_port=BASE + 100 * n + 50), b, state
                )
                running.append(connect)
                connect.grant()
                connect.write_secrets()
                connect.start()
                configs = connector_configs(
                    _topology(a, b, args.partitions),
                    _topology(a, b, args.partitions).links[0],
                    secrets_file=str(connect.secrets_file()),
                    tasks_max=args.partitions,
                )
                rest = connect.rest()

                def create(rest: Any = rest, configs: dict[str, dict[str, str]] = configs) -> None:
                    for name, config in configs.items():
                        rest.put_config(name, config)

                results[label] = _copy_time(a, b, args.records, create)
                connect.stop()
        finally:
            for thing in reversed(running):
                thing.stop()
    base = results["dedicated"]["records_per_s"] or 1
    for r in results.values():
        r["ratio_vs_dedicated"] = round(r["records_per_s"] / base, 2)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"MirrorMaker 2, {args.records:,} records x 100 B, {args.partitions} partitions, tasks.max={args.partitions}")
    print("seconds = from the link's start to the last record on the target: the end-to-end lag of a")
    print("1M-record backlog (the largest lag seen is the whole backlog, at the start, for every variant)")
    print(f"{'variant':<28} {'seconds':>8} {'records/s':>10} {'vs dedicated':>13}")
    for label, r in results.items():
        print(
            f"{label:<28} {r['seconds']:>8} {r['records_per_s']:>10,} "
            f"{r['ratio_vs_dedicated']:>12}x" + ("" if r["complete"] else "  INCOMPLETE")
        )


if __name__ == "__main__":
    main()
