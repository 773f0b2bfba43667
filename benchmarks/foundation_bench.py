"""Reference figures of the local estate on this machine (not a test).

    .venv/bin/python benchmarks/foundation_bench.py [--records 1000000] [--mm2-records 100000]

Prints: cluster start time (1 and 3 brokers, cold and restart), memory per broker (RSS), produce
and consume throughput with kafka-tools' perf tools, and MirrorMaker 2's end-to-end lag: how long
after the last acknowledged write B holds every record, for ``--mm2-records`` records.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dr.kafka.offsets import partition_lag
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker
from dr.runtime.perf import consumer_perf, producer_perf
from dr.runtime.process import wait_until


def rss_mb(pid: int) -> int:
    """Resident memory of a process in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def make_topic(cluster: LocalCluster, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient(cluster.endpoint().config())
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--mm2-records", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="kdr-bench-") as tmp:
        state = Path(tmp)
        one = LocalCluster(ClusterSpec("P1", brokers=1, base_port=23100), state)
        three = LocalCluster(ClusterSpec("P3", brokers=3, base_port=23200), state)
        b = LocalCluster(ClusterSpec("PB", brokers=1, base_port=23300), state)
        try:
            figures["start_1_broker_cold_s"] = round(one.start(), 2)
            figures["start_3_brokers_cold_s"] = round(three.start(), 2)
            figures["restart_1_broker_s"] = round(one.restart(), 2)
            figures["rss_idle_mb"] = {f"P3-node{n}": rss_mb(p) for n, p in three.pids().items()}

            make_topic(one, "perf", 6, 1)
            w = producer_perf(one.endpoint(), "perf", args.records, acks="1")
            r = consumer_perf(one.endpoint(), "perf", args.records)
            figures["produce_1_broker_rec_s"] = round(w.records_per_s)
            figures["produce_1_broker_mb_s"] = w.mb_per_s
            figures["consume_1_broker_rec_s"] = round(r.records_per_s)
            figures["consume_1_broker_mb_s"] = r.mb_per_s

            make_topic(three, "perf3", 6, 3)
            w3 = producer_perf(three.endpoint(), "perf3", args.records, acks="all")
            figures["produce_3_brokers_rf3_acks_all_rec_s"] = round(w3.records_per_s)
            figures["rss_loaded_mb"] = {f"P3-node{n}": rss_mb(p) for n, p in three.pids().items()}

            # MirrorMaker 2 end-to-end: produce N records to A, time until B holds them all.
            b.start()
            make_topic(one, "mirrored", 6, 1)
            mm = MirrorMaker(one, b, state, topics="mirrored")
            figures["mm2_start_s"] = round(mm.start(), 2)
            producer = Producer(one.endpoint().config(**{"acks": "all", "linger.ms": 5}))
            value = b"x" * 200
            t0 = time.monotonic()
            for i in range(args.mm2_records):
                producer.produce("mirrored", key=str(i).encode(), value=value)
                if i % 10000 == 0:
                    producer.poll(0)
            producer.flush(120)
            t_acked = time.monotonic()
            caught = wait_until(
                lambda: sum(partition_lag(one.endpoint(), b.endpoint(), ["mirrored"]).values()) == 0, 300, interval=0.05
            )
            t_done = time.monotonic()
            figures["mm2_records"] = args.mm2_records
            figures["mm2_caught_up"] = caught
            figures["mm2_produce_s"] = round(t_acked - t0, 2)
            figures["mm2_lag_after_last_ack_s"] = round(t_done - t_acked, 2)
            figures["mm2_end_to_end_rec_s"] = round(args.mm2_records / (t_done - t0))
            figures["rss_mm2_mb"] = rss_mb(mm.process.pid or 0)
            mm.stop()
        finally:
            for c in (one, three, b):
                c.destroy()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for k, v in figures.items():
            print(f"{k:<40} {v}")


if __name__ == "__main__":
    main()
