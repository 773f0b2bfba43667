"""What a running cluster holds, read through the admin API: the input of ``drctl estate adopt``.

:class:`LiveCluster` is plain data (topics with their partitions, replication factor and topic-level
configurations; every ACL binding; the SCRAM users; client quotas), so the derivation of a stack file
from it (:mod:`dr.topology.adoption`) is a pure function tested without a cluster. :func:`read_live`
fills it with one metadata request, one DescribeConfigs, one DescribeAcls and one
DescribeUserScramCredentials; client quotas, which librdkafka cannot read, come from
:func:`dr.runtime.quota_reader.read_quotas` (Kafka's own ``ConfigCommand``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from dr.base.errors import AuthError
from dr.kafka.client import Endpoint, connected_admin, translate_kafka_error
from dr.kafka.internal_topics import why_internal

__all__ = ["LiveAcl", "LiveCluster", "LiveQuota", "LiveTopic", "TopicConfigs", "read_live", "topic_configs"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class LiveTopic:
    """One topic as the cluster holds it."""

    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    """The effective value (a topic-level override, else the broker's)."""
    configs: dict[str, str] = field(default_factory=dict)
    """The topic-level overrides (``DYNAMIC_TOPIC_CONFIG``) other than ``min.insync.replicas``."""


@dataclass(frozen=True, order=True)
class LiveAcl:
    """One ACL binding, in Kafka's own names (``Topic``, ``Literal``, ``Write``, ``Allow``)."""

    principal: str
    """``User:alice``, ``User:*``, ``Group:ops``…"""
    resource_type: str
    resource_name: str
    pattern: str
    operation: str
    permission: str = "Allow"
    host: str = "*"

    def text(self) -> str:
        """The binding as one readable line, for the list of what a stack file cannot express."""
        where = "" if self.host == "*" else f" from host {self.host}"
        return (
            f"{self.permission} {self.principal} {self.operation} on {self.resource_type} "
            f"{self.resource_name!r} ({self.pattern}){where}"
        )


@dataclass(frozen=True)
class LiveQuota:
    """Client quotas on one entity: ``{"user": "alice"}``, ``{"user": None}`` (the default user),
    ``{"client-id": "x"}``, ``{"user": "a", "client-id": "x"}``, ``{"ip": "10.0.0.1"}``…"""

    entity: dict[str, str | None]
    configs: dict[str, float]

    def text(self) -> str:
        """``user 'alice'``, ``the default user``, ``user 'a' with client-id 'x'``."""
        parts = [
            f"the default {kind}" if name is None else f"{kind} {name!r}" for kind, name in sorted(self.entity.items())
        ]
        return " with ".join(parts)


@dataclass
class LiveCluster:
    """Everything :func:`read_live` found on one cluster."""

    topics: list[LiveTopic] = field(default_factory=list)
    internal_topics: list[str] = field(default_factory=list)
    """Kafka's, MirrorMaker 2's and Connect's own topics, never declared (:mod:`dr.kafka.internal_topics`)."""
    acls: list[LiveAcl] = field(default_factory=list)
    scram_users: dict[str, list[str]] = field(default_factory=dict)
    """User → its SCRAM mechanisms (``SCRAM-SHA-512``…). Passwords cannot be read: Kafka keeps salted hashes."""
    quotas: list[LiveQuota] = field(default_factory=list)
    bootstrap: str = ""
    """Where it was read (the bootstrap servers): a local cluster declares none, its repairs name this one."""


def _names(enum_value: object) -> str:
    """``ResourcePatternType.PREFIXED`` → ``Prefixed``, ``AclOperation.DESCRIBE_CONFIGS`` → ``DescribeConfigs``."""
    name = getattr(enum_value, "name", str(enum_value))
    return "".join(part.capitalize() for part in name.split("_")).replace("TransactionalId", "TransactionalID")


_RESOURCE_TYPES = {"Broker": "Cluster"}  # Kafka's admin API calls the cluster resource BROKER


def _refused(err: object) -> bool:
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.SECURITY_DISABLED,
    )


def _not_allowed(endpoint: Endpoint, what: str, exc: KafkaException) -> AuthError | None:
    err = exc.args[0] if exc.args else None
    if not _refused(err):
        return None
    return AuthError(
        f"{endpoint.label}: user {endpoint.username!r} may not {what} ({err}); nothing was written.", _ADOPT_AS
    )


_ADOPT_AS = (
    "adopt as a principal allowed to describe the cluster's topics, configurations, ACLs and users (the "
    "cluster's admin, a super user), and check the brokers run an ACL authorizer"
)


def may_describe_cluster(admin: AdminClient, endpoint: Endpoint, timeout: float) -> bool:
    """Whether the brokers let this user describe the cluster (what DescribeUserScramCredentials needs), asked
    first: librdkafka aborts the whole process (``munmap_chunk(): invalid pointer``) when the brokers refuse
    that request — seen with confluent-kafka 2.10.1 to 2.16.2. Kafka lists no operation for a user that may do
    nothing on the cluster."""
    described = _answer(
        endpoint,
        "describe the cluster",
        lambda: admin.describe_cluster(include_authorized_operations=True, request_timeout=timeout).result(
            timeout=timeout
        ),
    )
    allowed = described.authorized_operations or []
    return AclOperation.DESCRIBE in allowed or AclOperation.ALL in allowed


