"""A link on a real Kafka Connect cluster, from the stack: provision, replicate, lose a worker, refresh,
fail over A→B→C on the same Connect cluster, and bad input that leaves no half-made link; the Connect REST
client's errors and the lifecycle of a connector under a name no plan made.

One estate for the module (``Pulumi.local-connect.yaml`` on this suite's ports: A, B, C with one
broker each, a Connect cluster of two workers homed on B), driven through ``pulumi up`` (the
Automation API) and ``drctl`` as an operator would. The tests run in order.
"""

from __future__ import annotations

import json
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.groups import translated_within
from dr.kafka.connect_rest import ConnectRest
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.kafka.records import read_to_end
from dr.runtime.connect import CONNECT_REST_USER, CONNECT_USER
from dr.runtime.connect_link import connector_names, needs_tasks, runs
from dr.runtime.credentials import REPLICATOR_USER
from dr.runtime.process import wait_until
from dr.topology import Delivery, load_stack_file
from tests.integration.helpers import (
    StackEnv,
    committed_counts,
    drctl,
    link_copied,
    produce,
    provisioned,
    write_local_stack,
)
from tests.integration.ports import windows

STACK = "connectlink"


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[int, ...]]:
    """Free windows below the ephemeral range: A, B, C and the Connect workers' REST ports."""
    with windows(4) as starts:
        yield starts


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, ports: tuple[int, ...]) -> Iterator[StackEnv]:
    d = tmp_path_factory.mktemp("connect-link")
    write_local_stack(
        d, STACK, ports[:3], one_broker=("A", "B", "C"), example="Pulumi.local-connect.yaml", connect_ports=ports[3:]
    )
    e = StackEnv(d, STACK)
    with provisioned(e, up=lambda: EstateStack(StackRef.resolve(STACK)).up(load_stack_file(e.stack_file))):
        yield e


def estate(env: StackEnv) -> Estate:
    return env.estate()


def app(e: Estate, cluster: str, name: str) -> Any:
    return e.endpoint(cluster).with_user(name, e.app_password(name))


def caught_up(e: Estate, source: str, target: str, topics: list[str], timeout: float = 120) -> bool:
    """The target holds what the source holds now (the failover's own wait; it raises on timeout)."""
    return link_copied(e, f"{source}-to-{target}", topics, timeout)


ACKED: list[str] = []


def read_and_commit(conf: dict[str, Any], topic: str, at_least: int, timeout: float = 60) -> list[str]:
    """Read ``at_least`` records of ``topic`` as a consumer group member, then commit its positions."""
    consumer = Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(keys) < at_least and time.monotonic() < deadline:
            keys += [m.key().decode() for m in consumer.consume(500, timeout=0.5) if m.error() is None]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return keys


def test_up_runs_the_link_as_three_connectors_with_their_tasks(env: StackEnv) -> None:
    e = estate(env)
    connect = e.connect("mm2")
    assert connect.alive() and len(connect.alive_workers()) == 2
    res = drctl(env, "status", "--stack", STACK, "--json")
    st = json.loads(res.stdout)
    (link,) = st["links"]
    assert link["connect"] == "mm2" and link["process"] == "running", link
    assert set(link["connectors"]) == set(connector_names("A-to-B"))
    for name, c in link["connectors"].items():
        assert runs(name, c), (name, c)
    assert link["connectors"]["A-to-B-source"]["tasks"], "the source connector has no task"
    text = drctl(env, "status", "--stack", STACK).stdout
    assert "connector A-to-B-source" in text and "on Connect cluster mm2" in text
    rest = connect.rest()
    assert rest.info()["version"] == "4.3.1"
    # the workers resolve the replicator's password from a file only their user reads; the connector
    # configs stored by Connect hold the reference, no password
    secrets = connect.secrets_file()
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert stat.S_IMODE(secrets.parent.stat().st_mode) == 0o700
    assert "${file:" in (rest.config("A-to-B-source") or {})["source.cluster.sasl.jaas.config"]
    passwords = {v for v in e.credentials._load().values()}
    for name in connector_names("A-to-B"):
        stored = json.dumps(rest.config(name))
        assert not any(pw in stored for pw in passwords), f"{name} stores a password"


def _heartbeat_config(rest: ConnectRest) -> dict[str, str]:
    """The link's heartbeat connector's stored config without its name (to create another from it)."""
    config = dict(rest.config("A-to-B-heartbeat") or {})
    config.pop("name", None)
    assert config, "the link has no heartbeat connector"
    return config


