"""Who may do what on a cluster, as pure data: the ACL rules of each role (no engine, no client).

Application principals write only on the active cluster (and read what they consume everywhere;
in a hub-and-spoke estate, each on its home: an edge, or the hub and its passive copy);
on a passive cluster only the replicator writes, as with read-only mirror topics in Cluster
Linking; there an application only reads what it consumes. The replicator reads on a link's source and
writes on its target — exactly :data:`dr.runtime.mirrormaker.REPLICATOR_SOURCE_RIGHTS` and
``REPLICATOR_TARGET_RIGHTS`` (docs/security.md tabulates every right and why). The Pulumi program
(:mod:`stacks.access`) declares these rules as ``pulumi_kafka.Acl`` resources; the failover's
promote step grants the same rules at once through the admin API (:func:`dr.estate.estate.application_acls`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dr.base.errors import InternalError
from dr.kafka.internal_topics import InternalTopics
from dr.runtime.connect import (
    WORKER_CLUSTER_OPERATIONS,
    WORKER_GROUP_OPERATIONS,
    WORKER_TOPIC_OPERATIONS,
    worker_topics,
    worker_transactional_id,
)
from dr.runtime.mirrormaker import REPLICATOR_SOURCE_RIGHTS, REPLICATOR_TARGET_RIGHTS, transaction_rights
from dr.runtime.reserved import CONNECT_USER
from dr.topology.model import Application, Cluster, Role, Topology
from dr.topology.topics import consumes_remote, remote_topics_on

__all__ = [
    "CONNECT_USER",
    "AclRule",
    "acl_rules",
    "application_rules",
    "applications_on",
    "client_cluster",
    "connect_rules",
    "peer_rules",
]


@dataclass(frozen=True, order=True)
class AclRule:
    """One ALLOW binding for ``User:<principal>`` from any host, in ``pulumi_kafka`` terms."""

    principal: str
    resource_type: str  # Topic | Group | Cluster | TransactionalID
    resource_name: str
    operation: str  # Read | Write | Describe | DescribeConfigs | All | Create | AlterConfigs | IdempotentWrite
    pattern: str = "Literal"  # Literal | Prefixed

    @property
    def logical_name(self) -> str:
        """A stable, URN-safe resource name (the rule itself, readable)."""
        raw = f"{self.principal}-{self.resource_type}-{self.pattern}-{self.resource_name}-{self.operation}"
        return re.sub(r"[^A-Za-z0-9._-]", lambda m: f"~{ord(m.group()):x}", raw).lower()


def _replicator_source(user: str) -> list[AclRule]:
    return [AclRule(user, kind, name, op, pattern) for kind, name, op, pattern, _ in REPLICATOR_SOURCE_RIGHTS]


def _replicator_target(user: str) -> list[AclRule]:
    return [AclRule(user, kind, name, op, pattern) for kind, name, op, pattern, _ in REPLICATOR_TARGET_RIGHTS]


def _prefixed(principal: str, prefix: str, operation: str) -> set[AclRule]:
    """One prefixed binding per operation: as many ACLs for 1,000 topics under ``prefix`` as for one.

    No Describe beside it: Kafka's authorizer allows Describe on a topic to whoever may Read or Write
    it, so a prefixed Describe would only double the resources. Once fenced (Write removed) a producer
    loses Describe on its prefix too: its writes are refused on the metadata instead of the produce."""
    return {AclRule(principal, "Topic", prefix, operation, "Prefixed")}


def applications_on(topology: Topology, role: Role, cluster: str | None) -> list[Application]:
    """The applications that get ACLs on a cluster: all of them, except in a hub-and-spoke estate, where
    an edge serves only the applications whose home it is, and the hub (and its passive copy) the rest."""
    served = topology.shape().served_applications  # a hub-and-spoke estate's (dr.topology.hub_spoke)
    return topology.principals.applications if served is None else served(topology, role, cluster)


def client_cluster(topology: Topology, app: Application) -> str:
    """The cluster an application's client configuration names: where its write grants are.

    Its ``home`` in an active-active estate (the peer whose local topics it writes) and in a hub-and-spoke
    one (its edge, or the hub); the active cluster otherwise (active-passive, or a hub application
    declared without ``home``). Every failover rewrites ``home`` in the desired topology (a region's
    applications to the survivor, a lost edge's to their fallback, the hub's to the promoted copy), so
    the same function names the cluster after it. The publisher (:mod:`dr.failover.act.clients`) and the
    stack's ``clientConfigs`` output both ask it.
    """
    if not topology.shape().writes_at_home or app.home is None:
        return topology.active().name
    return app.home


def application_rules(topology: Topology, role: Role, cluster: str | None = None) -> set[AclRule]:
    """The application principals' ACLs on a cluster of ``role`` (named ``cluster``: an edge of a
    hub-and-spoke estate serves only its own applications). An application writes only on the active
    cluster, or on its edge; aggregated ``<edge>.<topic>`` copies are never writable (validation
    refuses a ``produces`` naming one). On any other cluster (passive) it only reads what it consumes:
    no group there, whose offsets the replicator alone keeps (the promote step grants the group)."""
    rules: set[AclRule] = set()
    serving = role in (Role.ACTIVE, Role.EDGE)
    internal = topology.internal_topics()
    for app in applications_on(topology, role, cluster):
        rules |= _grants(app, internal, writes=serving, reads=app.consumes, group=serving)
    return rules


def _grants(
    app: Application, internal: InternalTopics, *, writes: bool, reads: list[str], group: bool = True
) -> set[AclRule]:
    """One application's ACLs: its produced topics and prefix (when it ``writes`` there), the topics it
    ``reads`` and its consume prefix, and its consumer group (when ``group``). A prefix that would reach an
    internal topic is a bug here: validation refuses it (:mod:`dr.kafka.internal_topics`)."""
    for prefix in (app.produces_prefix if writes else None, app.consumes_prefix):
        reached = internal.reached_by(prefix) if prefix else []
        if reached:
            raise InternalError(
                f"application {app.name!r}'s prefix {prefix!r} reaches internal topics {', '.join(reached)}, "
                "yet the topology passed validation.",
                "report this as a bug, with the stack file",
            )
    rules: set[AclRule] = set()
    if writes:
        for topic in app.produces:
            rules |= {AclRule(app.name, "Topic", topic, "Write"), AclRule(app.name, "Topic", topic, "Describe")}
        if app.produces_prefix:
            rules |= _prefixed(app.name, app.produces_prefix, "Write")
    for topic in reads:
        rules |= {AclRule(app.name, "Topic", topic, "Read"), AclRule(app.name, "Topic", topic, "Describe")}
    if app.consumes_prefix:
        rules |= _prefixed(app.name, app.consumes_prefix, "Read")
    if app.consumer_group and group:
        rules.add(AclRule(app.name, "Group", app.consumer_group, "Read"))
    return rules


def peer_rules(topology: Topology, cluster: str) -> set[AclRule]:
    """Active-active: the application principals' ACLs on peer ``cluster``.

    An application writes its home's local topics only; a consumer reads, on every peer, its topics and
    their remote copies (``<peer>.<topic>``), so the global view — and a region failover — needs no new
    read grant. Remote topics get no write grant: only the replicator writes them.
    """
    rules: set[AclRule] = set()
    internal = topology.internal_topics()
    for app in topology.principals.applications:
        local = [t for t in app.consumes if not consumes_remote(topology, t)]
        named = [t for t in app.consumes if t not in local]
        reads = [*local, *remote_topics_on(topology, cluster, local), *named]
        rules |= _grants(app, internal, writes=app.home == cluster, reads=reads)
    return rules


def connect_rules(topology: Topology, cluster: Cluster) -> set[AclRule]:
    """The local Connect workers' ACLs on their home cluster: their group and internal topics (the rights
    :func:`dr.runtime.connect.connect_acls` grants, literal: no Delete, no other ``connect-`` topic)."""
    rules: set[AclRule] = set()
    for cc in topology.connect_clusters:
        if not cc.is_local or cc.cluster != cluster.name:
            continue
        rules |= {AclRule(CONNECT_USER, "Group", f"connect-{cc.name}", op) for op in WORKER_GROUP_OPERATIONS}
        for topic in worker_topics(cc.name).values():
            rules |= {AclRule(CONNECT_USER, "Topic", topic, op) for op in WORKER_TOPIC_OPERATIONS}
        rules |= {AclRule(CONNECT_USER, "Cluster", "kafka-cluster", op) for op in WORKER_CLUSTER_OPERATIONS}
        if topology.connect_exactly_once(cc):  # their leader writes the config topic in transactions
            rules.add(AclRule(CONNECT_USER, "TransactionalID", worker_transactional_id(cc.name), "Write"))
    return rules


def transaction_rules(topology: Topology, cluster: Cluster) -> set[AclRule]:
    """The replicator's transactional ids on ``cluster`` for every MirrorMaker 2 link into it that writes in
    transactions (:func:`dr.runtime.mirrormaker.transaction_rights`: a prefix of each link alone): an
    exactly-once link, and any link on Connect workers with exactly-once source support, whose every
    source task's producer is transactional whatever the connector asks."""
    rules: set[AclRule] = set()
    for link in topology.links_into(cluster.name):
        if not topology.writes_in_transactions(link):
            continue
        for kind, name, op, pattern in transaction_rights(link.source, link.name, link.connect):
            rules.add(AclRule(topology.principals.replicator, kind, name, op, pattern))
    return rules


def acl_rules(topology: Topology, cluster: Cluster) -> list[AclRule]:
    """Every ACL the cluster needs for its role and its links (pure; sorted, no duplicates)."""
    if topology.shape().peers:
        apps = peer_rules(topology, cluster.name) if cluster.role is Role.ACTIVE else set()
    else:
        apps = application_rules(topology, cluster.role, cluster.name)
    rules = apps | connect_rules(topology, cluster)
    replicator = topology.principals.replicator
    if topology.links_from(cluster.name):
        rules |= set(_replicator_source(replicator))
    if topology.links_into(cluster.name):
        rules |= set(_replicator_target(replicator)) | transaction_rules(topology, cluster)
    return sorted(rules)
