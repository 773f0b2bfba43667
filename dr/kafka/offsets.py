"""Kafka offset reads, owned in one place: end offsets, offset lookups, committed group offsets, lag.

The failover, the status report, the drill, the link runners and the verification all read
offsets through these functions, so every read fails the same way — through
:func:`dr.kafka.client.kafka_errors`, as :class:`~dr.base.errors.ClusterError` or
:class:`~dr.base.errors.AuthError` naming the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from dr.kafka.client import SILENT, Endpoint, kafka_errors

#: ``(topic, partition) → offset``.
Offsets = dict[tuple[str, int], int]

T = TypeVar("T")

#: A group coordinator that cannot answer yet: its ``__consumer_offsets`` partition is being created,
#: elected or loaded (a cluster just given its first group, a passive just rebuilt, a broker restarting).
COORDINATOR_NOT_READY = frozenset(
    {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}
)

#: How long a group-offset read waits for a coordinator that is not ready before it fails.
COORDINATOR_WAIT_S = 30.0


def _admin(endpoint: Endpoint, timeout: float) -> AdminClient:
    ms = max(1000, min(10000, int(timeout * 1000)))
    return AdminClient(endpoint.config(**{"socket.timeout.ms": ms, "request.timeout.ms": max(ms, 15000), **SILENT}))


def partitions_of(metadata: Any, topics: list[str]) -> list[TopicPartition]:
    """Every partition of those ``topics`` that exist (without error) in ``metadata``, in order."""
    return [
        TopicPartition(t, p)
        for t in topics
        if t in metadata.topics and metadata.topics[t].error is None
        for p in sorted(metadata.topics[t].partitions)
    ]


def list_offsets(
    admin: AdminClient,
    endpoint: Endpoint,
    specs: dict[TopicPartition, Any],
    timeout: float = 15.0,
    *,
    committed: bool = False,
) -> dict[tuple[str, int], Any]:
    """``admin.list_offsets`` for ``specs`` (an :class:`OffsetSpec` per partition), results by
    ``(topic, partition)``: each has ``.offset`` and ``.timestamp``. ``committed``: as a read-committed
    consumer sees them (the latest offset is then the last stable offset, before any open transaction)."""
    if not specs:
        return {}
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    with kafka_errors("listing partition offsets", endpoint):
        futures = admin.list_offsets(specs, request_timeout=timeout, isolation_level=level)
        return {(tp.topic, tp.partition): fut.result(timeout=timeout) for tp, fut in futures.items()}


def end_offsets(endpoint: Endpoint, topics: list[str], timeout: float = 15.0) -> Offsets:
    """High watermark of every partition of ``topics`` (missing topics are left out).

    ``timeout`` bounds each call; a short one (the drill's snapshots of a cluster about to be
    killed) fails fast instead of waiting out librdkafka's retries.
    """
    admin = _admin(endpoint, timeout)
    with kafka_errors("reading end offsets", endpoint):
        metadata = admin.list_topics(timeout=min(timeout, 10.0))
    latest = list_offsets(admin, endpoint, {tp: OffsetSpec.latest() for tp in partitions_of(metadata, topics)}, timeout)
    return {tp: info.offset for tp, info in latest.items()}


class OffsetReader:
    """Repeated offset reads of one cluster over one admin client (a polling loop's reader).

    :func:`end_offsets` and :func:`committed_offsets_of` open a client, authenticate and fetch the
    whole cluster's metadata on every call — right for one read, wasteful in a loop that polls
    thousands of partitions several times a second (the failover's drain inside the applications'
    write outage). A reader looks the partitions of ``topics`` up once; each read after that is one
    ListOffsets round trip. :func:`end_offsets_together` reads several clusters at once.
    """

    def __init__(self, endpoint: Endpoint, topics: list[str], timeout: float = 15.0) -> None:
        self.endpoint, self.timeout = endpoint, timeout
        self._admin = _admin(endpoint, timeout)
        with kafka_errors("reading end offsets", endpoint):
            metadata = self._admin.list_topics(timeout=min(timeout, 10.0))
        self._partitions = partitions_of(metadata, topics)
        self._has_group_offsets = "__consumer_offsets" in metadata.topics

    def request_end(self) -> dict[TopicPartition, Any]:
        """Send the ListOffsets request for every partition's end; the futures, not yet awaited."""
        if not self._partitions:
            return {}
        with kafka_errors("listing partition offsets", self.endpoint):
            return dict(
                self._admin.list_offsets(
                    {tp: OffsetSpec.latest() for tp in self._partitions}, request_timeout=self.timeout
                )
            )

    def collect_end(self, futures: dict[TopicPartition, Any]) -> Offsets:
        """The end offsets :meth:`request_end` asked for."""
        with kafka_errors("listing partition offsets", self.endpoint):
            return {(tp.topic, tp.partition): fut.result(timeout=self.timeout).offset for tp, fut in futures.items()}

    def end_offsets(self) -> Offsets:
        """High watermark of every partition of the reader's topics (missing topics left out)."""
        return self.collect_end(self.request_end())

    def committed(self, groups: list[str]) -> dict[str, Offsets]:
        """Several groups' committed offsets (as :func:`committed_offsets_of`), on this reader's client."""
        if not self._has_group_offsets:  # see committed_offsets_of: asking would crash librdkafka
            with kafka_errors("reading the cluster's topics", self.endpoint):
                self._has_group_offsets = "__consumer_offsets" in self._admin.list_topics(timeout=10).topics
        if not self._has_group_offsets:
            return {group: {} for group in groups}
        return _group_offsets(self._admin, self.endpoint, groups)


def end_offsets_together(readers: list[OffsetReader]) -> list[Offsets]:
    """Each reader's end offsets, the requests of every cluster in flight at once."""
    sent = [reader.request_end() for reader in readers]
    return [reader.collect_end(futures) for reader, futures in zip(readers, sent, strict=True)]


def start_offsets(endpoint: Endpoint, topics: list[str], timeout: float = 15.0) -> Offsets:
    """Log start offset of every partition of ``topics`` (missing topics are left out)."""
    admin = _admin(endpoint, timeout)
    with kafka_errors("reading start offsets", endpoint):
        metadata = admin.list_topics(timeout=min(timeout, 10.0))
    first = list_offsets(
        admin, endpoint, {tp: OffsetSpec.earliest() for tp in partitions_of(metadata, topics)}, timeout
    )
    return {tp: info.offset for tp, info in first.items()}


def commit_group_offsets(endpoint: Endpoint, group: str, offsets: Offsets, timeout: float = 15.0) -> None:
    """Commit ``offsets`` for ``group`` (as the admin: AlterConsumerGroupOffsets). Kafka refuses it while
    the group has members; that refusal is raised as :class:`~dr.base.errors.ClusterError`."""
    if not offsets:
        return
    admin = _admin(endpoint, timeout)
    parts = [TopicPartition(t, p, n) for (t, p), n in sorted(offsets.items())]
    with kafka_errors(f"committing offsets of group {group!r}", endpoint):
        futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, parts)])
        done = futures[group].result(timeout=timeout)
        failed = [tp for tp in done.topic_partitions if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)


