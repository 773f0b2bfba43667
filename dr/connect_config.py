"""MirrorMaker 2 connector configurations for a Kafka Connect cluster (external estates).

Locally a link is a dedicated MirrorMaker 2 process (:mod:`dr.runtime.mirrormaker`). Between
external clusters it runs as three connectors on the target side's Kafka Connect cluster; this
module renders their JSON (``PUT /connectors/<name>/config`` bodies) from the topology — pure,
with secrets referenced through a Connect config provider instead of written inline.
"""

from __future__ import annotations

from dr.errors import ConfigError
from dr.runtime.mirrormaker import IDENTITY_POLICY
from dr.topology import Cluster, Kind, Link, Topology

CONNECTORS = {
    "source": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "checkpoint": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "heartbeat": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
}


def _client(prefix: str, cluster: Cluster, secret_ref: str) -> dict[str, str]:
    if not cluster.bootstrap_servers:
        raise ConfigError(f"cluster {cluster.name!r} has no bootstrap_servers.",
                          "set bootstrap_servers for external clusters in the stack config")
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if cluster.sasl_mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {
        f"{prefix}.bootstrap.servers": cluster.bootstrap_servers,
        f"{prefix}.security.protocol": cluster.security_protocol,
        f"{prefix}.sasl.mechanism": cluster.sasl_mechanism,
        # Resolved by the worker's FileConfigProvider (config.providers=file): never inline.
        f"{prefix}.sasl.jaas.config": (f'{module} required username="${{file:{secret_ref}:username}}" '
                                        f'password="${{file:{secret_ref}:password}}";'),
    }


def connector_configs(topology: Topology, link: Link,
                      secrets_file: str = "/etc/kafka-connect/secrets/replicator.properties",
                      tasks_max: int = 4) -> dict[str, dict[str, str]]:
    """The three MM2 connectors (name → config) for ``link`` between two external clusters."""
    source, target = topology.cluster(link.source), topology.cluster(link.target)
    for c in (source, target):
        if c.kind is Kind.LOCAL:
            raise ConfigError(f"link {link.name!r}: cluster {c.name!r} is local; local links run a dedicated "
                              "MirrorMaker 2 process.", "use `drctl estate up` for local clusters")
    iv = link.intervals
    common = {
        "source.cluster.alias": source.name,
        "target.cluster.alias": target.name,
        "replication.policy.class": IDENTITY_POLICY,
        **_client("source.cluster", source, secrets_file),
        **_client("target.cluster", target, secrets_file),
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    }
    rf = str(min(3, target.brokers)) if target.kind is Kind.LOCAL else "3"
    topics = ",".join(link.topics)
    groups = ",".join(link.consumer_groups)
    return {
        f"{link.name}-source": {
            **common, "connector.class": CONNECTORS["source"], "tasks.max": str(tasks_max),
            "topics": topics, "refresh.topics.interval.seconds": str(iv.refresh_topics_s),
            "sync.topic.acls.enabled": "false", "sync.topic.configs.enabled": "true",
            "offset-syncs.topic.location": "target", "replication.factor": rf,
            "offset-syncs.topic.replication.factor": rf,
        },
        f"{link.name}-checkpoint": {
            **common, "connector.class": CONNECTORS["checkpoint"], "tasks.max": "1",
            "groups": groups, "refresh.groups.interval.seconds": str(iv.refresh_groups_s),
            "emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": str(iv.emit_checkpoints_s),
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": str(iv.sync_group_offsets_s),
            "offset-syncs.topic.location": "target", "checkpoints.topic.replication.factor": rf,
        },
        f"{link.name}-heartbeat": {
            **common, "connector.class": CONNECTORS["heartbeat"], "tasks.max": "1",
            "emit.heartbeats.interval.seconds": "5", "heartbeats.topic.replication.factor": rf,
        },
    }
