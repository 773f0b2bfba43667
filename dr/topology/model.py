"""The typed topology model: clusters, topics, principals and links of one stack.

Every model is frozen and rejects unknown keys. Keys may be written in snake_case or camelCase
(``base_port`` or ``basePort``). Building a :class:`Topology` runs every rule of
:mod:`dr.topology.validation`; a broken rule raises :class:`~dr.base.errors.TopologyError`, a malformed
value (wrong type, missing key, unknown key) raises :class:`~dr.base.errors.ConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from dr.base.errors import ConfigError, InternalError, TopologyError
from dr.base.pattern_safety import name_matcher
from dr.base.types import Model
from dr.kafka.internal_topics import InternalTopics
from dr.topology.failover_policy import FailoverPolicy
from dr.topology.kinds import (
    PORT_WINDOW,
    Architecture,
    Delivery,
    Engine,
    Kind,
    LinkState,
    Naming,
    Placement,
    Profile,
    Role,
)
from dr.topology.secret import Secret
from dr.topology.violation import Violation

__all__ = [
    "PORT_WINDOW",
    "Application",
    "Architecture",
    "Cluster",
    "Confluent",
    "Delivery",
    "Engine",
    "Kind",
    "Link",
    "LinkIntervals",
    "LinkState",
    "LostSite",
    "Naming",
    "OAuth",
    "OAuthClient",
    "Placement",
    "Principals",
    "Profile",
    "Quota",
    "Role",
    "Tls",
    "Topic",
    "Topology",
]

FAILOVER_STATES = {"planned": LinkState.PROMOTED, "unplanned": LinkState.FAILED_OVER}
"""The state a failover of each mode leaves a cluster link into the promoted cluster in."""

DEFAULT_DELIVERY = Delivery.EXACTLY_ONCE
"""What a MirrorMaker 2 link without ``delivery`` gets where its engine and Connect cluster allow it
(:meth:`Topology.delivery_of`): exactly-once (KIP-618) — a replicator killed mid-copy leaves no duplicate on
its target. An external Connect cluster whose workers do not declare ``exactly_once_source`` gets
at-least-once."""


class _Model(Model):
    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        loc_by_alias=False,
    )

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(exc, type(self).__name__, data) from None

    # Tell pydantic this __init__ only wraps its own: nested models are then validated in one pass
    # (all errors collected) and only the outermost call converts ValidationError to ConfigError.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Pydantic's ``model_validate``, raising ConfigError instead of ValidationError."""
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise _config_error(exc, cls.__name__, obj) from None


class Confluent(_Model):
    """Confluent Cloud settings of a ``kind: confluent-cloud`` cluster (the program creates the cluster).

    ``api_key``/``api_secret`` are the cluster's Kafka API key, used for its topics, ACLs and cluster
    links. Leave both out and the program creates one (a service account with CloudClusterAdmin on
    the cluster, and its key); declare both to use your own (an imported cluster), the secret with
    ``pulumi config set --path --secret 'kafka-dr:clusters[i].confluent.apiSecret' ...``.
    """

    environment_id: str = Field(min_length=1)
    """The Confluent Cloud environment (``env-...``) the cluster is created in."""
    cloud: Literal["AWS", "GCP", "AZURE"]
    region: str = Field(min_length=1)
    """The cloud provider's region, e.g. ``us-east-1``."""
    availability: Literal["SINGLE_ZONE", "MULTI_ZONE"] = "SINGLE_ZONE"
    cluster_type: Literal["basic", "standard", "dedicated"] = "standard"
    """``dedicated`` is required for a cluster that is the destination of a cluster link."""
    api_key: str | None = None
    api_secret: Secret | None = None


class Tls(_Model):
    """How the product's clients trust a cluster's brokers and, under mutual TLS, prove who they are.

    Every client of the product (the Kafka provider, ``drctl``, MirrorMaker 2, the Spark verification)
    takes these settings from here; none uses a system trust store or a JVM's ``cacerts``
    (:mod:`dr.kafka.tls` renders them for each). Files are paths on the machine running the product;
    the ``*_pem`` forms carry the PEM text in the stack instead (the key only as a Pulumi secret), and
    the product writes them to 0600 files under the stack's state directory.
    """

    ca_file: str | None = None
    """The CA bundle (PEM) that signed the brokers' certificates."""
    ca_pem: str | None = None
    """The same CA bundle as PEM text in the stack config (a CA certificate is public)."""
    client_certificate_file: str | None = None
    """Mutual TLS: the certificate (PEM) the product's clients present; its mapped DN is the admin principal."""
    client_certificate_pem: str | None = None
    """The same certificate as PEM text in the stack config."""
    client_key_file: str | None = None
    """Mutual TLS: the unencrypted PEM private key of ``client_certificate_*``, a file only its owner can
    read (0600 or 0400; one readable by the group or others is refused)."""
    client_key_pem: Secret | None = None
    """The same key as a Pulumi secret
    (``pulumi config set --path --secret 'kafka-dr:clusters[<i>].tls.clientKeyPem' < admin.key``)."""
    hostname_verification: bool = True
    """Check that each broker's certificate names the host dialled. Declared ``false``, ``drctl``,
    MirrorMaker 2, the connectors and Spark skip only that check (a warning on every command); the Pulumi
    Kafka provider cannot skip it alone and keeps checking, unless ``insecure_skip_verify``."""
    insecure_skip_verify: bool = False
    """The Pulumi Kafka provider checks no certificate of this cluster's brokers at all (its only way to
    accept certificates that do not name the host it dials). Anyone on the path can then pose as the
    brokers to the provider, which logs in as the admin; said as a warning on every command. The other
    clients keep verifying the chain."""
    principal_mapping_rules: str | None = None
    """The brokers' ``ssl.principal.mapping.rules`` (e.g. ``RULE:^CN=([^,]+).*$/$1/,DEFAULT``): how a
    certificate's DN becomes ``User:<name>``, so the ACLs the product writes name the mapped principal."""

    @property
    def has_client_certificate(self) -> bool:
        """True when a client certificate is declared (file or PEM)."""
        return bool(self.client_certificate_file or self.client_certificate_pem)

    @property
    def has_client_key(self) -> bool:
        """True when a client private key is declared (file or secret)."""
        return bool(self.client_key_file or self.client_key_pem is not None)


