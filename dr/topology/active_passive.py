"""Active-passive: one active cluster, its passive copy fed by a link, and a standby.

A failover promotes the passive cluster (:func:`after_failover`); :meth:`Topology.after_failover
<dr.topology.model.Topology.after_failover>` asks it through :data:`SHAPE`, its entry of :data:`dr.topology.architectures.ARCHITECTURES`,
for an active-passive estate and an active-active one (a failover of a whole active-active stack), as it asks
:func:`dr.topology.hub_spoke.after_hub_failover` for a hub. Its rules (:data:`RULES`: one active, one passive,
one standby, replication one way) hold for a hub-and-spoke stack too, whose hub is an active-passive pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from dr.topology.hub_fields import hub_fields_unused
from dr.topology.kinds import Engine, LinkState, Role
from dr.topology.model import FAILOVER_STATES, Cluster, Link, Rule, Topology, TopologyShape
from dr.topology.violation import Violation

__all__ = ["RULES", "SHAPE", "after_failover"]


def after_failover(t: Topology, mode: str = "planned") -> Topology:
    """The desired topology once the passive cluster of ``t`` is promoted (pure; ``t`` is unchanged).

    The active cluster becomes decommissioned, the passive becomes active and the standby (if any)
    becomes passive. A ``cluster-link`` link into the promoted cluster is kept, no longer running: its
    state becomes ``promoted`` (``mode="planned"``) or ``failed-over`` (``mode="unplanned"``), which is
    how its mirror topics are promoted. Every other link is dropped, and one link
    ``<passive>-to-<standby>`` is added with the engine, topics, consumer groups and intervals of the
    link that fed the old passive cluster.
    """
    old_active = t.active()
    new_active = t.to_promote()
    new_passive = t.standby()
    into = t.links_into(new_active.name)
    feeding = [link for link in into if link.is_running] or into
    template = next((link for link in feeding if link.source == old_active.name), feeding[0])

    roles = {old_active.name: Role.DECOMMISSIONED, new_active.name: Role.ACTIVE}
    links: list[Link] = [
        link.model_copy(update={"state": FAILOVER_STATES[mode]}) if link.is_running else link
        for link in into
        if link.engine == Engine.CLUSTER_LINK
    ]
    if new_passive is not None:
        roles[new_passive.name] = Role.PASSIVE
        links.append(
            template.model_copy(
                update={
                    "name": f"{new_active.name}-to-{new_passive.name}",
                    "source": new_active.name,
                    "target": new_passive.name,
                    "state": LinkState.RUNNING,
                }
            )
        )
    clusters = [c.model_copy(update={"role": roles[c.name]}) if c.name in roles else c for c in t.clusters]
    # A Connect cluster living on the decommissioned cluster would lose its internal topics: it
    # moves (new group and internal topics) to the cluster that now receives the link.
    home = new_passive.name if new_passive is not None else new_active.name
    connect_clusters = [
        cc.model_copy(update={"cluster": home}) if cc.is_local and cc.cluster == old_active.name else cc
        for cc in t.connect_clusters
    ]
    return Topology(
        name=t.name,
        profile=t.profile,
        clusters=clusters,
        topics=t.topics,
        principals=t.principals,
        links=links,
        connect_clusters=connect_clusters,
        failover_done=True,
        provisioning=t.provisioning,
        endpoint=t.endpoint,
        failover_policy=t.failover_policy,
    )


# -- rules ----------------------------------------------------------------------------------------


def _after_first(t: Topology, role: Role) -> Iterator[tuple[int, Cluster, str]]:
    """``(index, cluster, name of the first)`` of every cluster with ``role`` after the first one."""
    found = [(i, c) for i, c in enumerate(t.clusters) if c.role == role]
    for i, c in found[1:]:
        yield i, c, found[0][1].name


def _one_active(t: Topology) -> Iterator[Violation]:
    """Exactly one active cluster: the one the applications write to."""
    for i, c, first in _after_first(t, Role.ACTIVE):
        yield Violation(
            f"clusters[{i}].role",
            f"cluster {c.name!r} is active but so is {first!r}; an active-passive topology has exactly one",
            f"make {c.name!r} passive (fed by a link from {first!r}) or standby",
        )


def _one_passive_one_standby(t: Topology) -> Iterator[Violation]:
    """One passive cluster per active, and one standby that the failover promotes next."""
    for role, fix in (
        (Role.PASSIVE, "make {name!r} standby (the failover links it when it promotes {first!r}) or decommissioned"),
        (Role.STANDBY, "make {name!r} decommissioned, or keep it in another stack"),
    ):
        for i, c, first in _after_first(t, role):
            yield Violation(
                f"clusters[{i}].role",
                f"cluster {c.name!r} is {role} but so is {first!r}; "
                f"an active-passive topology has one {role} cluster per active cluster",
                fix.format(name=c.name, first=first),
            )


def _find_cycle(start: str, edges: dict[str, list[tuple[str, int]]], members: set[str]) -> list[int]:
    """Shortest list of link indices leading from ``start`` back to ``start`` inside ``members``."""
    paths: dict[str, list[int]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt, j in edges.get(node, []):
                if nxt == start:
                    return [*paths[node], j]
                if nxt in members and nxt not in paths:
                    paths[nxt] = [*paths[node], j]
                    following.append(nxt)
        frontier = following
    return []


def _reachable(node: str, edges: dict[str, list[tuple[str, int]]]) -> set[str]:
    seen: set[str] = set()
    stack = [node]
    while stack:
        for nxt, _ in edges.get(stack.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _link_cycles(t: Topology) -> Iterator[Violation]:
    """Replication flows one way, from the active cluster outwards: no links in a cycle."""
    known = [c.name for c in t.clusters]
    edges: dict[str, list[tuple[str, int]]] = {}
    for j, link in enumerate(t.links):
        if link.is_running and link.source in known and link.target in known:
            edges.setdefault(link.source, []).append((link.target, j))
    reach = {name: _reachable(name, edges) for name in known}
    reported: set[str] = set()
    for name in known:
        if name in reported or name not in reach[name]:
            continue
        component = {other for other in reach[name] if name in reach[other]} | {name}
        reported |= component
        cycle = _find_cycle(name, edges, component)
        hops = " → ".join([name, *(t.links[j].target for j in cycle)])
        link_names = ", ".join(repr(t.links[j].name) for j in cycle)
        yield Violation(
            f"links[{max(cycle)}]",
            f"links {link_names} form a replication cycle {hops}",
            "remove one of these links: replication flows one way, from the active cluster outwards",
        )


RULES: tuple[Rule, ...] = (_one_active, _one_passive_one_standby, _link_cycles)
"""The rules of an active-passive estate (and of a hub-and-spoke one's hub), run after the shared rules."""

SHAPE = TopologyShape(
    rules=(*RULES, partial(hub_fields_unused, homes=False)),
    after_failover=after_failover,
    runbook="runbooks/unplanned-failover.md",
    client_endpoint=True,  # clients follow the one active cluster, so an endpoint may front it
    site_controllers=True,  # a site's controller fails the whole stack over by itself
)
"""An active-passive stack's entry of :data:`dr.topology.architectures.ARCHITECTURES`."""
