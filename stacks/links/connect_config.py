"""MirrorMaker 2 connector configurations for a Kafka Connect cluster.

A link can run as three connectors on a Kafka Connect cluster (an external one, or a local
:class:`dr.runtime.connect.LocalConnectCluster`); this module renders their JSON
(``PUT /connectors/<name>/config`` bodies) from the topology — pure, with secrets referenced
through the workers' ``FileConfigProvider`` instead of written inline. The clusters may be local
(bootstrap from ``base_port``, SASL_PLAINTEXT with SCRAM-SHA-512) or external. The connectors'
producers are pointed at the link's target (``producer.override.*``, as the replicator), so the
records land there whichever cluster the Connect workers keep their own topics on.
"""

from __future__ import annotations

import re

from dr.base.errors import ConfigError
from dr.kafka.oauth import OAUTHBEARER, OAuthSettings, java_oauth
from dr.kafka.tls import certificate_blocks, uses_tls
from dr.runtime.mirrormaker import IDENTITY_POLICY
from dr.topology import Cluster, Delivery, Link, Topology
from dr.topology.model import ConnectCredentials, WorkerTls

CONNECTORS = {
    "source": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "checkpoint": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "heartbeat": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
}


#: How every local cluster's client listener authenticates (see :mod:`dr.runtime.cluster`).
LOCAL_SECURITY_PROTOCOL = "SASL_PLAINTEXT"
LOCAL_SASL_MECHANISM = "SCRAM-SHA-512"


def client_settings(cluster: Cluster) -> tuple[str, str, str]:
    """``(bootstrap servers, security protocol, SASL mechanism)`` of a local or external cluster."""
    if cluster.is_local:
        if cluster.base_port is None:
            raise ConfigError(
                f"local cluster {cluster.name!r} has no base_port.", "set base_port for the cluster in the stack config"
            )
        bootstrap = ",".join(f"127.0.0.1:{cluster.base_port + b - 1}" for b in range(1, cluster.brokers + 1))
        return bootstrap, LOCAL_SECURITY_PROTOCOL, LOCAL_SASL_MECHANISM
    if not cluster.bootstrap_servers:
        raise ConfigError(
            f"cluster {cluster.name!r} has no bootstrap_servers.",
            "set bootstrap_servers for external clusters in the stack config",
        )
    return cluster.bootstrap_servers, cluster.security_protocol, cluster.sasl_mechanism


#: The prefixes under which Connect lays a connector's settings over the workers' own client settings.
INHERITING = ("producer.override", "consumer.override", "admin.override")


def _tls(
    prefix: str, cluster: Cluster, keystore: ConnectCredentials | None, password_ref: str, worker: WorkerTls
) -> dict[str, str]:
    """The connector's TLS settings for ``cluster``: its CA as a PEM truststore — the declared file's
    path (the same path on every worker) or the declared PEM inline (a CA certificate is public) — never
    a worker's JVM ``cacerts``; under mutual TLS the replicator's keystore on the workers, opened with the
    password the workers' config provider resolves (``password_ref``), never written here.

    The clients Connect builds for a connector (``INHERITING`` prefixes) start from the workers' own
    ``producer.``/``consumer.``/``admin.`` settings, and an override cannot remove one: over a worker's own
    truststore (``worker``, :class:`dr.topology.WorkerTls`) they keep it whole instead of a PEM store beside
    its password or location, which Kafka's clients refuse; a replicator keystore that cannot sit over the
    worker's own keystore is refused here, naming what to change."""
    if cluster.is_local or not uses_tls(cluster.security_protocol):
        return {}
    tls = cluster.tls
    inherits = prefix in INHERITING
    out = {
        f"{prefix}.ssl.endpoint.identification.algorithm": "https" if tls is None or tls.hostname_verification else ""
    }
    if inherits and worker.own_truststore:
        pass  # the workers' own truststore, password and all (WorkerTls)
    elif tls is not None and tls.ca_file:
        out |= {f"{prefix}.ssl.truststore.type": "PEM", f"{prefix}.ssl.truststore.location": tls.ca_file}
    elif tls is not None and tls.ca_pem:
        certificates = certificate_blocks(tls.ca_pem)  # a CA input gives its certificates alone
        out |= {f"{prefix}.ssl.truststore.type": "PEM", f"{prefix}.ssl.truststore.certificates": certificates}
    if cluster.security_protocol == "SSL":
        if keystore is None or not keystore.keystore_file:
            raise ConfigError(
                f"cluster {cluster.name!r} uses mutual TLS (SSL): MirrorMaker 2 on Connect needs the replicator's "
                "certificate on the workers.",
                "set replicator_credentials.keystore_file of the link's Connect cluster: the path on every worker "
                "of the replicator's keystore (PKCS#12 or PEM), encrypted with the password its provider resolves",
            )
        if inherits:
            _keystore_fits(cluster, keystore, worker)
        out |= {
            f"{prefix}.ssl.keystore.type": keystore.keystore_type,
            f"{prefix}.ssl.keystore.location": keystore.keystore_file,
            f"{prefix}.ssl.key.password": password_ref,
        }
        if keystore.keystore_type == "PKCS12":
            out[f"{prefix}.ssl.keystore.password"] = password_ref
    return out


