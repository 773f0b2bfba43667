"""Confluent Cloud: ``kind: confluent-cloud`` clusters and ``engine: cluster-link`` links.

* :class:`ConfluentKafkaCluster` — a ``pulumi_confluentcloud.KafkaCluster`` created from the
  cluster's ``confluent:`` settings, and an explicit ``pulumi_kafka`` provider that reaches it with
  a Kafka API key of the cluster (SASL/PLAIN over TLS) for topics and ACLs. Confluent Cloud has no
  SCRAM users: the key *is* the login.
* :class:`ConfluentClusterLink` — a destination-initiated ``ClusterLink`` and one
  ``KafkaMirrorTopic`` per topic the link selects. Failover is declarative: the link's ``state``
  (``running`` / ``promoted`` / ``failed-over``, set by :meth:`Topology.after_failover`) is the
  mirror topics' ``status`` (``ACTIVE`` / ``PROMOTED`` / ``FAILED_OVER``), applied by ``pulumi up``.
  Mirror topics are ``retain_on_delete``: Pulumi never deletes one (nor its records).

Credentials, two kinds:

* The **Cloud API key** (organisation-level) is the ``confluentcloud`` provider's own: it creates
  the clusters, service accounts, role bindings and API keys. The program never reads it; the
  provider takes it from ``CONFLUENT_CLOUD_API_KEY`` / ``CONFLUENT_CLOUD_API_SECRET`` in the
  environment, or from the stack config ``confluentcloud:cloudApiKey`` and (secret)
  ``confluentcloud:cloudApiSecret`` (``pulumi config set --secret confluentcloud:cloudApiSecret ...``).
* The cluster's **Kafka API key** (topics, ACLs, cluster links). When ``confluent.api_key`` /
  ``confluent.api_secret`` are not declared — a cluster the program brings up itself, whose key
  cannot exist beforehand — the component creates it, as Confluent's own Pulumi/Terraform examples
  do: a ``ServiceAccount`` ``kafka-dr-<cluster>-admin``, a ``RoleBinding`` giving it
  ``CloudClusterAdmin`` on the cluster's ``rbac_crn``, and an ``ApiKey`` it owns for the cluster
  (created after the role binding). Declared keys win (an existing cluster imported by the user);
  declaring only one of the two is a ConfigError.

API secrets enter the program only as secret Outputs.

Limitation (not implemented): ACLs on Confluent Cloud name principals by service-account id
(``User:sa-abc123``), not by name. The application principals' ACLs that :mod:`stacks.access` builds
use the topology's principal names, which Confluent Cloud does not resolve; applications need service
accounts of their own, and ACLs written with those ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_confluentcloud as confluentcloud
import pulumi_kafka as kafka

from dr.base.errors import ConfigError
from dr.topology.model import Cluster, Confluent, Engine, Kind, Link, LinkState, Topology

__all__ = [
    "MIRROR_STATUS",
    "ConfluentClusterLink",
    "ConfluentClusterLinkArgs",
    "ConfluentKafkaCluster",
    "ConfluentKafkaClusterArgs",
    "cluster_link",
    "confluent_cluster",
    "mirrored_topics",
    "strip_protocol",
]

MIRROR_STATUS = {
    LinkState.RUNNING: "ACTIVE",
    LinkState.PROMOTED: "PROMOTED",
    LinkState.FAILED_OVER: "FAILED_OVER",
}
"""The ``KafkaMirrorTopic.status`` of a link's mirror topics, by the link's state."""


def strip_protocol(endpoint: str) -> str:
    """``host:port[,host:port...]`` from Confluent's ``SASL_SSL://host:port`` bootstrap endpoint."""
    return ",".join(part.strip().split("://", 1)[-1] for part in endpoint.split(",") if part.strip())


def _settings(c: Cluster) -> Confluent:
    if c.kind is not Kind.CONFLUENT_CLOUD or c.confluent is None:
        raise ConfigError(
            f"cluster {c.name!r} is {c.kind.value} without confluent settings; stacks.confluent builds "
            "only confluent-cloud clusters",
            f"set kind: confluent-cloud and a confluent: block on kafka-dr:clusters[{c.name}]",
        )
    return c.confluent


