"""MirrorMaker 2's offset syncs: which source offset each copied record had, read back from a link.

A link's source task records, in ``mm2-offset-syncs.<target alias>.internal``, pairs (upstream offset on
the source, downstream offset on the target) per source partition; with ``offset.lag.max=0`` (the
project's links) one for nearly every record. The checkpoints translate a group's commits *forwards*
with them (source → target); a region failover needs the other way too: what a group had consumed of
the copy ``B.<topic>`` on A says where it stands on B's own ``<topic>``
(:func:`dr.failover.act.positions.origin_offset`).

The topic lives on the link's source in dedicated mode (MirrorMaker 2's default) and on its target
for links on Kafka Connect (``offset-syncs.topic.location=target``).
"""

from __future__ import annotations

import struct

from dr.kafka.client import Endpoint, kafka_errors
from dr.kafka.records import read_to_end

__all__ = ["OffsetSync", "decode_offset_sync", "offset_syncs_topic", "read_offset_syncs"]

#: ``(topic, partition, upstream offset, downstream offset)``.
OffsetSync = tuple[str, int, int, int]


def offset_syncs_topic(target_alias: str) -> str:
    """The offset-syncs topic of a link into ``target_alias``."""
    return f"mm2-offset-syncs.{target_alias}.internal"


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync | None:
    """One offset-sync record in MirrorMaker 2's encoding (pure): key = the source topic (an int16 length
    and UTF-8 bytes) and an int32 partition; value = the upstream and the downstream int64 offsets.
    None for a tombstone or a record that does not parse."""
    if not key or not value:
        return None
    try:
        (size,) = struct.unpack_from(">h", key, 0)
        topic = key[2 : 2 + size].decode()
        (partition,) = struct.unpack_from(">i", key, 2 + size)
        upstream, downstream = struct.unpack_from(">qq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    if size < 0 or upstream < 0 or downstream < 0:
        return None
    return topic, partition, upstream, downstream


def read_offset_syncs(
    endpoint: Endpoint, target_alias: str, topics: list[str], timeout: float = 15.0
) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """The offset syncs of the link into ``target_alias`` held on ``endpoint`` for the source ``topics``:
    ``{(topic, partition): [(upstream, downstream), …]}`` in the order written. Empty when the topic does
    not exist there or holds nothing."""
    found: dict[tuple[str, int], list[tuple[int, int]]] = {}
    topic = offset_syncs_topic(target_alias)
    with kafka_errors(f"reading {topic}", endpoint):
        for msg in read_to_end(endpoint, topic, timeout=timeout, group="kdr-syncs", strict=False):
            sync = decode_offset_sync(msg.key(), msg.value())
            if sync is not None and sync[0] in topics:
                found.setdefault((sync[0], sync[1]), []).append((sync[2], sync[3]))
    return found
