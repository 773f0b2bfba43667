"""The three clusters of one failover, by role: A (active, replaced), B (passive, promoted), C (standby)."""

from __future__ import annotations

from dataclasses import dataclass

from dr.topology import Cluster, Topology

__all__ = ["Roles"]


@dataclass(frozen=True)
class Roles:
    """A, B and C of a topology before its failover; B always exists (a failover needs one to promote)."""

    source: Cluster
    target: Cluster
    standby: Cluster | None

    @classmethod
    def of(cls, topology: Topology) -> Roles:
        """The roles of ``topology``; :class:`~dr.base.errors.TopologyError` when it declares no passive cluster."""
        return cls(topology.active(), topology.to_promote(), topology.standby())

    @property
    def standby_name(self) -> str | None:
        """C's name, or None when the topology declares no standby."""
        return self.standby.name if self.standby else None
