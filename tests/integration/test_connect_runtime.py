"""A real Kafka Connect cluster (2 distributed workers, home B) running the MirrorMaker 2 connectors
of an A → B link: a worker killed mid-traffic, its tasks move to the other one, and B holds every
record of A. Ports: four free windows from tests/integration/ports.py (A, B, C, the Connect workers)."""

from __future__ import annotations

import os
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.kafka.client import Endpoint
from dr.kafka.connect_rest import ConnectRest
from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.connect import CONNECT_REST_USER, CONNECT_USER, ConnectSpec, LocalConnectCluster
from dr.runtime.connect_link import ConnectLink
from dr.runtime.credentials import REPLICATOR_USER
from dr.runtime.mirrormaker import grant_replicator
from dr.runtime.process import wait_until
from dr.topology import Delivery, Topology, load_stack_file
from stacks.links.connect_config import connector_configs
from tests.integration.helpers import create_topic, jvms_under, write_local_stack
from tests.integration.ports import windows

TOPIC = "orders"  # declared in Pulumi.local.yaml with 6 partitions
RECORDS = 20_000
DELIVERY = Delivery(os.environ.get("KDR_TEST_DELIVERY", "exactly-once"))
"""The link's delivery (``KDR_TEST_DELIVERY=at-least-once`` shows the duplicates it leaves, for contrast)."""


@dataclass
class Env:
    """The clusters, the Connect cluster and the topology of this module."""

    state: Path
    nothing_port: int
    """A port in this suite's windows that nothing listens on."""
    a: LocalCluster
    b: LocalCluster
    connect: LocalConnectCluster
    topology: Topology
    start_s: float


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """A and B (1 broker each) and a 2-worker Connect cluster whose home is B; all gone afterwards."""
    with windows(4) as (a_port, b_port, c_port, connect_port):
        yield from _env(tmp_path_factory, a_port, b_port, c_port, connect_port)


def _env(
    tmp_path_factory: pytest.TempPathFactory,
    A_PORT: int,  # noqa: N803
    B_PORT: int,  # noqa: N803
    C_PORT: int,  # noqa: N803
    CONNECT_PORT: int,  # noqa: N803
) -> Iterator[Env]:
    state = tmp_path_factory.mktemp("connect-runtime")
    topology = load_stack_file(write_local_stack(state, "connect", (A_PORT, B_PORT, C_PORT), one_broker=("A",)))
    # the link exactly-once (KIP-618): workers with exactly-once source support, a connector requiring it
    link = topology.links[0].model_copy(update={"delivery": DELIVERY})
    topology = topology.revised(links=[link, *topology.links[1:]])
    a = LocalCluster(ClusterSpec("A", brokers=1, base_port=A_PORT), state)
    b = LocalCluster(ClusterSpec("B", brokers=1, base_port=B_PORT), state)
    eos = DELIVERY == Delivery.EXACTLY_ONCE
    connect = LocalConnectCluster(ConnectSpec("dr", workers=2, base_port=CONNECT_PORT, exactly_once=eos), b, state)
    try:
        starts = [threading.Thread(target=c.start) for c in (a, b)]
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        a.wait_ready(60)
        b.wait_ready(60)
        grant_replicator(a, b, exactly_once=eos, connect="dr")
        connect.grant()
        connect.write_secrets()
        start_s = connect.start()
        print(f"\nConnect cluster of 2 workers started in {start_s:.1f}s")
        yield Env(state, CONNECT_PORT + 99, a, b, connect, topology, start_s)
    finally:
        try:
            connect.destroy()
        finally:
            a.destroy()
            b.destroy()
    assert jvms_under(state) == [], "a JVM of the suite is still running"


def _produce_slowly(
    endpoint: Endpoint, keys: list[str], progress: list[int], batch: int = 1000, pause: float = 0.25
) -> None:
    producer = Producer(endpoint.config(**{"acks": "all", "linger.ms": 5}))
    errors: list[object] = []
    for start in range(0, len(keys), batch):
        for key in keys[start : start + batch]:
            producer.produce(
                TOPIC, key=key, value=f"value-{key}", on_delivery=lambda err, _msg: err and errors.append(err)
            )
            producer.poll(0)
        producer.flush(60)
        progress.append(start + batch)
        time.sleep(pause)
    assert not errors, errors[:3]


