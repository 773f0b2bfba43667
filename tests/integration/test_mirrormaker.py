"""Real MirrorMaker 2 between two real clusters: every message copied, group offsets translated."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from dr.kafka.client import Endpoint, cluster_metadata
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.runtime.cluster import LocalCluster
from dr.runtime.credentials import REPLICATOR_USER
from dr.runtime.mirrormaker import MirrorMaker, group_offsets_translated_within
from dr.runtime.process import wait_until
from tests.integration.helpers import consume_all, create_topic, produce
from tests.integration.secret_scan import files_holding, open_to_others, records, topics_holding


def test_mm2_copies_every_message_and_translates_group_offsets(
    cluster_a: LocalCluster, cluster_b: LocalCluster, mm2_ab: MirrorMaker
) -> None:
    topic = "mirrored"
    create_topic(cluster_a, topic, partitions=3)
    keys = [f"m{i}" for i in range(5000)]
    acked, errors = produce(cluster_a.endpoint(), topic, keys)
    assert not errors and len(acked) == len(keys)

    mm2_ab.wait_caught_up([topic], timeout=120)
    assert sorted(consume_all(cluster_b.endpoint(), topic, len(keys))) == sorted(keys)

    # A consumer group reads the topic on A and commits (a caught-up application, as at failover).
    consumer = Consumer(
        cluster_a.endpoint().config(
            **{"group.id": "orders-app", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    consumer.subscribe([topic])
    read = 0
    while read < len(keys):
        read += sum(1 for m in consumer.consume(500, timeout=1) if m.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()  # MM2 only syncs offsets of groups with no active member on the target
    on_a = committed_offsets(cluster_a.endpoint(), "orders-app")
    assert sum(on_a.values()) == len(keys)

    def translated() -> bool:
        on_b = committed_offsets(cluster_b.endpoint(), "orders-app")
        assert all(on_b[tp] <= on_a[tp] for tp in on_b), "a translated offset must never skip records"
        return on_b == on_a

    # the bound comes from the intervals this link runs with, not a round number (issue 25 §6)
    within = group_offsets_translated_within(mm2_ab.intervals)
    translated_now = wait_until(translated, within, interval=0.5)
    on_b = committed_offsets(cluster_b.endpoint(), "orders-app")  # read once: the message shows what was judged
    assert translated_now, f"group offsets not translated within {within:.0f}s: A={on_a}, B just after the wait={on_b}"
    assert end_offsets(cluster_a.endpoint(), [topic]) == end_offsets(cluster_b.endpoint(), [topic])


def test_mm2_keeps_the_replicators_password_out_of_its_config_topic_and_command_line(
    cluster_a: LocalCluster, cluster_b: LocalCluster, mm2_ab: MirrorMaker
) -> None:
    """Dedicated MirrorMaker 2 stores its connectors' configurations in ``mm2-configs.<source>.internal`` on
    the target: they hold the config provider's reference, never the password (issue 32)."""
    secret = {"replicator": cluster_a.credentials.password(REPLICATOR_USER)}
    assert topics_holding(cluster_b.endpoint(), secret) == {}
    assert topics_holding(cluster_a.endpoint(), secret) == {}
    stored = records(cluster_b.endpoint(), [f"mm2-configs.{cluster_a.name}.internal"])
    configs = [blob for _topic, blob in stored if b"sasl.jaas.config" in blob]
    assert configs, "MirrorMaker 2 wrote its connectors' configurations to its config topic"
    reference = f"${{file:{mm2_ab.secrets_file()}:password}}".encode()
    assert all(reference in blob for blob in configs), "each holds the reference the provider resolves"
    pid = mm2_ab.process.pid
    assert pid is not None and secret["replicator"].encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert files_holding(mm2_ab.dir, secret) == {mm2_ab.secrets_file(): ["replicator"]}
    assert open_to_others(mm2_ab.dir, [mm2_ab.secrets_file()]) == []


def _refused_with(future: Future[object]) -> int:
    """The error code an admin future failed with (it must fail)."""
    with pytest.raises(KafkaException) as info:
        future.result(timeout=30)
    return int(info.value.args[0].code())


def test_the_replicator_grows_partitions_but_cannot_delete_configure_brokers_or_move_source_offsets(
    cluster_a: LocalCluster, cluster_b: LocalCluster, mm2_ab: MirrorMaker
) -> None:
    """Issue 32: the replicator holds what MirrorMaker 2 needs (it adds the partitions a source topic
    gained) and no more — on the target no topic or group deletion and no broker configuration, on the
    source no offset commit for an application's group."""
    topic = "grown"
    create_topic(cluster_a, topic, partitions=1)
    acked, errors = produce(cluster_a.endpoint(), topic, [f"g{i}" for i in range(100)])
    assert not errors and len(acked) == 100
    mm2_ab.wait_caught_up([topic], timeout=120)
    admin_a = AdminClient(cluster_a.endpoint().config())
    admin_a.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)

    def partitions_on_b() -> int:
        return len(cluster_metadata(cluster_b.endpoint(), 10.0).topics[topic].partitions)

    assert wait_until(lambda: partitions_on_b() == 3, 90, interval=1.0), f"B has {partitions_on_b()} partitions"

    password = cluster_a.credentials.password(REPLICATOR_USER)
    as_replicator_b = AdminClient(Endpoint(cluster_b.bootstrap, REPLICATOR_USER, password).config())
    as_replicator_a = AdminClient(Endpoint(cluster_a.bootstrap, REPLICATOR_USER, password).config())
    assert _refused_with(as_replicator_b.delete_topics([topic])[topic]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    group = "billing-x"
    consumer = Consumer(cluster_b.endpoint().config(**{"group.id": group, "enable.auto.commit": False}))
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    assert _refused_with(as_replicator_b.delete_consumer_groups([group])[group]) == (
        KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    broker = str(next(iter(cluster_metadata(cluster_b.endpoint(), 10.0).brokers)))
    broker_config = ConfigResource(
        ResourceType.BROKER,
        broker,
        incremental_configs=[ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)],
    )
    (future,) = as_replicator_b.incremental_alter_configs([broker_config]).values()
    assert _refused_with(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    moved = ConsumerGroupTopicPartitions("orders-app", [TopicPartition("mirrored", 0, 0)])
    (future,) = as_replicator_a.alter_consumer_group_offsets([moved]).values()
    try:  # the broker answers per partition: librdkafka raises or hands the error on each one
        codes = {tp.error.code() if tp.error else None for tp in future.result(timeout=30).topic_partitions}
    except KafkaException as exc:
        codes = {exc.args[0].code()}
    assert codes == {KafkaError.GROUP_AUTHORIZATION_FAILED}, codes
    assert committed_offsets(cluster_a.endpoint(), "orders-app")[("mirrored", 0)] > 0, "the replicator moved it"
