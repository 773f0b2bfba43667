"""Read-only checks of a cluster: can it be reached, are its brokers up, are partitions online.

Reachability is decided by a TCP connect to the bootstrap addresses first, so a dead cluster is
reported in well under a second instead of after librdkafka's metadata timeout.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from confluent_kafka.admin import ClusterMetadata

from dr.base.errors import AuthError, ClusterError
from dr.kafka.client import Endpoint, cluster_metadata

__all__ = [
    "ClusterHealth",
    "PartitionReplicas",
    "Reachability",
    "cluster_health",
    "listening",
    "metadata",
    "reachability",
]


def listening(bootstrap: str, timeout: float = 0.5) -> bool:
    """True when at least one bootstrap address accepts a TCP connection."""
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def metadata(endpoint: Endpoint, timeout: float) -> tuple[ClusterMetadata | None, str | None]:
    """``(metadata, None)`` or ``(None, why)``: a refused login told apart from an unreachable
    cluster, from a client that logs nothing (:func:`dr.kafka.client.cluster_metadata`)."""
    try:
        return cluster_metadata(endpoint, timeout), None
    except (AuthError, ClusterError) as exc:
        return None, exc.problem


class Reachability(TypedDict):
    """Whether a cluster answers, with how many brokers, or why not (:func:`reachability`)."""

    reachable: bool
    brokers: int | None
    error: str | None


def reachability(endpoint: Endpoint, timeout: float = 3.0) -> Reachability:
    """``{"reachable": bool, "brokers": n | None, "error": str | None}`` for one cluster."""
    if not listening(endpoint.bootstrap):
        return {"reachable": False, "brokers": None, "error": f"nothing listens on {endpoint.bootstrap}"}
    md, error = metadata(endpoint, timeout)
    return {"reachable": md is not None, "brokers": None if md is None else len(md.brokers), "error": error}


class PartitionReplicas(TypedDict):
    """A partition's leader, replicas and in-sync replicas (broker ids)."""

    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass
class ClusterHealth:
    """What a cluster's metadata says about its brokers and partitions."""

    reachable: bool
    brokers: list[int] = field(default_factory=list)
    expected_brokers: int | None = None
    offline: list[str] = field(default_factory=list)
    under_replicated: list[str] = field(default_factory=list)
    missing_topics: list[str] = field(default_factory=list)
    partitions: dict[str, PartitionReplicas] = field(default_factory=dict)
    error: str | None = None

    @property
    def brokers_down(self) -> int:
        """Declared brokers that are not registered (0 when unknown)."""
        if self.expected_brokers is None:
            return 0
        return max(0, self.expected_brokers - len(self.brokers))

    @property
    def healthy(self) -> bool:
        """Reachable, every declared broker up, no offline partition, every expected topic present."""
        return self.reachable and not self.brokers_down and not self.offline and not self.missing_topics

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = asdict(self)
        d.update(healthy=self.healthy, brokers_down=self.brokers_down)
        return d


def cluster_health(
    endpoint: Endpoint,
    *,
    expected_brokers: int | None = None,
    topics: list[str] | None = None,
    isr: bool = False,
    timeout: float = 10.0,
) -> ClusterHealth:
    """Brokers, offline and under-replicated partitions (all topics), and which of ``topics`` are missing.

    ``isr`` adds leader, replicas and in-sync replicas of every partition of ``topics``.
    """
    if not listening(endpoint.bootstrap):
        return ClusterHealth(False, expected_brokers=expected_brokers, error=f"nothing listens on {endpoint.bootstrap}")
    md, error = metadata(endpoint, timeout)
    if md is None:
        return ClusterHealth(False, expected_brokers=expected_brokers, error=error)
    health = ClusterHealth(True, brokers=sorted(md.brokers), expected_brokers=expected_brokers)
    for name, topic in sorted(md.topics.items()):
        for pid, part in sorted(topic.partitions.items()):
            key = f"{name}:{pid}"
            if part.leader < 0 or part.error is not None:
                health.offline.append(key)
            elif len(part.isrs) < len(part.replicas):
                health.under_replicated.append(key)
            if isr and (topics is None or name in topics):
                health.partitions[key] = PartitionReplicas(
                    leader=part.leader, replicas=list(part.replicas), isr=list(part.isrs)
                )
    health.missing_topics = sorted(set(topics or []) - set(md.topics))
    return health
