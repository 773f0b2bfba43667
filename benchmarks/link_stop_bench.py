"""What stopping the drained link costs inside a planned failover's outage (issue 46): a dedicated exactly-once
MirrorMaker 2 A→B, drained to lag 0 after a burst of traffic (as after the fence and the drain), stopped
gracefully — the promote step's former way — against SIGKILLed — its way now when the drain left nothing to
copy and every group's offsets on B — in alternating rounds on the same clusters, in one run (not a test).

    .venv/bin/python benchmarks/link_stop_bench.py [--rounds 3] [--records 5000] [--json]

Each round starts the link, writes ``--records`` to A, waits until the link has copied them all, then stops it
one way and times the stop until the process is gone. After each stop it counts the transactions the link
left open on B's ``orders`` (the promote step aborts any at once; a drained link should leave none) and checks
that B holds every record. The ratio is the kill's median against the graceful stop's median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker, grant_replicator
from dr.runtime.transactions import open_transactions

BASE = 26400  # below the ephemeral range; A and B in windows of 100 ports (26400-26599)
WAYS = ("graceful stop", "SIGKILL (drained)")


def _write(cluster: LocalCluster, records: int, tag: int) -> None:
    producer = Producer(cluster.endpoint().config(**{"acks": "all", "linger.ms": 5, "enable.idempotence": True}))
    for i in range(records):
        producer.produce("orders", key=f"r{tag}-{i}".encode(), value=b"x" * 100)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def _round(a: LocalCluster, b: LocalCluster, state: Path, way: str, records: int, tag: int) -> dict[str, Any]:
    mm = MirrorMaker(a, b, state / f"mm{tag}", topics="orders", groups="none", grant=False, exactly_once=True)
    mm.start(timeout=300)
    try:
        _write(a, records, tag)
        mm.wait_caught_up(["orders"], timeout=300)  # drained: lag 0
        t0 = time.monotonic()
        if way == WAYS[0]:
            mm.stop(timeout=20)
        else:
            mm.kill()
        seconds = time.monotonic() - t0
        assert not mm.alive(), f"{way}: the link still runs"
    finally:
        mm.stop()
    left_open = open_transactions(b.endpoint(), ["orders"])
    copied = sum(end_offsets(b.endpoint(), ["orders"]).values())
    return {"seconds": round(seconds, 3), "open_transactions": len(left_open), "end_offsets_on_b": copied}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="kdr-link-stop-bench-") as tmp:
        state = Path(tmp)
        a = LocalCluster(ClusterSpec("LA", brokers=1, base_port=BASE), state)
        b = LocalCluster(ClusterSpec("LB", brokers=1, base_port=BASE + 100), state)
        try:
            a.start()
            b.start()
            admin = AdminClient(a.endpoint().config())  # kept referenced until the future resolves
            admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(timeout=30)
            grant_replicator(a, b, exactly_once=True)
            tag = 0
            for _ in range(args.rounds):
                for way in WAYS:  # alternating: the machine's drift falls on both alike
                    tag += 1
                    runs[way].append(_round(a, b, state, way, args.records, tag))
        finally:
            b.stop()
            a.stop()
    medians = {w: statistics.median(r["seconds"] for r in runs[w]) for w in WAYS}
    result = {
        "runs": runs,
        "median_s": medians,
        "kill_vs_graceful": round(medians[WAYS[1]] / medians[WAYS[0]], 3) if medians[WAYS[0]] else None,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"dedicated exactly-once MirrorMaker 2 A→B drained after {args.records} records; {args.rounds} rounds each")
    print(f"{'way':<20} {'stop seconds':<28} {'median':>7} {'open txns left':>15}")
    for w in WAYS:
        secs = ", ".join(f"{r['seconds']:.2f}" for r in runs[w])
        print(f"{w:<20} {secs:<28} {medians[w]:>7.2f} {max(r['open_transactions'] for r in runs[w]):>15}")
    print(f"SIGKILL / graceful stop (medians): {result['kill_vs_graceful']}")


if __name__ == "__main__":
    main()
