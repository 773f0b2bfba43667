"""The rules a topology must satisfy, checked all at once at plan time.

Each rule is a small function yielding :class:`Violation` s; :func:`find_violations` runs them all
and :func:`raise_for_violations` turns any into one :class:`~dr.errors.TopologyError` whose message
lists every violation as ``field path: problem — fix``.

A link that no longer runs (a ``cluster-link`` kept ``promoted``/``failed-over`` after a failover,
see :class:`~dr.topology.model.LinkState`) replicates nothing: the rules about which roles a link
may join, what feeds a passive cluster, and cycles look only at running links.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dr.errors import TopologyError
from dr.topology.model import PORT_WINDOW, Engine, Kind, Profile, Role

if TYPE_CHECKING:
    from dr.topology.model import Cluster, Topology

__all__ = ["Violation", "find_violations", "raise_for_violations"]

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HOST_PORT = re.compile(r"[^\s:,]+:\d{1,5}|\[[0-9a-fA-F:.]+\]:\d{1,5}")
_FIRST_PORT, _LAST_PORT = 1024, 65535
_DEFAULT_BASE_PORT = 19100
_RULE_OWNED_CONFIGS = {"min.insync.replicas": "min_insync_replicas", "replication.factor": "replication_factor"}


@dataclass(frozen=True)
class Violation:
    """One broken rule: the offending field's path, what is wrong, and how to fix it."""

    path: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem} — {self.fix}"


def _names(items: list[Cluster]) -> str:
    return ", ".join(repr(c.name) for c in items) or "none declared"


# -- names ------------------------------------------------------------------------------------


def _duplicate_names(t: Topology) -> Iterator[Violation]:
    collections = (
        ("clusters", t.clusters),
        ("topics", t.topics),
        ("principals.applications", t.principals.applications),
        ("links", t.links),
    )
    for field, items in collections:
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            if item.name in first:
                yield Violation(
                    f"{field}[{i}].name",
                    f"{item.name!r} is already used by {field}[{first[item.name]}]",
                    "give each one a unique name",
                )
            else:
                first[item.name] = i
    p = t.principals
    if p.admin == p.replicator:
        yield Violation(
            "principals.replicator",
            f"{p.replicator!r} is also the admin principal",
            "use a separate replicator user so that its ACLs stay minimal",
        )
    reserved = {p.admin: "principals.admin", p.replicator: "principals.replicator"}
    for i, app in enumerate(p.applications):
        if app.name in reserved:
            yield Violation(
                f"principals.applications[{i}].name",
                f"{app.name!r} is already the {reserved[app.name]} principal",
                "give the application a principal name of its own",
            )


def _cluster_names(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if not _CLUSTER_NAME.fullmatch(c.name):
            yield Violation(
                f"clusters[{i}].name",
                f"{c.name!r} is not a valid cluster name (it names replication aliases, links and state directories)",
                "use 1-64 letters, digits, '-' or '_'",
            )


def _topic_names(t: Topology) -> Iterator[Violation]:
    for i, topic in enumerate(t.topics):
        if not _TOPIC_NAME.fullmatch(topic.name) or topic.name in (".", ".."):
            yield Violation(
                f"topics[{i}].name",
                f"{topic.name!r} is not a valid Kafka topic name",
                "use 1-249 characters from [a-zA-Z0-9._-], and not '.' or '..'",
            )


# -- roles ------------------------------------------------------------------------------------


def _one_active(t: Topology) -> Iterator[Violation]:
    if not t.clusters:
        yield Violation(
            "clusters", "no cluster is declared", "declare at least the active cluster under kafka-dr:clusters"
        )
        return
    actives = [(i, c) for i, c in enumerate(t.clusters) if c.role == Role.ACTIVE]
    if not actives:
        yield Violation(
            "clusters",
            "no cluster has role active",
            "set role: active on the cluster the applications write to",
        )
    for i, c in actives[1:]:
        first = actives[0][1].name
        yield Violation(
            f"clusters[{i}].role",
            f"cluster {c.name!r} is active but so is {first!r}; an active-passive topology has exactly one",
            f"make {c.name!r} passive (fed by a link from {first!r}) or standby",
        )


def _passive_fed(t: Topology) -> Iterator[Violation]:
    actives = [c.name for c in t.clusters if c.role == Role.ACTIVE]
    source = repr(actives[0]) if actives else "the active cluster"
    for i, c in enumerate(t.clusters):
        if c.role == Role.PASSIVE and not any(link.target == c.name and link.is_running for link in t.links):
            yield Violation(
                f"clusters[{i}].role",
                f"passive cluster {c.name!r} has no incoming link, so nothing replicates into it",
                f"add a link with target {c.name!r} from {source}, or make the cluster standby",
            )


def _standby_unlinked(t: Topology) -> Iterator[Violation]:
    if t.failover_done:
        return
    standbys = {c.name for c in t.clusters if c.role == Role.STANDBY}
    for j, link in enumerate(t.links):
        if not link.is_running:
            continue
        for end, direction in (("source", "out of"), ("target", "into")):
            name = getattr(link, end)
            if name in standbys:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} replicates {direction} standby cluster {name!r}, "
                    "but a standby has no link before a failover",
                    "remove the link: the failover pipeline links the standby when it promotes the passive cluster",
                )


