"""confluent-kafka client configuration and admin helpers shared by every layer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ClusterMetadata,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from dr.base.errors import AuthError, ClusterError
from dr.kafka.oauth import OAUTHBEARER, OAuthSettings, java_oauth, librdkafka_oauth, oauth_refusal
from dr.kafka.tls import TlsFiles, java_tls, librdkafka_tls, uses_sasl
from dr.kafka.tls_diagnosis import verify_reason

#: librdkafka settings that keep a client's own log lines off stderr. A client whose cluster died
#: (a killed A, a torn-down test estate) otherwise prints a reconnect failure every second; the
#: errors that matter still arrive as exceptions and through ``error_cb``.

#: Key of the failover's RTO probe record (:mod:`dr.failover.act.probe`). The verification never
#: compares records with this key: the probe writes one to the new active cluster per failover.
PROBE_KEY = b"__kdr_rto_probe__"

SILENT: dict[str, Any] = {"log_level": 0}


@dataclass(frozen=True)
class Endpoint:
    """How to reach one cluster as one principal. ``repr`` hides the password."""

    bootstrap: str
    username: str
    password: str = field(repr=False)
    security_protocol: str = "SASL_PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    tls: TlsFiles | None = None
    """The CA bundle (and, under mutual TLS, the client certificate) of a TLS protocol (:mod:`dr.kafka.tls`)."""
    cluster: str = ""
    """The cluster's name in the stack, for messages (empty when unknown)."""
    oauth: OAuthSettings | None = None
    """OAUTHBEARER: the identity provider (:mod:`dr.kafka.oauth`); ``username``/``password`` are then the
    client id and the client secret."""

    @property
    def uses_oauth(self) -> bool:
        """True when the client logs in with OAUTHBEARER tokens (client id and secret, not a password)."""
        return self.oauth is not None and self.sasl_mechanism == OAUTHBEARER and uses_sasl(self.security_protocol)

    @property
    def label(self) -> str:
        """``cluster 'A' (host:port,...)`` — or the bootstrap servers alone when the name is unknown."""
        return f"cluster {self.cluster!r} ({self.bootstrap})" if self.cluster else self.bootstrap

    def config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka configuration for this endpoint, plus ``extra`` (values: str, int, bool or a callback)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.uses_oauth and self.oauth is not None:
            conf |= librdkafka_oauth(self.oauth, self.username, self.password)
        elif uses_sasl(self.security_protocol):
            conf |= {"sasl.mechanisms": self.sasl_mechanism, "sasl.username": self.username}
            conf["sasl.password"] = self.password
        return {**conf, **librdkafka_tls(self.security_protocol, self.tls), **extra}

    def java_config(self) -> dict[str, str]:
        """The same settings for a JVM client (MirrorMaker 2, kafka-tools, Spark)."""
        props = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.uses_oauth and self.oauth is not None:
            props |= java_oauth(self.oauth, self.username, self.password)
        elif uses_sasl(self.security_protocol):
            module = (
                "org.apache.kafka.common.security.scram.ScramLoginModule"
                if self.sasl_mechanism.startswith("SCRAM")
                else "org.apache.kafka.common.security.plain.PlainLoginModule"
            )
            # JAAS reads quoted strings with Java's StreamTokenizer: backslash and quote are escapes.
            user = self.username.replace("\\", "\\\\").replace('"', '\\"')
            pw = self.password.replace("\\", "\\\\").replace('"', '\\"')
            props["sasl.mechanism"] = self.sasl_mechanism
            props["sasl.jaas.config"] = f'{module} required username="{user}" password="{pw}";'
        return {**props, **java_tls(self.security_protocol, self.tls)}

    def with_user(self, username: str, password: str) -> Endpoint:
        """The same cluster as another principal (the same TLS material; OAUTHBEARER: another client id and secret)."""
        return Endpoint(
            self.bootstrap,
            username,
            password,
            self.security_protocol,
            self.sasl_mechanism,
            self.tls,
            self.cluster,
            self.oauth,
        )


_REUSED: ContextVar[dict[Endpoint, tuple[float, AdminClient]] | None] = ContextVar("kdr_reused_admin", default=None)

REUSE_FOR_S = 300.0
"""How long :func:`reused_admin_clients` keeps one client per endpoint: a certificate or CA file replaced on
disk is read again by the next client at most this long after."""


@contextmanager
def reused_admin_clients() -> Iterator[None]:
    """Within it (in this thread), :func:`admin_client` gives one client per endpoint, renewed every
    :data:`REUSE_FOR_S` — for a long-running process that asks the same clusters every few seconds (the
    controller): each new client costs its threads, connections and SASL/TLS handshakes."""
    token = _REUSED.set({})
    try:
        yield
    finally:
        _REUSED.reset(token)


