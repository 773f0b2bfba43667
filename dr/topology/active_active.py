"""Active-active: peers that each write their own local topics and replicate them both ways.

Every cluster of an ``architecture: active-active`` stack is an ``active`` peer (a failed region is
``decommissioned``). Each link copies the source's *declared* topics to the target under MirrorMaker 2's
``DefaultReplicationPolicy`` names: A's ``orders`` is the remote topic ``A.orders`` on B, and B's
``orders`` is ``B.orders`` on A. A link copies only declared (local) topics, so a remote topic is never
copied again (no ``A.B.orders``) — MirrorMaker 2's own cycle check refuses ``B.orders`` going back to B.

Applications declare their ``home`` peer: they write its local topics, and read those and the remote
copies of the same topics (the global view: subscribe to ``^([^.]+\\.)?orders$``). Remote topics are
read-only for everyone but the replicator.

The rules here (:data:`RULES`) run only for active-active stacks, as
:data:`dr.topology.architectures.ARCHITECTURES` lists them; what active-passive alone demands (one active
cluster, no link cycle) is :mod:`dr.topology.active_passive`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from dr.topology.active_passive import after_failover
from dr.topology.hub_fields import hub_fields_unused
from dr.topology.kinds import Architecture, Engine, Naming, Role
from dr.topology.model import LostSite, TopologyShape
from dr.topology.topics import SEPARATOR, remote_topic, remote_topics_on  # remote_topics_on handed on to the kind
from dr.topology.violation import Violation

if TYPE_CHECKING:
    from dr.topology.model import Rule, Topology

__all__ = [
    "LOST_SITE",
    "RULES",
    "after_region_failover",
    "is_active_active",
    "moving_applications",
    "peers",
    "remote_source",
    "remote_topics_on",
    "survivor_for",
]


def is_active_active(topology: Topology) -> bool:
    """True for an ``architecture: active-active`` stack."""
    return topology.architecture is Architecture.ACTIVE_ACTIVE


def remote_source(topology: Topology, name: str) -> str | None:
    """The cluster whose topic ``name`` is a remote copy of (``A`` for ``A.orders``), or None for a local name."""
    source, sep, _rest = name.partition(SEPARATOR)
    if sep and source in {c.name for c in topology.clusters}:
        return source
    return None


def peers(topology: Topology) -> list[str]:
    """The active peers, in declaration order."""
    return [c.name for c in topology.clusters if c.role is Role.ACTIVE]


def _all_remote_names(topology: Topology) -> list[str]:
    return [remote_topic(c.name, t.name) for c in topology.clusters for t in topology.topics]


# -- rules ----------------------------------------------------------------------------------------


def _v(path: str, problem: str, fix: str) -> Violation:
    return Violation(path, problem, fix)


def _roles(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if c.role in (Role.PASSIVE, Role.STANDBY):
            yield _v(
                f"clusters[{i}].role",
                f"cluster {c.name!r} is {c.role}, but every cluster of an active-active topology is an active peer",
                f"set role: active on {c.name!r} (with links both ways), or decommissioned",
            )
    if len(peers(t)) < 2 and not t.failover_done:
        yield _v(
            "clusters",
            f"an active-active topology needs two or more active peers; it has {len(peers(t))}",
            "declare a second cluster with role: active and links both ways, or use architecture: active-passive",
        )


def _links(t: Topology) -> Iterator[Violation]:
    running = [(j, lk) for j, lk in enumerate(t.links) if lk.is_running]
    pairs = {(lk.source, lk.target) for _, lk in running}
    for j, link in running:
        if link.engine is not Engine.MIRRORMAKER2:
            yield _v(
                f"links[{j}].engine",
                f"is {link.engine} on link {link.name!r}; active-active peers replicate with MirrorMaker 2's "
                "prefixed remote topics",
                "use engine: mirrormaker2",
            )
        if link.connect is not None:
            yield _v(
                f"links[{j}].connect",
                f"link {link.name!r} runs on Connect cluster {link.connect!r}; active-active links run as "
                "dedicated MirrorMaker 2 processes between local peers only (for now)",
                "remove `connect` from the link",
            )
        if (link.target, link.source) not in pairs:
            yield _v(
                f"links[{j}]",
                f"link {link.name!r} copies {link.source!r} to {link.target!r}, but nothing copies {link.target!r} "
                f"back to {link.source!r}: active-active peers replicate both ways",
                f"add a link with source {link.target!r} and target {link.source!r}",
            )


def _loops(t: Topology) -> Iterator[Violation]:
    """A link pattern written to copy remote topics (``B.orders``, ``B\\..*``) would copy them on, to
    ``A.B.orders``: refused. A catch-all (``.*``) is fine — it selects the declared topics only."""
    remote = _all_remote_names(t)
    declared = [topic.name for topic in t.topics]
    for j, link in enumerate(t.links):
        for k, pattern in enumerate(link.topics):
            probe = link.model_copy(update={"topics": [pattern]})
            copies = [n for n in remote if probe.selects_topic(n)]
            if copies and not any(probe.selects_topic(n) for n in declared):
                looped = remote_topic(link.source, copies[0])
                yield _v(
                    f"links[{j}].topics[{k}]",
                    f"{pattern!r} selects remote topic {copies[0]!r}, which link {link.name!r} would copy on to "
                    f"{link.target!r} as {looped!r}: a replication loop",
                    "select local topics only (their names, or .*); each peer's topics reach every other peer "
                    "through that peer's own link",
                )


def _collisions(t: Topology) -> Iterator[Violation]:
    names = {c.name for c in t.clusters}
    for i, topic in enumerate(t.topics):
        source, sep, original = topic.name.partition(SEPARATOR)
        if sep and source in names:
            yield _v(
                f"topics[{i}].name",
                f"{topic.name!r} is the remote-topic name of {source!r}'s topic {original!r} "
                f"(MirrorMaker 2 names remote topics <source>{SEPARATOR}<topic>): the two would collide",
                f"rename the topic so it does not start with '{source}{SEPARATOR}' (e.g. "
                f"{topic.name.replace(SEPARATOR, '-', 1)!r})",
            )


def _homes(t: Topology) -> Iterator[Violation]:
    active = peers(t)
    known = ", ".join(repr(n) for n in active) or "none declared"
    for i, app in enumerate(t.principals.applications):
        if app.home is None:
            yield _v(
                f"principals.applications[{i}].home",
                f"application {app.name!r} has no home cluster; in active-active each application writes one peer",
                f"add home: <peer> to {app.name!r}, one of: {known}",
            )
        elif app.home not in active:
            what = "an unknown cluster" if app.home not in {c.name for c in t.clusters} else "not an active peer"
            yield _v(
                f"principals.applications[{i}].home",
                f"application {app.name!r} has home {app.home!r}, which is {what}",
                f"set home to one of the active peers: {known}",
            )


def _remote_writes(t: Topology) -> Iterator[Violation]:
    remote = _all_remote_names(t)
    for i, app in enumerate(t.principals.applications):
        for k, name in enumerate(app.produces):
            if remote_source(t, name) is not None:
                yield _v(
                    f"principals.applications[{i}].produces[{k}]",
                    f"application {app.name!r} would write remote topic {name!r}; remote topics are read-only "
                    "for everyone but the replicator",
                    f"produce to the local topic {name.partition(SEPARATOR)[2]!r} on the application's home peer",
                )
        prefix = app.produces_prefix
        hit = next((n for n in remote if prefix is not None and n.startswith(prefix)), None)
        if hit is not None:
            yield _v(
                f"principals.applications[{i}].produces_prefix",
                f"{prefix!r} would grant application {app.name!r} write on remote topic {hit!r}; remote topics "
                "are read-only for everyone but the replicator",
                "use a prefix no peer's name followed by '.' starts with (e.g. add a dash: 'team-')",
            )


RULES: tuple[Rule, ...] = (_roles, _links, _loops, _collisions, _homes, _remote_writes)
"""Every active-active rule, run after the shared rules for an active-active stack."""


# -- region failover ------------------------------------------------------------------------------


def survivor_for(topology: Topology, region: str) -> str:
    """The peer that takes over ``region``'s applications: the first other active peer.

    :class:`~dr.base.errors.TopologyError` when ``region`` is not an active peer or no other peer is left.
    """
    from dr.base.errors import TopologyError

    active = peers(topology)
    if region not in active:
        raise TopologyError(
            f"{region!r} is not an active peer of stack '{topology.name}' (peers: {', '.join(active) or 'none'})",
            f"pass --region with one of: {', '.join(active) or 'none'}",
        )
    others = [p for p in active if p != region]
    if not others:
        raise TopologyError(
            f"{region!r} is the last active peer of stack '{topology.name}': no region is left to take over",
            "rebuild another peer first (runbooks/active-active.md, fail back)",
        )
    return others[0]


def after_region_failover(topology: Topology, region: str, survivor: str) -> Topology:
    """The desired topology once ``region`` failed over to ``survivor`` (pure; ``topology`` is unchanged).

    ``region`` becomes decommissioned, every link into or out of it goes, and its applications' home
    becomes ``survivor``: they write the survivor's local topics and read them plus the remote copies
    (``<region>.<topic>`` stays on the survivor, readable).
    """
    clusters = [
        c.model_copy(update={"role": Role.DECOMMISSIONED}) if c.name == region else c for c in topology.clusters
    ]
    apps = [
        a.model_copy(update={"home": survivor}) if a.home == region else a for a in topology.principals.applications
    ]
    return topology.revised(
        clusters=clusters,
        principals=topology.principals.model_copy(update={"applications": apps}),
        links=[lk for lk in topology.links if region not in (lk.source, lk.target)],
        failover_done=True,
    )


def moving_applications(topology: Topology, region: str) -> list[str]:
    """The applications whose home is ``region`` (what a failover of ``region`` moves)."""
    return [a.name for a in topology.principals.applications if a.home == region]


LOST_SITE = LostSite(flag="region", role=Role.ACTIVE)
"""A lost region is named ``drctl failover --region <peer>``: each active peer fails over alone."""

SHAPE = TopologyShape(
    rules=(*RULES, partial(hub_fields_unused, homes=True)),
    after_failover=after_failover,  # a failover of the whole stack (not ``--region``) promotes as active-passive does
    runbook="runbooks/active-active.md",
    naming=Naming.PEER,  # every link between peers, declared topics only, prefixed
    edge_naming=Naming.PEER,
    writes_at_home=True,
    lost_site=LOST_SITE,
)
"""An active-active stack's entry of :data:`dr.topology.architectures.ARCHITECTURES`."""
