"""Hub failover of a hub-and-spoke estate: the edges' links stop, and each resumes into the new hub
exactly where the promoted copy of the old hub ended.

The pipeline (:mod:`dr.failover.kinds.active_passive.steps`) stays the one of every failover; for a hub-and-spoke stack
its steps call this module:

* ``fence-drain`` (planned) stops every edge's link into the old hub first, so the hub holds still
  while its link to the passive copy drains to lag 0;
* ``promote`` stops (or, unplanned, kills) the edges' links, then, for every partition of every edge
  topic, finds the edge offset of the last record the promoted copy holds of it
  (``<edge>.<topic>``, matched by key, value, timestamp and headers, searched backwards on the edge) and
  writes it where MirrorMaker 2 keeps its source offsets for the new link: the
  ``mm2-offsets.<edge>.internal`` topic on the new hub. When ``desired-state`` starts the re-pointed
  link, its task seeks to the next record: no gap, and no record copied a second time by the switch.
  Records the old links had already copied twice (MirrorMaker 2 is at-least-once) stay: they are
  counted by :func:`edge_copy_report`.

A partition whose copy is empty gets no position: the link reads it from the edge's first record. A
copy written by an exactly-once link ends in a commit marker: its last record is the last committed one
below its end (:func:`tail_windows`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, TypedDict

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from dr.base.errors import ClusterError, FailoverError
from dr.kafka.client import SILENT, Endpoint, admin_client, kafka_errors
from dr.kafka.offsets import list_offsets, partitions_of
from dr.topology import Link, Role, Topology
from dr.topology.topics import remote_topic

__all__ = [
    "CopyCounts",
    "ResumePoint",
    "SiteCopies",
    "edge_copy_report",
    "edge_links_into",
    "offsets_topic",
    "resume_points",
    "seed_resume_points",
    "tail_windows",
]

SOURCE_CONNECTOR = "MirrorSourceConnector"
"""The connector name a dedicated MirrorMaker 2 stores its source offsets under."""
_SEARCH_CHUNK = 2000
_POLL_S = 5.0


def offsets_topic(edge: str) -> str:
    """Where a dedicated MirrorMaker 2 keeps the source offsets of a link out of ``edge``, on its target."""
    return f"mm2-offsets.{edge}.internal"


def offset_key(edge: str, topic: str, partition: int) -> bytes:
    """The key MirrorMaker 2 stores a source partition's offset under (Connect's JsonConverter of
    ``[connector, {cluster, partition, topic}]``, keys in the order Java's HashMap iterates them: the
    worker looks the key up by its bytes)."""
    body = {"cluster": edge, "partition": partition, "topic": topic}
    return json.dumps([SOURCE_CONNECTOR, body], separators=(",", ":")).encode()


def edge_links_into(topology: Topology, hub: str) -> list[Link]:
    """The running links of ``topology`` that aggregate an edge into ``hub``: of each edge cluster, its one
    running link out (none unless hub-and-spoke, the only architecture whose validation lets a cluster be an
    edge)."""
    edges = [c.name for c in topology.clusters_with(Role.EDGE)]
    found = [next((link for link in topology.links if link.source == e and link.is_running), None) for e in edges]
    return [link for link in found if link is not None and link.target == hub]


@dataclass(frozen=True)
class ResumePoint:
    """Where an edge partition's link resumes on the new hub."""

    edge: str
    topic: str
    partition: int
    copied: int
    """Records the promoted copy holds of this partition."""
    last_copied: int | None
    """The edge offset of the last record the copy holds (None: the copy is empty)."""
    edge_end: int

    @property
    def resume_at(self) -> int:
        """The first edge offset the re-pointed link copies."""
        return -1 if self.last_copied is None else self.last_copied + 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form (journaled with the promote step)."""
        return {
            "edge": self.edge,
            "topic": self.topic,
            "partition": self.partition,
            "copied": self.copied,
            "last_copied": self.last_copied,
            "resume_at": self.resume_at if self.last_copied is not None else "earliest",
            "edge_end": self.edge_end,
            "to_copy": self.edge_end - self.resume_at if self.last_copied is not None else None,
        }


def _consumer(endpoint: Endpoint, isolation: str) -> Consumer:
    return Consumer(
        endpoint.config(
            **{
                "group.id": "kdr-hub-failover",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "isolation.level": isolation,
                **SILENT,  # its failures surface through kafka_errors, not librdkafka's own log
            }
        )
    )


def _bounds(endpoint: Endpoint, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(log start, end)`` of every partition of those ``topics`` that exist."""
    admin = admin_client(endpoint)
    with kafka_errors("reading partition bounds", endpoint):
        metadata = admin.list_topics(timeout=10)
    tps = partitions_of(metadata, topics)
    first = list_offsets(admin, endpoint, {tp: OffsetSpec.earliest() for tp in tps})
    last = list_offsets(admin, endpoint, {tp: OffsetSpec.latest() for tp in tps})
    return {tp: (first[tp].offset, last[tp].offset) for tp in first}


