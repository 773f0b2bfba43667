"""SCRAM users, client quotas, topics and ACLs of one cluster as ``pulumi_kafka`` resources.

The rules themselves are pure data (:func:`dr.topology.access.acl_rules`, unit-tested without an
engine); :class:`ClusterAccess` declares them through the cluster's own explicit provider.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kafka as kafka

from dr.base.errors import ConfigError
from dr.kafka.live import TopicConfigs
from dr.topology import Cluster, Topology
from dr.topology.access import AclRule, acl_rules
from dr.topology.quotas import user_quotas
from dr.topology.topics import topics_on
from stacks.existing_topics import declared_config
from stacks.kafka_sets import AclSet, Connection, TopicSet, UserSet, acl_binding

__all__ = ["AclRule", "ClusterAccess", "ClusterAccessArgs", "acl_rules", "password_version"]


def password_version(cluster: str, user: str, password: str) -> str:
    """A short fingerprint that changes when a password changes (``password_wo_version``).

    32 bits of a salted SHA-256: enough to notice a rotation, far too little to confirm a guess.
    """
    return hashlib.sha256(f"{cluster}\0{user}\0{password}".encode()).hexdigest()[:8]


@dataclass(frozen=True, kw_only=True)
class ClusterAccessArgs:
    """What :class:`ClusterAccess` provisions on one cluster."""

    topology: Topology
    cluster: Cluster
    provider: kafka.Provider
    passwords: dict[str, pulumi.Output[str]]
    """Principal → password (secret Outputs) for the replicator and every application."""
    scram_users: bool = True
    """False where the cluster has no SCRAM users of its own (Confluent Cloud: API keys)."""
    skip_topics: frozenset[str] = frozenset()
    """Topics owned by something else on this cluster (mirror topics of a cluster link)."""
    connection: Connection | None = None
    """The cluster's admin login (:attr:`stacks.cluster.KafkaCluster.connection`): with the topology's
    ``provisioning: batched``, the topics and the ACLs are one resource each, reaching the cluster
    through it."""
    existing_topics: Mapping[str, TopicConfigs] = field(default_factory=dict)
    """Per-resource mode: the declared topics the (external) cluster already holds, imported instead of
    created (:mod:`stacks.existing_topics`)."""
    deleted_with: pulumi.Resource | None = None
    """The local cluster resource whose deletion takes these users, topics and ACLs with its data: when
    both go (``pulumi destroy``), Kafka is not asked to delete them one by one — so a destroy succeeds
    after the brokers were killed or their data directory removed."""


class ClusterAccess(pulumi.ComponentResource):
    """SCRAM users, client quotas, topics and ACLs of one cluster, through that cluster's explicit provider.

    Quotas (:func:`dr.topology.quotas.user_quotas`) are one ``pulumi_kafka`` Quota per user entity
    (``<cluster>-quota-user-<name>``, ``<cluster>-quota-default``) in both provisioning modes.

    Topics are created with ``retain_on_delete``: removing a topic from the topology, or destroying
    the stack of an external cluster, never deletes its records (delete a topic on purpose with
    Kafka's own tools). Passwords reach the cluster through ``password_wo`` and are never stored.

    ``provisioning: batched`` (the topology's): the topics are one :class:`~stacks.kafka_sets.TopicSet`
    and the ACLs one :class:`~stacks.kafka_sets.AclSet` (``<cluster>-topics``, ``<cluster>-acls``),
    which retain removed topics in the same way, and the SCRAM users one :class:`~stacks.kafka_sets.UserSet`
    (``<cluster>-users``: one request for every user, where the individual resources made one each).
    """

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("kafka-dr:index:ClusterAccess", name, None, opts)
        c = args.cluster
        child = pulumi.ResourceOptions(parent=self, provider=args.provider, deleted_with=args.deleted_with)
        batched = args.topology.provisioning == "batched"
        if batched and args.connection is None:
            raise ConfigError(
                f"cluster {c.name!r} ({c.kind.value}) has no admin connection for batched provisioning.",
                "remove `kafka-dr:provisioning: batched` from the stack file, or report this as a bug",
            )
        sets = pulumi.ResourceOptions(parent=self, deleted_with=args.deleted_with)
        self.users: dict[str, kafka.UserScramCredential] = {}
        self.user_set: UserSet | None = None
        scram = dict(sorted(args.passwords.items())) if args.scram_users else {}
        if batched and scram and args.connection is not None:
            self.user_set = UserSet(
                f"{c.name}-users",
                connection=args.connection,
                passwords=scram,
                versions={
                    user: pulumi.Output.secret(password).apply(lambda pw, u=user: password_version(c.name, u, pw))
                    for user, password in scram.items()
                },
                opts=sets,
            )
            scram = {}
        for user, password in scram.items():
            self.users[user] = kafka.UserScramCredential(
                f"{c.name}-user-{user}",
                username=user,
                scram_mechanism="SCRAM-SHA-512",
                password_wo=pulumi.Output.secret(password),
                password_wo_version=pulumi.Output.secret(password).apply(
                    lambda pw, u=user: password_version(c.name, u, pw)
                ),
                opts=child,
            )
        # one resource per entity in both provisioning modes (a few per cluster, unlike topics and ACLs);
        # every input replaces, and the old resource's delete clears the entity's quota: delete it first
        self.quotas: dict[str | None, kafka.Quota] = {
            quota.user: kafka.Quota(
                f"{c.name}-quota-{quota.logical_name}",
                entity_type="user",
                entity_name=quota.user,
                config=quota.configs,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(delete_before_replace=True)),
            )
            for quota in user_quotas(args.topology)
        }
        declared = [t for t in topics_on(args.topology, c) if t.name not in args.skip_topics]
        # the replicator's first: the engine starts them first, and the link waits for them (needed_by)
        replicator = args.topology.principals.replicator
        rules = sorted(acl_rules(args.topology, c), key=lambda rule: rule.principal != replicator)
        self.topics: dict[str, kafka.Topic] = {}
        self.acls: list[kafka.Acl] = []
        self.topic_set: TopicSet | None = None
        self.acl_set: AclSet | None = None
        if batched and args.connection is not None:
            self.topic_set = TopicSet(
                f"{c.name}-topics",
                connection=args.connection,
                topics=[
                    {
                        "name": t.name,
                        "partitions": t.partitions,
                        "replication_factor": t.replication_factor,
                        "config": {"min.insync.replicas": str(t.min_insync_replicas), **t.configs},
                    }
                    for t in declared
                ],
                opts=sets,
            )
            self.acl_set = AclSet(
                f"{c.name}-acls",
                connection=args.connection,
                acls=[
                    acl_binding(
                        principal=f"User:{rule.principal}",
                        operation=rule.operation,
                        resource_type=rule.resource_type,
                        resource_name=rule.resource_name,
                        pattern=rule.pattern,
                    )
                    for rule in rules
                ],
                opts=sets,
            )
        else:
            for topic in declared:
                config = {"min.insync.replicas": str(topic.min_insync_replicas), **topic.configs}
                found = args.existing_topics.get(topic.name)
                self.topics[topic.name] = kafka.Topic(
                    f"{c.name}-topic-{topic.name}",
                    name=topic.name,
                    partitions=topic.partitions,
                    replication_factor=topic.replication_factor,
                    config=config if found is None else declared_config(config, found),
                    opts=pulumi.ResourceOptions.merge(
                        child,
                        pulumi.ResourceOptions(retain_on_delete=True, import_=topic.name if found else None),
                    ),
                )
            self.acls = [
                kafka.Acl(
                    f"{c.name}-acl-{rule.logical_name}",
                    acl_principal=f"User:{rule.principal}",
                    acl_host="*",
                    acl_operation=rule.operation,
                    acl_permission_type="Allow",
                    acl_resource_type=rule.resource_type,
                    acl_resource_name=rule.resource_name,
                    resource_pattern_type_filter=rule.pattern,
                    opts=child,
                )
                for rule in rules
            ]
        self._principals = [rule.principal for rule in rules] if self.acl_set is None else []
        self.register_outputs(
            {
                "users": sorted(self.users) if self.user_set is None else sorted(args.passwords),
                "topics": sorted(t.name for t in declared),
                "acls": len(rules),
            }
        )

    def needed_by(self, principal: str) -> list[pulumi.Resource]:
        """What a client of ``principal`` needs on this cluster: its SCRAM user (the user set, batched), its
        ACLs and every topic.

        A link depends on these of the replicator on both sides, not on the whole component: the
        applications' users and ACLs are created while MirrorMaker 2 starts (the failover's
        desired-state step builds C's in parallel with the link B→C)."""
        mine: list[pulumi.Resource] = [
            acl for acl, owner in zip(self.acls, self._principals, strict=True) if owner == principal
        ]
        sets: list[pulumi.Resource] = [r for r in (self.user_set, self.acl_set, self.topic_set) if r is not None]
        user = [self.users[principal]] if principal in self.users else []
        return [*user, *mine, *sets, *self.topics.values()]
