"""Benchmark of the integrity verification (not a test).

On local clusters, N records (default 5,000,000; 200-byte values; 12 partitions) are written to
A and replicated by a real MirrorMaker 2 process (identity topic names, the product's settings), with
one of two loss profiles:

* ``tail``      — MM2 copies A to B, then stops (the failover); the last 0.5 % of the time range is
  written to A afterwards and never reaches B;
* ``scattered`` — MM2 copies A to a third cluster C through Connect's ``Filter`` transform, dropping
  the 0.1 % of records (chosen at random) that carry the header ``bench-lost``.

For each profile the contenders read the same data, each in its own process (peak memory is
the peak summed RSS of that process tree, sampled every 0.1 s); with ``--repeat K`` each runs K
times, interleaved, and the fastest run counts (all are kept in the JSON):

(a) ``kafka-tools`` ConsumerPerformance: a raw read of the topic on A, then on B (no comparison);
(b) our verification (``python -m verification.job``, the options of ``drctl verify``: Spark ``local[2]``, Kafka source)
    with ``KDR_VERIFY_PASS2=fingerprints``: Kafka read once per side, pass 2 on the fingerprints
    persisted on disk (``fingerprints-memory``, b_mem: kept in memory while they fit);
(b_old) the same with ``KDR_VERIFY_PASS2=kafka`` (still the default): the former design, whose
    pass 2 (and lookup of target-only keys) re-read Kafka — ``--designs`` chooses among them;
(c) a naive single-process reconciler with confluent-kafka: (key, sha256(value+headers)) → count;
(d) Spark itself counting the same records in one session (same session settings, same Kafka
    source and offset bounds, ``count()`` of both sides); ``--skip-spark-count`` leaves it out.

A third profile, ``audit`` (topic ``bench-audit``, its own target cluster), measures the incremental
audit: N records copied by MirrorMaker 2, a first (full) ``drctl audit`` — in one Python process
(``--first-run python``, the baseline), then again on Spark (``--first-run spark --reset``; the
benchmark checks both find the same figures) — then 1 % new records on
both sides (written by the benchmark on both, standing in for the link, so MM2 is not restarted);
timed: the audit of that 1 %, the failover's integrity check started from that audit, and a full
``drctl verify`` of the same topic. Printed: audit / full verification (the aim is ≤ 10 %), and the
audit state on disk in MB per million records — audited and caught up (offsets only), and in
flight (residue: measured after 1 % more written to A only).

Printed: records/s of each, the ratios b/a, b/d, b/c and b/b_old, peak memory; ``--json FILE``
keeps them. Usage::

    .venv/bin/python benchmarks/verify_bench.py --records 5000000
    .venv/bin/python benchmarks/verify_bench.py --records 200000 --profiles tail   # quick look
    .venv/bin/python benchmarks/verify_bench.py --records 300000 --profiles audit --base-port 30400 --port-step 50
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TOPIC = "bench"
AUDIT_TOPIC = "bench-audit"
AUDIT_LINK = "A-to-D"
CONTENDERS = {
    "a": "(a) ConsumerPerformance",
    "b": "(b) verification, one read",
    "b_mem": "(b_mem) one read, memory+disk",
    "b_old": "(b_old) verification, re-read",
    "c": "(c) naive reconciler",
    "d": "(d) Spark count",
}
#: contender → design, and the environment that selects it in verification/job.py
DESIGNS = {"b": "fingerprints", "b_mem": "fingerprints-memory", "b_old": "kafka"}
DESIGN_ENV = {
    "fingerprints": {"KDR_VERIFY_PASS2": "fingerprints", "KDR_VERIFY_STORAGE": "DISK_ONLY"},
    "fingerprints-memory": {"KDR_VERIFY_PASS2": "fingerprints", "KDR_VERIFY_STORAGE": "MEMORY_AND_DISK"},
    "kafka": {"KDR_VERIFY_PASS2": "kafka"},
}
LOST_HEADER = "bench-lost"
SPAN_MS = 3_600_000  # the records' timestamps cover one hour


# ----------------------------------------------------------------------------- measuring
def _tree_rss_kb(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as f:
                m = re.search(r"VmRSS:\s+(\d+)", f.read())
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(m.group(1)) if m else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_measured(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 7200) -> dict:
    """Run ``cmd``; return wall seconds, peak tree RSS (MB), exit code, stdout, stderr."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}, cwd=REPO
    )
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            done.wait(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate(timeout=timeout)
    done.set()
    th.join()
    return {
        "seconds": time.monotonic() - t0,
        "peak_mb": peak[0] / 1024,
        "rc": proc.returncode,
        "stdout": out,
        "stderr": err,
    }


# ----------------------------------------------------------------------------- data
def job_command(source: str, target: str, creds: Path, topic: str, out: Path) -> list[str]:
    """The verification job (``python -m verification.job``) on ``topic`` of the pair, JSON result, quiet."""
    return [
        sys.executable,
        "-m",
        "verification.job",
        "--source-bootstrap",
        source,
        "--target-bootstrap",
        target,
        "--credentials",
        str(creds),
        "--topics",
        topic,
        "--out",
        str(out),
        "--json",
        "--quiet",
    ]


def run_subcommand(name: str, what: str, source: str, target: str, creds: Path) -> tuple[dict, dict]:
    """Run this script's ``name`` subcommand on TOPIC of the pair, measured (:func:`run_measured`);
    the measurement and the JSON result it prints last (``what`` names it in the error)."""
    r = run_measured(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            name,
            "--source",
            source,
            "--target",
            target,
            "--credentials",
            str(creds),
            "--topic",
            TOPIC,
        ]
    )
    if r["rc"] != 0:
        raise RuntimeError(f"{what} failed: {r['stderr'][-2000:]}")
    return r, json.loads(r["stdout"].strip().splitlines()[-1])


