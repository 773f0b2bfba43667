"""Parity: what two clusters the topology says should match hold differently, each with its repair (pure).

Every link joins two clusters that must agree on what an application meets after a failover: the
declared topics (present, partitions, topic-level configurations and ``min.insync.replicas``), the SCRAM
users, and the user quotas. ACLs differ by role on purpose (a passive cluster grants no application write),
so each cluster of a pair is compared with the rules of its own role (:func:`dr.topology.access.acl_rules`).
MirrorMaker 2 copies topic configurations and only READ ACLs; Cluster Linking more — neither copies users
or quotas, and a change made on B behind the product's back is copied by nothing.

:func:`parity_drifts` takes what each cluster holds (:class:`~dr.kafka.live.LiveCluster`, read by
``drctl status --parity``) and returns one :class:`Drift` per difference, with the command that repairs it:
``drctl estate up --refresh`` where the stack declares the value (Pulumi reads the drift, then restores
it), Kafka's own tool where it does not (the source side of the link is the reference).
"""

from __future__ import annotations

from dataclasses import dataclass

from dr.kafka.live import LiveCluster, LiveTopic
from dr.runtime.credentials import ADMIN_USER, BROKER_USER
from dr.runtime.reserved import CONNECT_USER
from dr.topology.access import acl_rules, applications_on
from dr.topology.model import Cluster, Role, Topology
from dr.topology.oauth_login import uses_oauth
from dr.topology.quotas import user_quotas
from dr.topology.topics import topics_on

__all__ = ["Drift", "parity_drifts"]

_SERVING = (Role.ACTIVE, Role.PASSIVE, Role.EDGE)
_TOOL = "--bootstrap-server {bootstrap} --command-config admin.properties"


@dataclass(frozen=True, order=True)
class Drift:
    """One difference between what a cluster holds and what its pair (or its role) says it should."""

    cluster: str
    what: str
    repair: str

    def text(self) -> str:
        """The line ``drctl status`` lists as a problem."""
        return f"parity: cluster {self.cluster}: {self.what} — repair: `{self.repair}`"


def _tool(cluster: Cluster, held: LiveCluster) -> str:
    """The connection flags of Kafka's tools for ``cluster``: where it was read (a local cluster declares no
    bootstrap servers), else what the stack declares."""
    return _TOOL.format(bootstrap=held.bootstrap or cluster.bootstrap_servers or cluster.name)


def _pairs(topology: Topology, live: dict[str, LiveCluster]) -> list[tuple[Cluster, Cluster]]:
    found = []
    for link in topology.links:
        source, target = topology.cluster(link.source), topology.cluster(link.target)
        if source.role in _SERVING and target.role in _SERVING and source.name in live and target.name in live:
            found.append((source, target))
    return found


def _configs(topic: LiveTopic) -> dict[str, str]:
    return {**topic.configs, "min.insync.replicas": str(topic.min_insync_replicas)}


def _topic_drifts(
    t: Topology, up: str, source: Cluster, target: Cluster, a: LiveCluster, b: LiveCluster
) -> list[Drift]:
    drifts = []
    on_a, on_b = {x.name: x for x in a.topics}, {x.name: x for x in b.topics}
    declared = {x.name: x for x in topics_on(t, target)}
    for name, topic in sorted(declared.items()):
        ta, tb = on_a.get(name), on_b.get(name)
        for cluster, found in ((source, ta), (target, tb)):
            if found is None:
                drifts.append(Drift(cluster.name, f"declared topic {name!r} is missing", up))
        if ta is None or tb is None:
            continue
        if ta.partitions != tb.partitions:
            drifts.append(
                Drift(target.name, f"topic {name!r} has {tb.partitions} partitions, {source.name} {ta.partitions}", up)
            )
        want = {"min.insync.replicas": str(topic.min_insync_replicas), **topic.configs}
        ca, cb = _configs(ta), _configs(tb)
        for key in sorted(set(ca) | set(cb)):
            va, vb = ca.get(key), cb.get(key)
            if va == vb:
                continue
            where = f"topic {name!r} {key}: {vb or '(broker default)'} on {target.name}, {va or '(broker default)'} on {source.name}"
            if key in want:
                bad = [c for c, v in ((source.name, va), (target.name, vb)) if v != want[key]]
                for off in bad or [target.name]:
                    drifts.append(Drift(off, f"{where} (declared {want[key]})", up))
            elif va is not None:
                tool = _tool(target, b)
                drifts.append(
                    Drift(
                        target.name,
                        where,
                        f"kafka-configs.sh {tool} --alter --entity-type topics --entity-name {name} --add-config {key}={va}",
                    )
                )
            else:
                tool = _tool(target, b)
                drifts.append(
                    Drift(
                        target.name,
                        where,
                        f"kafka-configs.sh {tool} --alter --entity-type topics --entity-name {name} --delete-config {key}",
                    )
                )
    return drifts


