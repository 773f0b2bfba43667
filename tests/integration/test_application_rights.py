"""An application's published rights used to the full, on real clusters (issue 32's Critical finding).

The finding: an application with ``consumes_prefix: "m"`` read MirrorMaker 2's connector configuration
(``mm2-configs.<source>.internal``, the replicator's password in it) on a passive cluster, wrote
``orders`` there as the replicator and forged an offset sync that moved billing's committed offset from
109 to 1,000,109 — and ``drctl status`` said "problems: none".

Here, with ONLY each application's published client file (``<state>/clients/<app>.json``; the only thing
taken from elsewhere is the other cluster's bootstrap address), every application of an accepted stack
(one with a well-formed prefix) tries the whole chain on every cluster of the estate: list the topics,
read every topic there (internal ones included), write every topic there (the passive's mirrored topics
and the offset-syncs topic included), commit another application's group, describe and alter
configurations, create and delete topics and groups. Each right the program computes for it
(:func:`dr.topology.access.acl_rules`) is used and works; each right is within the application's role;
every other attempt is refused by the broker; and no password of the estate is in anything it read.

The short prefix itself is refused before anything runs (exit 2 naming the field), and a committed
offset on the passive cluster that no translation explains — forged here as the admin — is a problem
``drctl status`` reports (exit 4, naming the group, the partition and both offsets).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from dr.estate.estate import Estate
from dr.failover.act.clients import client_files
from dr.kafka.checkpoints import translated_offsets
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.runtime.process import wait_until
from dr.topology import Role, load_stack_file
from dr.topology.access import acl_rules
from tests.integration.helpers import (
    StackEnv,
    committed_counts,
    drctl,
    link_copied,
    produce,
    provisioned,
    teardown_stack,
    write_local_stack,
)
from tests.integration.ports import windows

pytestmark = pytest.mark.integration

STACK = "rights"
PREFIX = "metrics."
DECLARED = ["orders", "payments", "metrics.cpu", "metrics.mem"]
REFUSED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
}


def _stack_doc(prefix: str) -> dict[str, Any]:
    """The local stack's applications and topics, plus ``metrics`` owning the ``prefix`` family."""
    return {
        "topics": [
            {"name": t, "partitions": 2, "replication_factor": 1, "min_insync_replicas": 1} for t in DECLARED[2:]
        ],
        "app": {
            "name": "metrics",
            "produces_prefix": prefix,
            "consumes_prefix": prefix,
            "consumer_group": "metrics",
        },
    }