class OAuthClient(_Model):
    """One client identity registered at the identity provider (OAUTHBEARER): the client-credentials grant's
    client id and secret, and the Kafka principal its tokens carry."""

    client_id: str = Field(min_length=1)
    client_secret: Secret | None = None
    """The client's secret, as a Pulumi secret (``pulumi config set --path --secret
    'kafka-dr:clusters[<i>].oauth.admin.clientSecret' ...``). An application's may be left out: its team
    provides it to its own clients (the published client files carry everything else)."""
    principal: str | None = None
    """The principal the brokers see for this client's tokens (the claim their
    ``sasl.oauthbearer.sub.claim.name`` names, ``sub`` by default); unset: the client id. An application's
    must be the application's name, so its ACLs are those of its role."""

    @property
    def kafka_principal(self) -> str:
        """``principal``, else the client id."""
        return self.principal or self.client_id


class OAuth(_Model):
    """How the product's clients log in to an OAUTHBEARER cluster: the identity provider's token endpoint, the
    scope asked for, the audience the brokers expect, the provider's CA, and one client identity for the
    admin, one for the replicator and one per application."""

    token_endpoint: str | None = None
    """The identity provider's token endpoint (``https://idp.example.com/realms/kafka/protocol/openid-connect/token``)."""
    scope: str | None = None
    """The scope each client asks for (space-separated); unset: none."""
    audience: str | None = None
    """The ``aud`` the brokers expect in a token (their ``sasl.oauthbearer.expected.audience``): a token
    without it is refused by the brokers, and the product names that cause."""
    tls: Tls | None = None
    """The identity provider's CA (``ca_file`` or ``ca_pem``, ``hostname_verification``) for an ``https``
    token endpoint; unset: the cluster's ``tls`` CA."""
    admin: OAuthClient | None = None
    """The admin's client (its principal must be a super user of the brokers)."""
    replicator: OAuthClient | None = None
    """The replicator's client (MirrorMaker 2 on a link that reads or writes this cluster)."""
    applications: dict[str, OAuthClient] = Field(default_factory=dict)
    """Each application's client, by application name."""


