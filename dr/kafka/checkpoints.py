"""MirrorMaker 2's checkpoints: the translation of each source group commit into the target's offsets.

A link's checkpoint connector writes, to ``<source>.checkpoints.internal`` on the target, one record per
(group, topic, partition) each time it translates a commit: the group's committed offset on the source
(upstream) and the offset it stands for on the target (downstream). The topic is compacted; its last
record per key is the current translation. The group offsets the link syncs on the target are taken
from these records, so a committed offset on a passive cluster is never beyond its translation unless
someone else wrote it.
"""

from __future__ import annotations

import struct
import uuid

from confluent_kafka import Consumer, TopicPartition

from dr.kafka.client import SILENT, Endpoint, kafka_errors
from dr.kafka.offsets import Offsets, end_offsets
from dr.kafka.records import reached

__all__ = ["Checkpoint", "checkpoints_topic", "decode_checkpoint", "translated_offsets"]

#: ``(group, topic, partition, upstream offset, downstream offset)``.
Checkpoint = tuple[str, str, int, int, int]


def checkpoints_topic(source_alias: str) -> str:
    """The checkpoints topic a link from ``source_alias`` writes on its target."""
    return f"{source_alias}.checkpoints.internal"


def _string(buf: bytes, at: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", buf, at)
    return buf[at + 2 : at + 2 + size].decode(), at + 2 + size


def decode_checkpoint(key: bytes | None, value: bytes | None) -> Checkpoint | None:
    """One checkpoint record in MirrorMaker 2's encoding (pure): key = group and topic (each an int16
    length and UTF-8 bytes) and an int32 partition; value = an int16 version, the upstream and the
    downstream int64 offsets and a metadata string. None for a tombstone or a record that does not parse."""
    if not key or not value:
        return None
    try:
        group, at = _string(key, 0)
        topic, at = _string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
        _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    return group, topic, partition, upstream, downstream


def translated_offsets(target: Endpoint, source_alias: str, timeout: float = 15.0) -> dict[str, Offsets]:
    """Every group's current translation on a link's ``target``: ``{group: {(topic, partition):
    downstream offset}}``, read (as ``target``'s principal, the admin) from the checkpoints topic of the
    link from ``source_alias``. Empty when that topic does not exist or holds nothing."""
    topic = checkpoints_topic(source_alias)
    ends = {tp: n for tp, n in end_offsets(target, [topic], timeout).items() if n > 0}
    found: dict[str, Offsets] = {}
    if not ends:
        return found
    consumer = Consumer(
        target.config(
            **{
                "group.id": f"kdr-status-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **SILENT,
            }
        )
    )
    with kafka_errors(f"reading {topic}", target):
        try:
            consumer.assign([TopicPartition(t, p, 0) for (t, p) in ends])
            left = dict(ends)
            for _ in range(int(timeout / 0.5) + 1):
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error() is not None:
                        continue
                    tp = (msg.topic() or "", msg.partition() or 0)
                    if (msg.offset() or 0) + 1 >= left.get(tp, 0):
                        left.pop(tp, None)
                    if (cp := decode_checkpoint(msg.key(), msg.value())) is not None:
                        group, t, p, _upstream, downstream = cp
                        found.setdefault(group, {})[(t, p)] = downstream
                for done in reached(consumer, left):  # a commit marker ends it (transactional checkpoints)
                    left.pop(done, None)
                if not left:
                    break
        finally:
            consumer.close()
    return found