def partition_lag(source: Endpoint, target: Endpoint, topics: list[str]) -> Offsets:
    """Per partition: how many records the source holds beyond the target."""
    src = end_offsets(source, topics)
    dst = end_offsets(target, topics)
    return {tp: src[tp] - dst.get(tp, 0) for tp in src}


def committed_offsets(endpoint: Endpoint, group: str) -> Offsets:
    """A consumer group's committed offsets on one cluster; ``{}`` where no group ever committed."""
    return committed_offsets_of(endpoint, [group])[group]


def committed_offsets_of(endpoint: Endpoint, groups: list[str]) -> dict[str, Offsets]:
    """Several groups' committed offsets on one cluster: one client, every request in flight at once.

    The admin API takes one group per OffsetFetch request, so the requests are sent together and
    awaited together (40 groups cost about one round trip, not 40).
    """
    if not groups:
        return {}
    admin = _admin(endpoint, 15.0)
    with kafka_errors(f"reading offsets of groups {', '.join(map(repr, groups[:3]))}...", endpoint):
        # Asking for group offsets on a cluster without __consumer_offsets makes librdkafka 2.x crash
        # the whole process (a segfault in rdk:main while the coordinator lookup creates that topic);
        # such a cluster holds no committed offset, so it is not asked.
        if "__consumer_offsets" not in admin.list_topics(timeout=10).topics:
            return {group: {} for group in groups}
    return _group_offsets(admin, endpoint, groups)


def coordinator_not_ready(exc: KafkaException) -> bool:
    """True when ``exc`` says a group coordinator is not ready yet (:data:`COORDINATOR_NOT_READY`)."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in COORDINATOR_NOT_READY


def while_coordinator_not_ready(
    attempt: Callable[[], T],
    wait_s: float = COORDINATOR_WAIT_S,
    *,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``attempt()``, again every ``interval`` while it raises a coordinator-not-ready KafkaException,
    for up to ``wait_s``; then that last exception. Any other exception is raised at once."""
    deadline = clock() + wait_s
    while True:
        try:
            return attempt()
        except KafkaException as exc:
            if not coordinator_not_ready(exc) or clock() >= deadline:
                raise
        sleep(interval)


def _coordinators_ready(admin: AdminClient, groups: list[str]) -> None:
    """Raise the first coordinator-not-ready error DescribeConsumerGroups gives for ``groups``.

    librdkafka's admin OffsetFetch must never meet such a coordinator: on NOT_COORDINATOR or
    COORDINATOR_NOT_AVAILABLE it asks the client's consumer-group handle to look the coordinator up
    again, and an AdminClient has none, so the process dies with SIGSEGV in ``rd_kafka_cgrp_op``
    (librdkafka issue 5040). DescribeGroups answers the same errors as a plain result. Other
    errors (an unknown group, a refusal) are left to the OffsetFetch to report."""
    for future in admin.describe_consumer_groups(groups, request_timeout=10).values():
        try:
            future.result(timeout=15)
        except KafkaException as exc:
            if coordinator_not_ready(exc):
                raise


def _group_offsets(admin: AdminClient, endpoint: Endpoint, groups: list[str]) -> dict[str, Offsets]:
    """Every group's OffsetFetch sent at once on ``admin``, then awaited — once every group's
    coordinator answers (:func:`_coordinators_ready`), waiting up to :data:`COORDINATOR_WAIT_S`."""
    if not groups:
        return {}
    unique = list(dict.fromkeys(groups))

    def fetch() -> dict[str, Offsets]:
        _coordinators_ready(admin, unique)
        futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g] for g in unique}
        found: dict[str, Offsets] = {}
        for group, future in futures.items():
            result = future.result(timeout=15)
            found[group] = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}
        return found

    with kafka_errors(f"reading offsets of groups {', '.join(map(repr, unique[:3]))}...", endpoint):
        return while_coordinator_not_ready(fetch, COORDINATOR_WAIT_S)
