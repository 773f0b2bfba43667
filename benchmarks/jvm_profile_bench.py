"""The local JVMs' two profiles (``KDR_JVM_PROFILE``, :data:`dr.runtime.process.JVM_PROFILES`) on the same
work in one run: a 3-broker local cluster started, one topic written with kafka-tools' ProducerPerformance
(acks=all) and read back with ConsumerPerformance, then stopped.

    .venv/bin/python -m benchmarks.jvm_profile_bench [--records 500000] [--repeat 2]

Printed per profile (medians over ``--repeat`` alternating runs): the cluster's start (format, start,
ready), write and read throughput, and the CPU seconds of the brokers' processes over the whole run
(``/proc/<pid>/stat``, read just before the stop) — then ``footprint / throughput`` for each figure. The
baseline is ``throughput`` (G1 + C2, the JVM's own defaults for a server).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from confluent_kafka.admin import NewTopic

from dr.kafka.client import admin_client
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.perf import consumer_perf, producer_perf
from tests.integration.ports import windows

PROFILES = ("throughput", "footprint")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(profile: str, records: int) -> dict[str, float]:
    """Start, write, read and stop a 3-broker cluster with ``profile``; its figures."""
    os.environ["KDR_JVM_PROFILE"] = profile
    with tempfile.TemporaryDirectory(prefix="kdr-jvm-bench-") as tmp, windows(1) as (port,):
        cluster = LocalCluster(ClusterSpec("J", brokers=3, base_port=port), Path(tmp))
        try:
            start_s = cluster.start()
            admin = admin_client(cluster.endpoint())
            admin.create_topics([NewTopic("bench", 6, 3)])["bench"].result(timeout=60)
            written = producer_perf(cluster.endpoint(), "bench", records)
            read = consumer_perf(cluster.endpoint(), "bench", records)
            cpu = sum(_cpu_seconds(pid) for pid in cluster.pids().values())
        finally:
            cluster.destroy()
    return {
        "start_s": start_s,
        "write_rec_s": written.records_per_s,
        "read_rec_s": read.records_per_s,
        "broker_cpu_s": cpu,
    }


def main() -> None:
    """Alternate the two profiles ``--repeat`` times and print a Markdown table with the ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in PROFILES}
    for _ in range(args.repeat):
        for profile in PROFILES:
            runs[profile].append(one_run(profile, args.records))
    med = {p: {k: statistics.median(r[k] for r in runs[p]) for k in runs[p][0]} for p in PROFILES}
    print(f"{args.records:,} records of 200 B, 3 brokers, medians of {args.repeat}\n")
    print("| figure | throughput (G1 + C2) | footprint (Serial + C1) | footprint / throughput |\n|---|---|---|---|")
    for key, label in (
        ("start_s", "cluster start (s)"),
        ("write_rec_s", "write, acks=all (records/s)"),
        ("read_rec_s", "read (records/s)"),
        ("broker_cpu_s", "brokers' CPU over the run (s)"),
    ):
        base, new = med["throughput"][key], med["footprint"][key]
        print(f"| {label} | {base:,.1f} | {new:,.1f} | {new / base:.2f} |")


if __name__ == "__main__":
    main()