def record(
    i: int, n: int, t0: int, pool: bytes, value_bytes: int, lost: bool = False
) -> tuple[bytes, bytes, int, list | None]:
    """The i-th record: key (4 versions per key), value, timestamp, headers (1 record in 10, and
    ``bench-lost`` on the records the scattered profile's filter drops)."""
    key = b"key-%09d" % (i % max(1, n // 4))
    off = (i * 7919) % (len(pool) - value_bytes)
    value = b"%012d" % i + pool[off : off + value_bytes - 12]
    headers = [("trace-id", b"%016x" % i)] if i % 10 == 0 else None
    if lost:
        headers = (headers or []) + [(LOST_HEADER, b"1")]
    return key, value, t0 + (i * SPAN_MS) // n, headers


def produce(
    endpoint,
    topic: str,
    n: int,
    partitions: int,
    value_bytes: int,
    t0: int,
    start: int = 0,
    stop: int | None = None,
    marked: frozenset[int] = frozenset(),
) -> int:
    """Write records ``start .. stop - 1`` of ``n`` to ``topic``; return how many."""
    from confluent_kafka import Producer

    pool = random.Random(7).randbytes(1 << 16)
    producer = Producer(
        endpoint.config(
            **{
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "acks": "1",
                "queue.buffering.max.messages": 2_000_000,
                "queue.buffering.max.kbytes": 2_000_000,
            }
        )
    )
    written = 0
    for i in range(start, n if stop is None else stop):
        key, value, ts, headers = record(i, n, t0, pool, value_bytes, i in marked)
        while True:
            try:
                producer.produce(topic, value, key, partition=i % partitions, timestamp=ts, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        written += 1
        if written % 50_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("records were not delivered")
    return written


def replicate(
    source, target, expected: int, work: Path, extra: dict[str, str] | None = None, topic: str = TOPIC
) -> float:
    """Run MirrorMaker 2 from ``source`` to ``target`` until the target topic holds ``expected``
    records, then stop it; return the records/s it replicated at."""
    from dr.kafka.offsets import end_offsets
    from dr.runtime.mirrormaker import MirrorMaker

    # the contenders' consumer groups are not the benchmark's business: leave them on A
    mm = MirrorMaker(
        source, target, state_dir=work, topics=topic, groups="kdr-bench-no-group", heap_mb=1024, extra=extra
    )
    t = time.monotonic()
    mm.start(timeout=180)
    try:
        deadline = time.monotonic() + 1800
        held = 0
        while time.monotonic() < deadline:
            try:
                held = sum(end_offsets(target.endpoint(), [topic]).values())
            except Exception:  # the topic is not created on the target yet
                held = 0
            if held >= expected:
                break
            time.sleep(0.5)
        if held != expected:
            raise RuntimeError(
                f"MirrorMaker 2 delivered {held} of {expected} records to {target.name}"
                + (" (duplicates: a task restarted)" if held > expected else "")
            )
    finally:
        mm.stop()
    return expected / (time.monotonic() - t)


def recreate_topic(endpoint, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(endpoint.config())
    if topic in admin.list_topics(timeout=15).topics:
        admin.delete_topics([topic])[topic].result(timeout=60)
        deadline = time.monotonic() + 60
        while topic in admin.list_topics(timeout=15).topics and time.monotonic() < deadline:
            time.sleep(0.2)
    for _ in range(50):
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(30)
            return
        except Exception as exc:  # topic deletion still in progress
            if "already exists" not in str(exc).lower() and "marked for deletion" not in str(exc).lower():
                raise
            time.sleep(0.5)


# ----------------------------------------------------------------------------- contenders
def consumer_perf(kafka_lib: Path, java: str, endpoint, topic: str, n: int, workdir: Path) -> dict:
    props = workdir / f"cp-{abs(hash(endpoint.bootstrap))}.properties"
    fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        for k, v in endpoint.java_config().items():
            if k != "bootstrap.servers":
                f.write(f"{k}={v}\n")
    cmd = [
        java,
        "-Xmx1g",
        "-cp",
        f"{kafka_lib}/*",
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server",
        endpoint.bootstrap,
        "--topic",
        topic,
        "--num-records",
        str(n),
        "--command-config",
        str(props),
        "--timeout",
        "60000",
        "--hide-header",
    ]
    res = run_measured(cmd)
    line = [ln for ln in res["stdout"].splitlines() if ln.count(",") >= 9][-1].split(",")
    res["consumed"] = int(line[4])
    res["tool_rec_per_s"] = float(line[5])
    res["fetch_rec_per_s"] = float(line[9])
    if res["consumed"] != n:
        raise RuntimeError(f"ConsumerPerformance read {res['consumed']} of {n} records")
    return res


def naive_main(argv: list[str]) -> None:
    """(c): one process, confluent-kafka, a dict (key, sha256) → count; prints a JSON result."""
    from confluent_kafka import Consumer, TopicPartition

    from verification.endpoints import endpoint_from_file
    from verification.sources import kafka_bounds

    p = argparse.ArgumentParser()
    p.add_argument("--source"), p.add_argument("--target"), p.add_argument("--credentials")
    p.add_argument("--topic")
    a = p.parse_args(argv)
    counts: dict[tuple[bytes | None, bytes], int] = {}
    read = 0
    for bootstrap, sign in ((a.source, 1), (a.target, -1)):
        ep = endpoint_from_file(bootstrap, a.credentials)
        bounds = kafka_bounds(ep, [a.topic])[a.topic]
        consumer = Consumer(
            ep.config(
                **{
                    "group.id": "naive-reconciler",
                    "enable.auto.commit": False,
                    "fetch.max.bytes": 64 << 20,
                    "max.partition.fetch.bytes": 8 << 20,
                }
            )
        )
        consumer.assign([TopicPartition(a.topic, q, b.start) for q, b in bounds.items() if b.size])
        left = {q: b.end for q, b in bounds.items() if b.size}
        while left:
            for m in consumer.consume(10_000, timeout=1.0):
                if m.error():
                    continue
                h = hashlib.sha256(m.value() or b"")
                for hk, hv in m.headers() or ():
                    h.update(hk.encode())
                    h.update(hv or b"")
                ident = (m.key(), h.digest())
                counts[ident] = counts.get(ident, 0) + sign
                read += 1
                if m.offset() >= left.get(m.partition(), 0) - 1:
                    left.pop(m.partition(), None)
        consumer.close()
    missing = sum(v for v in counts.values() if v > 0)
    extra = sum(-v for v in counts.values() if v < 0)
    print(json.dumps({"read": read, "missing": missing, "extra": extra}))


def spark_count_main(argv: list[str]) -> None:
    """(d): one Spark session (the verification's settings) counting both sides' records; prints JSON."""
    from verification.endpoints import endpoint_from_file
    from verification.session import prefer_kafka_v2, spark_session
    from verification.sources import bounds_to_ranges, kafka_bounds, read_kafka

    p = argparse.ArgumentParser()
    p.add_argument("--source"), p.add_argument("--target"), p.add_argument("--credentials")
    p.add_argument("--topic")
    a = p.parse_args(argv)
    t = time.monotonic()
    spark = spark_session()
    prefer_kafka_v2(spark)
    started = time.monotonic() - t
    t = time.monotonic()
    frames = []
    for bootstrap in (a.source, a.target):
        ep = endpoint_from_file(bootstrap, a.credentials)
        frames.append(read_kafka(spark, ep, bounds_to_ranges(kafka_bounds(ep, [a.topic]))))
    read = frames[0].unionByName(frames[1]).count()
    print(json.dumps({"read": read, "spark_start_s": started, "count_s": time.monotonic() - t}))


def audit_main(argv: list[str]) -> None:
    """One ``drctl audit`` run of the link benchA → benchD (``audit``), or the failover's integrity
    check started from it (``from-audit``); prints a JSON result."""
    from dr.failover.act import integrity
    from verification.audit import audit_endpoints, state_file
    from verification.endpoints import endpoint_from_file

    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["audit", "from-audit"])
    p.add_argument("--source"), p.add_argument("--target"), p.add_argument("--credentials")
    p.add_argument("--topic"), p.add_argument("--state-dir", type=Path), p.add_argument("--out", type=Path)
    p.add_argument("--first-run", default="auto"), p.add_argument("--reset", action="store_true")
    a = p.parse_args(argv)
    src, dst = endpoint_from_file(a.source, a.credentials), endpoint_from_file(a.target, a.credentials)
    if a.what == "audit":
        r = audit_endpoints(
            src,
            dst,
            path=state_file(a.state_dir, AUDIT_LINK),
            stack="bench",
            link=AUDIT_LINK,
            source_cluster="benchA",
            target_cluster="benchD",
            select=lambda t: t == a.topic,
            first_run=a.first_run,
            reset=a.reset,
        )
        print(json.dumps(r.to_dict()))
        return
    v = integrity.verify(
        source=src,
        target=dst,
        out_dir=a.out,
        topics=[a.topic],
        cutoff_ms=None,
        stack="bench",
        source_name="benchA",
        target_name="benchD",
        audit_link=AUDIT_LINK,
        state_dir=a.state_dir,
    )
    print(json.dumps(v.to_dict()))


def audit_case(a, target, n: int, args, work: Path, creds: Path, t0: int) -> dict:
    """The ``audit`` profile (see the module docstring): returns its figures."""
    from verification.audit import state_file

    state_dir = work / "audit-state"
    path = state_file(state_dir, AUDIT_LINK)
    common = [
        "--source",
        a.bootstrap,
        "--target",
        target.bootstrap,
        "--credentials",
        str(creds),
        "--topic",
        AUDIT_TOPIC,
        "--state-dir",
        str(state_dir),
    ]
    me = [sys.executable, str(Path(__file__).resolve())]

    def audit_run(label: str, *extra: str) -> dict:
        r = run_measured([*me, "audit", *common, *extra])
        if r["rc"] not in (0, 1):
            raise RuntimeError(f"audit failed: {r['stderr'][-3000:]}")
        out = json.loads(r["stdout"].strip().splitlines()[-1])
        row = {
            "seconds": r["seconds"],
            "peak_mb": r["peak_mb"],
            "state_bytes": path.stat().st_size,
            **{k: out[k] for k in ("read_source", "read_target", "verified", "in_flight", "missing")},
        }
        print(
            f"[audit] {label}: {r['seconds']:.1f}s, read {out['read_source']:,} + {out['read_target']:,}, "
            f"verified {out['verified']:,}, in flight {out['in_flight']:,}, missing {out['missing']:,}; "
            f"state {row['state_bytes']:,} bytes",
            flush=True,
        )
        return row

    recreate_topic(a.endpoint(), AUDIT_TOPIC, args.partitions)
    produce(a.endpoint(), AUDIT_TOPIC, n, args.partitions, args.value_bytes, t0)
    rate = replicate(a, target, n, work, topic=AUDIT_TOPIC)
    print(f"[audit] MirrorMaker 2 replicated {n:,} records at {rate:,.0f} rec/s", flush=True)
    # the first (full) audit both ways on the same data: one Python process (the baseline), then one
    # Spark verification turned into the same state (what --first-run auto picks at this size)
    row: dict = {"records": n, "first_python": audit_run("first (full) audit in Python", "--first-run", "python")}
    row["first"] = audit_run("first (full) audit on Spark", "--first-run", "spark", "--reset")
    same = ("read_source", "read_target", "verified", "in_flight", "missing")
    if any(row["first"][k] != row["first_python"][k] for k in same):
        raise RuntimeError(f"first audits differ: Spark {row['first']}, Python {row['first_python']}")
    row["first_spark_over_python"] = row["first"]["seconds"] / row["first_python"]["seconds"]
    inc = max(1, n // 100)
    for ep in (a.endpoint(), target.endpoint()):  # the link's part, written by the benchmark on both sides
        produce(ep, AUDIT_TOPIC, n, args.partitions, args.value_bytes, t0, start=n, stop=n + inc)
    row["incremental"] = audit_run(f"audit after {inc:,} new records (1%)")
    if row["incremental"]["verified"] != inc or row["incremental"]["missing"] or row["incremental"]["in_flight"]:
        raise RuntimeError(f"the audit found {row['incremental']}, expected {inc} verified")
    out = work / "report-audit-from-audit"
    r = run_measured([*me, "from-audit", *common, "--out", str(out)])
    if r["rc"] != 0:
        raise RuntimeError(f"integrity from the audit failed: {r['stderr'][-3000:]}")
    v = json.loads(r["stdout"].strip().splitlines()[-1])
    if not (v["clean"] and (v.get("started_from") or {}).get("audit")):
        raise RuntimeError(f"integrity from the audit: {v}")
    row["integrity_from_audit"] = {"seconds": r["seconds"], "peak_mb": r["peak_mb"]}
    print(f"[audit] integrity check started from the audit: {r['seconds']:.1f}s, clean", flush=True)
    out = work / "report-audit-full"
    rv = run_measured(job_command(a.bootstrap, target.bootstrap, creds, AUDIT_TOPIC, out))
    if rv["rc"] != 0:
        raise RuntimeError(f"full verification: exit {rv['rc']}: {rv['stderr'][-3000:]}")
    row["full_verify"] = {
        "seconds": rv["seconds"],
        "peak_mb": rv["peak_mb"],
        "timings": json.loads((out / "summary.json").read_text())["timings"],
    }
    print(f"[audit] full verification of the same topic: {rv['seconds']:.1f}s, clean", flush=True)
    produce(a.endpoint(), AUDIT_TOPIC, n, args.partitions, args.value_bytes, t0, start=n + inc, stop=n + 2 * inc)
    row["behind"] = audit_run(f"audit with {inc:,} records in flight (written to A only)")
    total = n + inc
    caught_up = row["incremental"]["state_bytes"]
    row["audit_over_full"] = row["incremental"]["seconds"] / row["full_verify"]["seconds"]
    row["from_audit_over_full"] = row["integrity_from_audit"]["seconds"] / row["full_verify"]["seconds"]
    row["state_mb_per_million_audited"] = caught_up / 1e6 / (total / 1e6)
    row["state_mb_per_million_in_flight"] = (row["behind"]["state_bytes"] - caught_up) / 1e6 / (inc / 1e6)
    return row


# ----------------------------------------------------------------------------- main
def main() -> int:
    if sys.argv[1:2] == ["naive"]:
        naive_main(sys.argv[2:])
        return 0
    if sys.argv[1:2] in (["audit"], ["from-audit"]):
        audit_main(sys.argv[1:])
        return 0
    if sys.argv[1:2] == ["spark-count"]:
        spark_count_main(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--profiles", default="tail,scattered")
    # below Linux's ephemeral range (32768-60999), so no client socket holds a cluster's port
    ap.add_argument("--base-port", type=int, default=22500)
    ap.add_argument(
        "--port-step",
        type=int,
        default=100,
        help="ports between clusters (A at --base-port, each profile's target one step further)",
    )
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--skip-spark-count", action="store_true", help="leave out (d), Spark counting the records")
    ap.add_argument(
        "--designs",
        default="fingerprints,kafka",
        help="verification designs to run: fingerprints (b, the one-read design), fingerprints-memory "
        "(b_mem, fingerprints kept in memory while they fit), kafka (b_old, the product's default: pass 2 re-reads Kafka)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="run each contender K times, keep the fastest")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="leave the clusters and data in place")
    ap.add_argument("--reports", type=Path, help="copy each profile's verification report here")
    args = ap.parse_args()

    from dr.base.toolchain import toolchain
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    tc = toolchain()
    work = Path(tempfile.mkdtemp(prefix="kdr-bench-"))

    def spec(name: str, k: int) -> ClusterSpec:
        return ClusterSpec(name, brokers=1, base_port=args.base_port + args.port_step * k, heap_mb=768)

    a = LocalCluster(spec("benchA", 0), work)
    names = {"tail": "benchB", "scattered": "benchC", "audit": "benchD"}
    profiles = args.profiles.split(",")
    if set(profiles) - set(names):
        raise SystemExit(f"unknown profile in {args.profiles!r}: choose from {sorted(names)}")
    profiles = sorted(set(profiles), key=list(names).index)  # the tail profile must see A unfinished
    # one target per profile, sharing A's credentials (the replicator logs in to both with one password)
    targets = {p: LocalCluster(spec(names[p], 1 + i), work, a.credentials) for i, p in enumerate(profiles)}
    n = args.records
    results: dict = {
        "records": n,
        "partitions": args.partitions,
        "value_bytes": args.value_bytes,
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
        "profiles": {},
    }
    lost_by_profile = {
        "tail": frozenset(range(int(n * 0.995), n)),
        "scattered": frozenset(random.Random(42).sample(range(n), max(1, n // 1000))),
    }
    started: list = [a]
    try:
        a.start()
        creds = work / "admin.json"
        fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"username": "admin", "password": a.endpoint().password}, f)
        t0 = int(time.time() * 1000) - SPAN_MS - 60_000
        recreate_topic(a.endpoint(), TOPIC, args.partitions)
        marked = lost_by_profile["scattered"] if "scattered" in profiles else frozenset()
        # with the tail profile, the tail is written only after MM2 stopped
        first = int(n * 0.995) if "tail" in profiles else n
        if set(profiles) - {"audit"}:
            t = time.monotonic()
            produce(a.endpoint(), TOPIC, n, args.partitions, args.value_bytes, t0, stop=first, marked=marked)
            print(f"produced {first:,} records to A in {time.monotonic() - t:.1f}s", flush=True)

        for profile in profiles:
            if profile == "audit":
                targets[profile].start()
                started.append(targets[profile])
                results["profiles"]["audit"] = audit_case(a, targets[profile], n, args, work, creds, t0)
                continue
            lost = lost_by_profile[profile]
            target = targets[profile]
            target.start()
            started.append(target)
            kept = n - len(lost)
            if profile == "tail":  # runs first (profiles are sorted): A's tail is written after MM2 stops
                rate = replicate(a, target, kept, work)
                produce(a.endpoint(), TOPIC, n, args.partitions, args.value_bytes, t0, start=first, marked=marked)
            else:
                flow = f"{a.name}->{target.name}."  # dedicated MM2 takes connector settings per flow
                rate = replicate(
                    a,
                    target,
                    kept,
                    work,
                    extra={
                        flow + k: v
                        for k, v in {
                            "transforms": "dropLost",
                            "transforms.dropLost.type": "org.apache.kafka.connect.transforms.Filter",
                            "transforms.dropLost.predicate": "isLost",
                            "predicates": "isLost",
                            "predicates.isLost.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                            "predicates.isLost.name": LOST_HEADER,
                        }.items()
                    },
                )
            print(
                f"[{profile}] MirrorMaker 2 replicated {kept:,} records to {target.name} at {rate:,.0f} rec/s; "
                f"{len(lost):,} never reached it",
                flush=True,
            )
            total = n + kept
            row: dict = {"lost": len(lost), "records_read": total}

            runs: dict[str, list[dict]] = {k: [] for k in CONTENDERS}
            designs = [(k, d) for k, d in DESIGNS.items() if d in args.designs.split(",")]
            for rep in range(args.repeat):
                ra = consumer_perf(tc.kafka_lib, tc.java, a.endpoint(), TOPIC, n, work)
                rb_ = consumer_perf(tc.kafka_lib, tc.java, target.endpoint(), TOPIC, kept, work)
                runs["a"].append(
                    {
                        "seconds": ra["seconds"] + rb_["seconds"],
                        "peak_mb": max(ra["peak_mb"], rb_["peak_mb"]),
                        "tool_rec_per_s": [ra["tool_rec_per_s"], rb_["tool_rec_per_s"]],
                        "fetch_rec_per_s": [ra["fetch_rec_per_s"], rb_["fetch_rec_per_s"]],
                        "load_avg": os.getloadavg()[0],
                    }
                )
                print(f"[{profile} #{rep + 1}] (a) ConsumerPerformance: {runs['a'][-1]['seconds']:.1f}s", flush=True)

                for key, design in designs if rep % 2 == 0 else designs[::-1]:  # alternate which runs first
                    out = work / f"report-{profile}-{design}"
                    rv = run_measured(
                        job_command(a.bootstrap, target.bootstrap, creds, TOPIC, out), env=DESIGN_ENV[design]
                    )
                    if rv["rc"] not in (0, 1):
                        raise RuntimeError(f"verification failed: {rv['stderr'][-3000:]}")
                    summary = json.loads((out / "summary.json").read_text())
                    if args.reports:
                        shutil.copytree(out, args.reports / f"{profile}-{design}", dirs_exist_ok=True)
                    found = summary["totals"]["missing"]
                    if found != len(lost) or sum(
                        summary["totals"][c] for c in ("unexpected", "duplicated", "corrupted")
                    ):
                        raise RuntimeError(
                            f"verification ({design}) found {summary['totals']}, expected {len(lost)} missing"
                        )
                    runs[key].append(
                        {
                            "seconds": rv["seconds"],
                            "peak_mb": rv["peak_mb"],
                            "missing_found": found,
                            "design": design,
                            "timings": summary["timings"],
                            "load_avg": os.getloadavg()[0],
                            "method": {
                                k: summary["method"].get(k)
                                for k in (
                                    "windows",
                                    "differing_windows",
                                    "pass2_offsets",
                                    "pass2_compared_records",
                                    "pass2b",
                                    "kafka_reads_per_side",
                                    "fingerprints",
                                )
                            },
                        }
                    )
                    print(
                        f"[{profile} #{rep + 1}] ({key}) verification, {design}: {rv['seconds']:.1f}s, "
                        f"found {found:,} missing",
                        flush=True,
                    )

                if not args.skip_spark_count:
                    rd, counted = run_subcommand("spark-count", "Spark count", a.bootstrap, target.bootstrap, creds)
                    if counted["read"] != total:
                        raise RuntimeError(f"Spark counted {counted['read']} of {total} records")
                    runs["d"].append(
                        {
                            "seconds": rd["seconds"],
                            "peak_mb": rd["peak_mb"],
                            "timings": {"spark_start_s": counted["spark_start_s"], "count_s": counted["count_s"]},
                            "load_avg": os.getloadavg()[0],
                        }
                    )
                    print(f"[{profile} #{rep + 1}] (d) Spark count: {rd['seconds']:.1f}s", flush=True)

                if not args.skip_naive:
                    rc, naive = run_subcommand("naive", "naive reconciler", a.bootstrap, target.bootstrap, creds)
                    if naive["missing"] != len(lost):
                        raise RuntimeError(f"naive reconciler found {naive}, expected {len(lost)} missing")
                    runs["c"].append(
                        {
                            "seconds": rc["seconds"],
                            "peak_mb": rc["peak_mb"],
                            "missing_found": naive["missing"],
                            "load_avg": os.getloadavg()[0],
                        }
                    )
                    print(f"[{profile} #{rep + 1}] (c) naive reconciler: {rc['seconds']:.1f}s", flush=True)
            # the fastest of the repeats: the run least disturbed by whatever else shares the machine
            for k, rs in runs.items():
                if rs:
                    row[k] = {
                        **min(rs, key=lambda r: r["seconds"]),
                        "all_seconds": [r["seconds"] for r in rs],
                        "peak_mb": max(r["peak_mb"] for r in rs),
                        "runs": rs,
                    }
            for k in CONTENDERS:
                if k in row:
                    row[k]["rec_per_s"] = total / row[k]["seconds"]
            for b in ("b", "b_mem", "b_old"):
                if b not in row:
                    continue
                spark_free = row[b]["seconds"] - row[b]["timings"].get("spark_start_s", 0)
                row[f"{b}_over_a"] = row[b]["rec_per_s"] / row["a"]["rec_per_s"]
                row[f"{b}_over_a_without_spark_start"] = (total / spark_free) / row["a"]["rec_per_s"]
                for base in ("c", "d"):
                    if base in row:
                        row[f"{b}_over_{base}"] = row[b]["rec_per_s"] / row[base]["rec_per_s"]
            for b in ("b", "b_mem"):
                if b in row and "b_old" in row:
                    row[f"{b}_over_b_old"] = row[b]["rec_per_s"] / row["b_old"]["rec_per_s"]
            row["load_avg_after"] = os.getloadavg()
            results["profiles"][profile] = row
    finally:
        if not args.keep:
            for cluster in started:
                cluster.destroy()
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: clusters {', '.join(c.bootstrap for c in started)}, state and credentials in {work}")

    print()
    print(
        f"N = {n:,} records on A (value {args.value_bytes} B, {args.partitions} partitions), "
        f"{os.cpu_count()} CPUs, load average at start {results['load_avg_at_start'][0]:.1f}"
    )
    print(f"{'profile':<10} {'contender':<32} {'seconds':>8} {'records/s':>11} {'peak MB':>8}")
    for profile, row in results["profiles"].items():
        if profile == "audit":
            for k, name in (("first_python", "first (full) audit, Python"), ("first", "first (full) audit, Spark")):
                print(
                    f"{'audit' if k == 'first_python' else '':<10} {name:<32} {row[k]['seconds']:8.1f} "
                    f"{n / row[k]['seconds']:11,.0f} {row[k]['peak_mb']:8.0f}"
                )
            print(f"{'':<10} first audit on Spark / in Python = {row['first_spark_over_python']:.3f}")
            for k, name in (
                ("incremental", "audit after 1% new data"),
                ("integrity_from_audit", "integrity from the audit"),
                ("full_verify", "full verification, same topic"),
            ):
                print(f"{'':<10} {name:<32} {row[k]['seconds']:8.1f} {'':>11} {row[k]['peak_mb']:8.0f}")
            print(
                f"{'':<10} audit after 1% / full verification = {row['audit_over_full']:.3f} (aim <= 0.10); "
                f"integrity from the audit / full = {row['from_audit_over_full']:.3f}"
            )
            print(
                f"{'':<10} audit state: {row['state_mb_per_million_audited']:.4f} MB per million records audited "
                f"(caught up), {row['state_mb_per_million_in_flight']:.1f} MB per million records in flight"
            )
            continue
        for k, name in CONTENDERS.items():
            if k in row:
                r = row[k]
                print(f"{profile:<10} {name:<32} {r['seconds']:8.1f} {r['rec_per_s']:11,.0f} {r['peak_mb']:8.0f}")
        for b in ("b", "b_mem", "b_old"):
            if f"{b}_over_a" in row:
                ratio = (
                    f"{b}/a = {row[f'{b}_over_a']:.2f} (without Spark start-up "
                    f"{row[f'{b}_over_a_without_spark_start']:.2f})"
                )
                for base in ("d", "c"):
                    if f"{b}_over_{base}" in row:
                        ratio += f", {b}/{base} = {row[f'{b}_over_{base}']:.2f}"
                print(f"{'':<10} {ratio}")
        for b in ("b", "b_mem"):
            if f"{b}_over_b_old" in row:
                print(f"{'':<10} {b}/b_old = {row[f'{b}_over_b_old']:.2f} (one read against the former design)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
