"""Benchmark: what TLS costs the verification's read (not a test).

Two local single-broker clusters on this machine, started by the product's runtime: ``plain`` (client
listener SASL_PLAINTEXT) and ``tls`` (``local_tls``: SASL_SSL, certificate of the estate's CA). The same
N records (same keys, values, timestamps and partitions) are written to both. Then the verification job
(``python -m verification.job``, the options of ``drctl verify``: Spark, Kafka source) compares each
cluster's topic with itself — every record read twice, over plaintext on one, over TLS on the other —
``--repeat`` times, interleaved, the fastest run of each counting. Also timed, the same way: a plain
librdkafka consumer reading the topic once (the raw read rate, without Spark).

Printed: seconds and records/s of each, and the ratios TLS / plaintext. ``--json FILE`` keeps them::

    .venv/bin/python benchmarks/tls_bench.py --records 1000000 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPIC = "bench-tls"


def _private_json(path: Path, doc: dict[str, str]) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    return path


def produce(endpoint, n: int, partitions: int, value_bytes: int) -> None:
    """The same N records on every call (seeded): keys, values, partitions and timestamps."""
    from confluent_kafka import Producer

    pool = random.Random(7).randbytes(1 << 16)
    t0 = 1_700_000_000_000
    p = Producer(endpoint.config(**{"linger.ms": 50, "batch.size": 1_000_000, "acks": "1"}))
    for i in range(n):
        off = (i * 7919) % (len(pool) - value_bytes)
        value = b"%012d" % i + pool[off : off + value_bytes - 12]
        while True:
            try:
                p.produce(TOPIC, value, b"key-%09d" % i, partition=i % partitions, timestamp=t0 + i)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(300):
        raise RuntimeError("records were not delivered")
    del p


def consume_all(endpoint, n: int) -> float:
    """Seconds for one librdkafka consumer to read the N records of the topic."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(endpoint.config(**{"group.id": "bench-tls", "enable.auto.commit": False}))
    parts = c.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in parts])  # no group join in the timing
    got, t = 0, time.monotonic()
    while got < n:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    seconds = time.monotonic() - t
    c.close()
    return seconds


def verify(bootstrap: str, creds: Path, out: Path) -> float:
    """Seconds of the verification job comparing the topic of ``bootstrap`` with itself (must be CLEAN)."""
    cmd = [
        sys.executable, "-m", "verification.job",
        "--source-bootstrap", bootstrap, "--target-bootstrap", bootstrap,
        "--credentials", str(creds), "--topics", TOPIC, "--out", str(out), "--json", "--quiet",
    ]  # fmt: skip
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=3600)
    seconds = time.monotonic() - t
    if r.returncode != 0:
        raise RuntimeError(f"verification failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--base-port", type=int, default=30700)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from confluent_kafka.admin import AdminClient, NewTopic

    from dr.runtime.cluster import ClusterSpec, LocalCluster

    work = Path(tempfile.mkdtemp(prefix="kdr-tls-bench-"))
    plain = LocalCluster(ClusterSpec("plain", brokers=1, base_port=args.base_port, heap_mb=768), work)
    tls = LocalCluster(
        ClusterSpec("tls", brokers=1, base_port=args.base_port + 100, heap_mb=768, tls=True), work, plain.credentials
    )
    n = args.records
    result: dict = {"records": n, "value_bytes": args.value_bytes, "partitions": args.partitions, "runs": {}}
    try:
        creds = {}
        for c in (plain, tls):
            c.start()
            ep = c.endpoint()
            admin = AdminClient(ep.config())
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(60)
            t = time.monotonic()
            produce(ep, n, args.partitions, args.value_bytes)
            print(f"{c.name}: produced {n:,} records in {time.monotonic() - t:.1f}s", flush=True)
            doc = {"username": ep.username, "password": ep.password, "security_protocol": ep.security_protocol}
            if ep.tls is not None and ep.tls.ca_location:
                doc["ssl_ca_location"] = ep.tls.ca_location
            creds[c.name] = _private_json(work / f"{c.name}.json", doc)
        for k in range(args.repeat):
            for c in (plain, tls):  # interleaved: the machine's load falls on both alike
                runs = result["runs"].setdefault(c.name, {"verify_s": [], "consume_s": []})
                runs["verify_s"].append(verify(c.bootstrap, creds[c.name], work / f"out-{c.name}-{k}"))
                runs["consume_s"].append(consume_all(c.endpoint(), n))
                print(f"{c.name} run {k + 1}: verify {runs['verify_s'][-1]:.1f}s, consume {runs['consume_s'][-1]:.1f}s")
    finally:
        for c in (tls, plain):
            c.stop()
    best = {name: {key: min(v) for key, v in runs.items()} for name, runs in result["runs"].items()}
    result["best"] = best
    print(f"\n{'listener':<10} {'verify s':>9} {'verify rec/s':>13} {'consume s':>10} {'consume rec/s':>14}")
    for name, b in best.items():
        print(
            f"{name:<10} {b['verify_s']:>9.1f} {2 * n / b['verify_s']:>13,.0f} "
            f"{b['consume_s']:>10.1f} {n / b['consume_s']:>14,.0f}"
        )
    result["ratio_verify_read_rate_tls_over_plain"] = best["plain"]["verify_s"] / best["tls"]["verify_s"]
    result["ratio_consume_rate_tls_over_plain"] = best["plain"]["consume_s"] / best["tls"]["consume_s"]
    print(
        f"TLS / plaintext read rate: verification {result['ratio_verify_read_rate_tls_over_plain']:.2f}, "
        f"librdkafka consumer {result['ratio_consume_rate_tls_over_plain']:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
