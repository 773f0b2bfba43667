"""Talking to a cluster with confluent-kafka: metadata, topics, offset bounds — fast failures, quiet logs."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from dr.base.errors import ClusterError
from dr.kafka import client as kafka_client
from dr.kafka.client import Endpoint
from dr.kafka.internal_topics import is_internal
from dr.kafka.offsets import list_offsets, partitions_of
from verification.sides import PartitionBounds, SideBounds

__all__ = [
    "cluster_metadata",
    "coordinates",
    "is_internal_topic",
    "kafka_bounds",
    "kafka_topics",
    "offset_ranges",
    "record_headers",
]

_ADMIN_TIMEOUT = 30.0


def is_internal_topic(name: str) -> bool:
    """Kafka, Connect and MirrorMaker 2 bookkeeping topics, never compared by default — the definition
    validation and the grants use (:func:`dr.kafka.internal_topics.is_internal`): a declared topic is never
    internal."""
    return is_internal(name)


def cluster_metadata(endpoint: Endpoint, timeout: float = _ADMIN_TIMEOUT) -> Any:
    """Topic metadata of a cluster, patiently (short attempts up to ``timeout``); a refused login
    fails at once as :class:`AuthError`."""
    return kafka_client.cluster_metadata(endpoint, timeout, attempt=2.0)


def kafka_topics(endpoint: Endpoint) -> dict[str, int]:
    """Every non-internal topic of a cluster with its partition count."""
    md = cluster_metadata(endpoint)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None and not is_internal_topic(name)}


def offset_ranges(
    admin: AdminClient, endpoint: Endpoint, tps: list[TopicPartition], timeout: float = _ADMIN_TIMEOUT
) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) → (earliest, end)`` of every partition in ``tps``. The end is the last stable
    offset: the records are read committed (:data:`verification.sources.DEFAULT_KAFKA_OPTIONS`), and a
    transaction still open is not decided yet (its records are in flight, like any not yet written)."""
    earliest = list_offsets(admin, endpoint, {tp: OffsetSpec.earliest() for tp in tps}, timeout)
    latest = list_offsets(admin, endpoint, {tp: OffsetSpec.latest() for tp in tps}, timeout, committed=True)
    return {k: (earliest[k].offset, latest[k].offset) for k in latest}


def kafka_bounds(endpoint: Endpoint, topics: list[str]) -> SideBounds:
    """Fix the offset range of every partition of ``topics`` now: ``[earliest, latest)``.

    Topics that do not exist on this cluster are left out of the result.
    """
    admin, md = kafka_client.connected_admin(endpoint, _ADMIN_TIMEOUT, attempt=2.0)
    tps = partitions_of(md, topics)
    ranges = offset_ranges(admin, endpoint, tps)
    first = list_offsets(admin, endpoint, {tp: OffsetSpec.for_timestamp(0) for tp in tps}, _ADMIN_TIMEOUT)
    newest = list_offsets(admin, endpoint, {tp: OffsetSpec.max_timestamp() for tp in tps}, _ADMIN_TIMEOUT)
    out: SideBounds = {t: {} for t in topics if t in md.topics and md.topics[t].error is None}
    for tp in tps:
        k = (tp.topic, tp.partition)
        out[tp.topic][tp.partition] = PartitionBounds(
            *ranges[k],
            first[k].timestamp if first[k].offset >= 0 else -1,
            newest[k].timestamp if newest[k].offset >= 0 else -1,
        )
    return out


def coordinates(message: Message) -> tuple[str, int, int]:
    """``(topic, partition, offset)`` of a consumed record (only error events lack them)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise ClusterError(
            f"the consumer returned a record without topic, partition or offset ({message.error()}).",
            "run again; if it persists, report it with the cluster's version",
        )
    return topic, partition, offset


def record_headers(message: Message) -> list[tuple[str, bytes | None]] | None:
    """A consumed record's headers in order, values as bytes; None when it has none."""
    headers = message.headers()
    if not headers:
        return None
    items = headers.items() if isinstance(headers, dict) else headers
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in items]
