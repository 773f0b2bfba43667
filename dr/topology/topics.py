"""Topic names across links, and the topic queries every layer asks whatever the architecture.

A link running MirrorMaker 2's ``DefaultReplicationPolicy`` names its copies ``<source>.<topic>`` on the
target (:func:`remote_topic`); an identity link keeps the names. Which topics a cluster holds
(:func:`topics_on`) and the name a link gives a topic on its target (:func:`target_topic`) are asked by the
failover, the estate and the Pulumi program alike, as are the remote copies each peer of an active-active
estate holds (:func:`remote_topics_on`, :func:`consumes_remote`): they ask here, never an architecture's own
module (:mod:`dr.topology.hub_spoke`, :mod:`dr.topology.active_active`), which builds on these names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dr.topology.kinds import Role

if TYPE_CHECKING:
    from dr.topology.model import Cluster, Link, Topic, Topology

__all__ = [
    "SEPARATOR",
    "consumes_remote",
    "copied_topics_regex",
    "link_topics_regex",
    "prefixed_link",
    "remote_copies",
    "remote_topic",
    "remote_topics_on",
    "target_topic",
    "topics_on",
]

SEPARATOR = "."
"""MirrorMaker 2's ``replication.policy.separator`` (its default): ``<source>.<topic>`` on the target."""


def remote_topic(source: str, topic: str) -> str:
    """The name a prefixed link out of ``source`` gives its topic ``topic`` on the target:
    ``<source>.<topic>`` (MirrorMaker 2's DefaultReplicationPolicy)."""
    return f"{source}{SEPARATOR}{topic}"


def remote_topics_on(t: Topology, cluster: str, topics: list[str] | None = None) -> list[str]:
    """The remote copies ``cluster`` may hold of ``topics`` (default: every declared topic) in an estate of
    peers: one per other declared cluster — a failed region's copies stay readable on the survivors."""
    names = topics if topics is not None else [topic.name for topic in t.topics]
    others = [c.name for c in t.clusters if c.name != cluster]
    return [remote_topic(o, name) for o in others for name in names]


def consumes_remote(t: Topology, name: str) -> bool:
    """True when ``name`` is the remote copy of a declared topic in an estate of peers (an active-active
    stack: :attr:`TopologyShape.peers <dr.topology.model.TopologyShape.peers>`), which an application may
    consume by name."""
    source, sep, original = name.partition(SEPARATOR)
    return (
        t.shape().peers
        and bool(sep)
        and source in {c.name for c in t.clusters}
        and original in {topic.name for topic in t.topics}
    )


def remote_copies(t: Topology) -> list[Topic]:
    """The copies the active cluster and its passive copy hold besides the declared topics, as the
    architecture adds them (the aggregated ``<edge>.<topic>`` of a hub); none for the others."""
    copies = t.shape().remote_copies
    return copies(t) if copies is not None else []


def prefixed_link(t: Topology, link: Link) -> bool:
    """True when ``link`` names remote topics ``<source>.<topic>`` (DefaultReplicationPolicy) rather
    than keeping the names (IdentityReplicationPolicy): as :meth:`Topology.naming` decides it."""
    return t.naming(link).prefixed


def link_topics_regex(t: Topology, link: Link) -> str:
    """Exactly the declared topics ``link`` selects, as one regex alternation (``(?!)``, matching nothing,
    when it selects none)."""
    names = [topic.name for topic in t.topics_for(link)]
    return "|".join(re.escape(n) for n in names) or "(?!)"


def copied_topics_regex(t: Topology, link: Link) -> str:
    """What ``link``'s MirrorMaker 2 copies: between peers only the declared topics it selects
    (:attr:`Naming.declared_only <dr.topology.kinds.Naming.declared_only>`), so no remote topic, whatever
    the link's patterns match, is ever copied on; else every topic its patterns match."""
    return link_topics_regex(t, link) if t.naming(link).declared_only else link.topics_regex


def target_topic(t: Topology, link: Link, topic: str) -> str:
    """The name ``link`` gives its source's ``topic`` on the target: ``<source>.<topic>`` over a prefixed
    link, else the same name."""
    return remote_topic(link.source, topic) if prefixed_link(t, link) else topic


def topics_on(t: Topology, cluster: Cluster) -> list[Topic]:
    """The topics ``cluster`` holds: the declared ones, plus the remote copies its architecture adds on the
    active cluster and its passive copy (the aggregated edge topics of a hub); none on a cluster that holds
    no topics."""
    if not cluster.holds_topics:
        return []
    if cluster.role in (Role.ACTIVE, Role.PASSIVE):
        return [*t.topics, *remote_copies(t)]
    return list(t.topics)
