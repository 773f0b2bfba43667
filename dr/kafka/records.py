"""Reading a topic's records from its beginning up to the end offsets it has now.

One reader (:func:`read_to_end`) for every caller that needs a topic's content at a moment — the
drill's key counts, the region failover's integrity comparison — so each stops at the same bound and
fails the same way when a partition cannot be read to its end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sized
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from dr.base.errors import ClusterError
from dr.kafka.client import SILENT, Endpoint, raise_kafka_error
from dr.kafka.offsets import end_offsets

__all__ = ["range_consumer", "reached", "read_to_end"]


def read_to_end(
    endpoint: Endpoint, topic: str, *, timeout: float = 120.0, group: str = "kdr-read", strict: bool = True
) -> Iterator[Message]:
    """Every record of ``topic`` below the end offsets read when the call starts, once each, partitions
    interleaved (each in offset order). A fresh, never-committing group named ``<group>-<random>``
    reads them, committed records only (``read_committed``: an exactly-once link's copies come in
    transactions, whose commit markers take offsets but are no records, so a partition is done once the
    consumer's position reaches its end). :class:`~dr.base.errors.ClusterError` when some partition is not
    read to that end within ``timeout`` seconds — unless not ``strict``: then what was read in time is
    all (a reader of a link's internal topics that reports what it found)."""
    todo = {tp: n for tp, n in end_offsets(endpoint, [topic], min(timeout, 30.0)).items() if n > 0}
    if not todo:
        return
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"{group}-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                **SILENT,
            }
        )
    )
    consumer.assign([TopicPartition(t, p, 0) for (t, p) in todo])
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                tp, offset = (msg.topic(), msg.partition()), msg.offset()
                if tp not in todo or offset is None or offset >= todo[tp]:
                    continue
                yield msg
                if offset + 1 >= todo[tp]:
                    del todo[tp]
            for done in reached(consumer, todo):
                del todo[done]
    finally:
        consumer.close()
    if todo and strict:
        raise ClusterError(
            f"could not read {topic} to its end within {timeout:.0f}s (left: {todo}).", "check the cluster answers"
        )


def range_consumer(endpoint: Endpoint, purpose: str, **overrides: Any) -> Consumer:
    """A consumer for reading assigned offset ranges in bulk: a fresh, never-committing group named
    ``kdr-<purpose>-<random>``, large fetches; ``overrides`` laid over (e.g. a socket timeout)."""
    return Consumer(
        endpoint.config(
            **{
                **SILENT,
                "group.id": f"kdr-{purpose}-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 64 * 1024 * 1024,
                "max.partition.fetch.bytes": 8 * 1024 * 1024,
                **overrides,
            }
        )
    )


def reached(consumer: Consumer, ends: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    """The partitions of ``ends`` whose position in ``consumer`` is at or past their end: read whole even
    when their last offsets are transaction markers (or aborted records) a consumer never sees."""
    if not ends:
        return []
    positions = consumer.position([TopicPartition(t, p) for (t, p) in ends])
    return [(tp.topic, tp.partition) for tp in positions if tp.offset >= ends[(tp.topic, tp.partition)]]


def consume_while(
    consumer: Consumer,
    endpoint: Endpoint,
    unfinished: Sized,
    idle_timeout: float,
    *,
    batch: int = 5000,
    doing: str = "reading records",
    stalled: Callable[[], tuple[str, str]] | None = None,
    ends: dict[tuple[str, int], int] | None = None,
) -> Iterator[Any]:
    """Messages from ``consumer`` while ``unfinished`` (what the caller still waits for) is not empty.

    End-of-partition events are skipped, other errors raised (``doing`` says what was being done); no
    message for ``idle_timeout`` seconds is a stall: :class:`ClusterError` with ``stalled()``'s message
    and next step (default: the unfinished count). With ``ends`` (partition → end offset; may be
    ``unfinished`` itself), a partition whose consumer position reaches its end is removed from it after
    each fetch: its last offsets may be transaction markers, which take offsets but are no records.
    """
    last = time.monotonic()
    while unfinished:
        if ends:
            for done in reached(consumer, ends):
                del ends[done]
            if not unfinished:
                break
        msgs = consumer.consume(num_messages=batch, timeout=1.0)
        if not msgs and time.monotonic() - last > idle_timeout:
            message, fix = (
                stalled()
                if stalled is not None
                else (
                    f"reading {endpoint.bootstrap} stalled with {len(unfinished)} partitions unfinished.",
                    "check the cluster is healthy and re-run",
                )
            )
            raise ClusterError(message, fix)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise_kafka_error(err, doing, endpoint)
            last = time.monotonic()
            yield m