def admin_client(endpoint: Endpoint) -> AdminClient:
    """An AdminClient that fails fast instead of retrying forever (the same one within :func:`reused_admin_clients`)."""
    reused = _REUSED.get()
    if reused is not None:
        found = reused.get(endpoint)
        if found is not None and time.monotonic() - found[0] < REUSE_FOR_S:
            return found[1]
    client = AdminClient(endpoint.config(**{"socket.timeout.ms": 10000, "request.timeout.ms": 15000, **SILENT}))
    if reused is not None:
        reused[endpoint] = (time.monotonic(), client)
    return client


#: What every TLS failure's message says (``drctl status`` tells it from a cluster that is gone).
TLS_FAILED = "TLS to the brokers failed"


def transport_failure(texts: Iterable[str], endpoint: Endpoint) -> ClusterError | None:
    """A :class:`ClusterError` naming the TLS cause among librdkafka's error texts (a certificate that
    does not verify, a handshake failure, a protocol that does not match the listener), with the step
    that fixes it; None when none of them is about TLS."""
    for text in texts:
        low = text.lower()
        where = f"{endpoint.label}: {TLS_FAILED}: {text}"
        if "certificate verify failed" in low or "unable to get local issuer" in low or "self-signed" in low:
            ca = endpoint.tls.ca_location if endpoint.tls is not None else None
            reason = verify_reason(endpoint.bootstrap, endpoint.tls)  # librdkafka does not say why
            return ClusterError(
                f"{where} ({reason})" if reason else where,
                f"check that the cluster's tls.ca_file/ca_pem ({ca or 'none declared: the system roots were used'}) "
                "is the CA that signed the brokers' certificates, that the certificates are not expired, and "
                "(hostname verification on) that they name the host dialled; "
                "`openssl s_client -connect <host:port> -CAfile <ca>` shows the chain the brokers send",
            )
        if "ssl" in low or "certificate" in low or "handshake" in low:
            return ClusterError(
                where,
                "check the cluster's security_protocol and tls settings in the stack match the brokers' "
                "listener (mutual TLS: the client certificate and key)",
            )
        if "security.protocol" in low:
            return ClusterError(
                f"{endpoint.label}: the brokers dropped the connection: {text}",
                f"check security_protocol ({endpoint.security_protocol}) matches the brokers' listener "
                "(SASL_SSL, SSL or SASL_PLAINTEXT) and the port",
            )
    return None


def translate_kafka_error(exc: KafkaException, what: str, endpoint: Endpoint) -> Exception:
    """Map a librdkafka error to our family, naming the cluster (never the password)."""
    err = exc.args[0] if exc.args else None
    text = str(err) if err is not None else str(exc)
    tls = transport_failure([text], endpoint)
    if tls is not None:
        return ClusterError(f"{what}: {tls.problem}", tls.fix)
    code = err.code() if isinstance(err, KafkaError) else None
    if code == KafkaError._AUTHENTICATION or "Authentication" in text or "SASL" in text or "authentication" in text:
        if endpoint.uses_oauth and endpoint.oauth is not None:
            refused = oauth_refusal(endpoint.label, endpoint.username, endpoint.oauth, [text])
            return AuthError(f"{what}: {refused.problem}", refused.fix)
        return AuthError(
            f"{what}: {endpoint.bootstrap} refused user {endpoint.username!r}: {text}",
            "check the username/password (local estate: .state/.../credentials.json)",
        )
    return ClusterError(
        f"{what}: {endpoint.bootstrap}: {text}", "check the cluster is running (`drctl status`) and reachable"
    )


@contextmanager
def kafka_errors(what: str, endpoint: Endpoint) -> Iterator[None]:
    """The one boundary between confluent-kafka and the product's error family.

    Inside the block a :class:`~confluent_kafka.KafkaException` becomes :class:`AuthError` or
    :class:`ClusterError` naming ``what`` was being done and the cluster (never the password)::

        with kafka_errors("listing partition offsets", endpoint):
            futures = admin.list_offsets(specs)
    """
    try:
        yield
    except KafkaException as exc:
        raise translate_kafka_error(exc, what, endpoint) from exc


#: Errors of a partition whose leader is being elected or moved (a topic just created, a broker
#: restarting): the next attempt, a moment later, normally succeeds.
LEADERSHIP_MOVING = frozenset(
    {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}
)


def leadership_moving(exc: BaseException) -> bool:
    """True when ``exc`` (a translated :class:`ClusterError`, or the KafkaException itself) says a
    partition has no leader right now — worth waiting for, not a broken cluster."""
    cause = exc if isinstance(exc, KafkaException) else exc.__cause__
    err = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
    return isinstance(err, KafkaError) and err.code() in LEADERSHIP_MOVING


def until_leaders_settle(check: Callable[[], bool]) -> Callable[[], bool]:
    """``check`` for a ``wait_until`` loop over offsets: a partition without a leader yet (a topic
    MirrorMaker 2 has just created, a broker restarting) reads as "not yet", any other error ends
    the wait."""

    def settled_check() -> bool:
        try:
            return check()
        except ClusterError as exc:
            if leadership_moving(exc):
                return False
            raise

    return settled_check


