"""What a verification compares: a Kafka cluster or a Parquet archive, and the offsets read from it.

Light on purpose (no Spark import), so the command line can build sides before Spark starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from dr.kafka.client import Endpoint

__all__ = [
    "ArchiveDescription",
    "ArchiveSide",
    "KafkaDescription",
    "KafkaSide",
    "PartitionBounds",
    "Side",
    "SideBounds",
    "Until",
    "beyond",
]

#: topic → partition → the first offset written after the bound was taken (:attr:`KafkaSide.until`).
Until = Mapping[str, Mapping[int, int]]


class KafkaDescription(TypedDict):
    """A Kafka side as the report records it (never its password)."""

    kind: Literal["kafka"]
    cluster: str | None
    stack: str | None
    bootstrap: str
    username: str | None
    security_protocol: str
    sasl_mechanism: str | None
    read_until: NotRequired[dict[str, dict[str, int]]]
    """Only with :attr:`KafkaSide.until`: the offsets from which a record that matches none of the other
    side's is not offending."""


class ArchiveDescription(TypedDict):
    """An archive side as the report records it."""

    kind: Literal["archive"]
    path: str
    name: str | None


@dataclass(frozen=True, kw_only=True)
class KafkaSide:
    """A Kafka cluster reached through ``endpoint`` (``name``/``stack`` only label the report).

    ``until`` (a target only) bounds what may offend by offset: a record at or beyond its partition's
    bound (:func:`beyond`) still matches a record of the source — a copy recovery wrote after the bound —
    but one that matches none is counted with the records after the cut-off, never as ``unexpected``,
    ``duplicated`` or ``corrupted``. The failover's integrity step sets it on B to B's end
    offsets taken just before the promotion granted writes: what lies beyond was written on the promoted
    cluster (applications, recovery), whatever its timestamp — e.g. records a client created while A was
    gone and delivered after the switch. None (``drctl verify``): every record before the cut-off counts.
    """

    endpoint: Endpoint
    name: str | None = None
    stack: str | None = None
    until: Until | None = None
    kind: str = field(default="kafka", init=False)

    def describe(self) -> KafkaDescription:
        """What the report records about this side: never the password."""
        out: KafkaDescription = {
            "kind": "kafka",
            "cluster": self.name,
            "stack": self.stack,
            "bootstrap": self.endpoint.bootstrap,
            "username": self.endpoint.username,
            "security_protocol": self.endpoint.security_protocol,
            "sasl_mechanism": self.endpoint.sasl_mechanism,
        }
        if self.until is not None:
            out["read_until"] = {t: {str(p): n for p, n in sorted(ps.items())} for t, ps in sorted(self.until.items())}
        return out


@dataclass(frozen=True, kw_only=True)
class ArchiveSide:
    """A Parquet archive of records (columns topic, partition, offset, timestamp, key, value, headers)."""

    path: Path
    name: str | None = None
    kind: str = field(default="archive", init=False)

    def describe(self) -> ArchiveDescription:
        """What the report records about this side."""
        return {"kind": "archive", "path": str(Path(self.path).resolve()), "name": self.name}


Side = KafkaSide | ArchiveSide


@dataclass(frozen=True)
class PartitionBounds:
    """The offsets ``[start, end)`` of one partition, plus timestamp hints (-1 when unknown)."""

    start: int
    end: int
    first_ts: int = -1
    max_ts: int = -1

    @property
    def size(self) -> int:
        """How many offsets the range spans."""
        return max(0, self.end - self.start)


#: topic → partition → bounds. A topic absent from the mapping does not exist on that side.
SideBounds = dict[str, dict[int, PartitionBounds]]


def beyond(until: Until | None, topic: str, partition: int, offset: int) -> bool:
    """True when ``offset`` lies at or beyond ``until[topic][partition]`` (pure): never without ``until`` or
    for a topic it does not list; always for a partition its topic's entry lacks (created after the bound
    was taken)."""
    if until is None or topic not in until:
        return False
    return offset >= until[topic].get(partition, 0)