def _keystore_fits(cluster: Cluster, keystore: ConnectCredentials, worker: WorkerTls) -> None:
    """Refuse a replicator keystore that Kafka's clients would refuse over the workers' own keystore."""
    if worker.keystore == "PEM-inline":
        raise ConfigError(
            f"cluster {cluster.name!r} uses mutual TLS, and the Connect workers keep their own key inline "
            "(worker_tls.keystore: PEM-inline): a connector cannot put the replicator's keystore file beside it.",
            "give the workers their own key as a keystore file (PKCS12, JKS or PEM) and declare its type in "
            "worker_tls.keystore",
        )
    if worker.keystore in ("PKCS12", "JKS") and keystore.keystore_type == "PEM":
        raise ConfigError(
            f"cluster {cluster.name!r} uses mutual TLS, and the Connect workers' own keystore has a store password "
            f"(worker_tls.keystore: {worker.keystore}), which a PEM keystore cannot take: the replicator's "
            f"{keystore.keystore_file} is PEM.",
            "put the replicator's certificate and key on the workers as a PKCS#12 keystore (.p12) encrypted with its "
            "password, and name it in replicator_credentials.keystore_file",
        )


def _client(
    prefix: str,
    cluster: Cluster,
    refs: tuple[str, str],
    keystore: ConnectCredentials | None = None,
    worker: WorkerTls | None = None,
) -> dict[str, str]:
    worker = worker or WorkerTls()
    bootstrap, protocol, mechanism = client_settings(cluster)
    if protocol == "SSL":  # mutual TLS: the replicator's certificate is its login
        return {
            f"{prefix}.bootstrap.servers": bootstrap,
            f"{prefix}.security.protocol": protocol,
            **_tls(prefix, cluster, keystore, refs[1], worker),
        }
    if mechanism == OAUTHBEARER and not cluster.is_local:
        return {
            f"{prefix}.bootstrap.servers": bootstrap,
            f"{prefix}.security.protocol": protocol,
            **{f"{prefix}.{k}": v for k, v in _oauth_login(cluster, refs).items()},
            **_tls(prefix, cluster, keystore, refs[1], worker),
        }
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    return {
        f"{prefix}.bootstrap.servers": bootstrap,
        f"{prefix}.security.protocol": protocol,
        f"{prefix}.sasl.mechanism": mechanism,
        # Resolved by the workers' config provider (a file, a directory or environment variables):
        # the config holds only the reference, never the password.
        f"{prefix}.sasl.jaas.config": f'{module} required username="{refs[0]}" password="{refs[1]}";',
        **_tls(prefix, cluster, keystore, refs[1], worker),
    }


def _oauth_login(cluster: Cluster, refs: tuple[str, str]) -> dict[str, str]:
    """The replicator's OAUTHBEARER login through Kafka's login handler: its client id and secret are the
    references the workers' config provider resolves (``username``/``password`` of the replicator's
    credentials: the client id and the client secret), never written here. An ``https`` token endpoint is
    trusted through a CA file on the workers (``oauth.tls.ca_file``, else the cluster's ``tls.ca_file``). The
    workers' JVM must list the token endpoint in ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls``."""
    o = cluster.oauth
    if o is None or not o.token_endpoint:
        raise ConfigError(
            f"cluster {cluster.name!r} declares OAUTHBEARER but no oauth.token_endpoint.",
            "declare the identity provider's token endpoint under oauth",
        )
    ca = None
    if o.token_endpoint.startswith("https:"):
        ca = (o.tls.ca_file if o.tls is not None else None) or (cluster.tls.ca_file if cluster.tls else None)
        if ca is None:
            raise ConfigError(
                f"cluster {cluster.name!r}: MirrorMaker 2 on Connect reaches the identity provider over https and "
                "needs its CA as a file on the workers.",
                "set oauth.tls.ca_file to the path of the provider's CA (PEM) on every Connect worker",
            )
    return java_oauth(OAuthSettings(o.token_endpoint, o.scope, o.audience, ca), refs[0], refs[1])


def exactly_once_settings() -> dict[str, str]:
    """What makes a link's source connector exactly-once (KIP-618) on workers with
    ``exactly.once.source.support=enabled``: Connect refuses to create it elsewhere (``required``); a
    transaction per poll of the source; only committed source records read (MirrorSourceConnector's
    condition). Connect fences the link's earlier tasks by their transactional ids with the connector's
    admin client, which every connector points at the target as the replicator (:func:`connector_configs`)."""
    return {
        "exactly.once.support": "required",
        "transaction.boundary": "poll",
        "source.consumer.isolation.level": "read_committed",
    }


MM2_DEFAULT_EXCLUDES = (r".*[\-\.]internal", r".*\.replica", r"__.*")
"""MirrorMaker 2's own ``topics.exclude`` default (kept: setting the key replaces it)."""