class Cluster(_Model):
    """One Kafka cluster and its role. Local clusters are run by the project on 127.0.0.1."""

    name: str = Field(min_length=1)
    role: Role
    kind: Kind = Kind.LOCAL
    brokers: Literal[1, 3] = 1
    """Local only: number of brokers."""
    racks: list[str] = Field(default_factory=list)
    """Local only: one rack name per broker (default ``rack-1`` .. ``rack-N``)."""
    base_port: int | None = None
    """Local only: first port of the cluster's 100-port window."""
    local_tls: bool = False
    """Local only: serve clients SASL_SSL with a certificate of a CA the product makes for the estate
    (``<state>/tls/local-ca.pem``, which every client of the product verifies); inter-broker and controller
    traffic stays SASL_PLAINTEXT on 127.0.0.1."""
    bootstrap_servers: str | None = None
    """External only (optional for Confluent Cloud, whose endpoint the program exports): ``host:port,...``."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] = "SCRAM-SHA-512"
    """``OAUTHBEARER``: clients log in with tokens from an identity provider (``oauth``), not a password."""
    oauth: OAuth | None = None
    """OAUTHBEARER only: the identity provider and the client identities (:class:`OAuth`)."""
    security_protocol: Literal["SASL_SSL", "SSL", "SASL_PLAINTEXT"] = "SASL_SSL"
    """How clients reach the cluster: SASL over TLS, mutual TLS (``SSL``: the principal is the client
    certificate's mapped DN, no SASL), or SASL without encryption. Local clusters run SASL_PLAINTEXT."""
    tls: Tls | None = None
    """The CA bundle, client certificate and hostname verification of a TLS protocol (:class:`Tls`)."""
    admin_username: str | None = None
    admin_password: Secret | None = None
    confluent: Confluent | None = None
    """Confluent Cloud only (required there): environment, cloud, region, type and API key."""
    internal_topics_replication_factor: int | None = Field(default=None, ge=1)
    """External only: the replication factor of the internal topics replication creates on this
    cluster (MirrorMaker 2's offset-syncs, checkpoints and heartbeats topics). Unset: the smaller of
    3 and the cluster's broker count, read when the link is provisioned."""
    lost_edge_topics: list[str] = Field(default_factory=list)
    """Hub-and-spoke, on a decommissioned edge (written by ``drctl failover --edge``): the topics its link
    carried, whose ``<edge>.<topic>`` copies stay declared on the hub and its passive copy — they hold
    the edge's history, the moved consumers read it, and recovery replays into it."""

    @model_validator(mode="before")
    @classmethod
    def _default_racks(cls, data: Any) -> Any:
        if isinstance(data, dict) and "racks" not in data and data.get("kind", Kind.LOCAL) == Kind.LOCAL:
            brokers = data.get("brokers", 1)
            if brokers in (1, 3):
                data = {**data, "racks": [f"rack-{i}" for i in range(1, brokers + 1)]}
        return data

    def oauth_clients(self) -> list[tuple[str, OAuthClient]]:
        """Every declared OAUTHBEARER client identity: (``admin`` | ``replicator`` | ``applications.<name>``, client)."""
        o = self.oauth
        if o is None:
            return []
        named = [("admin", o.admin), ("replicator", o.replicator)]
        named += [(f"applications.{app}", client) for app, client in o.applications.items()]
        return [(who, client) for who, client in named if client is not None]

    @property
    def is_local(self) -> bool:
        """True when this project runs the cluster's brokers on this machine."""
        return self.kind == Kind.LOCAL

    @property
    def expected_brokers(self) -> int | None:
        """How many brokers a health check expects: the declared count of a local cluster; None for
        another kind, whose size this project does not declare."""
        return self.brokers if self.is_local else None

    @property
    def client_protocol(self) -> str:
        """The security protocol clients use: a local cluster's own (SASL_SSL with ``local_tls``, else
        SASL_PLAINTEXT), the declared one otherwise."""
        if self.is_local:
            return "SASL_SSL" if self.local_tls else "SASL_PLAINTEXT"
        return self.security_protocol

    @property
    def port_window(self) -> range | None:
        """The ports a local cluster may use, or None for external clusters / no base_port."""
        if not self.is_local or self.base_port is None:
            return None
        return range(self.base_port, self.base_port + PORT_WINDOW)

    @property
    def holds_topics(self) -> bool:
        """True for the active and passive clusters (and hub-and-spoke edges), which hold every declared topic."""
        return self.role in (Role.ACTIVE, Role.PASSIVE, Role.EDGE)


class ClientEndpoint(_Model):
    """A stable client address that follows the active cluster (issue 31): an HAProxy in TCP mode with
    a bootstrap port and one port per broker slot; each cluster's endpoint listener advertises these
    ports, so every address a client learns goes through the proxy, and a failover switches the proxy's
    backends to the new active cluster (runtime API, no restart).

    Local estates: the product runs the proxy (``address`` must be a loopback address) and its runtime
    API on a unix socket in the state directory. External clusters: the platform team runs both, and
    ``runtime_api`` says where the runtime API answers (``host:port`` or a socket path)."""

    address: str = "127.0.0.1"
    """The address clients connect to (and the proxy binds, for a local estate)."""
    bootstrap_port: int
    """The port clients bootstrap from (any broker of the active cluster behind it)."""
    broker_ports: list[int] = Field(min_length=1, max_length=3)
    """One port per broker slot: port ``i`` reaches broker id ``i + 1`` of the active cluster."""
    runtime_api: str | None = None
    """Where HAProxy's runtime API answers: the path of a unix socket (mode 0600, on this machine) or
    ``127.0.0.1:<port>`` (loopback). The API has no authentication: whoever reaches it can point every
    client elsewhere, so any other address is refused unless ``insecure_remote_runtime_api``. Local
    estates: leave it out (a 0600 socket in the state directory)."""
    insecure_remote_runtime_api: bool = False
    """Accept a ``runtime_api`` on an address other than loopback (a warning on every command). Prefer
    a loopback port forwarded over SSH to the proxy's socket."""

    @property
    def ports(self) -> list[int]:
        """Every port the proxy binds: the bootstrap port, then the broker slots."""
        return [self.bootstrap_port, *self.broker_ports]

    def advertised(self, broker_id: int) -> str:
        """``host:port`` a cluster's endpoint listener advertises for broker ``broker_id``."""
        return f"{self.address}:{self.broker_ports[broker_id - 1]}"

    @property
    def bootstrap(self) -> str:
        """The only bootstrap address applications need."""
        return f"{self.address}:{self.bootstrap_port}"


def _config_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class Topic(_Model):
    """A topic declared on every cluster that holds topics."""

    name: str
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1)
    min_insync_replicas: int = Field(default=1, ge=1)
    configs: dict[str, str] = Field(default_factory=dict)
    """Other topic configs (``retention.ms``...); YAML numbers and booleans become strings."""

    @field_validator("configs", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: _config_value(item) for key, item in value.items()}
        return value


_LONG_MAX = 2**63 - 1
"""Kafka keeps a quota as a double; the stack file takes whole numbers up to a Java long."""


class Quota(_Model):
    """Kafka client quotas of one user (Kafka's own names, per broker): a limit left out is not set.

    ``producer_byte_rate``/``consumer_byte_rate`` are bytes per second; ``request_percentage`` is the
    share of one request-handler and network thread a user may keep busy in each quota window (above
    100 means more than one thread). Provisioned as ``pulumi_kafka`` Quota resources on every cluster
    that carries the applications' users (:mod:`stacks.access`).
    """

    producer_byte_rate: int | None = Field(default=None, ge=1, le=_LONG_MAX, strict=True)
    """Bytes per second a user may produce to each broker."""
    consumer_byte_rate: int | None = Field(default=None, ge=1, le=_LONG_MAX, strict=True)
    """Bytes per second a user may fetch from each broker."""
    request_percentage: int | None = Field(default=None, ge=1, le=_LONG_MAX, strict=True)
    """Percent of one broker thread's time a user's requests may take (above 100: several threads)."""

    @model_validator(mode="after")
    def _sets_a_limit(self) -> Quota:
        if not self.configs():
            raise ValueError(
                "a quota sets no limit: give producer_byte_rate, consumer_byte_rate or request_percentage "
                "(or remove the quota)"
            )
        return self

    def configs(self) -> dict[str, str]:
        """The limits as Kafka's quota configs (``producer_byte_rate`` → ``"1048576"``), unset ones left out."""
        limits = {
            "producer_byte_rate": self.producer_byte_rate,
            "consumer_byte_rate": self.consumer_byte_rate,
            "request_percentage": self.request_percentage,
        }
        return {key: str(value) for key, value in limits.items() if value is not None}