def _user_drifts(t: Topology, up: str, pair: tuple[Cluster, Cluster], live: dict[str, LiveCluster]) -> list[Drift]:
    source, target = pair
    a, b = set(live[source.name].scram_users), set(live[target.name].scram_users)
    p = t.principals
    declared = {p.replicator} | {app.name for c in pair for app in applications_on(t, c.role, c.name)}
    own = {p.admin, ADMIN_USER, BROKER_USER, CONNECT_USER} | {c.admin_username for c in t.clusters if c.admin_username}
    drifts = []
    for user in sorted(declared):
        for cluster, users in ((source, a), (target, b)):
            if user not in users and not uses_oauth(cluster):  # OAUTHBEARER: the identity provider holds the clients
                drifts.append(Drift(cluster.name, f"SCRAM user {user!r} (declared) is missing", up))
    for user in sorted((a ^ b) - declared - own):
        where, other = (source, target) if user in a else (target, source)
        tool = _tool(where, live[where.name])
        drifts.append(
            Drift(
                where.name,
                f"SCRAM user {user!r} is on {where.name}, not on {other.name}, and the stack does not declare it",
                f"declare it (`drctl estate adopt --stack {t.name} --from {where.name}` proposes it), or remove it: "
                f"kafka-configs.sh {tool} --alter --entity-type users --entity-name {user} --delete-config SCRAM-SHA-512",
            )
        )
    return drifts


def _acl_drifts(t: Topology, up: str, cluster: Cluster, held: LiveCluster) -> list[Drift]:
    want = {
        (f"User:{r.principal}", r.resource_type, r.resource_name, r.pattern, r.operation) for r in acl_rules(t, cluster)
    }
    have = {
        (x.principal, x.resource_type, x.resource_name, x.pattern, x.operation)
        for x in held.acls
        if x.permission == "Allow" and x.host == "*"
    }
    apps = {f"User:{app.name}" for app in t.principals.applications}
    drifts = [
        Drift(
            cluster.name, f"ACL Allow {p} {op} on {kind} {name!r} ({pattern}) of its {cluster.role} role is missing", up
        )
        for p, kind, name, pattern, op in sorted(want - have)
    ]
    tool = _tool(cluster, held)
    for p, kind, name, pattern, op in sorted(have - want):
        if p not in apps:  # the platform team's own rules are not the stack's to judge
            continue
        flag = {"Topic": "--topic", "Group": "--group", "TransactionalID": "--transactional-id"}.get(kind, "--cluster")
        resource = f"{flag} {name}" if flag != "--cluster" else flag
        drifts.append(
            Drift(
                cluster.name,
                f"ACL Allow {p} {op} on {kind} {name!r} ({pattern}) is beyond its {cluster.role} role",
                f"kafka-acls.sh {tool} --remove --force --allow-principal {p} --operation {op} {resource} "
                f"--resource-pattern-type {pattern.lower()}",
            )
        )
    return drifts


def _quota_drifts(t: Topology, up: str, cluster: Cluster, held: LiveCluster) -> list[Drift]:
    have = {
        q.entity["user"]: {k: str(int(v)) if v == int(v) else str(v) for k, v in q.configs.items()}
        for q in held.quotas
        if set(q.entity) == {"user"}
    }
    drifts = []
    for quota in user_quotas(t):
        found = have.get(quota.user)
        if found != quota.configs:
            who = "the default user" if quota.user is None else f"user {quota.user!r}"
            drifts.append(Drift(cluster.name, f"quota of {who} is {found or 'not set'}, declared {quota.configs}", up))
    return drifts


def parity_drifts(topology: Topology, live: dict[str, LiveCluster]) -> list[Drift]:
    """Every difference between the clusters each link joins (both serving, both read into ``live``), and
    between each such cluster's ACLs and quotas and its declaration (sorted, no duplicates)."""
    up = f"drctl estate up --stack {topology.name} --refresh"  # refresh: Pulumi reads the drift first
    found: set[Drift] = set()
    for source, target in _pairs(topology, live):
        a, b = live[source.name], live[target.name]
        found |= set(_topic_drifts(topology, up, source, target, a, b))
        found |= set(_user_drifts(topology, up, (source, target), live))
        for cluster in (source, target):
            found |= set(_acl_drifts(topology, up, cluster, live[cluster.name]))
            found |= set(_quota_drifts(topology, up, cluster, live[cluster.name]))
    return sorted(found)