# -- links ------------------------------------------------------------------------------------


def _link_ends(t: Topology) -> Iterator[Violation]:
    by_name = {c.name: c for c in t.clusters}
    for j, link in enumerate(t.links):
        for end, direction in (("source", "out of"), ("target", "into")):
            name = getattr(link, end)
            cluster = by_name.get(name)
            if cluster is None:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} names unknown cluster {name!r}",
                    f"use one of the declared clusters: {_names(t.clusters)}",
                )
            elif cluster.role == Role.DECOMMISSIONED and link.is_running:
                yield Violation(
                    f"links[{j}].{end}",
                    f"link {link.name!r} replicates {direction} decommissioned cluster {name!r}",
                    f"remove the link, or set its {end} to a cluster that is not decommissioned",
                )
        target = by_name.get(link.target)
        if link.engine == Engine.CLUSTER_LINK and target is not None and target.kind != Kind.CONFLUENT_CLOUD:
            yield Violation(
                f"links[{j}].engine",
                f"cluster-link needs a Confluent destination, but target {target.name!r} is {target.kind}",
                "use engine: mirrormaker2",
            )
        source = by_name.get(link.source)
        if link.engine == Engine.CLUSTER_LINK and source is not None and source.kind != Kind.CONFLUENT_CLOUD:
            yield Violation(
                f"links[{j}].source",
                f"cluster-link is built between Confluent Cloud clusters, but source {source.name!r} is {source.kind}",
                "use engine: mirrormaker2",
            )
        if not link.is_running:
            if link.engine != Engine.CLUSTER_LINK:
                yield Violation(
                    f"links[{j}].state",
                    f"is {link.state} on {link.engine} link {link.name!r}; "
                    "only a cluster-link is kept after a failover",
                    "remove the link, or set state: running",
                )
            elif target is not None and target.role != Role.ACTIVE:
                yield Violation(
                    f"links[{j}].state",
                    f"is {link.state} but target {target.name!r} of link {link.name!r} is {target.role}: "
                    "promoted mirror topics belong on the active cluster",
                    "set state: running if the link should replicate, or remove the link",
                )