class Application(_Model):
    """An application principal and the topics it may produce to and consume from.

    ``produces``/``consumes`` name topics (one ACL per topic and operation). An application that
    owns a family of topics declares its prefix instead (``produces_prefix``/``consumes_prefix``):
    one prefixed ACL per operation covers every topic whose name starts with it, however many there are.
    """

    name: str = Field(min_length=1)
    produces: list[str] = Field(default_factory=list)
    consumes: list[str] = Field(default_factory=list)
    produces_prefix: str | None = Field(default=None, min_length=1)
    """Every topic whose name starts with this may be written (one prefixed ACL, not one per topic)."""
    consumes_prefix: str | None = Field(default=None, min_length=1)
    """Every topic whose name starts with this may be read (one prefixed ACL, not one per topic)."""
    consumer_group: str | None = None
    password: Secret | None = None
    home: str | None = None
    """The cluster the application runs against. Active-active (required there): a peer — it writes that
    cluster's local topics and reads them plus their remote copies (``<peer>.<topic>``). Hub-and-spoke: an
    edge, or the hub; unset means the active cluster (the hub)."""
    fallback: str | None = None
    """Hub-and-spoke, an application whose home is an edge: where it moves when that edge is lost
    (``drctl failover --edge``) — another edge, or the hub. Unset: the hub."""
    quota: Quota | None = None
    """Kafka client quotas of this application's user on every cluster that carries its user; unset:
    ``principals.default_quota`` applies (when declared), else no limit."""

    @property
    def writes(self) -> bool:
        """True when the application produces anything (named topics or a prefix)."""
        return bool(self.produces or self.produces_prefix)


class Principals(_Model):
    """The users of every cluster: an admin super-user, the replicator, and applications."""

    admin: str = Field(default="admin", min_length=1)
    replicator: str = Field(default="replicator", min_length=1)
    replicator_password: Secret | None = None
    """The replicator's password, as a secret. Required for a link on an external Connect cluster:
    the platform team puts the same password where the workers' config provider reads it
    (:class:`ConnectCredentials`). Unset, the program generates one (kept as a secret stack output)."""
    applications: list[Application] = Field(default_factory=list)
    default_quota: Quota | None = None
    """Kafka's default user quota (``--entity-type users --entity-default``) on every cluster that carries
    the applications' users: it limits every user without a quota of its own — the replicator and the
    admin included, so keep it above what a link copies (or give those users their own quota with
    Kafka's tools)."""

    def application(self, name: str) -> Application:
        """The application principal called ``name``; ConfigError when there is none."""
        for app in self.applications:
            if app.name == name:
                return app
        known = ", ".join(a.name for a in self.applications) or "none declared"
        raise ConfigError(f"no application principal named {name!r}", f"use one of: {known}")


class LinkIntervals(_Model):
    """How often (seconds) a link emits checkpoints, syncs offsets and refreshes topics/groups."""

    emit_checkpoints_s: int = Field(default=1, ge=1)
    sync_group_offsets_s: int = Field(default=1, ge=1)
    refresh_topics_s: int = Field(default=5, ge=1)
    refresh_groups_s: int = Field(default=5, ge=1)


def _selects(patterns: list[str], name: str) -> bool:
    # bounded time whatever the pattern (RE2; an invalid or backtracking one is read as its own text)
    return any(name_matcher(pattern).fullmatch(name) for pattern in patterns)