def _answer(endpoint: Endpoint, what: str, call: Callable[[], _T]) -> _T:
    """``call()``'s result; a refusal becomes :class:`AuthError` naming ``what``, any other Kafka error the
    product's error for the cluster."""
    try:
        return call()
    except KafkaException as exc:
        refused = _not_allowed(endpoint, what, exc)
        if refused is not None:
            raise refused from None
        raise translate_kafka_error(exc, what.replace("describe", "describing", 1), endpoint) from None


@dataclass(frozen=True)
class TopicConfigs:
    """One topic's configuration as DescribeConfigs answers it."""

    min_insync_replicas: int
    """The effective value (a topic-level override, else the broker's)."""
    min_insync_pinned: bool
    """True when ``min.insync.replicas`` is set on the topic itself."""
    overrides: dict[str, str]
    """The other topic-level settings (``DYNAMIC_TOPIC_CONFIG``), sensitive ones left out."""


def _topic_configs(entries: dict[str, Any]) -> TopicConfigs:
    mir = entries.get("min.insync.replicas")
    topic_level = {
        key: str(entry.value)
        for key, entry in entries.items()
        if getattr(entry.source, "value", entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        and entry.value is not None
        and not entry.is_sensitive
    }
    pinned = topic_level.pop("min.insync.replicas", None) is not None
    return TopicConfigs(int(mir.value) if mir is not None and mir.value else 1, pinned, topic_level)


def topic_configs(
    admin: AdminClient, endpoint: Endpoint, names: list[str], timeout: float = 30.0
) -> dict[str, TopicConfigs]:
    """The configuration of each of ``names`` (existing topics), with one DescribeConfigs request."""
    if not names:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    return {
        resource.name: _topic_configs(
            _answer(endpoint, "describe topic configurations", partial(future.result, timeout))
        )
        for resource, future in futures.items()
    }


def read_live(endpoint: Endpoint, timeout: float = 30.0) -> LiveCluster:
    """Topics (with configs), ACLs and SCRAM users of the cluster ``endpoint`` reaches (quotas not included).

    ClusterError when it cannot be reached, AuthError when the credentials are refused or the principal may
    not describe what adoption reads (each names the request)."""
    admin, metadata = connected_admin(endpoint, timeout=timeout)
    live = LiveCluster(bootstrap=endpoint.bootstrap)
    names: list[str] = []
    for name, topic in sorted(metadata.topics.items()):
        if why_internal(name) is not None:
            live.internal_topics.append(name)
            continue
        if topic.error is not None:
            if _refused(topic.error):
                raise AuthError(
                    f"{endpoint.label}: user {endpoint.username!r} may not describe topic {name!r}; nothing was written.",
                    "adopt as the cluster's admin (a super user)",
                )
            continue
        names.append(name)
    configs = topic_configs(admin, endpoint, names, timeout)
    for name in names:
        partitions = metadata.topics[name].partitions
        first = partitions[min(partitions)] if partitions else None
        found = configs.get(name) or TopicConfigs(1, False, {})
        rf = len(first.replicas) if first is not None else 1
        live.topics.append(LiveTopic(name, len(partitions), rf, found.min_insync_replicas, found.overrides))
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]  # None matches any name in a filter; the stub says str
        ResourcePatternType.ANY,
        None,  # type: ignore[arg-type]  # any principal
        None,  # type: ignore[arg-type]  # any host
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    bindings = _answer(endpoint, "describe ACLs", lambda: admin.describe_acls(everything).result(timeout=timeout))
    for b in bindings:
        restype = _names(b.restype)
        live.acls.append(
            LiveAcl(
                principal=b.principal,
                resource_type=_RESOURCE_TYPES.get(restype, restype),
                resource_name=b.name,
                pattern=_names(b.resource_pattern_type),
                operation=_names(b.operation),
                permission=_names(b.permission_type),
                host=b.host,
            )
        )
    live.acls.sort()
    if not may_describe_cluster(admin, endpoint, timeout):
        raise AuthError(
            f"{endpoint.label}: user {endpoint.username!r} may not describe SCRAM users (it lacks Describe on the "
            "cluster); nothing was written.",
            _ADOPT_AS,
        )
    # one future for every user when none are named
    every_user = cast("Future[dict[str, Any]]", admin.describe_user_scram_credentials())
    described: dict[str, Any] = _answer(endpoint, "describe SCRAM users", partial(every_user.result, timeout))
    for user, description in sorted(described.items()):
        infos = getattr(description, "scram_credential_infos", None) or []
        live.scram_users[user] = sorted(_scram_name(i.mechanism) for i in infos)
    return live


def _scram_name(mechanism: object) -> str:
    """``ScramMechanism.SCRAM_SHA_512`` → ``SCRAM-SHA-512``."""
    return getattr(mechanism, "name", str(mechanism)).replace("_", "-")