def test_rest_errors_name_the_problem(env: StackEnv, ports: tuple[int, ...]) -> None:
    connect = estate(env).connect("mm2")
    rest = connect.rest()
    nothing = ports[3] + 99  # in this suite's window, never listened on
    with pytest.raises(ClusterError, match=f"127.0.0.1:{nothing} is unreachable") as info:
        ConnectRest(f"http://127.0.0.1:{nothing}", timeout=2).info()
    assert "start the Connect cluster" in str(info.value)

    with pytest.raises(AuthError, match="HTTP 401"):
        ConnectRest(connect.url).connectors()
    wrong = ConnectRest(connect.url, username=CONNECT_REST_USER, password="not-the-password")
    with pytest.raises(AuthError) as auth:
        wrong.connectors()
    assert "not-the-password" not in str(auth.value)

    bogus = {**_heartbeat_config(rest), "tasks.max": "many"}
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


def test_stop_resume_restart_delete_a_connector_with_an_unplanned_name(env: StackEnv) -> None:
    rest = estate(env).connect("mm2").rest()
    config = _heartbeat_config(rest)
    # percent-encoded in every path; under the link's name, whose transactional ids (exactly-once workers:
    # every source task's producer is transactional) the replicator may use
    name = "A-to-B-probe ä x?#"
    rest.put_config(name, config)
    try:
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
    finally:
        rest.delete(name)
    assert wait_until(lambda: rest.status(name) is None, 30)
    rest.delete(name)


def test_refresh_sees_a_connector_deleted_or_stopped_behind_pulumis_back(env: StackEnv) -> None:
    e = estate(env)
    rest = e.connect("mm2").rest()
    rest.delete("A-to-B-heartbeat")
    rest.stop("A-to-B-checkpoint")
    rest.wait_state("A-to-B-checkpoint", "STOPPED", timeout=30)
    res = drctl(env, "estate", "preview", "--stack", STACK, "--refresh", "--expect-no-changes")
    out = res.stdout + res.stderr
    assert res.returncode != 0, "preview --refresh did not notice the deleted and the stopped connector"
    assert "A-to-B-heartbeat" in out and "A-to-B-checkpoint" in out, out[-3000:]
    up = drctl(env, "estate", "up", "--stack", STACK, "--refresh")
    assert up.returncode == 0, up.stderr[-3000:]
    assert rest.wait_running("A-to-B-heartbeat", timeout=60)
    assert rest.wait_state("A-to-B-checkpoint", "RUNNING", timeout=60)
    clean = drctl(env, "estate", "preview", "--stack", STACK, "--refresh", "--expect-no-changes")
    assert clean.returncode == 0, clean.stdout[-2000:] + clean.stderr[-2000:]


def _recreate_topic(endpoint: Any, topic: str) -> None:
    """Delete ``topic`` if it exists and create it again, empty (a rebuilt source's topic)."""
    from confluent_kafka.admin import NewTopic

    from dr.kafka.client import admin_client

    admin = admin_client(endpoint)
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic])[topic].result(30)
        assert wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, 0.5), f"{topic} deleted"
    assert wait_until(lambda: _created(admin, NewTopic(topic, 1, 1)), 30, 0.5), f"{topic} created"


def _created(admin: Any, new: Any) -> bool:
    try:
        admin.create_topics([new])[new.topic].result(30)
    except Exception as exc:  # "marked for deletion" until the deletion has gone through
        return "already exists" in str(exc)
    return True


def _keys_on(endpoint: Any, topic: str) -> list[str]:
    """Every committed key of ``topic`` below its end offsets now (what was read within 30 s). Done once the
    reader's position reaches each end: the copy is exactly-once, so its end offsets count commit markers,
    which no record carries (counting records up to the end offset waited out the whole 30 s)."""
    return [m.key().decode() for m in read_to_end(endpoint, topic, timeout=30, strict=False)]


