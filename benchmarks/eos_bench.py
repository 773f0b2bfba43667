"""What exactly-once costs a MirrorMaker 2 link: copy throughput and end-to-end lag, against at-least-once,
on the same data in one run (issue 35).

    .venv/bin/python benchmarks/eos_bench.py [--records 300000] [--partitions 3] [--rate 2000] [--json]

``--records`` records (100 bytes) are written once to topic ``orders`` of a source cluster A, with no link
running. Then, for each variant, a fresh target cluster receives them through a dedicated MirrorMaker 2
started at that moment:

* **copy**: seconds from the link's start until it has copied every record (judged as the failover
  judges it: the target's end offsets for at-least-once, the source offsets committed with the copies
  for exactly-once, whose target offsets also count commit markers), and records per second;
* **end-to-end lag**: with the link caught up, ``--rate`` records/s are written to A for ``--seconds``;
  a consumer on the target reading committed (as the published client configurations do) measures, per
  record, its arrival minus its producer timestamp (kept by MirrorMaker 2): p50, p95 and max.

Variants: at-least-once (the baseline); exactly-once with a transaction per poll (the product's
``transaction.boundary=poll``); exactly-once with a transaction per second
(``transaction.boundary=interval``), for the interval's effect. Ratios are against the baseline, in this
one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker, grant_replicator
from dr.runtime.perf import producer_perf

BASE = 25500  # below the ephemeral range; windows of 100 ports per cluster (25500-25999)

VARIANTS: list[tuple[str, bool, dict[str, str] | None]] = [
    ("at-least-once", False, None),
    ("exactly-once, per poll", True, None),
    ("exactly-once, per 1 s", True, {"transaction.boundary": "interval", "transaction.boundary.interval.ms": "1000"}),
]
"""Each variant's connector properties. A dedicated MirrorMaker 2 keeps only the Mirror connectors' own
settings from the top level of its properties (``MirrorMakerConfig.connectorBaseConfig``): a Connect
source-connector setting such as ``transaction.boundary`` reaches the connector under the flow's prefix
(``<source>-><target>.``), which :func:`_flow` adds."""


def _flow(source: str, target: str, extra: dict[str, str] | None) -> dict[str, str] | None:
    """``extra`` under the flow prefix ``source->target.`` (see :data:`VARIANTS`)."""
    return None if extra is None else {f"{source}->{target}.{k}": v for k, v in extra.items()}


def _copy(mm: MirrorMaker, records: int) -> dict[str, Any]:
    """Start ``mm``; wait until it has copied every record of ``orders`` (its own lag, which reads the
    committed source offsets of an exactly-once link)."""
    t0 = time.monotonic()
    mm.start(timeout=180)
    left, last, moved_at = records, -1, time.monotonic()
    while time.monotonic() - moved_at < 120:  # a link that copies nothing for 2 minutes has stalled
        try:
            left = sum(mm.lag(["orders"]).values())
        except Exception:  # noqa: BLE001 - the copy's topic or offsets topic not there yet
            left = records
        if left == 0:
            break
        if left != last:
            last, moved_at = left, time.monotonic()
        time.sleep(0.25)
    seconds = time.monotonic() - t0
    return {
        "copy_seconds": round(seconds, 2),
        "records_per_s": round((records - left) / seconds),
        "complete": left == 0,
    }


def _end_to_end(source: LocalCluster, target: LocalCluster, rate: int, seconds: float) -> dict[str, Any]:
    """Write ``rate`` records/s to A for ``seconds``; per record on the target (read committed), its arrival
    minus its producer timestamp, in milliseconds."""
    ends = end_offsets(target.endpoint(), ["orders"])
    consumer = Consumer(
        target.endpoint().config(
            **{
                "group.id": f"kdr-bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
    )
    consumer.assign([TopicPartition(t, p, n) for (t, p), n in ends.items()])
    total = int(rate * seconds)
    lags: list[float] = []

    def write() -> None:
        producer = Producer(source.endpoint().config(**{"acks": "all", "linger.ms": 1}))
        t0 = time.monotonic()
        for i in range(total):
            producer.produce("orders", key=f"e2e-{i}".encode(), value=b"x" * 100)
            producer.poll(0)
            ahead = t0 + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(60)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + seconds + 60
    try:
        while len(lags) < total and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error() is None:
                    lags.append(time.time() * 1000 - msg.timestamp()[1])
    finally:
        consumer.close()
        writer.join()
    lags.sort()
    return {
        "lag_p50_ms": round(statistics.median(lags)) if lags else None,
        "lag_p95_ms": round(lags[int(len(lags) * 0.95)]) if lags else None,
        "lag_max_ms": round(lags[-1]) if lags else None,
        "e2e_records": len(lags),
        "e2e_written": total,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000, help="records/s written for the end-to-end lag")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the end-to-end traffic runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kdr-eos-bench-") as tmp:
        state = Path(tmp)
        a = LocalCluster(ClusterSpec("EA", brokers=1, base_port=BASE), state)
        running: list[Any] = [a]
        try:
            a.start()
            admin = AdminClient(a.endpoint().config())  # kept referenced until the future resolves
            admin.create_topics([NewTopic("orders", args.partitions, 1)])["orders"].result(timeout=30)
            producer_perf(a.endpoint(), "orders", args.records, record_size=100, acks="1")
            for n, (label, eos, extra) in enumerate(VARIANTS, start=1):
                b = LocalCluster(ClusterSpec(f"E{n}", brokers=1, base_port=BASE + 100 * n), state)
                b.start()
                running.append(b)
                grant_replicator(a, b, exactly_once=eos)
                mm = MirrorMaker(
                    a, b, state / f"mm{n}", topics="orders", groups="none", grant=False,
                    exactly_once=eos, extra=_flow(a.name, b.name, extra),
                )  # fmt: skip
                running.append(mm)
                results[label] = _copy(mm, args.records)
                results[label] |= _end_to_end(a, b, args.rate, args.seconds)
                mm.stop()
                b.stop()
                running.remove(b)
        finally:
            for thing in reversed(running):
                thing.stop()
    base = results[VARIANTS[0][0]]
    for r in results.values():
        r["throughput_vs_at_least_once"] = round(r["records_per_s"] / (base["records_per_s"] or 1), 2)
        if r["lag_p50_ms"] is not None and base["lag_p50_ms"]:
            r["lag_p50_vs_at_least_once"] = round(r["lag_p50_ms"] / base["lag_p50_ms"], 2)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"dedicated MirrorMaker 2, {args.records:,} records x 100 B, {args.partitions} partitions; ")
    print(f"end-to-end lag at {args.rate:,} records/s for {args.seconds:.0f} s, read committed on the target")
    head = f"{'variant':<24} {'copy s':>7} {'rec/s':>8} {'x':>5} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'x p50':>6}"
    print(head)
    for label, r in results.items():
        print(
            f"{label:<24} {r['copy_seconds']:>7} {r['records_per_s']:>8,} {r['throughput_vs_at_least_once']:>5} "
            f"{r['lag_p50_ms']!s:>7} {r['lag_p95_ms']!s:>7} {r['lag_max_ms']!s:>7} "
            f"{r.get('lag_p50_vs_at_least_once', '-')!s:>6}" + ("" if r["complete"] else "  INCOMPLETE")
        )


if __name__ == "__main__":
    main()