def _write_stack(root: Path, stack: str, ports: tuple[int, int, int], prefix: str) -> Path:
    path = write_local_stack(root, stack, ports)
    doc = yaml.safe_load(path.read_text())
    extra = _stack_doc(prefix)
    doc["config"]["kafka-dr:topics"] += extra["topics"]
    doc["config"]["kafka-dr:principals"]["applications"].append(extra["app"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- the short prefix: refused before anything runs ------------------------------------------------------


def test_a_prefix_that_covers_internal_topics_is_refused_naming_the_field(tmp_path: Path) -> None:
    """``consumes_prefix: "m"`` (a declared topic starts with it, as in the finding) covers MirrorMaker 2's
    ``mm2-…`` topics: `drctl status` and `drctl estate up` refuse the stack with exit 2, naming the field,
    and start nothing."""
    with windows(3) as ports:
        path = _write_stack(tmp_path, "short", ports, "m")
        env = StackEnv(tmp_path, "short")
        status = drctl(env, "status", "--stack", "short", timeout=120)
        assert status.returncode == 2, status.stdout[-2000:] + status.stderr[-2000:]
        assert "consumes_prefix" in status.stderr and "'m'" in status.stderr, status.stderr[-2000:]
        up = drctl(env, "estate", "up", "--stack", "short", timeout=600)
        if up.returncode != 2:  # it ran: take down what it started
            teardown_stack("short", load_stack_file(path), env.state)
        assert up.returncode == 2, up.stdout[-2000:] + up.stderr[-2000:]
        assert "consumes_prefix" in up.stderr, up.stderr[-2000:]
        assert not (env.state / "clients").exists(), "nothing was provisioned"


# -- the accepted stack's rights, used to the full -------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]) -> Iterator[StackEnv]:
    """The local stack (A and B with one broker, link A-to-B) plus ``metrics`` owning ``metrics.*``,
    provisioned by `drctl estate up`; records in every declared topic, billing's commit on A translated
    onto B by the link; destroyed at the end."""
    root = tmp_path_factory.mktemp("app-rights")
    _write_stack(root, STACK, stack_ports, PREFIX)
    with provisioned(StackEnv(root, STACK)) as e:
        _fill(e.estate())
        yield e


def _fill(estate: Estate) -> None:
    a, b = estate.endpoint("A"), estate.endpoint("B")
    for topic, who in (("orders", "orders-app"), ("metrics.cpu", "metrics"), ("metrics.mem", "metrics")):
        acked, errors = produce(a.with_user(who, estate.app_password(who)), topic, [f"{topic}-{i}" for i in range(40)])
        assert len(acked) == 40, errors[:3]
    acked, errors = produce(a, "payments", [f"payments-{i}" for i in range(40)])  # nobody produces payments
    assert len(acked) == 40, errors[:3]
    # billing has read half of each partition of orders on A; the link translates that onto B
    half = {tp: n // 2 for tp, n in end_offsets(a, ["orders"]).items()}
    _member_commit(a.with_user("billing", estate.app_password("billing")), "billing", "orders", half)
    assert link_copied(estate, "A-to-B", DECLARED, 120)

    # MirrorMaker 2 translates conservatively (to an offset sync at or before the commit, and not every
    # partition at once): the group's offsets on B are its checkpoints, not the source's numbers
    def synced() -> bool:
        got = committed_offsets(b, "billing")
        return bool(got) and got == translated_offsets(b, "A").get("billing")

    assert wait_until(synced, 120, interval=1), (committed_offsets(b, "billing"), translated_offsets(b, "A"))


def _member_commit(endpoint: Any, group: str, topic: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` as a member of ``group`` (a consumer that joined it, as applications do: MirrorMaker
    2 lists consumer groups, which a commit through the admin API alone does not make)."""
    consumer = Consumer(endpoint.config(**{"group.id": group, "enable.auto.commit": False}))
    assigned: list[TopicPartition] = []
    consumer.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))
    try:
        assert wait_until(lambda: bool(consumer.poll(0.2) or True) and bool(assigned), 60, interval=0)
        consumer.commit(offsets=[TopicPartition(t, p, n) for (t, p), n in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _commit(endpoint: Any, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as the admin (no member joins)."""
    admin = AdminClient(endpoint.config())
    tps = [TopicPartition(t, p, n) for (t, p), n in offsets.items()]
    for fut in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)]).values():
        fut.result(timeout=30)


@dataclass
class Attacker:
    """One application's published client file, pointed at one cluster (nothing else of the product)."""

    app: str
    cluster: str
    conf: dict[str, Any]
    read_bytes: list[bytes] = field(default_factory=list)

    @classmethod
    def of(cls, env: StackEnv, app: str, cluster: str, bootstrap: str) -> Attacker:
        _, json_path = client_files(env.state, app)
        conf = json.loads(json_path.read_text())
        assert conf["sasl.username"] == app and conf["sasl.password"], "the file carries the app's credentials"
        return cls(app, cluster, {**conf, "bootstrap.servers": bootstrap, "log_level": 0})

    def listed(self) -> set[str]:
        md = AdminClient(self.conf).list_topics(timeout=15)
        return {t for t, m in md.topics.items() if m.error is None}

    def read(self, partitions: dict[str, int], records: int, seconds: float = 20) -> KafkaError | int:
        """Fetch every record of these topics (name → partition count) from the beginning, without a group
        commit; the refusal, or how many records came within ``seconds`` (their bytes kept for the secret
        scan; it stops early once ``records`` came)."""
        consumer = Consumer({**self.conf, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        got = 0
        try:
            consumer.assign([TopicPartition(t, p, 0) for t, n in partitions.items() for p in range(n)])
            for _ in range(int(seconds * 2)):
                for msg in consumer.consume(500, timeout=0.5):
                    if (err := msg.error()) is not None:
                        # a refused group (none on a passive cluster) only stops commits: the fetch goes on
                        if err.code() in REFUSED - {KafkaError.GROUP_AUTHORIZATION_FAILED}:
                            return err
                        continue
                    got += 1
                    self.read_bytes += [msg.key() or b"", msg.value() or b""]
                    self.read_bytes += [v or b"" for _, v in msg.headers() or []]
                if records and got >= records:
                    break
        finally:
            consumer.close()
        return got

    def described(self, topic: str) -> KafkaError | None:
        """The topic's metadata as this application: the refusal, or None. Read and Write imply Describe,
        so a refused Describe means the topic can be neither read nor written."""
        md = AdminClient(self.conf).list_topics(topic=topic, timeout=15)
        return md.topics[topic].error

    def write(self, topic: str) -> KafkaError | None:
        """One record to partition 0 of ``topic``, acks=all: the refusal, or None when acknowledged."""
        result: list[KafkaError | None] = []
        producer = Producer({**self.conf, "acks": "all", "message.timeout.ms": 15000, "enable.idempotence": False})
        producer.produce(
            topic, key=f"{self.app}-probe", value=b"x", partition=0, on_delivery=lambda e, _m: result.append(e)
        )
        producer.flush(30)
        assert result, f"no delivery report for {topic}"
        return result[0]

    def commit(self, group: str, topic: str, partition: int, offset: int) -> KafkaError | None:
        """Commit ``offset`` for ``group`` as this application (an OffsetCommit without joining, as an offset
        sync does; a consumer's commit would wait for a coordinator forever once FindCoordinator is refused)."""
        tp = TopicPartition(topic, partition, offset)
        return self.admin("alter_consumer_group_offsets", [ConsumerGroupTopicPartitions(group, [tp])])

    def admin(self, call: str, *args: Any) -> KafkaError | None:
        """An admin API call as this application: the first refusal among its futures, or None."""
        client = AdminClient(self.conf)  # kept until its futures are done: they die with it
        futures = getattr(client, call)(*args, request_timeout=15)
        for fut in futures.values():
            try:
                result = fut.result(timeout=30)
            except KafkaException as exc:
                return exc.args[0]
            for tp in getattr(result, "topic_partitions", None) or []:
                if tp.error is not None:
                    return tp.error
        return None


def _secrets(estate: Estate) -> dict[str, str]:
    """Every password the estate generated (admin, replicator, applications), by user."""
    found = {u: estate.credentials.password(u) for u in estate.credentials.users()}
    for name in ("A", "B"):
        creds = estate.local_cluster(name).credentials
        found |= {f"{name}:{u}": creds.password(u) for u in creds.users()}
    return found


def _refused(result: KafkaError | int | None) -> bool:
    return isinstance(result, KafkaError) and result.code() in REFUSED


@dataclass(frozen=True)
class Rights:
    """What one application may do on one cluster, from the rules the program installs."""

    read: set[str]
    write: set[str]
    groups: set[str]


def _rights(estate: Estate, app: str, cluster: str, topics: set[str]) -> Rights:
    """The application's rights on ``cluster`` computed by :func:`acl_rules` (the code the Pulumi program
    uses), applied to the topics that exist there; and each checked to be within its role."""
    topology = estate.topology
    c = topology.cluster(cluster)
    application = next(a for a in topology.principals.applications if a.name == app)
    consumes, produces = set(topology.consumed_by(application)), set(topology.produced_by(application))
    read: set[str] = set()
    write: set[str] = set()
    groups: set[str] = set()
    for rule in acl_rules(topology, c):
        if rule.principal != app or getattr(rule, "permission", "Allow") != "Allow":
            continue
        where = f"{app} on {cluster} ({c.role}): {rule}"
        assert rule.resource_type in ("Topic", "Group"), f"beyond its role: {where}"
        if rule.resource_type == "Group":
            assert (rule.resource_name, rule.operation, rule.pattern) == (
                application.consumer_group,
                "Read",
                "Literal",
            ), where
            groups.add(rule.resource_name)
            continue
        covered = (
            {t for t in topics if t.startswith(rule.resource_name)}
            if rule.pattern == "Prefixed"
            else {rule.resource_name}
        )
        if rule.operation in ("Read", "Describe"):
            mine = consumes | produces if c.role is Role.ACTIVE else consumes
            assert covered <= mine, f"beyond its role, {sorted(covered - mine)}: {where}"
            if rule.operation == "Read":
                read |= covered
        elif rule.operation == "Write":
            assert c.role is Role.ACTIVE, f"an application writes on a {c.role} cluster: {where}"
            assert covered <= produces, f"beyond its role, {sorted(covered - produces)}: {where}"
            write |= covered
        else:
            raise AssertionError(f"beyond its role: {where}")
    return Rights(read & topics, write & topics, groups)


@pytest.mark.parametrize("app", ["orders-app", "billing", "metrics"])
def test_an_application_with_its_published_file_has_exactly_its_rights_on_every_cluster(
    env: StackEnv, app: str
) -> None:
    estate = env.estate()
    secrets = _secrets(estate)
    seen_internal: set[str] = set()
    for cluster in ("A", "B"):
        admin = AdminClient(estate.endpoint(cluster).config())
        md = admin.list_topics(timeout=15)
        topics = {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}
        ends = end_offsets(estate.endpoint(cluster), list(topics))
        rights = _rights(estate, app, cluster, set(topics))
        me = Attacker.of(env, app, cluster, estate.local_cluster(cluster).bootstrap)
        internal = set(topics) - set(DECLARED)
        seen_internal |= {f"{cluster}:{t}" for t in internal}

        # what it sees: its own topics, nothing else
        assert me.listed() <= rights.read | rights.write, f"{app} lists topics beyond its rights on {cluster}"

        # every topic it may read: all of its records; every other topic (internal ones included): its
        # metadata refused, and the fetch of all of them together yields nothing
        for topic in sorted(rights.read):
            # records, not offsets: on B, the copies of an exactly-once link sit between commit markers
            records = sum(committed_counts(estate.endpoint(cluster), [topic]).values())
            got = me.read({topic: topics[topic]}, records)
            assert isinstance(got, int) and got >= records, f"{app} could not read {topic} on {cluster}: {got}"
        others = {t: n for t, n in topics.items() if t not in rights.read}
        for topic in sorted(others):
            if topic not in rights.write:
                assert _refused(me.described(topic)), f"{app} may describe {topic} on {cluster}"
        got = me.read(others, 0, seconds=5)
        assert got == 0 or _refused(got), f"{app} read {got} records of {sorted(others)} on {cluster}"

        # every topic: write (the passive's mirrored topics, the link's internal topics included)
        for topic in sorted(topics):
            err = me.write(topic)
            if topic in rights.write:
                assert err is None, f"{app} could not write {topic} on {cluster}: {err}"
            else:
                assert _refused(err), f"{app} wrote {topic} on {cluster}: {err}"

        # its own group at its present offset (changing nothing), and every other application's group
        for other in ("orders-app", "billing", "metrics"):
            topic = sorted(rights.read)[0] if rights.read else "orders"
            now = committed_offsets(estate.endpoint(cluster), other).get((topic, 0), 0)
            err = me.commit(other, topic, 0, now)
            if other in rights.groups and topic in rights.read:
                assert err is None, f"{app} could not commit its group on {cluster}: {err}"
            else:
                assert _refused(err), f"{app} committed group {other} on {cluster}: {err}"

        # configurations, topics and groups of the cluster: none of its business
        broker = ConfigResource(ConfigResource.Type.BROKER, str(next(iter(md.brokers))))
        orders = ConfigResource(ConfigResource.Type.TOPIC, "orders")
        assert _refused(me.admin("describe_configs", [broker]))
        assert _refused(me.admin("describe_configs", [orders]))
        change = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        topic_change = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[change])
        assert _refused(me.admin("incremental_alter_configs", [topic_change]))
        assert _refused(me.admin("create_topics", [NewTopic(f"{app}-own-{uuid.uuid4().hex[:6]}", 1, 1)]))
        assert _refused(me.admin("delete_topics", ["orders"]))
        assert _refused(me.admin("delete_consumer_groups", ["billing" if app != "billing" else "orders-app"]))
        assert set(end_offsets(estate.endpoint(cluster), ["orders"])) == {tp for tp in ends if tp[0] == "orders"}

        # nothing it could read holds a password of the estate (the replicator's above all)
        blob = b"\x00".join(me.read_bytes)
        leaked = sorted(user for user, pw in secrets.items() if pw.encode() in blob)
        assert not leaked, f"{app} read the passwords of {leaked} on {cluster}"

    # the chain's targets existed, so reading and writing them was really tried
    for name in ("B:mm2-configs.A.internal", "B:A.checkpoints.internal", "A:mm2-offset-syncs.B.internal"):
        assert name in seen_internal, f"{name} not found: {sorted(seen_internal)}"
    assert {"A:__consumer_offsets", "B:__consumer_offsets", "B:heartbeats"} <= seen_internal


# -- status: a committed offset on the passive that no translation explains ------------------------------


def test_status_flags_a_forged_commit_on_the_passive_then_is_clean_once_restored(env: StackEnv) -> None:
    estate = env.estate()
    b = estate.endpoint("B")
    before = committed_offsets(b, "billing")
    translated = translated_offsets(b, "A")["billing"]
    ends = end_offsets(b, ["orders"])
    behind = [p for (t, p), n in sorted(translated.items()) if t == "orders" and n < ends[(t, p)]]
    assert behind, f"billing read only half: room ahead of its translation {translated}, ends {ends}"
    p1 = behind[0]
    p0 = next(p for (t, p) in sorted(before) if t == "orders" and p != p1)
    assert drctl(env, "status", "--stack", STACK).returncode == 0
    forged = {("orders", p0): ends[("orders", p0)] + 1_000_000, ("orders", p1): translated[("orders", p1)] + 1}
    _commit(b, "billing", forged)  # as the admin: the commit an application must not be able to make
    try:
        res = drctl(env, "status", "--stack", STACK)
        out = res.stdout + res.stderr
        assert res.returncode == 4, out[-3000:]
        assert (
            f"consumer group 'billing' on passive cluster B, orders:{p0}: committed offset "
            f"{forged[('orders', p0)]} is beyond the partition's end offset {ends[('orders', p0)]}"
        ) in out, out[-3000:]
        assert (
            f"consumer group 'billing' on passive cluster B, orders:{p1}: committed offset "
            f"{forged[('orders', p1)]} is ahead of the translation of its source commit ({translated[('orders', p1)]})"
        ) in out, out[-3000:]
    finally:
        _commit(b, "billing", {tp: before[tp] for tp in forged})
    res = drctl(env, "status", "--stack", STACK)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