def _read(
    endpoint: Endpoint, topic: str, partition: int, start: int, stop: int, isolation: str = "read_uncommitted"
) -> list[Any]:
    """The records of one partition in ``[start, stop)``, in offset order (``read_committed``: its committed
    records only; commit markers are never records)."""
    if stop <= start:
        return []
    consumer = _consumer(endpoint, isolation)
    records: list[Any] = []
    try:
        with kafka_errors(f"reading {topic}-{partition}", endpoint):
            consumer.assign([TopicPartition(topic, partition, start)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                msg = consumer.poll(_POLL_S)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    continue
                offset = msg.offset() or 0
                if offset >= stop:
                    break
                records.append(msg)
                if offset >= stop - 1:
                    break
    finally:
        consumer.close()
    return records


def tail_windows(start: int, end: int) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` windows, last first and growing eightfold from 2, that cover ``[start, end)`` (pure):
    where to look, backwards, for a partition's last committed record when its last offsets may be commit
    markers or aborted records (a copy written by an exactly-once link)."""
    windows: list[tuple[int, int]] = []
    hi, size = end, 2
    while hi > start:
        lo = max(start, hi - size)
        windows.append((lo, hi))
        hi, size = lo, size * 8
    return windows


def _last_record(endpoint: Endpoint, topic: str, partition: int, start: int, end: int) -> Any | None:
    """The last committed record of ``topic``-``partition`` below ``end`` (None when it holds none)."""
    for lo, hi in tail_windows(start, end):
        records = _read(endpoint, topic, partition, lo, hi, isolation="read_committed")
        if records:
            return records[-1]
    return None


def _fingerprint(msg: Any) -> tuple[Any, ...]:
    return (msg.key(), msg.value(), msg.timestamp()[1], tuple(msg.headers() or ()))


def _find_last(edge_ep: Endpoint, topic: str, partition: int, bounds: tuple[int, int], last: Any) -> int | None:
    """The edge offset of the record equal to ``last`` (key, value, timestamp, headers), searched backwards
    from the edge's end: the highest such offset, None when the edge does not hold it."""
    start, end = bounds
    want = _fingerprint(last)
    hi = end
    while hi > start:
        lo = max(start, hi - _SEARCH_CHUNK)
        for msg in reversed(_read(edge_ep, topic, partition, lo, hi)):
            if _fingerprint(msg) == want:
                return int(msg.offset())
        hi = lo
    return None


def resume_points(edge: str, edge_ep: Endpoint, hub_ep: Endpoint, topics: list[str]) -> list[ResumePoint]:
    """For every partition of the edge's ``topics``: where the new hub's copy (``<edge>.<topic>``) ended.

    Raises FailoverError when the copy's last record is not on the edge (the edge lost it, or the copy
    is not of this edge): resuming anywhere would then leave a gap or copy again what is there.
    """
    copies = {remote_topic(edge, t): t for t in topics}
    on_edge = _bounds(edge_ep, topics)
    on_hub = _bounds(hub_ep, list(copies))
    points: list[ResumePoint] = []
    for (topic, partition), bounds in sorted(on_edge.items()):
        copy = remote_topic(edge, topic)
        c_start, c_end = on_hub.get((copy, partition), (0, 0))
        if c_end <= c_start:
            points.append(ResumePoint(edge, topic, partition, 0, None, bounds[1]))
            continue
        # an exactly-once link's copy ends in a commit marker: the last record sits below it
        last = _last_record(hub_ep, copy, partition, c_start, c_end)
        if last is None:
            raise FailoverError(
                f"cannot read the last records of {copy}-{partition} on the new hub "
                f"(offsets {c_start}..{c_end}: no committed record).",
                "check the promoted cluster answers (`drctl status`), then rerun the failover (it resumes)",
            )
        found = _find_last(edge_ep, topic, partition, bounds, last)
        if found is None:
            raise FailoverError(
                f"the last record of {copy}-{partition} on the new hub (offset {last.offset()}) is not on edge "
                f"{edge!r} ({topic}-{partition}, offsets {bounds[0]}..{bounds[1]}): the edge no longer holds it, so "
                "the position where the copy ended is unknown.",
                f"resume the link by hand (reset {offsets_topic(edge)} on the new hub), or rerun once the edge "
                "holds its records again",
            )
        points.append(ResumePoint(edge, topic, partition, c_end - c_start, found, bounds[1]))
    return points


def seed_resume_points(hub_ep: Endpoint, points: list[ResumePoint], replication_factor: int = 1) -> int:
    """Write each point where MirrorMaker 2 reads its source offsets on the new hub (idempotent: the
    compacted topic keeps the last value per key); return how many positions were written."""
    by_edge: dict[str, list[ResumePoint]] = {}
    for p in points:
        if p.last_copied is not None:
            by_edge.setdefault(p.edge, []).append(p)
    if not by_edge:
        return 0
    admin = admin_client(hub_ep)
    with kafka_errors("creating MirrorMaker 2's offsets topics", hub_ep):
        existing = admin.list_topics(timeout=10).topics
        wanted = [
            NewTopic(offsets_topic(e), 1, replication_factor, config={"cleanup.policy": "compact"})
            for e in by_edge
            if offsets_topic(e) not in existing
        ]
        for future in admin.create_topics(wanted).values() if wanted else ():
            try:
                future.result(timeout=30)
            except Exception as exc:  # already there (a rerun): fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
    producer = Producer(hub_ep.config(**{"acks": "all", "enable.idempotence": True}))
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for edge, group in by_edge.items():
        for p in group:
            value = json.dumps({"offset": p.last_copied}, separators=(",", ":")).encode()
            producer.produce(
                offsets_topic(edge), key=offset_key(edge, p.topic, p.partition), value=value, on_delivery=delivered
            )
    if producer.flush(30) or errors:
        raise ClusterError(
            f"could not write the edges' resume positions to the new hub: {errors[:1] or 'flush timed out'}",
            "check the promoted cluster answers, then rerun the failover (it resumes at promote)",
        )
    return sum(len(g) for g in by_edge.values())


class CopyCounts(TypedDict):
    """An edge's records against the hub's copies (:func:`edge_copy_report`)."""

    edge: str
    records: int
    missing: int
    duplicates: int
    unexpected: int


class SiteCopies(CopyCounts):
    """:class:`CopyCounts` with the ``hub`` compared and the ``topics`` (``drctl verify --edge --json``)."""

    hub: str
    topics: list[str]


def edge_copy_report(edge: str, edge_ep: Endpoint, hub_ep: Endpoint, topics: list[str]) -> CopyCounts:
    """Each edge record compared with the hub's copy, by partition, key, value and timestamp (a multiset):
    ``missing`` (on the edge, not on the hub), ``duplicates`` (extra copies on the hub) and ``unexpected``
    (on the hub, not on the edge). Reads both sides whole: meant for checks and drills, not for huge topics."""
    on_edge = _bounds(edge_ep, topics)
    on_hub = _bounds(hub_ep, [remote_topic(edge, t) for t in topics])
    report = CopyCounts(edge=edge, records=0, missing=0, duplicates=0, unexpected=0)
    for (topic, partition), (start, end) in sorted(on_edge.items()):
        copy = remote_topic(edge, topic)
        mine = Counter(_fingerprint(m) for m in _read(edge_ep, topic, partition, start, end))
        c_start, c_end = on_hub.get((copy, partition), (0, 0))
        # the copy's committed records: an exactly-once link's aborted copies are not on the hub
        theirs = Counter(_fingerprint(m) for m in _read(hub_ep, copy, partition, c_start, c_end, "read_committed"))
        report["records"] += sum(mine.values())
        report["missing"] += sum((mine - theirs).values())
        report["duplicates"] += sum(max(0, n - mine[k]) for k, n in theirs.items() if k in mine)
        report["unexpected"] += sum(n for k, n in theirs.items() if k not in mine)
    return report
