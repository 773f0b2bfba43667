"""The one argument type of every link component (:data:`stacks.links.LINK_COMPONENTS`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pulumi

    from dr.kafka.client import Endpoint
    from dr.kafka.connect_rest import ConnectRest
    from dr.runtime.cluster import LocalCluster
    from dr.runtime.credentials import Credentials
    from dr.topology import Link, Topology
    from stacks.access import ClusterAccess
    from stacks.connect import LocalConnectWorkers

__all__ = ["LinkArgs", "RunnerSite"]


@dataclass(frozen=True, kw_only=True)
class LinkArgs:
    """One link of the topology and what the program built before it (every placement's input)."""

    topology: Topology
    link: Link
    state_dir: Path
    credentials: Credentials
    """The stack's generated passwords."""
    clusters: Mapping[str, pulumi.Resource]
    """The cluster components, by cluster name."""
    access: dict[str, ClusterAccess]
    """The :class:`~stacks.access.ClusterAccess` of each provisioned cluster, by cluster name."""
    workers: dict[str, LocalConnectWorkers]
    """The local Connect clusters' worker resources, by Connect cluster name."""


class RunnerSite(Protocol):
    """What a placement's runner is built from (:data:`stacks.links.LINK_RUNNERS`): the estate of the stack
    (:class:`dr.estate.estate.Estate`), seen through what runners use."""

    topology: Topology
    state: Path

    def endpoint(self, name: str) -> Endpoint:
        """How to reach cluster ``name``."""
        ...

    def local_cluster(self, name: str) -> LocalCluster:
        """The runtime handle of local cluster ``name`` (refused for an external one)."""
        ...

    def connect_rest(self, name: str) -> ConnectRest:
        """The REST API of Connect cluster ``name``."""
        ...