def _keys_by_partition(endpoint: Endpoint, ends: dict[tuple[str, int], int]) -> dict[int, list[str]]:
    """Every committed key of every partition below its end offset, in offset order (read_committed: a
    transactional copy's commit markers take offsets but are no records, and aborted records are skipped)."""
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"reader-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
    )
    tps = [TopicPartition(t, p, 0) for (t, p) in ends]
    consumer.assign(tps)
    out: dict[int, list[str]] = {p: [] for (_, p) in ends}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None and msg.offset() < ends[(msg.topic(), msg.partition())]:
                    out[msg.partition()].append(msg.key().decode())
            if all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in consumer.position(tps)):
                break
    finally:
        consumer.close()
    return out


def _on(status: dict, worker: str) -> bool:
    return (
        status["connector"]["state"] == "RUNNING"
        and status["connector"]["worker_id"] == worker
        and bool(status["tasks"])
        and all(t["state"] == "RUNNING" and t["worker_id"] == worker for t in status["tasks"])
    )


def test_mm2_connectors_survive_a_killed_worker_and_copy_every_record(env: Env) -> None:
    connect, a, b = env.connect, env.a, env.b
    secrets = connect.secrets_file()
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert stat.S_IMODE(secrets.parent.stat().st_mode) == 0o700
    rest = connect.rest()
    assert rest.info()["version"] == "4.3.1"

    create_topic(a, TOPIC, partitions=6)
    # The checkpoint connector has a task only while a consumer group exists on the source.
    group = Consumer(a.endpoint().config(**{"group.id": "billing", "enable.auto.commit": False}))
    group.commit(offsets=[TopicPartition(TOPIC, p, 0) for p in range(6)], asynchronous=False)
    group.close()
    link = env.topology.links[0]
    configs = connector_configs(env.topology, link, secrets_file=str(secrets), tasks_max=2)
    for name, config in configs.items():
        assert rest.validate(config) == [], name
        rest.put_config(name, config)
    for name in configs:
        rest.wait_running(name, timeout=90)
    stored = rest.config(f"{link.name}-source")
    password = connect.credentials.password(REPLICATOR_USER)
    assert "${file:" in stored["source.cluster.sasl.jaas.config"] and password not in str(stored)

    held = {name: [t["worker_id"] for t in rest.status(name)["tasks"]] for name in configs}
    print(f"tasks before the kill: {held}")
    # the worker killed is one that runs a source task: its uncommitted copies are what could repeat
    victim = next(i for i in range(2) if connect.worker_id(i) in held[f"{link.name}-source"])
    survivor = 1 - victim
    worker0, worker1 = connect.worker_id(victim), connect.worker_id(survivor)

    keys = [f"k{i:05d}" for i in range(RECORDS)]
    progress: list[int] = []
    producer = threading.Thread(target=_produce_slowly, args=(a.endpoint(), keys, progress))
    producer.start()
    assert wait_until(lambda: bool(progress) and progress[-1] >= RECORDS // 3, 60)
    killed_at = time.monotonic()
    connect.kill_worker(victim)
    assert connect.alive_workers() == [survivor]

    rest = connect.rest()
    assert wait_until(lambda: all(_on(rest.status(n), worker1) for n in configs), 90, interval=0.2), (
        f"tasks did not all move to worker {survivor}: { {n: rest.status(n) for n in configs} }"
    )
    moved_s = time.monotonic() - killed_at
    producer.join(120)
    assert progress[-1] >= RECORDS
    print(f"tasks moved to worker {survivor} {moved_s:.1f}s after worker {victim} was killed")
    assert worker0 not in str({n: rest.status(n) for n in configs})

    a_ends = end_offsets(a.endpoint(), [TOPIC])
    assert sum(a_ends.values()) == RECORDS
    on_a = _keys_by_partition(a.endpoint(), a_ends)
    # B's end offsets also count the copy's commit markers: B has caught up once its committed records
    # hold every key of A (read committed, as the published client configurations do).
    on_b: dict[int, list[str]] = {}

    def holds_a() -> bool:
        on_b.update(_keys_by_partition(b.endpoint(), end_offsets(b.endpoint(), [TOPIC])))
        return all(set(on_b.get(p, [])) >= set(keys) for p, keys in on_a.items())

    assert wait_until(holds_a, 120, interval=0.5), (
        f"B never caught up: A {a_ends}, B {end_offsets(b.endpoint(), [TOPIC])}"
    )
    duplicates = 0
    for p, keys_a in on_a.items():
        keys_b = on_b[p]
        assert list(dict.fromkeys(keys_b)) == keys_a, f"partition {p} differs"
        duplicates += len(keys_b) - len(keys_a)
    print(f"B holds all {RECORDS} records of A ({duplicates} copied twice after the crash)")
    # Exactly-once (KIP-618): the killed worker's open transactions were aborted and the tasks resumed
    # from the offsets committed with the last committed records: nothing is copied twice.
    if DELIVERY == Delivery.EXACTLY_ONCE:
        assert duplicates == 0, f"{duplicates} records of A are on B twice after a worker was killed"
        # what the drain reads: the source offsets committed with the copies, exactly A's ends (B's end
        # offsets are beyond them by the commit markers)
        copied = ConnectLink(connect.rest(), link.name, connect.name).copied()
        assert copied == a_ends, (copied, a_ends)
        assert sum(end_offsets(b.endpoint(), [TOPIC]).values()) > RECORDS

    # The killed worker comes back and rejoins; the connectors keep running.
    connect.start_worker(victim)
    assert connect.alive()
    for name in configs:
        connect.rest().wait_running(name, timeout=60)
    logs = "".join(connect.process(i).log_file.read_text(errors="replace") for i in range(2))
    for user in (REPLICATOR_USER, CONNECT_USER, CONNECT_REST_USER):
        assert connect.credentials.password(user) not in logs, f"the {user} password is in a worker log"


def test_rest_errors_name_the_problem(env: Env) -> None:
    connect = env.connect
    rest = connect.rest()
    with pytest.raises(ClusterError, match=f"127.0.0.1:{env.nothing_port} is unreachable") as info:
        ConnectRest(f"http://127.0.0.1:{env.nothing_port}", timeout=2).info()
    assert "start the Connect cluster" in str(info.value)

    with pytest.raises(AuthError, match="HTTP 401"):
        ConnectRest(connect.url).connectors()
    wrong = ConnectRest(connect.url, username=CONNECT_REST_USER, password="not-the-password")
    with pytest.raises(AuthError) as info:
        wrong.connectors()
    assert "not-the-password" not in str(info.value)

    link = env.topology.links[0]
    bogus = dict(
        connector_configs(env.topology, link, secrets_file=str(connect.secrets_file()))[f"{link.name}-heartbeat"]
    )
    bogus["tasks.max"] = "many"
    problems = rest.validate(bogus)
    assert problems and any(p.startswith("tasks.max: ") for p in problems), problems
    with pytest.raises(ClusterError, match="HTTP 400"):
        rest.put_config("bogus", bogus)
    assert "bogus" not in rest.connectors()

    rest.delete("never-created")
    rest.delete("never created ä?#")
    with pytest.raises(ConfigError, match="cannot be used"):
        rest.delete("a/b")
    assert rest.status("never-created") is None and rest.config("never-created") is None


def test_stop_resume_restart_delete_a_connector_with_an_unplanned_name(env: Env) -> None:
    rest = env.connect.rest()
    link = env.topology.links[0]
    config = connector_configs(env.topology, link, secrets_file=str(env.connect.secrets_file()))[
        f"{link.name}-heartbeat"
    ]
    # percent-encoded in every path; under the link's name, whose transactional ids (exactly-once workers:
    # every source task's producer is transactional) the replicator may use
    name = f"{link.name}-probe ä x?#"
    rest.put_config(name, config)
    # A follower worker's connector list follows the config topic, so it may lag the PUT briefly.
    assert wait_until(lambda: name in rest.connectors(), 30, interval=0.2), rest.connectors()
    assert rest.config(name)["connector.class"] == config["connector.class"]
    rest.wait_running(name, timeout=60)
    rest.stop(name)
    stopped = rest.wait_state(name, "STOPPED", timeout=60)
    assert stopped["tasks"] == []
    rest.resume(name)
    rest.wait_running(name, timeout=60)
    rest.restart(name, include_tasks=True, only_failed=False)
    rest.wait_running(name, timeout=60)
    rest.delete(name)
    assert wait_until(lambda: rest.status(name) is None, 30)
    rest.delete(name)
