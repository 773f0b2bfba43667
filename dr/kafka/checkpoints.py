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

from dr.kafka.client import Endpoint, kafka_errors
from dr.kafka.offsets import Offsets
from dr.kafka.records import read_to_end

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
    found: dict[str, Offsets] = {}
    with kafka_errors(f"reading {topic}", target):
        for msg in read_to_end(target, topic, timeout=timeout, group="kdr-status", strict=False):
            if (cp := decode_checkpoint(msg.key(), msg.value())) is not None:
                group, t, p, _upstream, downstream = cp
                found.setdefault(group, {})[(t, p)] = downstream
    return found
