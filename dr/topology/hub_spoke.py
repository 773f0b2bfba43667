"""Hub-and-spoke: edge clusters aggregated into a hub, and the rules such a topology must satisfy.

``architecture: hub-spoke`` declares clusters with role ``edge`` (each writing its own local topics),
one hub (role ``active``), the hub's passive DR copy and a standby. Each edge has one link into the hub,
run with MirrorMaker 2's ``DefaultReplicationPolicy``: edge ``e1``'s topic ``orders`` is ``e1.orders`` on
the hub, so the copies of several edges never mix and never loop back. The hub → passive link copies
everything with identity names (``e1.orders`` stays ``e1.orders``), as the active → passive link of an
active-passive estate does.

What each cluster holds: every edge and the hub hold the declared topics (an application writes them
on its home cluster); the hub and its passive copy also hold ``<edge>.<topic>`` for every topic an
edge's link selects, read-only for applications (only the replicator writes them).

:data:`RULES` are its rules, run after active-passive's (its hub is an active-passive pair) as its
:data:`SHAPE` says (its entry of :data:`dr.topology.architectures.ARCHITECTURES`); the helpers say which topics a cluster holds and which replication policy a link runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from dr.topology import active_passive
from dr.topology.kinds import Architecture, Engine, Naming, Role
from dr.topology.model import LostSite, TopologyShape
from dr.topology.topics import SEPARATOR, remote_topic
from dr.topology.violation import Violation

if TYPE_CHECKING:
    from dr.topology.model import Application, Cluster, Link, Rule, Topic, Topology

__all__ = [
    "LOST_SITE",
    "RULES",
    "SHAPE",
    "after_edge_loss",
    "aggregated_topics",
    "check_lost_edge",
    "edge_applications",
    "edge_link",
    "edges",
    "fallback_of",
    "is_edge_link",
    "is_hub_spoke",
    "lost_edges",
    "remote_topic_names",
    "remote_topics",
    "served_applications",
]

_MAX_TOPIC_NAME = 249


def is_hub_spoke(t: Topology) -> bool:
    """True when ``t`` declares ``architecture: hub-spoke``."""
    return t.architecture is Architecture.HUB_SPOKE


def edges(t: Topology) -> list[Cluster]:
    """The edge clusters, in declaration order."""
    return t.clusters_with(Role.EDGE)


def is_edge_link(t: Topology, link: Link) -> bool:
    """True when ``link`` aggregates an edge into the hub (a hub-spoke stack's link out of an edge)."""
    if not is_hub_spoke(t):
        return False
    return any(c.name == link.source and c.role is Role.EDGE for c in t.clusters)


def edge_link(t: Topology, edge: str) -> Link | None:
    """The running link out of ``edge`` (validation allows exactly one), or None."""
    found = [link for link in t.links if link.source == edge and link.is_running]
    return found[0] if found else None


def remote_topics(t: Topology) -> list[tuple[str, Topic]]:
    """``(edge, topic)`` for every declared topic an edge's running link carries into the hub, the
    topic renamed ``<edge>.<topic>`` (its partitions and configs are the edge topic's); a lost edge's
    copies (its ``lost_edge_topics``) stay."""
    if not is_hub_spoke(t):
        return []
    found: list[tuple[str, Topic]] = []
    for edge in edges(t):
        link = edge_link(t, edge.name)
        if link is None:
            continue
        found += [
            (edge.name, topic.model_copy(update={"name": remote_topic(edge.name, topic.name)}))
            for topic in t.topics_for(link)
        ]
    for lost in lost_edges(t):
        found += [
            (lost.name, topic.model_copy(update={"name": remote_topic(lost.name, topic.name)}))
            for topic in t.topics
            if topic.name in lost.lost_edge_topics
        ]
    return found


def lost_edges(t: Topology) -> list[Cluster]:
    """The decommissioned edges whose applications moved (``drctl failover --edge``), in declaration order."""
    return [c for c in t.clusters if c.role is Role.DECOMMISSIONED and c.lost_edge_topics]


def remote_topic_names(t: Topology) -> set[str]:
    """The names of every remote (aggregated) topic of ``t`` on the hub and its passive copy."""
    return {topic.name for _edge, topic in remote_topics(t)}


def aggregated_topics(t: Topology) -> list[Topic]:
    """The edges' topics as the hub and its passive copy hold them (``<edge>.<topic>``): what
    :func:`dr.topology.topics.topics_on` adds there for a hub-spoke estate."""
    return [topic for _edge, topic in remote_topics(t)]


# -- rules ----------------------------------------------------------------------------------------


def _edges_declared(t: Topology) -> Iterator[Violation]:
    if not edges(t):
        yield Violation(
            "clusters",
            "a hub-spoke estate declares no edge cluster",
            "give each cluster whose topics the hub aggregates role: edge, with a link into the hub (role active)",
        )
    hub = [c.name for c in t.clusters_with(Role.ACTIVE)]
    for edge in edges(t):
        if edge_link(t, edge.name) is None:
            target = repr(hub[0]) if hub else "the hub"
            yield Violation(
                "links",
                f"edge {edge.name!r} has no link into the hub, so nothing aggregates its topics",
                f"add a link with source {edge.name!r} and target {target}",
            )


def _links(t: Topology) -> Iterator[Violation]:
    roles = {c.name: c.role for c in t.clusters}
    hubs = [c.name for c in t.clusters_with(Role.ACTIVE)]
    hub = repr(hubs[0]) if hubs else "the hub (role active)"
    seen_edges: dict[str, str] = {}
    for j, link in enumerate(t.links):
        if not link.is_running:
            continue
        source, target = roles.get(link.source), roles.get(link.target)
        if target is Role.EDGE:
            yield Violation(
                f"links[{j}].target",
                f"link {link.name!r} replicates into edge {link.target!r}; in a hub-spoke estate nothing "
                "replicates into an edge (a hub → edge link would send the edges' own records back: a loop)",
                f"remove the link; edges only send, into {hub}",
            )
            continue
        if source is not Role.EDGE:
            if source is Role.ACTIVE and target not in (Role.PASSIVE, None):
                yield Violation(
                    f"links[{j}].target",
                    f"link {link.name!r} replicates the hub into {link.target!r} ({target}); the hub's only "
                    "link is to its passive DR copy",
                    "set the target to the passive cluster, or remove the link",
                )
            continue
        if target is not Role.ACTIVE and target is not None:
            yield Violation(
                f"links[{j}].target",
                f"edge {link.source!r} is linked to {link.target!r} ({target}), not to the hub; an edge "
                "replicates only into the hub",
                f"set target: {hub}",
            )
        if link.source in seen_edges:
            yield Violation(
                f"links[{j}]",
                f"edge {link.source!r} has a second link ({link.name!r}; the first is {seen_edges[link.source]!r})",
                "keep one link per edge: it carries every topic the edge's applications write",
            )
        seen_edges.setdefault(link.source, link.name)
        if link.engine is not Engine.MIRRORMAKER2 or link.connect is not None:
            how = "on a Connect cluster" if link.connect is not None else f"with engine {link.engine}"
            yield Violation(
                f"links[{j}].{'connect' if link.connect is not None else 'engine'}",
                f"edge link {link.name!r} runs {how}; prefixed (<edge>.<topic>) links are built only as "
                "dedicated MirrorMaker 2 processes between local clusters so far",
                "use engine: mirrormaker2 without `connect`",
            )


def _prefix_collisions(t: Topology) -> Iterator[Violation]:
    edge_names = [c.name for c in edges(t)]
    for i, topic in enumerate(t.topics):
        for edge in edge_names:
            prefix = remote_topic(edge, "")
            if topic.name.startswith(prefix):
                original = topic.name[len(prefix) :]
                yield Violation(
                    f"topics[{i}].name",
                    f"topic {topic.name!r} is the name the hub gives the copy of {original!r} from edge {edge!r}, "
                    "so the hub's own topic and the aggregated one would be the same topic",
                    f"rename the topic so it does not start with {prefix!r}",
                )
    for edge, topic in remote_topics(t):
        if len(topic.name) > _MAX_TOPIC_NAME:
            yield Violation(
                "topics",
                f"edge {edge!r}'s copy {topic.name[:40]}... on the hub is {len(topic.name)} characters; "
                f"Kafka allows {_MAX_TOPIC_NAME}",
                "shorten the topic or the edge's name",
            )


def _applications(t: Topology) -> Iterator[Violation]:
    roles = {c.name: c.role for c in t.clusters}
    hubs = [c.name for c in t.clusters_with(Role.ACTIVE)]
    homes = ", ".join(repr(c.name) for c in t.clusters if c.role in (Role.EDGE, Role.ACTIVE)) or "none declared"
    remote = remote_topic_names(t)
    for i, app in enumerate(t.principals.applications):
        at = f"principals.applications[{i}]"
        for k, name in enumerate(app.produces):
            if name in remote:
                yield Violation(
                    f"{at}.produces[{k}]",
                    f"application {app.name!r} produces to {name!r}, an edge's topic aggregated on the hub: "
                    "it is read-only there (only the replicator writes it)",
                    f"produce to {name.split(SEPARATOR, 1)[1]!r} on the edge {name.split(SEPARATOR, 1)[0]!r} "
                    "(home: that edge) instead",
                )
        if app.produces_prefix and any(name.startswith(app.produces_prefix) for name in remote):
            yield Violation(
                f"{at}.produces_prefix",
                f"application {app.name!r}'s write prefix {app.produces_prefix!r} covers edge topics aggregated "
                "on the hub, which are read-only there",
                "use a prefix that no <edge>. copy starts with",
            )
        home = app.home if app.home is not None else (hubs[0] if hubs else None)
        if app.home is not None and app.home not in roles:
            yield Violation(
                f"{at}.home",
                f"application {app.name!r} has unknown home cluster {app.home!r}",
                f"use one of: {homes}",
            )
            continue
        if app.home is not None and roles[app.home] not in (Role.EDGE, Role.ACTIVE):
            yield Violation(
                f"{at}.home",
                f"application {app.name!r} has home {app.home!r}, a {roles[app.home]} cluster; applications run "
                "on an edge or on the hub",
                f"use one of: {homes}",
            )
            continue
        if home is not None and roles.get(home) is Role.EDGE:
            remote_read = [name for name in app.consumes if name in remote]
            if remote_read:
                yield Violation(
                    f"{at}.consumes",
                    f"application {app.name!r} lives on edge {home!r} but consumes {remote_read[0]!r}, "
                    "which only the hub and its passive copy hold",
                    "consume it from an application whose home is the hub, or consume the edge's own topic",
                )


def _fallbacks(t: Topology) -> Iterator[Violation]:
    roles = {c.name: c.role for c in t.clusters}
    for i, app in enumerate(t.principals.applications):
        if app.fallback is None:
            continue
        at = f"principals.applications[{i}].fallback"
        targets = [c.name for c in t.clusters if c.role in (Role.EDGE, Role.ACTIVE) and c.name != app.home]
        choose = f"use one of: {', '.join(repr(n) for n in targets) or 'none declared'}, or remove it (the hub)"
        if app.home is None or roles.get(app.home) is not Role.EDGE:
            yield Violation(
                at,
                f"application {app.name!r} names fallback {app.fallback!r}, but its home "
                f"{app.home or 'the hub'!r} is not an edge; only an edge's applications move when it is lost",
                "remove `fallback` (a hub failover moves the hub's applications to the promoted copy)",
            )
        elif app.fallback not in roles:
            yield Violation(at, f"application {app.name!r} has unknown fallback cluster {app.fallback!r}", choose)
        elif app.fallback == app.home:
            yield Violation(
                at,
                f"application {app.name!r} falls back to {app.fallback!r}, its own home edge: when that edge is "
                "lost it would have nowhere to go",
                choose,
            )
        elif roles[app.fallback] not in (Role.EDGE, Role.ACTIVE):
            yield Violation(
                at,
                f"application {app.name!r} falls back to {app.fallback!r}, a {roles[app.fallback]} cluster; an "
                "edge's applications move to another edge or to the hub",
                choose,
            )


def _lost_edges(t: Topology) -> Iterator[Violation]:
    declared = {topic.name for topic in t.topics}
    for i, c in enumerate(t.clusters):
        if not c.lost_edge_topics:
            continue
        if c.role is not Role.DECOMMISSIONED:
            yield Violation(
                f"clusters[{i}].lost_edge_topics",
                f"cluster {c.name!r} lists lost-edge topics but is {c.role}; only a lost (decommissioned) edge "
                "keeps its copies on the hub this way",
                "remove `lost_edge_topics`, or set role: decommissioned",
            )
        unknown = [name for name in c.lost_edge_topics if name not in declared]
        if unknown:
            yield Violation(
                f"clusters[{i}].lost_edge_topics",
                f"lost edge {c.name!r} lists {unknown[0]!r}, which is not a declared topic",
                "list declared topics only (their <edge>.<topic> copies stay on the hub)",
            )


# -- loss of an edge -----------------------------------------------------------------------------------


RULES: tuple[Rule, ...] = (_edges_declared, _links, _prefix_collisions, _applications, _fallbacks, _lost_edges)
"""Every hub-and-spoke rule, run after the shared rules and the hub's active-passive ones."""


def fallback_of(t: Topology, app: Application) -> str:
    """Where ``app`` moves when its home edge is lost: its ``fallback``, else the hub."""
    return app.fallback if app.fallback is not None else t.active().name


def edge_applications(t: Topology, edge: str) -> list[Application]:
    """The applications whose home is ``edge`` (what the loss of ``edge`` moves)."""
    return [app for app in t.principals.applications if app.home == edge]


def check_lost_edge(t: Topology, edge: str) -> Link:
    """The link out of ``edge`` when ``edge`` can be failed over (an edge of a hub-spoke stack, with its
    link into the hub); :class:`~dr.base.errors.TopologyError` naming the choices otherwise."""
    from dr.base.errors import TopologyError

    names = [c.name for c in edges(t)]
    if not is_hub_spoke(t):
        raise TopologyError(
            f"stack '{t.name}' is {t.architecture}: --edge moves the applications of a lost edge of a hub-spoke stack",
            f"run `drctl failover --stack {t.name}` without --edge",
        )
    if edge not in names:
        raise TopologyError(
            f"{edge!r} is not an edge of stack '{t.name}' (edges: {', '.join(names) or 'none'})",
            f"pass --edge with one of: {', '.join(names) or 'none'}",
        )
    link = edge_link(t, edge)
    if link is None:  # validation refuses an edge without a link; a hand-edited file may still lack it
        raise TopologyError(f"edge {edge!r} has no link into the hub", f"add a link with source {edge!r}")
    return link


def after_edge_loss(t: Topology, edge: str) -> Topology:
    """The desired hub-and-spoke topology once ``edge`` is lost (pure; ``t`` is unchanged).

    ``edge`` becomes decommissioned and its link goes; the topics that link carried are kept in the
    edge's ``lost_edge_topics``, so their ``<edge>.<topic>`` copies stay on the hub and its passive copy.
    Each of the edge's applications moves to its fallback (:func:`fallback_of`): it writes that
    cluster's local topics; moved to the hub, it also reads the copies ``<edge>.<topic>`` of what it
    consumed (its translated offsets are there). Other edges' applications whose fallback was ``edge``
    fall back to the hub from now on.
    """
    link = check_lost_edge(t, edge)
    carried = [topic.name for topic in t.topics_for(link)]
    hub = t.active().name
    apps = []
    for app in t.principals.applications:
        if app.home == edge:
            target = fallback_of(t, app)
            update: dict[str, object] = {"home": target, "fallback": None}
            if target == hub:
                extra = [remote_topic(edge, n) for n in app.consumes if n in carried]
                update["consumes"] = [*app.consumes, *(n for n in extra if n not in app.consumes)]
            apps.append(app.model_copy(update=update))
        elif app.fallback == edge:
            apps.append(app.model_copy(update={"fallback": None}))
        else:
            apps.append(app)
    clusters = [
        c.model_copy(update={"role": Role.DECOMMISSIONED, "lost_edge_topics": carried}) if c.name == edge else c
        for c in t.clusters
    ]
    return t.revised(
        clusters=clusters,
        links=[lk for lk in t.links if lk.source != edge],
        principals=t.principals.model_copy(update={"applications": apps}),
        failover_done=True,
    )


# -- hub failover -----------------------------------------------------------------------------------


def after_hub_failover(t: Topology, mode: str = "planned") -> Topology:
    """The desired hub-and-spoke topology once the hub's passive copy is promoted (pure).

    The hub becomes decommissioned, its passive copy the hub (active), the standby its passive copy
    (fed by ``<new hub>-to-<standby>``, shaped like the old hub's link). Every edge's link is re-pointed
    at the new hub (``<edge>-to-<new hub>``, same topics, groups and intervals), and the applications
    whose home was the old hub move to the new one. ``mode`` is accepted for symmetry with
    :meth:`Topology.after_failover` (MirrorMaker 2 links keep no state across a failover).
    """
    if mode not in ("planned", "unplanned"):
        from dr.base.errors import ConfigError

        raise ConfigError(f"unknown failover mode {mode!r}", "use 'planned' or 'unplanned'")
    old_hub = t.active()
    new_hub = t.to_promote()
    standby = t.standby()
    feeding = [link for link in t.links_into(new_hub.name) if link.is_running and link.source == old_hub.name]
    roles = {old_hub.name: Role.DECOMMISSIONED, new_hub.name: Role.ACTIVE}
    links: list[Link] = []
    for edge in edges(t):
        link = edge_link(t, edge.name)
        if link is not None:
            links.append(link.model_copy(update={"name": f"{edge.name}-to-{new_hub.name}", "target": new_hub.name}))
    if standby is not None and feeding:
        roles[standby.name] = Role.PASSIVE
        links.append(
            feeding[0].model_copy(
                update={"name": f"{new_hub.name}-to-{standby.name}", "source": new_hub.name, "target": standby.name}
            )
        )
    clusters = [c.model_copy(update={"role": roles[c.name]}) if c.name in roles else c for c in t.clusters]
    apps = [
        app.model_copy(update={"home": new_hub.name}) if app.home == old_hub.name else app
        for app in t.principals.applications
    ]
    apps = [app.model_copy(update={"fallback": new_hub.name}) if app.fallback == old_hub.name else app for app in apps]
    return t.revised(
        clusters=clusters,
        links=links,
        principals=t.principals.model_copy(update={"applications": apps}),
        failover_done=True,
    )


def served_applications(t: Topology, role: Role, cluster: str | None) -> list[Application]:
    """The applications a cluster of ``role`` serves: an edge only those whose home it is, the hub (and its
    passive copy) the rest (no home, or the hub's own name)."""
    apps = t.principals.applications
    if role is Role.EDGE:
        return [app for app in apps if app.home == cluster]
    hubs = {c.name for c in t.clusters_with(Role.ACTIVE)}
    return [app for app in apps if app.home is None or app.home in hubs]


LOST_SITE = LostSite(flag="edge", role=Role.EDGE)
"""A lost edge is named ``drctl failover --edge <edge>``; the hub fails over as an active-passive pair."""

SHAPE = TopologyShape(
    rules=(*active_passive.RULES, *RULES),
    after_failover=after_hub_failover,
    runbook="runbooks/hub-and-spoke.md",
    edge_naming=Naming.PREFIXED,  # an edge's topics land on the hub as <edge>.<topic>; the hub's link keeps names
    remote_copies=aggregated_topics,
    writes_at_home=True,
    served_applications=served_applications,
    lost_site=LOST_SITE,
)
"""A hub-and-spoke stack's entry of :data:`dr.topology.architectures.ARCHITECTURES`."""