def _credentials(c: Cluster) -> tuple[str, pulumi.Output[str]] | None:
    """The declared API key of the cluster and its secret (as a secret Output); None when neither is
    declared (the component creates one); ConfigError naming the field when only one is, or the
    secret is still encrypted."""
    settings = _settings(c)
    secret = settings.api_secret
    if not settings.api_key and secret is None:
        return None
    if not settings.api_key:
        raise ConfigError(
            f"confluent-cloud cluster {c.name!r} has confluent.api_secret but no confluent.api_key",
            f"set kafka-dr:clusters[{c.name}].confluent.apiKey to the key of that secret, or remove "
            "apiSecret too and let the program create a service account and API key for the cluster",
        )
    if secret is None or secret.is_encrypted:
        state = "is still encrypted (run inside `pulumi`, which decrypts it)" if secret is not None else "is missing"
        raise ConfigError(
            f"confluent-cloud cluster {c.name!r}: confluent.api_secret {state}",
            f"set it with `pulumi config set --path --secret 'kafka-dr:clusters[<index of {c.name}>]"
            ".confluent.apiSecret' <secret>` (or remove apiKey too and let the program create a "
            "service account and API key for the cluster)",
        )
    return settings.api_key, pulumi.Output.secret(secret.get_secret_value())


def _cluster_type(settings: Confluent) -> dict[str, Any]:
    if settings.cluster_type == "dedicated":
        # Confluent's minimum: 1 CKU single-zone, 2 CKUs multi-zone.
        return {
            "dedicated": confluentcloud.KafkaClusterDedicatedArgs(cku=2 if settings.availability == "MULTI_ZONE" else 1)
        }
    if settings.cluster_type == "basic":
        return {"basic": confluentcloud.KafkaClusterBasicArgs()}
    return {"standard": confluentcloud.KafkaClusterStandardArgs()}


# -- clusters ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConfluentKafkaClusterArgs:
    """What :class:`ConfluentKafkaCluster` needs: the cluster and, for a cluster whose key the user
    declared, its Kafka API key (both None: the component creates a service account and key)."""

    cluster: Cluster
    api_key: pulumi.Input[str] | None = None
    api_secret: pulumi.Input[str] | None = None