def raise_kafka_error(err: KafkaError, what: str, endpoint: Endpoint) -> None:
    """Raise a :class:`KafkaError` carried by a message or a result as the product's error."""
    raise translate_kafka_error(KafkaException(err), what, endpoint)


def upsert_scram_users(endpoint: Endpoint, users: dict[str, str], iterations: int = 4096) -> None:
    """Create or update SCRAM-SHA-512 credentials for ``users`` (name → password)."""
    if not users:
        return
    admin = admin_client(endpoint)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, iterations)
    with kafka_errors("creating SCRAM users", endpoint):
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in users.items()]
        )
    for user, fut in futures.items():
        with kafka_errors(f"creating SCRAM user {user!r}", endpoint):
            fut.result(timeout=30)


def acl(
    principal: str,
    resource: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    """One ALLOW (by default) ACL binding for ``User:principal`` from any host."""
    return AclBinding(resource, name, pattern, f"User:{principal}", "*", operation, permission)


def create_acls(endpoint: Endpoint, bindings: Iterable[AclBinding]) -> None:
    """Create ACL bindings (idempotent on the broker side)."""
    bindings = list(bindings)
    if not bindings:
        return
    admin = admin_client(endpoint)
    with kafka_errors("creating ACLs", endpoint):
        futures = admin.create_acls(bindings)
    for binding, fut in futures.items():
        with kafka_errors(f"creating ACL {binding}", endpoint):
            fut.result(timeout=30)


def delete_acls(endpoint: Endpoint, filters: Iterable[AclBindingFilter]) -> int:
    """Delete ACLs matching ``filters``; return how many were removed."""
    filters = list(filters)
    if not filters:
        return 0
    admin = admin_client(endpoint)
    removed = 0
    with kafka_errors("deleting ACLs", endpoint):
        futures = admin.delete_acls(filters)
    for _f, fut in futures.items():
        with kafka_errors("deleting ACLs", endpoint):
            removed += len(fut.result(timeout=30))
    return removed


#: The first metadata try of :func:`connected_admin` (seconds) before the error callback is read.
FIRST_ATTEMPT_S = 1.0


def connected_admin(
    endpoint: Endpoint, timeout: float = 10.0, attempt: float | None = None
) -> tuple[AdminClient, ClusterMetadata]:
    """An AdminClient that has just fetched the cluster's metadata, with that metadata.

    Raises :class:`AuthError` at once when the cluster refuses the credentials and
    :class:`ClusterError` when it cannot be reached within ``timeout``. librdkafka reports a refused
    SASL login only through its error callback (the metadata call itself fails as a transport
    error or times out), so the callback is read after every failed attempt; ``attempt`` (default:
    1 s, doubling each try) is how long each try may take before the callback is checked again.
    """
    errors: list[KafkaError] = []
    admin = AdminClient(
        endpoint.config(
            **{
                "socket.timeout.ms": max(1000, min(10000, int(timeout * 1000))),
                "request.timeout.ms": 15000,
                "error_cb": errors.append,
                **SILENT,
            }
        )
    )
    deadline = time.monotonic() + timeout
    # Without ``attempt`` the tries grow 1, 2, 4 … s: a TLS or login failure (known only through the
    # callback) is read after a second, while a slow cluster keeps its connection between tries and
    # gets ever longer ones, up to all of ``timeout``.
    step = attempt or FIRST_ATTEMPT_S
    while True:
        left = deadline - time.monotonic()
        try:
            return admin, admin.list_topics(timeout=max(0.5, min(step, left)))
        except KafkaException as exc:
            step = attempt or step * 2
            admin.poll(0.2)  # error callbacks are served by poll()
            refusals = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
            if refusals and endpoint.uses_oauth and endpoint.oauth is not None:
                raise oauth_refusal(endpoint.label, endpoint.username, endpoint.oauth, refusals) from None
            if refusals:
                raise AuthError(
                    f"{endpoint.bootstrap} refused user {endpoint.username!r}: authentication failed.",
                    "check the username and password (local estate: .state/estate/credentials.json; "
                    "a stack: its credentials file)",
                ) from None
            tls = transport_failure((e.str() for e in errors), endpoint)
            if tls is not None:
                raise tls from None
            if time.monotonic() >= deadline:
                err = exc.args[0] if exc.args else exc
                raise ClusterError(
                    f"cannot reach {endpoint.bootstrap}: {err.str() if isinstance(err, KafkaError) else err}.",
                    "check the cluster is running (`drctl estate status`) and the bootstrap address",
                ) from None


def cluster_metadata(endpoint: Endpoint, timeout: float = 10.0, attempt: float | None = None) -> ClusterMetadata:
    """The cluster's metadata (brokers, topics); errors as :func:`connected_admin`."""
    return connected_admin(endpoint, timeout, attempt)[1]


def probe(endpoint: Endpoint, timeout: float = 10.0) -> int:
    """Connect and fetch metadata; return the broker count (errors as :func:`connected_admin`)."""
    return len(cluster_metadata(endpoint, timeout).brokers)
