"""Hub-and-spoke on real clusters: two edges aggregated into a hub (``<edge>.readings``), the hub copied to its
passive P; the hub is killed under edge traffic, ``drctl failover --mode unplanned`` promotes P and re-points
both edges at it, and every edge record is on the new hub exactly once (duplicates counted and reported).

Four one-broker clusters and three MirrorMaker 2 processes (the example's standby is left out: a fifth
cluster would add nothing this test checks, on a 2-core machine).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from dr.failover.hub import edge_copy_report, offset_key, offsets_topic
from dr.kafka.offsets import end_offsets
from dr.runtime.process import wait_until
from tests import REPO_ROOT
from tests.integration.helpers import StackEnv, drctl, provisioned
from tests.integration.ports import windows

STACK = "hubtest"
EDGES = ("E1", "E2")


def _write_stack(root: Path, ports: tuple[int, ...]) -> None:
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.hub-spoke.yaml").read_text())
    config = doc["config"]
    config["kafka-dr:clusters"] = [c for c in config["kafka-dr:clusters"] if c["role"] != "standby"]
    for c, port in zip(config["kafka-dr:clusters"], ports, strict=True):
        c["base_port"] = port
    (root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


class EdgeTraffic(threading.Thread):
    """An edge application writing ``readings`` on its edge until stopped; keeps what was acknowledged."""

    def __init__(self, endpoint, edge: str) -> None:  # noqa: ANN001 - Endpoint
        super().__init__(daemon=True)
        self.endpoint, self.edge = endpoint, edge
        self.acked: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        producer = Producer(self.endpoint.config(**{"acks": "all", "linger.ms": 5}))

        def delivered(err, msg) -> None:  # noqa: ANN001
            if err is None:
                self.acked.append(msg.key().decode())

        n = 0
        while not self.halt.is_set():
            for _ in range(20):
                key = f"{self.edge}-{n}"
                producer.produce("readings", key=key, value=f"reading {n} of {self.edge}", on_delivery=delivered)
                n += 1
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(30)


def _offset_keys(endpoint, edge: str) -> set[bytes]:  # noqa: ANN001 - Endpoint
    """The keys MirrorMaker 2 itself stored its source offsets under, on a link's target."""
    consumer = Consumer(endpoint.config(**{"group.id": "kdr-test-offsets", "enable.auto.commit": False}))
    keys: set[bytes] = set()
    try:
        ends = end_offsets(endpoint, [offsets_topic(edge)])
        consumer.assign([TopicPartition(t, p, 0) for (t, p), end in ends.items() if end > 0])
        deadline = time.monotonic() + 20
        read = 0
        while time.monotonic() < deadline and read < sum(ends.values()):
            for msg in consumer.consume(100, timeout=1):
                read += 1
                if msg.error() is None and msg.key():
                    keys.add(msg.key())
    finally:
        consumer.close()
    return keys


def test_hub_failover_under_edge_traffic_leaves_every_edge_record_once_on_the_new_hub(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with windows(4) as ports:
        _write_stack(tmp_path, ports)
        env = StackEnv(tmp_path, STACK)
        outputs: list[str] = []
        with provisioned(env):
            up_s = time.monotonic() - t0
            estate = env.estate()
            traffic = {
                e: EdgeTraffic(
                    estate.endpoint(e).with_user(f"sensor-{e.lower()}", estate.app_password(f"sensor-{e.lower()}")), e
                )
                for e in EDGES
            }
            for t in traffic.values():
                t.start()
            try:
                hub_ep, p_ep = estate.endpoint("H"), estate.endpoint("P")
                copies = [f"{e}.readings" for e in EDGES]
                assert wait_until(
                    lambda: (
                        all(n > 0 for n in end_offsets(p_ep, copies).values()) and len(end_offsets(p_ep, copies)) == 4
                    ),
                    90,
                    interval=0.5,
                ), "the edges' records never reached P through the hub"
                # MirrorMaker 2's own keys for an edge's source offsets are the ones the failover writes
                # (the worker commits its source offsets every second, after the records it copied)
                stored: set[bytes] = set()

                def committed() -> bool:
                    stored.update(k for k in _offset_keys(hub_ep, "E1") if k.startswith(b'["MirrorSourceConnector"'))
                    return bool(stored)

                assert wait_until(committed, 60, interval=1), "MirrorMaker 2 E1-to-H never committed a source offset"
                assert stored <= {offset_key("E1", "readings", p) for p in (0, 1)}, stored

                estate.local_cluster("H").kill()  # the hub is gone; the edges go on writing
                killed_at = time.monotonic()
                res = drctl(
                    env,
                    "failover",
                    "--stack",
                    STACK,
                    "--mode",
                    "unplanned",
                    "--yes",
                    "--skip-verify",
                    "--force-decommission",
                    "--json",
                    timeout=600,
                    outputs=outputs,
                )
                failover_s = time.monotonic() - killed_at
                assert res.returncode == 0, res.stderr[-5000:]
                time.sleep(2)  # edge traffic now flows into P through the re-pointed links
            finally:
                for t in traffic.values():
                    t.halt.set()
                for t in traffic.values():
                    t.join(60)

            after = env.estate()
            assert after.topology.active().name == "P"
            assert sorted(lk.name for lk in after.topology.links) == ["E1-to-P", "E2-to-P"]
            for e in EDGES:
                after.mirror(f"{e}-to-P").wait_caught_up(["readings"], timeout=90)

            reports = {e: edge_copy_report(e, after.endpoint(e), after.endpoint("P"), ["readings"]) for e in EDGES}
            print(
                f"\nhub-spoke: up {up_s:.0f}s; failover {failover_s:.1f}s; acknowledged "
                + ", ".join(f"{e} {len(t.acked)}" for e, t in traffic.items())
                + "; on P: "
                + "; ".join(
                    f"{e} {r['records']} records, {r['missing']} missing, {r['duplicates']} duplicates, "
                    f"{r['unexpected']} unexpected"
                    for e, r in reports.items()
                )
            )
            for e, r in reports.items():
                assert r["records"] >= len(traffic[e].acked) > 0, (e, r)
                assert r["missing"] == 0, f"edge {e}: records never copied to the new hub: {r}"
                assert r["unexpected"] == 0, f"edge {e}: records on P that {e} never held: {r}"
                assert r["duplicates"] == 0, f"edge {e}: records copied twice to the new hub: {r}"

            summary = json.loads(res.stdout)
            text = json.dumps(summary)
            assert "edge_resume" in text or "resume into P" in text, "the failover reported where each edge resumed"

            status = drctl(env, "status", "--stack", STACK, "--json", outputs=outputs)
            links = {lk["name"]: lk for lk in json.loads(status.stdout)["links"]}
            for e in EDGES:
                assert links[f"{e}-to-P"]["total_lag"] == 0, links[f"{e}-to-P"]
    print(f"hub-spoke test: {time.monotonic() - t0:.0f}s in all")
