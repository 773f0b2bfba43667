"""The rule of every architecture but hub-and-spoke: the fields only a hub-and-spoke stack uses stay unused.

Its own module, beside the architectures' (:mod:`dr.topology.active_passive`, :mod:`dr.topology.active_active`),
whose ``SHAPE`` each runs it — not in :mod:`dr.topology.hub_spoke`, which builds on active-passive's rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from dr.topology.kinds import Role
from dr.topology.violation import Violation

if TYPE_CHECKING:
    from dr.topology.model import Topology

__all__ = ["hub_fields_unused"]


def hub_fields_unused(t: Topology, *, homes: bool) -> Iterator[Violation]:
    """The rule of every other architecture's stack: no edge cluster, no fallback, no lost-edge topics, and
    no application ``home`` unless that architecture's applications write at home (``homes``)."""
    for i, c in enumerate(t.clusters):
        if c.role is Role.EDGE:
            yield Violation(
                f"clusters[{i}].role",
                f"cluster {c.name!r} is an edge, but the stack's architecture is {t.architecture}",
                "set kafka-dr:architecture: hub-spoke, or give the cluster another role",
            )
    for i, app in enumerate(t.principals.applications):
        if app.home is not None and not homes:
            yield Violation(
                f"principals.applications[{i}].home",
                f"application {app.name!r} names a home cluster, but in an active-passive estate every "
                "application runs against the active cluster",
                "remove `home`, or declare kafka-dr:architecture: hub-spoke",
            )
    for i, app in enumerate(t.principals.applications):
        if app.fallback is not None:
            yield Violation(
                f"principals.applications[{i}].fallback",
                f"application {app.name!r} names a fallback cluster, but only a hub-spoke estate moves an "
                f"edge's applications (the stack's architecture is {t.architecture})",
                "remove `fallback`, or declare kafka-dr:architecture: hub-spoke",
            )
    for i, c in enumerate(t.clusters):
        if c.lost_edge_topics:
            yield Violation(
                f"clusters[{i}].lost_edge_topics",
                f"cluster {c.name!r} lists lost-edge topics, but the stack's architecture is {t.architecture}",
                "remove `lost_edge_topics` (only `drctl failover --edge` of a hub-spoke stack writes it)",
            )
