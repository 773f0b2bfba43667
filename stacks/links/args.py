"""The one argument type of every link component (:data:`stacks.links.LINK_COMPONENTS`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from dr.runtime.credentials import Credentials
from dr.topology import Link, Topology

__all__ = ["LinkArgs"]


@dataclass(frozen=True, kw_only=True)
class LinkArgs:
    """One link of the topology and what the program built before it (every placement's input)."""

    topology: Topology
    link: Link
    state_dir: Path
    credentials: Credentials
    """The stack's generated passwords."""
    clusters: dict[str, pulumi.Resource]
    """The cluster components, by cluster name."""
    access: dict[str, Any]
    """The :class:`~stacks.access.ClusterAccess` of each provisioned cluster, by cluster name."""
    workers: dict[str, Any]
    """The local Connect clusters' worker resources, by Connect cluster name."""
