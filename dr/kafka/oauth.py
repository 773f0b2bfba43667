"""What each client of the product needs to log in with OAUTHBEARER tokens (issue 49), as pure renderers.

A cluster declared ``sasl_mechanism: OAUTHBEARER`` gives its clients the identity provider's token endpoint,
a scope and the provider's CA (:class:`OAuthSettings`); the client identity itself travels in the
:class:`~dr.kafka.client.Endpoint`'s username (client id) and password (client secret), so an endpoint
for another principal is ``with_user(client_id, client_secret)`` as for SCRAM.

librdkafka fetches tokens itself (``sasl.oauthbearer.method=oidc``, the client-credentials grant); a Java
client uses Kafka's ``OAuthBearerLoginCallbackHandler``, which also needs the JVM system property
:data:`ALLOWED_URLS_PROPERTY` to name the token endpoint (Kafka 4 refuses any URL not listed there).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from dr.base.errors import AuthError
from dr.base.hosts import is_loopback

__all__ = [
    "ALLOWED_URLS_PROPERTY",
    "JAVA_LOGIN_HANDLER",
    "JAVA_LOGIN_MODULE",
    "OAUTHBEARER",
    "OAuthSettings",
    "TokenEndpointFlaw",
    "java_oauth",
    "jvm_allowed_urls",
    "librdkafka_oauth",
    "oauth_refusal",
    "published_oauth",
    "secret_reference",
    "token_endpoint_flaw",
]

OAUTHBEARER = "OAUTHBEARER"
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
"""The JVM system property listing the token (and JWKS) URLs a Kafka Java client or broker may call."""
JAVA_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
JAVA_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class OAuthSettings:
    """The identity provider of one cluster, as its clients reach it."""

    token_endpoint: str
    scope: str | None = None
    audience: str | None = None
    """The ``aud`` the brokers expect (used to name the cause of a refused token)."""
    ca_location: str | None = None
    """The PEM CA bundle of an ``https`` token endpoint (None: plain http on loopback)."""


def jvm_allowed_urls(settings: OAuthSettings | None) -> list[str]:
    """The JVM option a Kafka Java client logging in with ``settings`` needs (Kafka 4 refuses a token endpoint
    not listed in :data:`ALLOWED_URLS_PROPERTY`); none without OAuth."""
    return [] if settings is None else [f"-D{ALLOWED_URLS_PROPERTY}={settings.token_endpoint}"]


def librdkafka_oauth(settings: OAuthSettings, client_id: str, client_secret: str) -> dict[str, str]:
    """librdkafka settings that make the client fetch its own tokens (client-credentials grant)."""
    conf = {
        "sasl.mechanisms": OAUTHBEARER,
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": settings.token_endpoint,
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": client_secret,
    }
    if settings.scope:
        conf["sasl.oauthbearer.scope"] = settings.scope
    if settings.ca_location:
        conf["https.ca.location"] = settings.ca_location
    return conf


def _jaas_quoted(value: str) -> str:
    # JAAS reads quoted strings with Java's StreamTokenizer: backslash and quote are escapes.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_oauth(settings: OAuthSettings, client_id: str, client_secret: str) -> dict[str, str]:
    """Java client properties for the same login (the JVM must also allow the URL: :data:`ALLOWED_URLS_PROPERTY`).
    ``client_secret`` may be a config-provider reference (``${file:...}``) rather than the secret itself."""
    options = f"clientId={_jaas_quoted(client_id)} clientSecret={_jaas_quoted(client_secret)}"
    if settings.scope:
        options += f" scope={_jaas_quoted(settings.scope)}"
    props = {
        "sasl.mechanism": OAUTHBEARER,
        "sasl.login.callback.handler.class": JAVA_LOGIN_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": settings.token_endpoint,
        "sasl.jaas.config": f"{JAVA_LOGIN_MODULE} required {options};",
    }
    if settings.ca_location:
        # The login handler's HTTPS client takes its trust store from the JAAS options.
        props["sasl.jaas.config"] = (
            f'{JAVA_LOGIN_MODULE} required {options} ssl.truststore.type="PEM" '
            f"ssl.truststore.location={_jaas_quoted(settings.ca_location)};"
        )
    return props


def published_oauth(settings: OAuthSettings, client_id: str) -> dict[str, str]:
    """What an application's published client file carries for OAUTHBEARER, for a Java client and for
    librdkafka alike: everything but its client secret, which its team adds (``sasl.oauthbearer.client.secret``
    for librdkafka; ``clientSecret`` in the JAAS ``OAuthBearerLoginModule`` options for Java, whose JVM must
    also list the token endpoint in ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls``)."""
    out = {
        "sasl.mechanism": OAUTHBEARER,
        "sasl.login.callback.handler.class": JAVA_LOGIN_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": settings.token_endpoint,
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
    }
    if settings.scope:
        out["sasl.oauthbearer.scope"] = settings.scope
    if settings.ca_location:
        out["https.ca.location"] = settings.ca_location
    return out


#: The config provider a Java client of the product resolves an OAUTHBEARER client secret with (a name of its own,
#: so it never replaces the ``file`` provider a worker or a team declares).
SECRET_PROVIDER = "kdroauth"


def secret_reference(path: str) -> tuple[str, dict[str, str]]:
    """A Java client's client secret as a reference to the ``clientSecret`` line of the 0600 properties file
    ``path`` (the value to pass as the secret to :func:`java_oauth`), and the config provider (Kafka's
    ``FileConfigProvider``) that resolves it: the secret itself is in no config, command line or log."""
    p = SECRET_PROVIDER
    return f"${{{p}:{path}:clientSecret}}", {
        "config.providers": p,
        f"config.providers.{p}.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    }


_NO_TOKEN = "Failed to acquire SASL OAUTHBEARER token"


def oauth_refusal(where: str, client_id: str, settings: OAuthSettings, texts: Iterable[str]) -> AuthError:
    """The :class:`AuthError` of a refused OAUTHBEARER login of ``client_id`` at ``where`` (``cluster 'A'
    (host:port)``), from librdkafka's error texts: no token from the identity provider (unreachable, or the
    client refused there), or a token the brokers refused (audience, issuer, signature, expiry)."""
    texts = list(texts)
    for text in texts:
        if _NO_TOKEN in text:
            reason = text.split(_NO_TOKEN, 1)[1].lstrip(": ")
            unreachable = "connect" in reason.lower() or "resolve" in reason.lower() or "timed out" in reason.lower()
            problem = (
                f"{where}: client {client_id!r} got no token from the identity provider at "
                f"{settings.token_endpoint}: {reason}"
            )
            if unreachable:
                return AuthError(
                    problem + " (the identity provider cannot be reached)",
                    "check the identity provider is up and that this machine reaches oauth.token_endpoint "
                    "(a proxy, a firewall, its CA: oauth.tls.ca_file); then run the command again",
                )
            return AuthError(
                problem + " (the identity provider refused the request)",
                f"check that client {client_id!r} is registered and enabled at the identity provider, that its "
                "secret in the stack (oauth.<identity>.client_secret) is the one registered, and that "
                "oauth.token_endpoint is the provider's token URL",
            )
    detail = next((t for t in texts if "invalid_token" in t or "SASL" in t), texts[0] if texts else "")
    expected = f"the declared audience {settings.audience!r}" if settings.audience else "the brokers' expected audience"
    return AuthError(
        f"{where}: the brokers refused the token of client {client_id!r} from {settings.token_endpoint}: {detail}",
        f"the token's audience, issuer, signature or expiry is not what the brokers validate: check that the "
        f"token's aud is {expected} (scope asked: {settings.scope or 'none'}), that its iss is the brokers' "
        "sasl.oauthbearer.expected.issuer, and that the brokers reach the provider's JWKS "
        "(their log names the failed check)",
    )


TokenEndpointFlaw = Literal["not-a-url", "plain-http", "no-ca"]


def token_endpoint_flaw(url: str, *, has_ca: bool) -> TokenEndpointFlaw | None:
    """What makes a token endpoint unsafe to send a client secret to (pure), or None: not an http(s) URL, plain
    http to another machine, or https with no CA to trust (the product never trusts the system roots). The
    stack's rules (:mod:`dr.topology.oauth_rules`) and a credentials file's reader (:mod:`verification.endpoints`)
    both ask it."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "not-a-url"
    if parsed.scheme == "http" and not is_loopback(parsed.hostname):
        return "plain-http"
    if parsed.scheme == "https" and not has_ca:
        return "no-ca"
    return None
