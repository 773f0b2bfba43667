"""Replaying records of one cluster into another: each partition's missing offsets read once, written in batches.

:func:`plan_ranges` (pure) turns the coordinates of the records to replay into, per partition, the
few offset ranges that hold them; :func:`read_ranges` reads those ranges with one consumer, once
each; :func:`replay` writes the wanted records, in order, through one idempotent producer (batched
by librdkafka), keeping key, value, headers, timestamp and partition. The site failovers'
``--recover`` (region and edge) replay through it; what makes a second run write nothing is the
caller's comparison before it, which sees the copies a first run wrote.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from confluent_kafka import Message, Producer, TopicPartition

from dr.base.errors import ClusterError
from dr.kafka.client import SILENT, Endpoint
from dr.kafka.records import consume_while, range_consumer

__all__ = ["MAX_GAP", "Coordinates", "Ranges", "plan_ranges", "read_ranges", "replay"]

#: ``(topic, partition, offset)`` of one record.
Coordinates = tuple[str, int, int]
#: ``(topic, partition) → [(start, end), ...]``: half-open offset ranges, ascending, disjoint.
Ranges = dict[tuple[str, int], list[tuple[int, int]]]

MAX_GAP = 1000
"""Wanted offsets at most this far apart are read as one range (reading the records between costs
less than a new fetch position); farther apart, the partition is re-positioned at the next one."""


def plan_ranges(wanted: Iterable[Coordinates], max_gap: int = MAX_GAP) -> Ranges:
    """Per partition, the offset ranges holding every ``wanted`` record: consecutive wanted offsets
    (duplicates ignored) share a range when at most ``max_gap`` apart. Pure."""
    if max_gap < 1:
        raise ValueError(f"max_gap must be at least 1, not {max_gap}")
    offsets: dict[tuple[str, int], set[int]] = defaultdict(set)
    for topic, partition, offset in wanted:
        offsets[(topic, partition)].add(offset)
    ranges: Ranges = {}
    for tp in sorted(offsets):
        spans: list[tuple[int, int]] = []
        for offset in sorted(offsets[tp]):
            if spans and offset - (spans[-1][1] - 1) <= max_gap:
                spans[-1] = (spans[-1][0], offset + 1)
            else:
                spans.append((offset, offset + 1))
        ranges[tp] = spans
    return ranges


def read_ranges(endpoint: Endpoint, ranges: Ranges, *, idle_timeout: float = 30.0) -> Iterator[Message]:
    """Every record of ``ranges`` on ``endpoint``, each once, each partition in offset order, read by
    one consumer that starts every partition at its first range and stops it after its last.

    Offsets no longer in the log (retention, compaction, transaction markers) are simply not
    yielded; no record for ``idle_timeout`` seconds while some range is unfinished is a
    :class:`~dr.base.errors.ClusterError`.
    """
    todo = {tp: list(spans) for tp, spans in ranges.items() if spans}
    if not todo:
        return
    consumer = range_consumer(endpoint, "replay")
    # the next offset each partition may yield: records fetched before a re-positioning are dropped
    floor = {tp: spans[0][0] for tp, spans in todo.items()}
    try:
        consumer.assign([TopicPartition(t, p, floor[(t, p)]) for t, p in todo])

        def stalled() -> tuple[str, str]:
            return (
                f"reading {endpoint.bootstrap} stalled for {idle_timeout:.0f}s with {len(todo)} partitions "
                f"unfinished (first: {min(todo)}).",
                "check the cluster answers, then rerun the recovery (it writes only what is still missing)",
            )

        for msg in consume_while(
            consumer, endpoint, todo, idle_timeout, batch=10000, doing="reading records to replay", stalled=stalled
        ):
            tp, offset = (msg.topic() or "", msg.partition() or 0), msg.offset() or 0
            spans = todo.get(tp)
            if spans is None or offset < floor[tp]:
                continue
            floor[tp] = offset + 1
            while spans and offset >= spans[0][1]:  # past this range (its last records may be gone)
                spans.pop(0)
            if spans and offset >= spans[0][0]:
                yield msg
                if offset + 1 < spans[0][1]:
                    continue
                spans.pop(0)
            if not spans:
                del todo[tp]
                consumer.incremental_unassign([TopicPartition(*tp)])
            elif offset + 1 < spans[0][0]:
                floor[tp] = spans[0][0]
                consumer.incremental_unassign([TopicPartition(*tp)])
                consumer.incremental_assign([TopicPartition(tp[0], tp[1], floor[tp])])
    finally:
        consumer.close()


def replay(
    source: Endpoint,
    target: Endpoint,
    wanted: Iterable[Coordinates],
    rename: Callable[[str], str],
    *,
    rerun: str,
    progress: Callable[[str], None] = lambda _m: None,
    timeout: float = 120.0,
) -> int:
    """Write the ``wanted`` records of ``source`` to ``rename(topic)`` on ``target``, same partition,
    keeping key, value, headers and timestamp; returns how many were acknowledged (all of them).

    One consumer reads each partition's ranges once (:func:`read_ranges`); one idempotent producer
    (``acks=all``) writes while it reads. A wanted record that could not be read, or a write not
    acknowledged within ``timeout`` seconds, is a :class:`~dr.base.errors.ClusterError` whose next
    step is ``rerun``.
    """
    want = set(wanted)
    if not want:
        return 0
    ranges = plan_ranges(want)
    progress(
        f"reading {len(want):,} records in {sum(len(s) for s in ranges.values())} offset ranges of "
        f"{len(ranges)} partitions on {source.bootstrap}; writing them to {target.bootstrap}"
    )
    producer = Producer(
        target.config(
            **{
                **SILENT,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 20,
                "compression.type": "lz4",
                "message.timeout.ms": int(timeout * 1000),
            }
        )
    )
    acked = 0
    failed: list[str] = []

    def delivered(err: Any, msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif not failed:
            failed.append(f"{msg.topic()}-{msg.partition()}: {err}")

    read = 0
    for msg in read_ranges(source, ranges):
        coords = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
        if coords not in want:
            continue
        want.discard(coords)
        read += 1
        while True:
            try:
                producer.produce(
                    rename(coords[0]),
                    key=msg.key(),
                    value=msg.value(),
                    headers=msg.headers(),
                    timestamp=msg.timestamp()[1],
                    partition=coords[1],
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the producer's queue is full: let it drain
                producer.poll(0.1)
        producer.poll(0)
    unsent = producer.flush(timeout)
    if want:
        t, p, o = min(want)
        raise ClusterError(
            f"{len(want):,} records to replay are no longer on {source.bootstrap} (first: {t}-{p}@{o}); "
            f"{acked:,} others were written.",
            rerun,
        )
    if unsent or failed or acked != read:
        raise ClusterError(
            f"{read - acked:,} of the {read:,} records replayed into {target.bootstrap} were not acknowledged"
            + (f" (first: {failed[0]})" if failed else f" within {timeout:.0f}s")
            + ".",
            rerun,
        )
    return acked
