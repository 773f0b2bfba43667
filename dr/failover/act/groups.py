"""Consumer groups at failover: does every synced group have a translated committed offset on B?

MirrorMaker 2 translates a group's committed offsets from the source into the target's offsets
(checkpoints, then offset sync). At promotion a group is in one of four states:

* ``translated`` — every partition the group committed on the source has an offset on the target;
* ``partial`` — some have none: on those partitions its consumers fall back to ``auto.offset.reset``;
* ``none`` — no offset at all on the target: every partition falls back to ``auto.offset.reset``;
* ``not-synced`` — the link's ``consumer_groups`` patterns do not select the group;
* ``no-commits`` — the group never committed on the source either: nothing to translate, its
  consumers start on the target exactly as they would have on the source.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.failover.record.metrics import Offsets, group_positions
from dr.runtime.mirrormaker import group_offsets_translated_within
from dr.topology import Topology

__all__ = ["GroupState", "describe_group", "fallback_text", "offsets_ahead", "translated_within"]


def translated_within(topology: Topology, target: str) -> float:
    """Seconds after a group's last commit by which the link into ``target`` has translated it there,
    from that link's intervals (the defaults when no link leads there)."""
    links = topology.links_into(target)
    return group_offsets_translated_within(links[0].intervals.model_dump() if links else None)


def fallback_text(partitions: list[str], target_end: Offsets, topics: list[str]) -> str:
    """What consumers do on ``partitions`` (``"topic:p"``, empty = all of ``topics``) without an offset."""
    if partitions:
        keys = [(p.rpartition(":")[0], int(p.rpartition(":")[2])) for p in partitions]
    else:
        keys = [tp for tp in target_end if tp[0] in topics]
    records = sum(target_end.get(tp, 0) for tp in keys)
    where = ", ".join(partitions) if partitions else "every partition of " + ", ".join(topics)
    return (
        f"on {where} its consumers follow auto.offset.reset: 'earliest' re-reads all {records} records "
        "held there now; 'latest' (the client default) starts at the end and skips every record they had "
        "not yet read"
    )


class GroupState(TypedDict):
    """One consumer group at promotion (:func:`describe_group`): its :class:`~dr.failover.record.metrics.GroupPositions`
    between the group's counts and its ``status`` (what its consumers will do)."""

    group: str
    application: str
    topics: list[str]
    synced_by_link: bool
    translated_partitions: int
    source_partitions: int | None
    target_committed_total: int
    rereads: int | None
    rereads_per_partition: dict[str, int]
    would_skip: dict[str, int]
    missing_on_target: list[str]
    not_comparable: list[str]
    status: NotRequired[str]
    """``not-synced``, ``no-commits``, ``none``, ``partial`` or ``translated`` (set by :func:`describe_group`)."""
    consumers_will: NotRequired[str]


def describe_group(
    *,
    group: str,
    application: str,
    topics: list[str],
    synced_by_link: bool,
    source_committed: Offsets | None,
    target_committed: Offsets,
    source_end: Offsets | None,
    target_end: Offsets,
    aligned: bool = True,
) -> GroupState:
    """The state of one consumer group at promotion (pure; see the module doc for the states);
    ``aligned`` as in :func:`~dr.failover.record.metrics.group_positions`."""
    target_committed = {tp: n for tp, n in target_committed.items() if tp[0] in topics}
    if source_committed is not None:
        source_committed = {tp: n for tp, n in source_committed.items() if tp[0] in topics}
    positions = group_positions(source_committed, target_committed, source_end, target_end, aligned=aligned)
    entry: GroupState = {
        "group": group,
        "application": application,
        "topics": topics,
        "synced_by_link": synced_by_link,
        "translated_partitions": len(target_committed),
        "source_partitions": None if source_committed is None else len(source_committed),
        "target_committed_total": sum(target_committed.values()),
        "rereads": positions["rereads"],
        "rereads_per_partition": positions["rereads_per_partition"],
        "would_skip": positions["would_skip"],
        "missing_on_target": positions["missing_on_target"],
        "not_comparable": positions["not_comparable"],
    }
    if not synced_by_link:
        entry["status"] = "not-synced"
        entry["consumers_will"] = fallback_text([], target_end, topics)
    elif source_committed is not None and not source_committed and not target_committed:
        entry["status"] = "no-commits"
        entry["consumers_will"] = "start by auto.offset.reset, as they would have on the source (no offset to carry)"
    elif not target_committed:
        entry["status"] = "none"
        entry["consumers_will"] = fallback_text([], target_end, topics)
    elif positions["missing_on_target"]:
        entry["status"] = "partial"
        entry["consumers_will"] = fallback_text(positions["missing_on_target"], target_end, topics)
    else:
        entry["status"] = "translated"
        entry["consumers_will"] = "resume from the translated offsets" + (
            f", reading {positions['rereads']} records a second time" if positions["rereads"] else ""
        )
    return entry


def offsets_ahead(group: str, cluster: str, committed: Offsets, translated: Offsets, end: Offsets) -> list[str]:
    """The committed offsets of a synced ``group`` on passive ``cluster`` that no translation explains
    (pure): one line per partition whose offset is beyond the partition's ``end`` offset there, or ahead
    of ``translated`` (the link's checkpoint of the group's source commit). The link only ever writes
    translated offsets on a passive cluster, so such an offset was committed by someone else — after a
    failover the group's consumers would skip the records in between. A partition with no translation
    (or no known end) is judged by what is known."""
    found = []
    for (topic, partition), offset in sorted(committed.items()):
        where = f"consumer group {group!r} on passive cluster {cluster}, {topic}:{partition}"
        if (topic, partition) in end and offset > end[(topic, partition)]:
            found.append(
                f"{where}: committed offset {offset} is beyond the partition's end offset {end[(topic, partition)]}"
            )
        elif (topic, partition) in translated and offset > translated[(topic, partition)]:
            found.append(
                f"{where}: committed offset {offset} is ahead of the translation of its source commit "
                f"({translated[(topic, partition)]})"
            )
    return found