class ConnectCredentials(_Model):
    """Where the workers of an external Connect cluster find the replicator's credentials: one of
    Kafka Connect's config providers, set up on every worker by the platform team.

    * ``file`` — ``path`` is a properties file with ``username=`` and ``password=`` lines
      (``org.apache.kafka.common.config.provider.FileConfigProvider``);
    * ``directory`` — ``path`` is a directory holding files named ``username`` and ``password``
      (``DirectoryConfigProvider``);
    * ``env`` — the worker's environment variables ``username_variable`` and ``password_variable``
      (``EnvVarConfigProvider``).

    ``alias`` is the provider's name in the workers' ``config.providers`` (default: the type).
    """

    provider: Literal["file", "directory", "env"]
    alias: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    path: str | None = None
    username_variable: str = Field(default="KDR_REPLICATOR_USERNAME", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    password_variable: str = Field(default="KDR_REPLICATOR_PASSWORD", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    keystore_file: str | None = None
    """Mutual TLS (a link end with ``security_protocol: SSL``): the replicator's keystore at this absolute
    path on every worker — PKCS#12 (``.p12``/``.pfx``) or PEM — holding its certificate (whose mapped DN
    is the replicator principal) and its key, encrypted with the ``password`` the provider resolves."""

    @model_validator(mode="after")
    def _path_fits(self) -> ConnectCredentials:
        if self.keystore_file is not None and (
            not self.keystore_file.startswith("/") or any(ch in self.keystore_file for ch in ":}")
        ):
            raise ValueError("`keystore_file` must be an absolute path on every worker, without ':' or '}'")
        if self.provider in ("file", "directory"):
            if not self.path or not self.path.startswith("/"):
                raise ValueError(f"provider {self.provider} needs `path`: an absolute path on every worker")
            if ":" in self.path or "}" in self.path:
                raise ValueError("`path` cannot hold ':' or '}' (they end a ${provider:path:key} reference)")
        return self

    @property
    def provider_alias(self) -> str:
        """The name the workers' ``config.providers`` gives the provider."""
        return self.alias or self.provider

    def references(self) -> tuple[str, str]:
        """The ``${...}`` references of the username and the password, as connector configs hold them."""
        a = self.provider_alias
        if self.provider == "env":
            return f"${{{a}:{self.username_variable}}}", f"${{{a}:{self.password_variable}}}"
        if self.provider == "directory":
            return f"${{{a}:{self.path}:username}}", f"${{{a}:{self.path}:password}}"
        return f"${{{a}:{self.path}:username}}", f"${{{a}:{self.path}:password}}"

    @property
    def keystore_type(self) -> str:
        """``PKCS12`` for a ``.p12``/``.pfx`` keystore file, else ``PEM``."""
        return "PKCS12" if (self.keystore_file or "").lower().endswith((".p12", ".pfx")) else "PEM"


class WorkerTls(_Model):
    """The Connect workers' own client TLS stores — the ``ssl.*`` settings under ``producer.``, ``consumer.``
    and ``admin.`` in their properties, for their home cluster — as the platform team set them.

    Connect builds a connector's producer, consumer and admin client from those settings with the
    connector's overrides laid over them, and an override can replace a setting but never remove one: a
    PEM truststore from the stack's ``tls`` beside a worker's truststore password (PKCS12, JKS) or location
    is refused by Kafka's clients. Declared, those three clients of every connector (all towards the link's
    target) trust what the workers' own truststore trusts — it must hold the target's CA, as a platform
    team's truststore does for its clusters — and no store password is ever in a connector config;
    MirrorMaker 2's own clients of both ends still take the stack's ``tls``."""

    truststore: Literal["none", "PKCS12", "JKS", "PEM", "PEM-inline"] = "none"
    """``ssl.truststore.type`` of the workers' own truststore: ``PKCS12`` or ``JKS`` (a file with a
    password), ``PEM`` (a file), ``PEM-inline`` (``ssl.truststore.certificates``); ``none``: they set none."""
    keystore: Literal["none", "PKCS12", "JKS", "PEM", "PEM-inline"] = "none"
    """``ssl.keystore.type`` of the workers' own keystore (mutual TLS to their home cluster): ``PKCS12`` or
    ``JKS`` (a store password), ``PEM`` (a file), ``PEM-inline`` (``ssl.keystore.key``); ``none``: none."""

    @property
    def own_truststore(self) -> bool:
        """True when the workers declare a truststore of their own, which the connectors' clients inherit."""
        return self.truststore != "none"


class ConnectCluster(_Model):
    """A Kafka Connect distributed cluster that runs MirrorMaker 2 links as connectors.

    Local (no ``url``): the stack runs ``workers`` Connect workers on 127.0.0.1, REST port of
    worker ``i`` = ``base_port + i``, with their group and internal topics on the Kafka cluster
    ``cluster``. External (``url``): an existing Connect cluster the product only talks to through
    its REST API; its workers must reach both ends of every link it runs.
    """

    name: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    """The Kafka cluster holding the Connect cluster's group and internal topics (configs, offsets,
    status). A link's records go to the link's own target, whatever this cluster is."""
    workers: int = Field(default=2, ge=1, le=8)
    base_port: int | None = None
    url: str | None = None
    username: str | None = None
    """External only: the REST API's basic-auth user (with ``password``)."""
    password: Secret | None = None
    replicator_credentials: ConnectCredentials | None = None
    """External only (required there): the config provider through which the workers resolve the
    replicator's username and password."""
    tasks_max: int = Field(default=4, ge=1, le=1000)
    """``tasks.max`` of each link's MirrorSourceConnector (at least the partitions, to spread them)."""
    exactly_once_source: bool = False
    """External only: the workers run with ``exactly.once.source.support=enabled`` (a worker setting the
    platform team makes), so its links may be exactly-once. Local workers enable it when one of their
    links is exactly-once."""
    heap_mb: int = Field(default=768, ge=256, le=65536)
    """Local only: JVM heap of each worker (every source task buffers a consumer's fetches and a
    producer's batches; size it with ``tasks_max``)."""
    worker_tls: WorkerTls = Field(default_factory=WorkerTls)
    """External only: the workers' own TLS stores (:class:`WorkerTls`), which Connect lends every
    connector's clients; declare them when the workers set any."""

    @property
    def is_local(self) -> bool:
        """True when this project runs the workers on this machine."""
        return self.url is None

    @property
    def rest_ports(self) -> range | None:
        """The REST ports of a local Connect cluster's workers, or None."""
        if not self.is_local or self.base_port is None:
            return None
        return range(self.base_port, self.base_port + self.workers)


class Link(_Model):
    """Replication from ``source`` to ``target`` of the topics and consumer groups it selects."""

    name: str = Field(min_length=1)
    source: str
    target: str
    engine: Engine = Engine.MIRRORMAKER2
    topics: list[str] = Field(default_factory=lambda: [".*"])
    """Topic names or regular expressions (full match); ``.*`` means every declared topic."""
    consumer_groups: list[str] = Field(default_factory=lambda: [".*"])
    """Consumer group names or regular expressions (full match) whose offsets are synced."""
    intervals: LinkIntervals = Field(default_factory=LinkIntervals)
    connect: str | None = None
    """``engine: mirrormaker2`` only: the name of a declared Connect cluster (``kafka-dr:connectClusters``)
    that runs the link as three connectors; unset, local links run a dedicated MirrorMaker 2 process."""
    delivery: Delivery | None = None
    """``exactly-once`` or ``at-least-once`` (MirrorMaker 2 only). Unset: :data:`DEFAULT_DELIVERY` where
    the link's runner allows exactly-once (a dedicated MirrorMaker 2, a local Connect cluster, an external
    one declaring ``exactly_once_source``) and a Connect cluster writes to its own home cluster, else
    at-least-once (:meth:`Topology.delivery_of`)."""
    state: LinkState = LinkState.RUNNING
    """``running`` replicates; ``promoted``/``failed-over`` (cluster-link only) is a link kept after a
    failover so that its mirror topics stay, promoted, on the cluster that took over."""

    @property
    def is_running(self) -> bool:
        """True when the link replicates (every rule about roles and cycles looks only at these)."""
        return self.state == LinkState.RUNNING

    @property
    def topics_regex(self) -> str:
        """The topic names/patterns as one regex alternation (what MirrorMaker 2 matches)."""
        return "|".join(f"(?:{p})" for p in self.topics)

    @property
    def groups_regex(self) -> str:
        """The consumer-group names/patterns as one regex alternation."""
        return "|".join(f"(?:{p})" for p in self.consumer_groups)

    def selects_topic(self, topic: str) -> bool:
        """True when ``topic`` matches one of the link's topic names/patterns."""
        return _selects(self.topics, topic)

    def selects_group(self, group: str) -> bool:
        """True when ``group`` matches one of the link's consumer-group names/patterns."""
        return _selects(self.consumer_groups, group)


# The rules (dr.topology.validation) read this module's types, so this module does not import them: the
# package registers them here when it is imported (dr/topology/__init__.py), before any Topology is built.
_RULE_CHECKS: list[Callable[[Topology], None]] = []


def _with_prefix(named: list[str], prefix: str | None, topics: list[Topic]) -> list[str]:
    if prefix is None:
        return list(named)
    return list(named) + [t.name for t in topics if t.name.startswith(prefix) and t.name not in named]


def register_rule_check(check: Callable[[Topology], None]) -> None:
    """Run ``check`` on every :class:`Topology` constructed; it raises :class:`TopologyError` on a broken rule."""
    _RULE_CHECKS.append(check)


Rule = Callable[["Topology"], Iterator[Violation]]
"""A topology rule: every :class:`~dr.topology.violation.Violation` of it that a topology commits."""


@dataclass(frozen=True)
class LostSite:
    """How ``drctl failover`` names a lost site of an architecture whose sites fail over one at a time."""

    flag: str
    """The flag naming the site (``region``: ``--region <cluster>``)."""
    role: Role
    """The role of the clusters it names."""


@dataclass(frozen=True, kw_only=True)
class TopologyShape:
    """One architecture's part of the topology, an entry of :data:`dr.topology.architectures.ARCHITECTURES`:
    its own rules, its failover's desired state, how its links name their copies, the remote copies it adds on
    the active cluster and its passive copy, where applications write, and what an operator is told when one
    of its clusters is lost. The shared modules ask it, so none of them names an architecture."""

    rules: tuple[Rule, ...]
    """The rules only this architecture's stacks obey, run after the rules every stack obeys."""
    after_failover: Callable[[Topology, str], Topology]
    """The desired topology once the failover of a mode (``planned``/``unplanned``) is done (pure)."""
    runbook: str
    """The runbook to follow when one of its clusters is lost (``runbooks/<name>.md``), which ``drctl status``
    names."""
    naming: Naming = Naming.IDENTITY
    """What its links name their copies on the target (:meth:`Topology.naming`), but those out of an edge."""
    edge_naming: Naming = Naming.IDENTITY
    """What a link out of an edge cluster names its copies on the target."""
    remote_copies: Callable[[Topology], list[Topic]] | None = None
    """The copies the active cluster and its passive copy hold besides the declared topics, if any."""
    writes_at_home: bool = False
    """True when each application writes on its home cluster rather than on the one active cluster."""
    served_applications: Callable[[Topology, Role, str | None], list[Application]] | None = None
    """The applications a cluster of a role (named) serves, when not every application
    (:func:`dr.topology.access.applications_on`)."""
    lost_site: LostSite | None = None
    """How ``drctl failover`` names one lost site, when a site fails over alone (None: the stack fails over
    as a whole)."""
    client_endpoint: bool = False
    """True when a client endpoint may front its one active cluster (:mod:`dr.topology.endpoint_rules`)."""
    site_controllers: bool = False
    """True when each site's controller (``drctl controller``) may fail the stack over by itself."""

    @property
    def peers(self) -> bool:
        """True when its clusters are peers replicating both ways (links of :attr:`Naming.PEER
        <dr.topology.kinds.Naming.PEER>`): each holds the remote copy ``<peer>.<topic>`` of every other's
        declared topics, which an application may consume by name."""
        return self.naming is Naming.PEER


# The architectures' modules build on this one, so this module does not import their table: the package
# hands it over when it is imported (dr/topology/__init__.py), before any Topology is built.
_ARCHITECTURES: dict[Architecture, TopologyShape] = {}


def register_architectures(table: Mapping[Architecture, TopologyShape]) -> None:
    """Make :meth:`Topology.shape` answer from ``table`` (one shape per architecture)."""
    _ARCHITECTURES.clear()
    _ARCHITECTURES.update(table)


class Topology(_Model):
    """The whole estate of one stack; constructing it validates every rule at once."""

    name: str = Field(min_length=1)
    """The stack name."""
    profile: Profile = Profile.DEV
    architecture: Architecture = Architecture.ACTIVE_PASSIVE
    clusters: list[Cluster] = Field(default_factory=list)
    topics: list[Topic] = Field(default_factory=list)
    principals: Principals = Field(default_factory=Principals)
    links: list[Link] = Field(default_factory=list)
    connect_clusters: list[ConnectCluster] = Field(default_factory=list)
    endpoint: ClientEndpoint | None = None
    """The stable client endpoint that follows the active cluster (None: clients use each cluster's
    own bootstrap servers, published by the failover)."""
    failover_done: bool = False
    """True once a failover has happened (a standby may then carry a link)."""
    provisioning: Literal["individual", "batched"] = "individual"
    """How each cluster's topics and ACLs become Pulumi resources. ``individual`` (the default): one
    ``pulumi_kafka`` Topic or Acl per topic and per ACL rule. ``batched``: one resource holding every
    topic of the cluster and one holding every ACL, each created, changed and read with one admin
    call (:mod:`stacks.kafka_sets`) — for estates of hundreds of topics. SCRAM users stay one
    resource each either way. Local and external clusters only."""
    failover_policy: FailoverPolicy = Field(default_factory=FailoverPolicy)
    """What each site's controller (``drctl controller``) does when it finds a cluster down, its witness and
    metrics ports (:mod:`dr.topology.failover_policy`)."""

    @model_validator(mode="after")
    def _check_rules(self) -> Topology:
        if not _RULE_CHECKS:
            raise InternalError("the topology rules are not registered (dr/topology/__init__.py registers them)")
        for check in _RULE_CHECKS:
            check(self)
        return self

    def revised(self, **changes: Any) -> Topology:
        """This topology with ``changes`` (field name → new value), every other field kept; validated as
        a new one (:meth:`model_validate`), so a broken rule is refused here."""
        return type(self).model_validate({**{k: getattr(self, k) for k in type(self).model_fields}, **changes})

    # -- lookups -------------------------------------------------------------------------------

    def cluster(self, name: str) -> Cluster:
        """The cluster called ``name``; ConfigError naming the declared clusters when unknown."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        known = ", ".join(c.name for c in self.clusters)
        raise ConfigError(f"stack '{self.name}' has no cluster named {name!r}", f"use one of: {known}")

    def clusters_with(self, role: Role) -> list[Cluster]:
        """Every cluster with ``role``, in declaration order."""
        return [c for c in self.clusters if c.role == role]

    def _only(self, role: Role) -> Cluster | None:
        found = self.clusters_with(role)
        if len(found) > 1:
            names = ", ".join(c.name for c in found)
            raise TopologyError(
                f"stack '{self.name}' has {len(found)} {role} clusters ({names}) where one was expected",
                f"keep a single {role} cluster in kafka-dr:clusters",
            )
        return found[0] if found else None

    def active(self) -> Cluster:
        """The active cluster (validation guarantees exactly one)."""
        found = self._only(Role.ACTIVE)
        if found is None:  # validation refuses such a stack: reaching this is a bug
            raise InternalError(
                f"stack '{self.name}' has no active cluster, yet it passed validation.",
                "report this as a bug, with the stack file",
            )
        return found

    def passive(self) -> Cluster | None:
        """The passive cluster, or None; TopologyError if several are declared."""
        return self._only(Role.PASSIVE)

    def standby(self) -> Cluster | None:
        """The standby cluster, or None; TopologyError if several are declared."""
        return self._only(Role.STANDBY)

    def to_promote(self) -> Cluster:
        """The passive cluster a failover promotes; TopologyError when none is declared."""
        found = self.passive()
        if found is None:
            raise TopologyError(
                f"stack '{self.name}' has no passive cluster to promote",
                "declare a passive cluster with a link from the active cluster before failing over",
            )
        return found

    def links_into(self, name: str) -> list[Link]:
        """Links whose target is cluster ``name``."""
        return [link for link in self.links if link.target == name]

    def links_from(self, name: str) -> list[Link]:
        """Links whose source is cluster ``name``."""
        return [link for link in self.links if link.source == name]

    def connect_cluster(self, name: str) -> ConnectCluster:
        """The Connect cluster called ``name``; ConfigError naming the declared ones when unknown."""
        for connect in self.connect_clusters:
            if connect.name == name:
                return connect
        known = ", ".join(c.name for c in self.connect_clusters) or "none declared"
        raise ConfigError(f"stack '{self.name}' has no Connect cluster named {name!r}", f"use one of: {known}")

    def link_connect(self, link: Link) -> ConnectCluster | None:
        """The Connect cluster running ``link``, or None for a dedicated MirrorMaker 2 / cluster link."""
        return self.connect_cluster(link.connect) if link.connect else None

    def delivery_of(self, link: Link) -> Delivery:
        """How ``link`` delivers: its declared ``delivery``, else :data:`DEFAULT_DELIVERY` where its engine and
        Connect cluster allow exactly-once. A cluster link copies the log itself (offsets, transactions):
        exactly-once."""
        if link.engine == Engine.CLUSTER_LINK:
            return Delivery.EXACTLY_ONCE
        if link.delivery is not None:
            return link.delivery
        connect = self.link_connect(link) if link.connect else None
        if connect is not None and not connect.is_local and not connect.exactly_once_source:
            return Delivery.AT_LEAST_ONCE
        return DEFAULT_DELIVERY

    def connect_exactly_once(self, connect: ConnectCluster) -> bool:
        """True when the workers of ``connect`` run with exactly-once source support: an external cluster
        that declares it; a local one when a link on it is exactly-once (the product then enables it)."""
        if not connect.is_local:
            return connect.exactly_once_source
        return any(
            link.connect == connect.name and self.delivery_of(link) == Delivery.EXACTLY_ONCE for link in self.links
        )

    def writes_in_transactions(self, link: Link) -> bool:
        """True when ``link`` (MirrorMaker 2) writes its copies in transactions: it is exactly-once, or runs
        on Connect workers with exactly-once source support, where every source task's producer is
        transactional whatever the connector asks."""
        if link.engine != Engine.MIRRORMAKER2:
            return False
        connect = next((cc for cc in self.connect_clusters if cc.name == link.connect), None)
        workers = connect is not None and self.connect_exactly_once(connect)
        return workers or self.delivery_of(link) == Delivery.EXACTLY_ONCE

    def secret_fields(self) -> list[tuple[str, str, Any]]:
        """Every secret set in the topology: (field path, top-level config key, value)."""
        found: list[tuple[str, str, Any]] = []
        for i, c in enumerate(self.clusters):
            if c.admin_password is not None:
                found.append((f"clusters[{i}].admin_password", "clusters", c.admin_password))
            if c.tls is not None and c.tls.client_key_pem is not None:
                found.append((f"clusters[{i}].tls.client_key_pem", "clusters", c.tls.client_key_pem))
            if c.confluent is not None and c.confluent.api_secret is not None:
                found.append((f"clusters[{i}].confluent.api_secret", "clusters", c.confluent.api_secret))
            for who, client in c.oauth_clients():
                if client.client_secret is not None:
                    found.append((f"clusters[{i}].oauth.{who}.client_secret", "clusters", client.client_secret))
        if self.principals.replicator_password is not None:
            found.append(("principals.replicator_password", "principals", self.principals.replicator_password))
        for i, app in enumerate(self.principals.applications):
            if app.password is not None:
                found.append((f"principals.applications[{i}].password", "principals", app.password))
        for i, connect in enumerate(self.connect_clusters):
            if connect.password is not None:
                found.append((f"connect_clusters[{i}].password", "connect_clusters", connect.password))
        return found

    def both_local(self, link: Link) -> bool:
        """True when both ends of ``link`` are clusters this project runs on this machine."""
        return self.cluster(link.source).is_local and self.cluster(link.target).is_local

    def placement(self, link: Link) -> Placement:
        """Where ``link`` runs (:meth:`Placement.of <dr.topology.kinds.Placement.of>`, from its engine, its
        Connect cluster and where its ends run)."""
        return Placement.of(link.engine, on_connect=link.connect is not None, both_local=self.both_local(link))

    def naming(self, link: Link) -> Naming:
        """What ``link`` names its copies on the target, as its architecture's shape declares it
        (:attr:`TopologyShape.naming`; :attr:`~TopologyShape.edge_naming` for a link out of an edge)."""
        shape = self.shape()
        from_edge = any(c.name == link.source and c.role is Role.EDGE for c in self.clusters)
        return shape.edge_naming if from_edge else shape.naming

    def shape(self) -> TopologyShape:
        """What this estate's architecture decides of it (its entry of
        :data:`~dr.topology.architectures.ARCHITECTURES`)."""
        return _ARCHITECTURES[self.architecture]

    def internal_topics(self) -> InternalTopics:
        """The internal topics of this estate (:mod:`dr.kafka.internal_topics`): of every cluster, each of
        which a link may join after a failover, and of every Connect cluster."""
        return InternalTopics.of((c.name for c in self.clusters), (cc.name for cc in self.connect_clusters))

    def produced_by(self, app: Application) -> list[str]:
        """The declared topics ``app`` may write: its named topics, then those under its prefix."""
        return _with_prefix(app.produces, app.produces_prefix, self.topics)

    def consumed_by(self, app: Application) -> list[str]:
        """The declared topics ``app`` may read: its named topics, then those under its prefix."""
        return _with_prefix(app.consumes, app.consumes_prefix, self.topics)

    def topics_for(self, link: Link) -> list[Topic]:
        """The declared topics a link replicates."""
        return [topic for topic in self.topics if link.selects_topic(topic.name)]

    # -- desired-state change ------------------------------------------------------------------

    def after_failover(self, mode: str = "planned") -> Topology:
        """The desired topology once the failover of ``mode`` (``planned`` or ``unplanned``) is done (pure;
        ``self`` is unchanged), in its architecture's shape: the passive cluster promoted
        (:func:`dr.topology.active_passive.after_failover`), a hub-and-spoke estate's edges re-pointed too
        (:func:`dr.topology.hub_spoke.after_hub_failover`)."""
        if mode not in FAILOVER_STATES:
            raise ConfigError(f"unknown failover mode {mode!r}", "use 'planned' or 'unplanned'")
        return self.shape().after_failover(self, mode)


# -- pydantic errors → ConfigError ---------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_FIXES = {
    "missing": "add it",
    "extra_forbidden": "remove it or correct its spelling",
    "literal_error": "use one of the values named",
    "enum": "use one of the values named",
    "int_type": "use a whole number",
    "int_parsing": "use a whole number",
    "int_from_float": "use a whole number",
    "bool_type": "use true or false",
    "bool_parsing": "use true or false",
    "string_type": "use a string",
    "list_type": "use a list",
    "dict_type": "use a mapping",
    "model_type": "use a mapping",
    "model_attributes_type": "use a mapping",
    "string_too_short": "use a non-empty string",
}


def format_location(loc: tuple[Any, ...]) -> str:
    """Render a pydantic error location as a field path: ``clusters[0].base_port``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _IDENTIFIER.fullmatch(str(part)):
            path += f".{part}" if path else str(part)
        else:
            path += f'["{part}"]'
    return path or "(top level)"


def _fix_for(error: Any) -> str:
    ctx = error.get("ctx") or {}
    if error["type"] == "greater_than_equal":
        return f"use a value of at least {ctx.get('ge')}"
    if error["type"] == "less_than_equal":
        return f"use a value of at most {ctx.get('le')}"
    return _FIXES.get(error["type"], "correct the value")


def _config_error(exc: ValidationError, what: str, data: Any) -> ConfigError:
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        what = f"{what} '{data['name']}'"
    # Never include the rejected input in the message: it may be a secret.
    lines = [f"  - {format_location(e['loc'])}: {e['msg']} — {_fix_for(e)}" for e in exc.errors(include_url=False)]
    count = len(lines)
    return ConfigError(
        f"invalid {what} ({count} problem{'s' if count != 1 else ''}):\n" + "\n".join(lines),
        "correct the fields listed above (in the stack file under `kafka-dr:`) and run again",
    )
