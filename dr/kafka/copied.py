"""How far a MirrorMaker 2 link has copied each source partition, from the source offsets it stored.

An exactly-once link commits its copies and their source offsets in one transaction, so the stored
offset of a partition is exactly what the target holds of it — unlike the target's end offset, which
also counts the transactions' commit markers (and aborted records) and so runs ahead of the records.
An at-least-once link stores them after the copies they count (each offset flush, every second): they
trail its copies by at most that, and unlike end offsets they compare with the source's even when the
source holds markers. The drain, converge and status compare the source's end offsets with them. The connector stores, per source
partition, the offset of the last record it copied: the next one to copy is that plus one.

A source may itself hold transactions (it was the target of an exactly-once link before a failover):
its last offsets can then be commit markers or aborted records the link never copies, so a gap between
the stored position and the source's end is only "behind" when it holds a committed record
(:func:`uncopied`).

Two stores: a link on Kafka Connect is read through Connect's offsets API (KIP-875,
:meth:`dr.kafka.connect_rest.ConnectRest.offsets`); a dedicated MirrorMaker 2 keeps them in its offsets
topic on the target (``mm2-offsets.<source>.internal``), read here as committed records.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from dr.kafka.client import SILENT, Endpoint, kafka_errors
from dr.kafka.offsets import Offsets, end_offsets
from dr.kafka.records import reached

Positions = Mapping[tuple[str, int], int]

__all__ = [
    "dedicated_offsets_topic",
    "furthest",
    "holding_records",
    "next_to_copy",
    "stored_positions",
    "uncopied",
]


def dedicated_offsets_topic(source_alias: str) -> str:
    """The offsets topic a dedicated MirrorMaker 2 of a link from ``source_alias`` keeps on its target."""
    return f"mm2-offsets.{source_alias}.internal"


def next_to_copy(entries: Iterable[tuple[Any, Any]]) -> Offsets:
    """``(source partition, source offset)`` pairs as a MirrorSourceConnector stores them
    (``{"cluster", "topic", "partition"}``, ``{"offset": n}``; a later pair replaces an earlier one, a
    ``None`` offset forgets it) → per ``(topic, partition)`` the next source offset to copy (pure)."""
    out: Offsets = {}
    for partition, offset in entries:
        if not isinstance(partition, dict) or "topic" not in partition or "partition" not in partition:
            continue
        tp = (str(partition["topic"]), int(partition["partition"]))
        if isinstance(offset, dict) and isinstance(offset.get("offset"), int):
            out[tp] = offset["offset"] + 1
        else:
            out.pop(tp, None)
    return out


def furthest(stores: Iterable[Positions]) -> Offsets:
    """Per partition, the furthest position any of ``stores`` holds (pure): a connector's positions kept in
    more than one offsets store (its own on its target, its workers' on their home) — each is committed
    only after the copies it counts, so the furthest is still what the target holds."""
    out: Offsets = {}
    for store in stores:
        for tp, n in store.items():
            out[tp] = max(n, out.get(tp, n))
    return out


def stored_positions(
    endpoint: Endpoint, topic: str, connector: str = "MirrorSourceConnector", timeout: float = 15.0
) -> Offsets:
    """:func:`next_to_copy` of what ``connector`` stored in the Connect offsets ``topic`` (keys
    ``["<connector>", {partition}]``, values ``{"offset": n}``), read committed to its current end."""
    ends = {tp: n for tp, n in end_offsets(endpoint, [topic], timeout).items() if n > 0}
    if not ends:
        return {}
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"kdr-copied-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **SILENT,
            }
        )
    )
    entries: list[tuple[Any, Any]] = []
    with kafka_errors(f"reading {topic}", endpoint):
        try:
            consumer.assign([TopicPartition(t, p, 0) for (t, p) in ends])
            left = dict(ends)
            deadline = time.monotonic() + timeout
            while left and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error() is not None or msg.key() is None:
                        continue
                    raw = msg.value()
                    try:
                        key = json.loads(msg.key() or b"null")
                        value = json.loads(raw) if raw is not None else None
                    except ValueError:
                        continue
                    if isinstance(key, list) and len(key) == 2 and key[0] == connector:
                        entries.append((key[1], value))
                for done in reached(consumer, left):
                    left.pop(done, None)
        finally:
            consumer.close()
    return next_to_copy(entries)


def holding_records(
    endpoint: Endpoint, start: Positions, end: Positions, timeout: float = 10.0
) -> set[tuple[str, int]]:
    """The partitions holding at least one committed record between ``start`` (included) and ``end``
    (excluded): read committed from ``start`` until a record shows, or the position passes ``end``
    (markers and aborted records are skipped). A partition still undecided at ``timeout`` (an open
    transaction holds its last stable offset back) counts as holding records."""
    todo = {tp: n for tp, n in end.items() if start.get(tp, 0) < n}
    if not todo:
        return set()
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"kdr-holding-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **SILENT,
            }
        )
    )
    found: set[tuple[str, int]] = set()
    with kafka_errors("reading the records a link has still to copy", endpoint):
        try:
            consumer.assign([TopicPartition(t, p, start.get((t, p), 0)) for (t, p) in todo])
            deadline = time.monotonic() + timeout
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(100, timeout=0.2):
                    tp = (msg.topic(), msg.partition())
                    if msg.error() is None and tp in todo and (msg.offset() or 0) < todo[tp]:
                        found.add(tp)
                        todo.pop(tp)
                for done in reached(consumer, todo):
                    todo.pop(done, None)
        finally:
            consumer.close()
    return found | set(todo)


def uncopied(source: Endpoint, ends: Positions, copied: Positions) -> Offsets:
    """Per source partition, ``end - copied`` where that gap holds a committed record on ``source``, else
    0: a gap of only commit markers or aborted records is copied (there is nothing there to copy)."""
    gaps = {tp: max(0, n - copied.get(tp, 0)) for tp, n in ends.items()}
    live = (
        holding_records(source, copied, {tp: ends[tp] for tp, n in gaps.items() if n}) if any(gaps.values()) else set()
    )
    return {tp: n if tp in live else 0 for tp, n in gaps.items()}
