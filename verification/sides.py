"""What a verification compares: a Kafka cluster or a Parquet archive, and the offsets read from it.

Light on purpose (no Spark import), so the command line can build sides before Spark starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from dr.kafka.client import Endpoint

__all__ = [
    "ArchiveDescription",
    "ArchiveSide",
    "KafkaDescription",
    "KafkaSide",
    "PartitionBounds",
    "Side",
    "SideBounds",
]


class KafkaDescription(TypedDict):
    """A Kafka side as the report records it (never its password)."""

    kind: Literal["kafka"]
    cluster: str | None
    stack: str | None
    bootstrap: str
    username: str | None
    security_protocol: str
    sasl_mechanism: str | None


class ArchiveDescription(TypedDict):
    """An archive side as the report records it."""

    kind: Literal["archive"]
    path: str
    name: str | None


@dataclass(frozen=True, kw_only=True)
class KafkaSide:
    """A Kafka cluster reached through ``endpoint`` (``name``/``stack`` only label the report)."""

    endpoint: Endpoint
    name: str | None = None
    stack: str | None = None
    kind: str = field(default="kafka", init=False)

    def describe(self) -> KafkaDescription:
        """What the report records about this side: never the password."""
        return {
            "kind": "kafka",
            "cluster": self.name,
            "stack": self.stack,
            "bootstrap": self.endpoint.bootstrap,
            "username": self.endpoint.username,
            "security_protocol": self.endpoint.security_protocol,
            "sasl_mechanism": self.endpoint.sasl_mechanism,
        }


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
