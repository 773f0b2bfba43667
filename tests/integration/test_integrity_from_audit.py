"""The failover's integrity check started from the last audit, on real clusters, MirrorMaker 2 and Spark.

A and B (one broker each) in one free port window P (A: P/P+20/P+40, B: P+50/P+70/P+90), a real
MirrorMaker 2 A → B:

1. ``orders-0`` holds 100 records, copied; 10 records written to ``orders-1`` while the link is
   stopped; the audit verifies 100 and keeps the 10 in flight (its residue);
2. the link runs again and copies 50 + 20 more; it stops (the failover); the copies of ``orders-1``
   offsets 0..12 are deleted on B — 10 records that were in flight at the audit and 3 new ones;
   5 records written to A after the cut-off;
3. ``integrity.verify`` with the link's audit starts from it (reads only past the bounds, no
   Spark), lists exactly the 13 dropped records, says so in the report, and the full Spark
   verification of the same data lists the same 13; ``recover`` replays them from that report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr.failover.act import integrity
from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker
from dr.runtime.process import wait_until
from tests.integration.ports import windows
from verification.audit import audit_endpoints, state_file

pytestmark = pytest.mark.integration

STACK, LINK = "fromaudit", "A-to-B"


def produce(cluster: LocalCluster, partition: int, start: int, n: int) -> None:
    producer = Producer(cluster.endpoint().config(**{"acks": "all", "linger.ms": 5}))
    errors: list = []
    for i in range(start, start + n):
        producer.produce(
            "orders",
            key=f"p{partition}-k{i}".encode(),
            value=f"v-{i}".encode(),
            partition=partition,
            headers=[("n", str(i).encode())] if i % 2 else None,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(60) == 0 and not errors, errors[:3]


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, LocalCluster, MirrorMaker, Path]]:
    state = tmp_path_factory.mktemp("from-audit")
    with windows(1) as (port,):
        a = LocalCluster(ClusterSpec("A", brokers=1, base_port=port), state)
        b = LocalCluster(ClusterSpec("B", brokers=1, base_port=port + 50), state)
        mm2 = MirrorMaker(a, b, state, topics="orders")
        try:
            a.start()
            b.start()
            admin = AdminClient(a.endpoint().config())  # kept: a collected client fails its futures
            admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(timeout=30)
            yield a, b, mm2, state
        finally:
            mm2.stop()
            a.destroy()
            b.destroy()


def synced(a: LocalCluster, b: LocalCluster) -> bool:
    return wait_until(
        lambda: end_offsets(a.endpoint(), ["orders"]) == end_offsets(b.endpoint(), ["orders"]), 180, interval=0.5
    )


def test_integrity_from_the_audit_lists_exactly_the_dropped_records(estate, tmp_path: Path) -> None:
    a, b, mm2, state = estate
    path = state_file(state / "stack-state", LINK)
    produce(a, 0, 0, 100)
    mm2.start()
    assert synced(a, b)
    mm2.stop()
    produce(a, 1, 0, 10)  # in flight at the audit
    run = audit_endpoints(
        a.endpoint(), b.endpoint(), path=path, stack=STACK, link=LINK, source_cluster="A", target_cluster="B"
    )
    assert (run.verified, run.in_flight, run.missing) == (100, 10, 0)

    mm2.start()
    produce(a, 0, 100, 50)
    produce(a, 1, 10, 20)
    assert synced(a, b)
    mm2.stop()  # the failover stops the link
    # the link "drops" orders-1 offsets 0..12: the 10 in flight at the audit and 3 of the new ones
    admin = AdminClient(b.endpoint().config())
    for fut in admin.delete_records([TopicPartition("orders", 1, 13)]).values():
        fut.result(timeout=30)
    time.sleep(0.05)
    cutoff = int(time.time() * 1000)
    time.sleep(0.05)
    produce(a, 0, 150, 5)  # after the cut-off: compared by neither check

    lines: list[str] = []
    v = integrity.verify(
        source=a.endpoint(),
        target=b.endpoint(),
        out_dir=tmp_path / "from-audit",
        topics=["orders"],
        cutoff_ms=cutoff,
        stack=STACK,
        source_name="A",
        target_name="B",
        progress=lines.append,
        audit_link=LINK,
        state_dir=state / "stack-state",
        context={"failover_id": "it-1", "mode": "planned"},
    )
    origin = v.started_from
    assert origin and origin["audit"], origin
    assert origin["bounds"] == {"source": {"orders": {"0": 100, "1": 10}}, "target": {"orders": {"0": 100, "1": 0}}}
    assert (origin["skipped_source"], origin["skipped_target"], origin["residue_source"]) == (110, 100, 10)
    assert (origin["read_source"], origin["read_target"]) == (75, 67)  # 50 + 5 late + 20; 50 + the 17 left on B
    assert origin["lost_target"] == 13  # deleted on B before anything read them
    assert any("starting from audit run 1 of A-to-B" in ln for ln in lines), lines
    assert not v.clean and v.counts == {"missing": 13, "unexpected": 0, "duplicated": 0, "corrupted": 0}
    dropped = [("orders", 1, o, f"p1-k{o}".encode()) for o in range(13)]
    missing = integrity.missing_records(v.report_dir)
    assert sorted((m["topic"], m["partition"], m["offset"], m["key"]) for m in missing) == dropped
    summary = json.loads((Path(v.report_dir) / "summary.json").read_text())
    assert summary["method"]["from_audit"]["audit_runs"] == 1 and summary["totals"]["source_after_cutoff"] == 5
    assert summary["failover"]["failover_id"] == "it-1"
    html = (Path(v.report_dir) / "report.html").read_text()
    assert "started from" in html and "audit run 1 of link A-to-B" in html

    # the full Spark verification of the same data finds the same records
    full = integrity.verify(
        source=a.endpoint(),
        target=b.endpoint(),
        out_dir=tmp_path / "full",
        topics=["orders"],
        cutoff_ms=cutoff,
        stack=STACK,
        source_name="A",
        target_name="B",
    )
    assert full.started_from is None and full.counts == v.counts
    assert (
        sorted((m["topic"], m["partition"], m["offset"], m["key"]) for m in integrity.missing_records(full.report_dir))
        == dropped
    )

    # drctl recover replays the report started from the audit
    rec = integrity.recover(v.report_dir, source=a.endpoint(), target=b.endpoint())
    assert rec["written"] == 13
    assert integrity.recover(v.report_dir, source=a.endpoint(), target=b.endpoint())["written"] == 0

    # a damaged state file: the full verification runs, and says why
    path.write_text(path.read_text()[:40])
    again = integrity.verify(
        source=a.endpoint(),
        target=b.endpoint(),
        out_dir=tmp_path / "damaged",
        topics=["orders"],
        cutoff_ms=cutoff,
        stack=STACK,
        source_name="A",
        target_name="B",
        audit_link=LINK,
        state_dir=state / "stack-state",
    )
    assert again.started_from["audit"] is False and str(path) in again.started_from["reason"]
    assert again.clean, again.counts  # the recovered records are there now
