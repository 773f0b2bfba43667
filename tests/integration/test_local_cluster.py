"""Real KRaft clusters: durability under broker loss, restart, authentication and ACLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from dr.base.errors import AuthError
from dr.kafka.client import Endpoint, probe
from dr.kafka.offsets import OffsetReader, committed_offsets_of, end_offsets, end_offsets_together
from dr.runtime.cluster import LocalCluster
from dr.runtime.process import wait_until
from tests.integration.helpers import _poll_into, consume_all, create_topic, produce


def isr_sizes(cluster: LocalCluster, topic: str) -> list[int]:
    """ISR size of every partition of ``topic``."""
    md = AdminClient(cluster.endpoint().config()).list_topics(topic, timeout=10)
    return [len(p.isrs) for p in md.topics[topic].partitions.values()]


def test_three_brokers_min_insync_two_survive_one_loss_refuse_after_two(cluster3: LocalCluster) -> None:
    topic = "durable"
    create_topic(cluster3, topic, partitions=3, rf=3, config={"min.insync.replicas": "2"})
    admin = cluster3.endpoint()
    acked_all: list[str] = []

    acked, errors = produce(admin, topic, [f"a{i}" for i in range(2000)])
    assert errors == [] and len(acked) == 2000
    acked_all += acked

    cluster3.kill_broker(3)
    assert wait_until(lambda: max(isr_sizes(cluster3, topic)) == 2, 60), "ISR never shrank to 2 after one kill"
    acked, errors = produce(admin, topic, [f"b{i}" for i in range(2000)])
    assert errors == [], f"writes must continue with one broker down: {errors[:3]}"
    acked_all += acked

    cluster3.kill_broker(2)
    assert wait_until(lambda: max(isr_sizes(cluster3, topic)) == 1, 60), "ISR never shrank to 1 after two kills"
    acked, errors = produce(admin, topic, [f"c{i}" for i in range(50)], retries=0, **{"message.timeout.ms": 20000})
    assert acked == [], "acks=all must be refused below min.insync.replicas"
    codes = {e.code() for e in errors}
    assert codes <= {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}, errors[:3]
    assert "NOT_ENOUGH_REPLICAS" in errors[0].name()

    cluster3.start_broker(2)
    cluster3.start_broker(3)
    keys = consume_all(admin, topic, len(acked_all))
    assert set(acked_all) <= set(keys), f"lost acknowledged records: {sorted(set(acked_all) - set(keys))[:5]}"


def test_restart_keeps_every_message(cluster_a: LocalCluster) -> None:
    topic = "restart-check"
    create_topic(cluster_a, topic, partitions=2)
    acked, errors = produce(cluster_a.endpoint(), topic, [f"k{i}" for i in range(5000)])
    assert not errors and len(acked) == 5000
    seconds = cluster_a.restart()
    assert cluster_a.state() == "running" and seconds > 0
    keys = consume_all(cluster_a.endpoint(), topic, 5000)
    assert sorted(keys) == sorted(acked)


def test_unauthenticated_and_wrong_password_are_refused(cluster_a: LocalCluster) -> None:
    assert probe(cluster_a.endpoint()) == 1
    no_auth = AdminClient({"bootstrap.servers": cluster_a.bootstrap, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        no_auth.list_topics(timeout=5)

    wrong = cluster_a.endpoint().with_user("admin", "not-the-password")
    with pytest.raises(AuthError, match="refused user 'admin'") as info:
        probe(wrong)
    assert "not-the-password" not in str(info.value)

    with pytest.raises(AuthError, match="mallory"):
        probe(cluster_a.endpoint().with_user("mallory", "whatever"))


def test_authenticated_user_without_acl_cannot_write(cluster_a: LocalCluster) -> None:
    from dr.kafka.client import upsert_scram_users

    create_topic(cluster_a, "acl-check", partitions=1)
    upsert_scram_users(cluster_a.endpoint(), {"no-acl-app": "pw-no-acl-app-123"})
    app = cluster_a.endpoint().with_user("no-acl-app", "pw-no-acl-app-123")
    assert wait_until(lambda: _can_connect(app), 30), "SCRAM user never became usable"
    acked, errors = produce(app, "acl-check", ["x"], retries=0, **{"message.timeout.ms": 10000})
    assert acked == [] and errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _can_connect(endpoint: Endpoint) -> bool:
    try:
        AdminClient(endpoint.config()).list_topics(timeout=5)
        return True
    except KafkaException:
        return False


def test_no_jvm_left_after_stop(estate_dir, port_window: int) -> None:  # noqa: ANN001
    from dr.runtime.cluster import ClusterSpec
    from dr.runtime.process import pid_alive

    cluster = LocalCluster(ClusterSpec("STOPME", brokers=1, base_port=port_window), estate_dir)
    cluster.start()
    pids = list(cluster.pids().values())
    assert pids and all(pid_alive(p) for p in pids)
    cluster.destroy()
    assert not any(pid_alive(p) for p in pids)
    assert cluster.state() == "absent"


def test_port_in_use_is_named(estate_dir, port_window: int) -> None:  # noqa: ANN001
    import socket

    from dr.base.errors import PortInUse
    from dr.runtime.cluster import ClusterSpec

    with socket.socket() as s:
        # as a server binds (the brokers too): a connection of the window's previous user may still be in
        # TIME_WAIT on this port, which refuses a plain bind (seen once in a full run: errno 98)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port_window))
        s.listen()
        cluster = LocalCluster(ClusterSpec("BUSY", brokers=1, base_port=port_window), estate_dir)
        with pytest.raises(PortInUse, match=str(port_window)):
            cluster.start()
    cluster.destroy()


def test_consumer_offsets_survive_in_partition(cluster_a: LocalCluster) -> None:
    """A committed group offset is readable back (the basis of MM2's offset sync)."""
    create_topic(cluster_a, "commit-check", partitions=1)
    produce(cluster_a.endpoint(), "commit-check", [f"k{i}" for i in range(10)])
    consumer = Consumer(
        cluster_a.endpoint().config(
            **{"group.id": "committer", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    consumer.subscribe(["commit-check"])
    got = []
    wait_until(lambda: _poll_into(consumer, got) >= 10, 30, interval=0)
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("commit-check", 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 10


def test_an_offset_reader_reads_what_the_one_shot_reads_do_on_one_client(
    cluster_a: LocalCluster, cluster_b: LocalCluster
) -> None:
    """The drain's reader: the same end and committed offsets as end_offsets/committed_offsets_of,
    a later read sees records produced after the reader was made, two clusters read at once."""
    create_topic(cluster_a, "reader-a", partitions=3)
    create_topic(cluster_b, "reader-b", partitions=2)
    a, b = OffsetReader(cluster_a.endpoint(), ["reader-a", "absent"]), OffsetReader(cluster_b.endpoint(), ["reader-b"])
    assert a.end_offsets() == {("reader-a", p): 0 for p in range(3)}, "a missing topic is left out"
    produce(cluster_a.endpoint(), "reader-a", [f"k{i}" for i in range(30)])
    produce(cluster_b.endpoint(), "reader-b", [f"k{i}" for i in range(7)])
    ends_a, ends_b = end_offsets_together([a, b])
    assert ends_a == end_offsets(cluster_a.endpoint(), ["reader-a"]) and sum(ends_a.values()) == 30
    assert ends_b == end_offsets(cluster_b.endpoint(), ["reader-b"]) and sum(ends_b.values()) == 7
    consumer = Consumer(
        cluster_a.endpoint().config(
            **{"group.id": "reader-g", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    consumer.subscribe(["reader-a"])
    got: list[str] = []
    wait_until(lambda: _poll_into(consumer, got) >= 30, 30, interval=0)
    consumer.commit(asynchronous=False)
    consumer.close()
    read = a.committed(["reader-g", "nobody"])
    assert read == committed_offsets_of(cluster_a.endpoint(), ["reader-g", "nobody"])
    assert sum(read["reader-g"].values()) == 30 and read["nobody"] == {}


def test_every_broker_maps_the_class_data_archive_that_setup_built(cluster_a: LocalCluster) -> None:
    """The Kafka class-data archive is only a start-time saving and fails silently by design, so this is
    where a broken one shows: set-up built it, and each running node of the cluster has it mapped."""
    from dr.base.toolchain import toolchain
    from dr.runtime.class_archive import archive_path, usable

    path = archive_path(toolchain().kafka_lib)
    assert usable(path), f"make setup built no usable Kafka class-data archive at {path}"
    pids = cluster_a.pids()
    assert pids, "the cluster runs no process"
    for node, pid in pids.items():
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert str(path) in maps, f"node {node} (pid {pid}) does not map {path}"