def _link_patterns(t: Topology) -> Iterator[Violation]:
    for j, link in enumerate(t.links):
        for field in ("topics", "consumer_groups"):
            for k, pattern in enumerate(getattr(link, field)):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    yield Violation(
                        f"links[{j}].{field}[{k}]",
                        f"{pattern!r} is not a valid regular expression ({exc})",
                        "fix the pattern; names are matched as full regular expressions",
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


# -- topics and applications ------------------------------------------------------------------


def _topic_durability(t: Topology) -> Iterator[Violation]:
    holders = [c for c in t.clusters if c.is_local and c.role in (Role.ACTIVE, Role.PASSIVE, Role.STANDBY)]
    production = t.profile == Profile.PRODUCTION
    for i, topic in enumerate(t.topics):
        rf, isr = topic.replication_factor, topic.min_insync_replicas
        for c in holders:
            if rf > c.brokers:
                holds = "will hold every topic after a failover" if c.role == Role.STANDBY else "holds every topic"
                grow = f", or give cluster {c.name!r} brokers: 3" if c.brokers < 3 and rf <= 3 else ""
                yield Violation(
                    f"topics[{i}].replication_factor",
                    f"{rf} is more than the {c.brokers} broker(s) of local {c.role} cluster {c.name!r}, which {holds}",
                    f"set replication_factor to at most {c.brokers}{grow}",
                )
        if isr > rf:
            yield Violation(
                f"topics[{i}].min_insync_replicas",
                f"{isr} is more than replication_factor {rf}, so no acks=all write could ever succeed",
                f"set min_insync_replicas to at most {rf}",
            )
        if production and rf >= 3 and isr < 2:
            yield Violation(
                f"topics[{i}].min_insync_replicas",
                f"is {isr} with replication_factor {rf} in the production profile: "
                "an acknowledged write may exist on a single broker",
                "set min_insync_replicas to 2",
            )
        unclean = topic.configs.get("unclean.leader.election.enable", "")
        if production and unclean.strip().lower() == "true":
            yield Violation(
                f'topics[{i}].configs["unclean.leader.election.enable"]',
                "is true in the production profile: "
                "an out-of-sync replica may become leader and drop acknowledged messages",
                'remove it or set it to "false"',
            )
        for key, field in _RULE_OWNED_CONFIGS.items():
            if key in topic.configs:
                yield Violation(
                    f'topics[{i}].configs["{key}"]',
                    f"duplicates the topic's {field} field",
                    f"remove it from configs and set {field} instead",
                )


def _application_topics(t: Topology) -> Iterator[Violation]:
    declared = {topic.name for topic in t.topics}
    known = ", ".join(repr(topic.name) for topic in t.topics) or "none declared"
    for i, app in enumerate(t.principals.applications):
        for field, verb in (("produces", "produces to"), ("consumes", "consumes from")):
            for k, name in enumerate(getattr(app, field)):
                if name not in declared:
                    yield Violation(
                        f"principals.applications[{i}].{field}[{k}]",
                        f"application {app.name!r} {verb} undeclared topic {name!r}",
                        f"declare {name!r} under kafka-dr:topics, or use one of: {known}",
                    )


# -- clusters ---------------------------------------------------------------------------------


def _free_base_port(t: Topology) -> int:
    ends = [c.port_window.stop for c in t.clusters if c.port_window is not None]
    if not ends:
        return _DEFAULT_BASE_PORT
    return -(-max(ends) // PORT_WINDOW) * PORT_WINDOW


def _local_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if not c.is_local:
            continue
        if c.base_port is None:
            yield Violation(
                f"clusters[{i}].base_port",
                f"local cluster {c.name!r} has no base_port",
                f"set base_port to the first of {PORT_WINDOW} free ports, e.g. {_free_base_port(t)}",
            )
        elif c.base_port < _FIRST_PORT or c.base_port + PORT_WINDOW - 1 > _LAST_PORT:
            yield Violation(
                f"clusters[{i}].base_port",
                f"window {c.base_port}..{c.base_port + PORT_WINDOW - 1} of local cluster {c.name!r} "
                f"leaves the range {_FIRST_PORT}..{_LAST_PORT}",
                f"choose a base_port between {_FIRST_PORT} and {_LAST_PORT - PORT_WINDOW + 1}",
            )
        if len(c.racks) != c.brokers:
            default = ", ".join(f"rack-{n}" for n in range(1, c.brokers + 1))
            yield Violation(
                f"clusters[{i}].racks",
                f"{len(c.racks)} rack(s) for the {c.brokers} broker(s) of local cluster {c.name!r}",
                f"list exactly one rack per broker, e.g. [{default}]",
            )
        if c.bootstrap_servers is not None:
            yield Violation(
                f"clusters[{i}].bootstrap_servers",
                f"is set on local cluster {c.name!r}, whose listeners come from base_port",
                "remove it, or set kind: external",
            )
        if c.admin_password is not None:
            yield Violation(
                f"clusters[{i}].admin_password",
                f"is set on local cluster {c.name!r}; "
                "local passwords are generated at runtime into the state directory",
                "remove it",
            )


def _port_overlaps(t: Topology) -> Iterator[Violation]:
    windows = [(i, c, c.port_window) for i, c in enumerate(t.clusters) if c.port_window is not None]
    for n, (j, c, window) in enumerate(windows):
        for _, other, other_window in windows[:n]:
            if window.start < other_window.stop and other_window.start < window.stop:
                yield Violation(
                    f"clusters[{j}].base_port",
                    f"window {window.start}..{window.stop - 1} of local cluster {c.name!r} overlaps "
                    f"{other_window.start}..{other_window.stop - 1} of {other.name!r}",
                    f"give each local cluster its own {PORT_WINDOW}-port window, e.g. base_port {_free_base_port(t)}",
                )
                break


def _remote_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if c.is_local:
            continue
        servers = (c.bootstrap_servers or "").strip()
        if not servers and c.kind == Kind.CONFLUENT_CLOUD and c.bootstrap_servers is None:
            pass  # the program creates the cluster and exports its bootstrap endpoint
        elif not servers:
            yield Violation(
                f"clusters[{i}].bootstrap_servers",
                f"{c.kind} cluster {c.name!r} has no bootstrap_servers",
                "set it to the brokers' host:port, comma-separated",
            )
        else:
            for entry in (part.strip() for part in servers.split(",")):
                if not _HOST_PORT.fullmatch(entry):
                    yield Violation(
                        f"clusters[{i}].bootstrap_servers",
                        f"{entry!r} of cluster {c.name!r} is not host:port",
                        "list the brokers as host:port, comma-separated",
                    )
        if c.base_port is not None:
            yield Violation(
                f"clusters[{i}].base_port",
                f"is set on {c.kind} cluster {c.name!r}; only local clusters use a port window",
                "remove it, or set kind: local",
            )


def _confluent_clusters(t: Topology) -> Iterator[Violation]:
    for i, c in enumerate(t.clusters):
        if c.kind == Kind.CONFLUENT_CLOUD and c.confluent is None:
            yield Violation(
                f"clusters[{i}].confluent",
                f"confluent-cloud cluster {c.name!r} has no confluent settings, so it cannot be created",
                "add confluent: {environment_id, cloud, region, cluster_type, api_key} "
                "(and the api_secret with `pulumi config set --path --secret`)",
            )
        elif c.kind != Kind.CONFLUENT_CLOUD and c.confluent is not None:
            yield Violation(
                f"clusters[{i}].confluent",
                f"is set on {c.kind} cluster {c.name!r}; only confluent-cloud clusters use it",
                "remove it, or set kind: confluent-cloud",
            )


def _cluster_link_destinations(t: Topology) -> Iterator[Violation]:
    index = {c.name: i for i, c in enumerate(t.clusters)}
    # name -> why it must be dedicated; a standby becomes a destination when the passive is promoted
    destinations: dict[str, str] = {}
    for link in t.links:
        if link.engine == Engine.CLUSTER_LINK:
            destinations.setdefault(link.target, f"is the destination of cluster link {link.name!r}")
    passives = [c.name for c in t.clusters if c.role == Role.PASSIVE]
    fed_by_cluster_link = any(
        link.engine == Engine.CLUSTER_LINK and link.is_running and link.target in passives for link in t.links
    )
    if fed_by_cluster_link:
        for c in t.clusters:
            if c.role == Role.STANDBY:
                destinations.setdefault(c.name, "will be the destination of a cluster link after a failover")
    for name, why in destinations.items():
        if name not in index:
            continue  # _link_ends reports unknown clusters
        i = index[name]
        settings = t.clusters[i].confluent
        if settings is not None and settings.cluster_type != "dedicated":
            yield Violation(
                f"clusters[{i}].confluent.cluster_type",
                f"is {settings.cluster_type} but cluster {name!r} {why}; "
                "Confluent Cloud accepts cluster links only into dedicated clusters",
                "set confluent.cluster_type: dedicated",
            )


_RULES: tuple[Callable[[Topology], Iterator[Violation]], ...] = (
    _duplicate_names,
    _cluster_names,
    _topic_names,
    _one_active,
    _passive_fed,
    _standby_unlinked,
    _link_ends,
    _link_patterns,
    _link_cycles,
    _topic_durability,
    _application_topics,
    _local_clusters,
    _port_overlaps,
    _remote_clusters,
    _confluent_clusters,
    _cluster_link_destinations,
)


def find_violations(topology: Topology) -> list[Violation]:
    """Every rule ``topology`` breaks, in a stable order (empty when valid)."""
    return [violation for rule in _RULES for violation in rule(topology)]


def raise_for_violations(topology: Topology) -> None:
    """Raise one TopologyError listing every violation of ``topology``; return if there is none."""
    violations = find_violations(topology)
    if not violations:
        return
    count = len(violations)
    listing = "\n".join(f"  - {v}" for v in violations)
    raise TopologyError(
        f"topology of stack '{topology.name}' breaks {count} rule{'s' if count != 1 else ''}:\n{listing}",
        f"correct each field listed above under `kafka-dr:` in Pulumi.{topology.name}.yaml, then run again",
    )
