"""Benchmark: what the broker-side lease fence costs an application's produce (not a test).

Two local single-broker clusters on this machine, started by the product's runtime: ``standard`` (Kafka's
StandardAuthorizer, as every stack in mode manual) and ``fenced`` (``kafkadr.fence.LeaseFenceAuthorizer``,
as a stack in mode automatic, with a valid lease permit written for the whole run). On each, an application
principal (SCRAM, a WRITE ACL on the topic: not a super user, so every produce request goes through the
fence's check) writes the same N small records with ``linger.ms=0`` — many small produce requests, the
fence's worst case, since it judges each request, not each record — ``--repeat`` times, interleaved, the
fastest run of each counting.

Printed: seconds and records/s of each, and the ratio fenced / standard (best runs, and medians).
``--control`` runs the second cluster without the fence as well: the ratio then is the machine's noise floor.
``--json FILE`` keeps them::

    .venv/bin/python benchmarks/lease_fence_bench.py --records 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "bench-fence"
APP = "bench-app"


def produce(endpoint, n: int, value_bytes: int) -> float:  # noqa: ANN001 - dr.kafka.client.Endpoint
    """Seconds to have N records acknowledged (acks=1, one request per batch as soon as it is ready)."""
    from confluent_kafka import Producer

    refused: list[str] = []
    value = b"x" * value_bytes
    p = Producer(endpoint.config(**{"linger.ms": 0, "acks": "1", "enable.idempotence": False}))

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            refused.append(str(err))

    t = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, value, b"k%09d" % i, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    if p.flush(300):
        raise RuntimeError("records were not delivered")
    seconds = time.monotonic() - t
    if refused:
        raise RuntimeError(f"{len(refused)} records refused, e.g. {refused[0]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base-port", type=int, default=28700)
    ap.add_argument(
        "--control", action="store_true", help="run the second cluster without the fence too: the noise floor (A/A)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from confluent_kafka.admin import AclOperation, NewTopic, ResourceType

    from dr.controller.permit import LeasePermit
    from dr.controller.witness import Holding
    from dr.kafka.client import acl, admin_client, create_acls, upsert_scram_users
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    work = Path(tempfile.mkdtemp(prefix="kdr-fence-bench-"))
    standard = LocalCluster(ClusterSpec("standard", brokers=1, base_port=args.base_port, heap_mb=768), work)
    fenced = LocalCluster(
        ClusterSpec("fenced", brokers=1, base_port=args.base_port + 100, heap_mb=768, lease_fence=not args.control),
        work,
        standard.credentials,
    )
    # valid for the whole run (a day): the check's cost is measured, not a refusal
    LeasePermit(fenced.lease_permit_file, ttl_s=86_400, margin_s=0).grant(Holding("bench/fenced", 1, 0), time.time())
    password = secrets.token_urlsafe(16)
    n = args.records
    result: dict = {"records": n, "value_bytes": args.value_bytes, "control": args.control, "runs": {}}
    try:
        for c in (standard, fenced):
            c.start()
            ep = c.endpoint()
            admin = admin_client(ep)  # kept: a client destroyed before the result cancels it
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
            upsert_scram_users(ep, {APP: password})
            create_acls(ep, [acl(APP, ResourceType.TOPIC, TOPIC, AclOperation.WRITE)])
        time.sleep(2)  # the new SCRAM user and ACL reach the broker's metadata cache
        for k in range(args.repeat):
            for c in (standard, fenced):  # interleaved: the machine's load falls on both alike
                seconds = produce(c.endpoint().with_user(APP, password), n, args.value_bytes)
                result["runs"].setdefault(c.name, []).append(seconds)
                print(f"{c.name} run {k + 1}: {seconds:.2f}s, {n / seconds:,.0f} records/s", flush=True)
    finally:
        for c in (fenced, standard):
            c.stop()
        shutil.rmtree(work, ignore_errors=True)
    best = {name: min(runs) for name, runs in result["runs"].items()}
    median = {name: statistics.median(runs) for name, runs in result["runs"].items()}
    result["best_s"], result["median_s"] = best, median
    result["ratio_rate_fenced_over_standard"] = best["standard"] / best["fenced"]
    result["ratio_median_rate_fenced_over_standard"] = median["standard"] / median["fenced"]
    print(f"\n{'authorizer':<10} {'best s':>8} {'records/s':>11} {'median s':>9}")
    for name, s in best.items():
        print(f"{name:<10} {s:>8.2f} {n / s:>11,.0f} {median[name]:>9.2f}")
    label = "control (both standard)" if args.control else "lease fence / StandardAuthorizer"
    print(
        f"{label} produce rate: best {result['ratio_rate_fenced_over_standard']:.3f}, "
        f"median {result['ratio_median_rate_fenced_over_standard']:.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