def topics_exclude(topology: Topology) -> str:
    """MirrorMaker 2's default exclusions plus the internal topics of every declared Connect cluster,
    which live on a cluster a link may read from (a Connect cluster homed on the source, or on B when
    B→C runs after a failover) and must never be copied."""
    connect = [re.escape(f"connect-{cc.name}-") + "(?:configs|offsets|status)" for cc in topology.connect_clusters]
    return ",".join((*MM2_DEFAULT_EXCLUDES, *connect))


def connector_configs(
    topology: Topology,
    link: Link,
    secrets_file: str = "/etc/kafka-connect/secrets/replicator.properties",
    tasks_max: int = 4,
    *,
    credentials: tuple[str, str] | None = None,
    internal_rf: int | None = None,
    keystore: ConnectCredentials | None = None,
) -> dict[str, dict[str, str]]:
    """The three MM2 connectors (name → config) for ``link``, its clusters local or external.

    ``secrets_file`` is the replicator's ``username=``/``password=`` file as the Connect workers
    see it (:meth:`dr.runtime.connect.LocalConnectCluster.secrets_file` for a local Connect
    cluster); ``credentials`` instead gives the username and password references of another
    config provider (:meth:`dr.topology.ConnectCredentials.references`). The configs reference the
    credentials and never hold a password. ``internal_rf`` is the replication factor of the
    internal topics on the target (default: the target's declared value, else min(3, brokers) of a
    local target, else 3). ``keystore``: the Connect cluster's replicator credentials whose
    ``keystore_file`` a mutual-TLS end needs. The link's Connect cluster's ``worker_tls`` decides what the
    clients Connect builds for the connectors take from the workers' own stores (:func:`_tls`).
    """
    if "}" in secrets_file or ":" in secrets_file or not secrets_file.strip():
        raise ConfigError(
            f"secrets file path {secrets_file!r} cannot be referenced from a Connect config "
            "(a ':' or '}' ends the ${file:...} reference early).",
            "keep the secrets file at a path without ':' and '}'",
        )
    if not isinstance(tasks_max, int) or tasks_max < 1:
        raise ConfigError(
            f"tasks_max={tasks_max!r}: the source connector needs at least one task.", "use a positive number of tasks"
        )
    source, target = topology.cluster(link.source), topology.cluster(link.target)
    refs = credentials or (f"${{file:{secrets_file}:username}}", f"${{file:{secrets_file}:password}}")
    connect = topology.link_connect(link)
    worker = connect.worker_tls if connect is not None else WorkerTls()
    iv = link.intervals
    common = {
        "source.cluster.alias": source.name,
        "target.cluster.alias": target.name,
        "replication.policy.class": IDENTITY_POLICY,
        **_client("source.cluster", source, refs, keystore),
        **_client("target.cluster", target, refs, keystore),
        # The records (and heartbeats, checkpoints) go to the link's target as the replicator,
        # wherever the workers' own Kafka cluster is.
        **_client("producer.override", target, refs, keystore, worker),
        # ...and Connect keeps a connector's source offsets there too: on workers with exactly-once source
        # support each connector and task has a store on its producer's cluster (KIP-618), read by a consumer
        # and bounded by end offsets from an admin client that Connect builds from the workers' own cluster
        # plus these overrides. Both must point where the producer writes: B→C on workers homed on B read
        # B's offsets topic up to C's end offsets, and a task restarted after a worker loss never started.
        **_client("consumer.override", target, refs, keystore, worker),
        **_client("admin.override", target, refs, keystore, worker),
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    }
    rf = str(
        internal_rf or target.internal_topics_replication_factor or (min(3, target.brokers) if target.is_local else 3)
    )
    topics = ",".join(link.topics)
    groups = ",".join(link.consumer_groups)
    return {
        f"{link.name}-source": {
            **common,
            **(exactly_once_settings() if topology.delivery_of(link) == Delivery.EXACTLY_ONCE else {}),
            "connector.class": CONNECTORS["source"],
            "tasks.max": str(tasks_max),
            "topics": topics,
            "topics.exclude": topics_exclude(topology),
            "refresh.topics.interval.seconds": str(iv.refresh_topics_s),
            "sync.topic.acls.enabled": "false",
            "sync.topic.configs.enabled": "true",
            "offset-syncs.topic.location": "target",
            "replication.factor": rf,
            "offset-syncs.topic.replication.factor": rf,
        },
        f"{link.name}-checkpoint": {
            **common,
            "connector.class": CONNECTORS["checkpoint"],
            "tasks.max": "1",
            "groups": groups,
            "refresh.groups.interval.seconds": str(iv.refresh_groups_s),
            "emit.checkpoints.enabled": "true",
            "emit.checkpoints.interval.seconds": str(iv.emit_checkpoints_s),
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": str(iv.sync_group_offsets_s),
            "offset-syncs.topic.location": "target",
            "checkpoints.topic.replication.factor": rf,
        },
        f"{link.name}-heartbeat": {
            **common,
            "connector.class": CONNECTORS["heartbeat"],
            "tasks.max": "1",
            "emit.heartbeats.interval.seconds": "5",
            "heartbeats.topic.replication.factor": rf,
        },
    }
