"""How far a MirrorMaker 2 link has copied each source partition, from the source offsets it stored.

An exactly-once link commits its copies and their source offsets in one transaction, so the stored
offset of a partition is exactly what the target holds of it — unlike the target's end offset, which
also counts the transactions' commit markers (and aborted records) and so runs ahead of the records.
The drain compares the source's end offsets with these positions. The connector stores, per source
partition, the offset of the last record it copied: the next one to copy is that plus one.

Two stores: a link on Kafka Connect is read through Connect's offsets API (KIP-875,
:meth:`dr.kafka.connect_rest.ConnectRest.offsets`); a dedicated MirrorMaker 2 keeps them in its offsets
topic on the target (``mm2-offsets.<source>.internal``), read here as committed records.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from dr.kafka.client import SILENT, Endpoint, kafka_errors
from dr.kafka.offsets import Offsets, end_offsets
from dr.kafka.records import reached

__all__ = ["dedicated_offsets_topic", "next_to_copy", "stored_positions"]


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