def test_a_connector_created_under_an_old_name_starts_from_the_beginning_of_a_rebuilt_source(env: StackEnv) -> None:
    """A link recreated under its old name towards a rebuilt source copies the new records from offset 0: the
    offsets its deleted namesake stored in the Connect cluster are forgotten (KIP-875), not reused."""
    from stacks.connect import _create_connector, workers_props

    e = estate(env)
    rest = e.connect("mm2").rest()
    # `.internal` topics are excluded by MirrorMaker 2's default topics.exclude, so the link A-to-B leaves it alone;
    # the name stays under the link's own transactional ids (the workers run exactly-once source support)
    topic, name = "reborn.internal", "A-to-B-reborn-source"
    config = dict(rest.config("A-to-B-source") or {})
    config.update({"topics": r"reborn\.internal", "topics.exclude": "^$", "tasks.max": "1", "name": name})
    props = {
        "local": True,
        "connect": "mm2",
        "workers_props": workers_props(e.topology, e.topology.connect_cluster("mm2"), e.state),
        "connector": name,
        "config": config,
    }
    a, b = e.endpoint("A"), e.endpoint("B")
    try:
        _recreate_topic(a, topic)
        first, _ = produce(a, topic, [f"old-{i}" for i in range(20)])
        _create_connector(props)
        assert wait_until(lambda: set(first) <= set(_keys_on(b, topic)), 90, 0.5), "the first records on B"
        rest.stop(name)  # commits the source offsets
        rest.wait_state(name, "STOPPED", timeout=30)
        stored = rest.offsets(name)
        assert any(o.get("offset", {}).get("offset", -1) >= 19 for o in stored), stored
        rest.delete(name)
        _recreate_topic(a, topic)  # the source is rebuilt: its offsets start at 0 again
        second, _ = produce(a, topic, [f"new-{i}" for i in range(20)])
        assert len(second) == 20
        _create_connector(props)
        assert wait_until(lambda: set(second) <= set(_keys_on(b, topic)), 90, 0.5), "the rebuilt source's records on B"
    finally:
        rest.delete(name)
        for endpoint in (a, b):
            from dr.kafka.client import admin_client

            admin_client(endpoint).delete_topics([topic])


def test_planned_failover_moves_the_link_to_B_to_C_on_the_same_connect_cluster(env: StackEnv) -> None:
    e = estate(env)
    keys = [f"fo-{i}" for i in range(2000)]
    acked, _ = produce(app(e, "A", "orders-app"), "orders", keys)
    ACKED.extend(acked)
    read_on_a = read_and_commit(app(e, "A", "billing").config(**{"group.id": "billing"}), "orders", 1000)
    assert len(read_on_a) >= 1000
    # the checkpoint connector (tasks appear once the group exists) syncs the group's offsets to B
    within = translated_within(e.topology, "B")
    assert wait_until(lambda: bool(committed_offsets(e.endpoint("B"), "billing")), within, interval=1.0)
    res = drctl(env, "failover", "--stack", STACK, "--yes", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads(res.stdout)
    print(f"\nfailover on a Connect link: RTO {summary.get('rto_s')}s, A→B→C {summary.get('a_b_c_s')}s")
    assert summary["status"] == "completed" and summary["verdict"]["counts"]["missing"] == 0
    groups = {g["group"]: g for g in summary["consumer_groups"]}
    assert groups["billing"]["status"] in ("translated", "partial") and not groups["billing"]["would_skip"]
    translated = sum(committed_offsets(e.endpoint("B"), "billing").values())
    assert 0 < translated <= len(read_on_a), (translated, len(read_on_a))
    after = estate(env)
    assert [(lk.name, lk.connect) for lk in after.topology.links] == [("B-to-C", "mm2")]
    rest = after.connect("mm2").rest()
    assert not [n for n in rest.connectors() if n.startswith("A-to-B-")], "the old link's connectors remain"
    for name in connector_names("B-to-C"):
        status = rest.wait_state(name, "RUNNING", timeout=60)
        assert status["connector"]["state"] == "RUNNING" and (status["tasks"] or not needs_tasks(name))
    assert caught_up(after, "B", "C", ["orders"])
    # records, not offsets: both copies hold commit markers (exactly-once links)
    on_c = committed_counts(after.endpoint("C"), ["orders"])
    on_b = committed_counts(after.endpoint("B"), ["orders"])
    assert sum(on_c.values()) == sum(on_b.values()) >= len(ACKED)
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]
    st = json.loads(drctl(env, "status", "--stack", STACK, "--json").stdout)
    assert [(lk["name"], lk["process"]) for lk in st["links"]] == [("B-to-C", "running")]


def _keys_by_partition(endpoint: Any, topic: str) -> dict[int, list[str]]:
    """Every committed key of every partition of ``topic`` below its current end, in offset order (read
    committed: a transactional copy's commit markers take offsets but are no records)."""
    ends = {tp: n for tp, n in end_offsets(endpoint, [topic]).items()}
    out: dict[int, list[str]] = {p: [] for (_, p) in ends}
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