class ConfluentKafkaCluster(pulumi.ComponentResource):
    """A Confluent Cloud Kafka cluster, with ``bootstrap_servers`` and a ``provider`` for its resources."""

    kafka_cluster: confluentcloud.KafkaCluster
    cluster_id: pulumi.Output[str]
    bootstrap_endpoint: pulumi.Output[str]
    """As Confluent reports it (``SASL_SSL://host:port``); what a cluster link's source takes."""
    bootstrap_servers: pulumi.Output[str]
    rest_endpoint: pulumi.Output[str]
    provider: kafka.Provider
    api_key: pulumi.Input[str]
    """The Kafka API key the provider and cluster links use: declared, or the created ``ApiKey``'s id."""
    api_secret: pulumi.Output[str]
    service_account: confluentcloud.ServiceAccount | None
    """The created admin service account, role binding and API key; None when the key was declared."""
    role_binding: confluentcloud.RoleBinding | None
    admin_api_key: confluentcloud.ApiKey | None

    def __init__(self, name: str, args: ConfluentKafkaClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.cluster
        if (args.api_key is None) != (args.api_secret is None):
            raise ConfigError(
                f"cluster {c.name!r}: ConfluentKafkaClusterArgs has only one of api_key, api_secret",
                "pass both (a declared key) or neither (the component creates one)",
            )
        super().__init__("kafka-dr:index:ConfluentKafkaCluster", name, None, opts)
        settings = _settings(c)
        self.role = c.role.value
        self.kafka_cluster = confluentcloud.KafkaCluster(
            f"{c.name}-kafka-cluster",
            display_name=c.name,
            availability=settings.availability,
            cloud=settings.cloud,
            region=settings.region,
            environment=confluentcloud.KafkaClusterEnvironmentArgs(id=settings.environment_id),
            **_cluster_type(settings),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster_id = self.kafka_cluster.id
        self.bootstrap_endpoint = self.kafka_cluster.bootstrap_endpoint
        self.bootstrap_servers = self.kafka_cluster.bootstrap_endpoint.apply(strip_protocol)
        self.rest_endpoint = self.kafka_cluster.rest_endpoint
        self.service_account = self.role_binding = self.admin_api_key = None
        if args.api_key is not None and args.api_secret is not None:
            self.api_key = args.api_key
            self.api_secret = pulumi.Output.secret(args.api_secret)
        else:
            self._create_api_key(c.name, settings)
        self.provider = kafka.Provider(
            f"{c.name}-kafka",
            bootstrap_servers=self.bootstrap_servers.apply(lambda s: s.split(",")),
            sasl_username=self.api_key,
            sasl_password=self.api_secret,
            sasl_mechanism="plain",
            tls_enabled=True,
            kafka_version="2.7.0",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {
                "role": self.role,
                "cluster_id": self.cluster_id,
                "bootstrap_servers": self.bootstrap_servers,
                "rest_endpoint": self.rest_endpoint,
            }
        )

    def _create_api_key(self, name: str, settings: Confluent) -> None:
        """A service account with ``CloudClusterAdmin`` on the cluster and a Kafka API key it owns."""
        child = pulumi.ResourceOptions(parent=self)
        display = f"kafka-dr-{name}-admin"
        self.service_account = confluentcloud.ServiceAccount(
            f"{name}-admin-service-account",
            display_name=display,
            description=f"kafka-dr: manages topics, ACLs and cluster links of Kafka cluster {name}",
            opts=child,
        )
        self.role_binding = confluentcloud.RoleBinding(
            f"{name}-admin-cluster-admin",
            principal=self.service_account.id.apply(lambda sa: f"User:{sa}"),
            role_name="CloudClusterAdmin",
            crn_pattern=self.kafka_cluster.rbac_crn,
            opts=child,
        )
        self.admin_api_key = confluentcloud.ApiKey(
            f"{name}-admin-api-key",
            display_name=display,
            description=f"kafka-dr: Kafka API key of {display} for cluster {name}",
            owner=confluentcloud.ApiKeyOwnerArgs(
                id=self.service_account.id, api_version=self.service_account.api_version, kind=self.service_account.kind
            ),
            managed_resource=confluentcloud.ApiKeyManagedResourceArgs(
                id=self.kafka_cluster.id,
                api_version=self.kafka_cluster.api_version,
                kind=self.kafka_cluster.kind,
                environment=confluentcloud.ApiKeyManagedResourceEnvironmentArgs(id=settings.environment_id),
            ),
            # the key is of no use before the role binding grants its owner the cluster
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role_binding]),
        )
        self.api_key = self.admin_api_key.id
        self.api_secret = pulumi.Output.secret(self.admin_api_key.secret)


def confluent_cluster(c: Cluster, opts: pulumi.ResourceOptions | None = None) -> ConfluentKafkaCluster:
    """The :class:`ConfluentKafkaCluster` of ``c``: with its declared API key, or (none declared) one
    the component creates; ConfigError naming the field when only half a key is declared."""
    declared = _credentials(c)
    if declared is None:
        return ConfluentKafkaCluster(c.name, ConfluentKafkaClusterArgs(cluster=c), opts)
    api_key, api_secret = declared
    return ConfluentKafkaCluster(
        c.name, ConfluentKafkaClusterArgs(cluster=c, api_key=api_key, api_secret=api_secret), opts
    )


# -- links ------------------------------------------------------------------------------------


def mirrored_topics(topology: Topology, cluster: str) -> set[str]:
    """Names of the topics that are mirror topics on ``cluster`` (owned by a cluster link, not by
    ClusterAccess): every topic selected by a ``cluster-link`` link into it, running or kept."""
    return {
        topic.name
        for link in topology.links_into(cluster)
        if link.engine is Engine.CLUSTER_LINK
        for topic in topology.topics_for(link)
    }


