"""How soon a dedicated MirrorMaker 2 copies again after a SIGKILL: the product's Connect group settings
against Connect's defaults, on the same clusters and traffic in one run (issue 35).

    .venv/bin/python benchmarks/mm2_restart_bench.py [--kills 3] [--rate 500] [--json]

A source cluster A is written at ``--rate`` records/s throughout. For each variant, a dedicated exactly-once
MirrorMaker 2 A→B is started on a fresh target B; each of ``--kills`` times, once it has caught up, it is
SIGKILLed and started again, and the figure is the seconds from the SIGKILL until the link's committed
source positions move past where they stood at the kill (it copies again).

Variants: Kafka's defaults for the worker on the target (``rebalance.timeout.ms`` 60 s, ``session.timeout.ms``
10 s, ``heartbeat.interval.ms`` 3 s, ``scheduled.rebalance.max.delay.ms`` 5 min, and its producers'
``transaction.timeout.ms`` 60 s: the baseline) and the product's (10 s, 6 s, 1.5 s, 5 s and 15 s:
:func:`dr.runtime.mirrormaker.mm2_properties`). A process killed mid-transaction leaves it open on the
target; the next start reads its offsets topic read-committed, so it waits until the broker aborts that
transaction at its timeout. The ratio is the product's median
against the baseline's median, in this one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker, grant_replicator

BASE = 26100  # below the ephemeral range; windows of 100 ports per cluster (26100-26399)

CONNECT_DEFAULTS = {"rebalance.timeout.ms": "60000", "session.timeout.ms": "10000", "heartbeat.interval.ms": "3000"}
CONNECT_DEFAULTS |= {"scheduled.rebalance.max.delay.ms": "300000", "producer.transaction.timeout.ms": "60000"}
VARIANTS: list[tuple[str, dict[str, str] | None]] = [("Kafka defaults", CONNECT_DEFAULTS), ("product", None)]


class _Writer(threading.Thread):
    """``rate`` records/s to ``orders`` of ``cluster`` until stopped."""

    def __init__(self, cluster: LocalCluster, rate: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.rate, self.halt = cluster, rate, threading.Event()

    def run(self) -> None:
        producer = Producer(self.cluster.endpoint().config(**{"acks": "all", "linger.ms": 5}))
        i, t0 = 0, time.monotonic()
        while not self.halt.is_set():
            producer.produce("orders", key=f"k{i}".encode(), value=b"x" * 100)
            producer.poll(0)
            i += 1
            ahead = t0 + i / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(30)


def _copied(mm: MirrorMaker) -> int:
    try:
        return sum(mm.copied().values())
    except Exception:  # noqa: BLE001 - the offsets topic is being written or not there yet
        return -1


def _kill_and_time(mm: MirrorMaker) -> float:
    """SIGKILL ``mm`` (caught up), start it again; seconds until its committed positions move on."""
    mm.wait_caught_up(["orders"], timeout=120)
    at_kill = _copied(mm)
    t0 = time.monotonic()
    mm.kill()
    mm.start(timeout=400)
    while time.monotonic() - t0 < 400:
        if _copied(mm) > at_kill:
            return round(time.monotonic() - t0, 2)
        time.sleep(0.2)
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kdr-restart-bench-") as tmp:
        state = Path(tmp)
        a = LocalCluster(ClusterSpec("RA", brokers=1, base_port=BASE), state)
        running: list[Any] = [a]
        writer: _Writer | None = None
        try:
            a.start()
            admin = AdminClient(a.endpoint().config())  # kept referenced until the future resolves
            admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(timeout=30)
            writer = _Writer(a, args.rate)
            writer.start()
            for n, (label, group) in enumerate(VARIANTS, start=1):
                b = LocalCluster(ClusterSpec(f"R{n}", brokers=1, base_port=BASE + 100 * n), state)
                b.start()
                running.append(b)
                grant_replicator(a, b, exactly_once=True)
                extra = None if group is None else {f"{b.name}.{k}": v for k, v in group.items()}
                mm = MirrorMaker(
                    a, b, state / f"mm{n}", topics="orders", groups="none", grant=False, exactly_once=True, extra=extra
                )
                running.append(mm)
                mm.start(timeout=180)
                times = [_kill_and_time(mm) for _ in range(args.kills)]
                results[label] = {"seconds": times, "median_s": statistics.median(times)}
                mm.stop()
                running.remove(mm)
                b.stop()
                running.remove(b)
        finally:
            if writer is not None:
                writer.halt.set()
                writer.join(30)
            for thing in reversed(running):
                thing.stop()
    base = results[VARIANTS[0][0]]["median_s"]
    for r in results.values():
        r["median_vs_kafka_defaults"] = round(r["median_s"] / base, 2) if base else None
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"dedicated MirrorMaker 2 A→B, exactly-once, {args.rate} records/s on A; SIGKILL then start, {args.kills}×")
    print(f"{'variant':<18} {'copies again after (s)':<28} {'median':>7} {'x':>5}")
    for label, r in results.items():
        runs = ", ".join(f"{s:.1f}" for s in r["seconds"])
        print(f"{label:<18} {runs:<28} {r['median_s']:>7.1f} {r['median_vs_kafka_defaults']!s:>5}")


if __name__ == "__main__":
    main()