def test_losing_a_worker_mid_traffic_on_B_to_C_moves_its_tasks_and_loses_nothing(env: StackEnv) -> None:
    e = estate(env)
    connect = e.connect("mm2")
    rest = connect.rest()
    held = [t["worker_id"] for t in (rest.status("B-to-C-source") or {}).get("tasks", [])]
    # the worker killed is one that runs a source task: its uncommitted copies are what could repeat
    victim = next(i for i in range(2) if connect.worker_id(i) in held)
    survivor = 1 - victim
    dead_id, survivor_id = connect.worker_id(victim), connect.worker_id(survivor)
    keys = [f"wl-{i}" for i in range(20000)]
    acked: list[str] = []

    def write() -> None:
        for n in range(0, len(keys), 2000):
            ok, _ = produce(app(e, "B", "orders-app"), "orders", keys[n : n + 2000])
            acked.extend(ok)

    writer = threading.Thread(target=write)
    writer.start()
    # mid-traffic: a third of the records acknowledged by B, the rest still to come
    assert wait_until(lambda: len(acked) >= len(keys) // 3, 120, interval=0.05), len(acked)
    connect.kill_worker(victim)
    assert connect.alive_workers() == [survivor]
    t0 = time.monotonic()
    writer.join(timeout=300)
    ACKED.extend(acked)
    assert len(acked) == len(keys)
    rest = connect.rest()

    def moved() -> bool:
        for name in connector_names("B-to-C"):
            status = rest.status(name)
            if (
                not status
                or (needs_tasks(name) and not status["tasks"])
                or status["connector"]["worker_id"] != survivor_id
                or any(t["state"] != "RUNNING" or t["worker_id"] != survivor_id for t in status["tasks"])
            ):
                return False
        return True

    assert wait_until(moved, 120, interval=1.0), {n: rest.status(n) for n in connector_names("B-to-C")}
    print(f"\ntasks moved to the surviving worker {time.monotonic() - t0:.1f}s after the kill")
    assert dead_id not in str({n: rest.status(n) for n in connector_names("B-to-C")})
    assert caught_up(e, "B", "C", ["orders", "payments"])
    from dr.failover.act.integrity import verify

    verdict = verify(
        source=e.endpoint("B"),
        target=e.endpoint("C"),
        out_dir=Path(env["KDR_STATE_DIR"]) / "wl",
        topics=["orders", "payments"],
        cutoff_ms=None,
    )
    # B-to-C declares no delivery: exactly-once by default, though its workers are homed on B and it
    # writes to C. Its tasks resume from the positions committed with their last transaction on C, so
    # nothing is copied twice.
    counts = verdict.counts
    print(f"after the worker loss: {counts['duplicated']} records copied twice, {counts['missing']} missing")
    (link,) = e.topology.links
    assert link.name == "B-to-C" and e.topology.delivery_of(link) == Delivery.EXACTLY_ONCE
    assert (counts["duplicated"], counts["missing"], counts["corrupted"], counts["unexpected"]) == (0, 0, 0, 0), counts
    # and each partition of C holds B's committed records in B's order, each once
    on_b, on_c = _keys_by_partition(e.endpoint("B"), "orders"), _keys_by_partition(e.endpoint("C"), "orders")
    for p, keys_b in on_b.items():
        assert on_c.get(p) == keys_b, f"partition {p} of orders differs on C"
    # the killed worker comes back and rejoins; the connectors keep running
    connect.start_worker(victim)
    assert sorted(connect.alive_workers()) == [0, 1]
    rest = connect.rest()
    for name in connector_names("B-to-C"):
        rest.wait_state(name, "RUNNING", timeout=60)
    logs = "".join(connect.process(i).log_file.read_text(errors="replace") for i in range(2))
    for user in {REPLICATOR_USER, CONNECT_USER, CONNECT_REST_USER, *e.credentials._load()}:
        assert connect.credentials.password(user) not in logs, f"the {user} password is in a Connect worker log"


def test_a_rejected_connector_or_an_unreachable_connect_leaves_nothing(env: StackEnv, ports: tuple[int, ...]) -> None:
    from stacks.connect import _create_connector, workers_props

    e = estate(env)
    cc = e.topology.connect_cluster("mm2")
    props = {
        "local": True,
        "connect": "mm2",
        "workers_props": workers_props(e.topology, cc, e.state),
        "connector": "bad-source",
        "config": {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "tasks.max": "not-a-number",
            "source.cluster.alias": "B",
            "target.cluster.alias": "C",
        },
    }
    with pytest.raises(RuntimeError, match="rejected by Kafka Connect's validation"):
        _create_connector(props)
    assert "bad-source" not in e.connect("mm2").rest().connectors()
    nothing = ports[3] + 99  # in this suite's window, never listened on
    dead = {**props, "local": False, "url": f"http://127.0.0.1:{nothing}", "config": {"connector.class": "x"}}
    with pytest.raises(ClusterError, match=f"127.0.0.1:{nothing} is unreachable"):
        _create_connector(dead)