@dataclass(frozen=True, kw_only=True)
class ConfluentClusterLinkArgs:
    """A cluster link, its two built clusters, and what must exist first (the source's topics)."""

    topology: Topology
    link: Link
    source: ConfluentKafkaCluster
    destination: ConfluentKafkaCluster
    depends_on: list[pulumi.Resource]


class ConfluentClusterLink(pulumi.ComponentResource):
    """A destination-initiated cluster link and its mirror topics (status from the link's state)."""

    cluster_link: confluentcloud.ClusterLink
    mirror_topics: dict[str, confluentcloud.KafkaMirrorTopic]

    def __init__(self, name: str, args: ConfluentClusterLinkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("kafka-dr:index:ConfluentClusterLink", name, None, opts)
        link, src, dst = args.link, args.source, args.destination
        self.status = MIRROR_STATUS[link.state]
        self.cluster_link = confluentcloud.ClusterLink(
            f"{link.name}-cluster-link",
            link=link.name,
            link_mode="DESTINATION",
            connection_mode="OUTBOUND",
            source_kafka_cluster=confluentcloud.ClusterLinkSourceKafkaClusterArgs(
                id=src.cluster_id,
                bootstrap_endpoint=src.bootstrap_endpoint,
                credentials=confluentcloud.ClusterLinkSourceKafkaClusterCredentialsArgs(
                    key=src.api_key, secret=pulumi.Output.secret(src.api_secret)
                ),
            ),
            destination_kafka_cluster=confluentcloud.ClusterLinkDestinationKafkaClusterArgs(
                id=dst.cluster_id,
                rest_endpoint=dst.rest_endpoint,
                credentials=confluentcloud.ClusterLinkDestinationKafkaClusterCredentialsArgs(
                    key=dst.api_key, secret=pulumi.Output.secret(dst.api_secret)
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.mirror_topics = {}
        for topic in args.topology.topics_for(link):
            self.mirror_topics[topic.name] = confluentcloud.KafkaMirrorTopic(
                f"{link.name}-mirror-{topic.name}",
                source_kafka_topic=confluentcloud.KafkaMirrorTopicSourceKafkaTopicArgs(topic_name=topic.name),
                cluster_link=confluentcloud.KafkaMirrorTopicClusterLinkArgs(link_name=self.cluster_link.link),
                kafka_cluster=confluentcloud.KafkaMirrorTopicKafkaClusterArgs(
                    id=dst.cluster_id,
                    rest_endpoint=dst.rest_endpoint,
                    credentials=confluentcloud.KafkaMirrorTopicKafkaClusterCredentialsArgs(
                        key=dst.api_key, secret=pulumi.Output.secret(dst.api_secret)
                    ),
                ),
                status=self.status,
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True, depends_on=args.depends_on),
            )
        self.register_outputs(
            {
                "source": link.source,
                "target": link.target,
                "engine": link.engine.value,
                "state": link.state.value,
                "status": self.status,
                "mirror_topics": sorted(self.mirror_topics),
            }
        )


def cluster_link(
    topology: Topology,
    link: Link,
    clusters: Mapping[str, pulumi.Resource],
    depends_on: list[pulumi.Resource] | None = None,
) -> ConfluentClusterLink:
    """The :class:`ConfluentClusterLink` of ``link`` between two already built Confluent clusters.

    ``depends_on`` should hold what creates the source topics (the source's ClusterAccess): a
    mirror topic can only be created once its source topic exists.
    """
    ends: list[ConfluentKafkaCluster] = []
    for end in (link.source, link.target):
        built = clusters.get(end)
        if not isinstance(built, ConfluentKafkaCluster):
            why = "is not built by the program" if built is None else "is not a Confluent Cloud cluster"
            raise ConfigError(
                f"cluster link {link.name!r}: cluster {end!r} {why}; a cluster link needs both of its "
                "Confluent Cloud clusters (a decommissioned source too, while its promoted link is kept)",
                "build every confluent-cloud cluster a cluster-link names, including decommissioned ones",
            )
        ends.append(built)
    source, destination = ends
    return ConfluentClusterLink(
        link.name,
        ConfluentClusterLinkArgs(
            topology=topology, link=link, source=source, destination=destination, depends_on=list(depends_on or [])
        ),
    )
