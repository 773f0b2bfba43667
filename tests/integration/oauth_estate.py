"""An existing estate whose client listeners accept only OAUTHBEARER tokens (issue 49), started OUTSIDE the
product as a platform team runs one.

Each cluster is one plain ``kafka.Kafka`` KRaft node (:class:`~tests.integration.existing_estate.Broker`) whose
``CLIENT`` listener enables only OAUTHBEARER and validates tokens with Kafka's own JWT validator
(``OAuthBearerValidatorCallbackHandler``): signatures against the identity provider's JWKS, the expected issuer
and audience, the principal from the ``sub`` claim. The JVM property
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` names the JWKS URL, as Kafka 4 requires. The brokers talk to
each other over a PLAIN listener of their own; ``User:kdr-admin`` (the admin's client id at the identity
provider) is a super user, and so is ``User:connect``, the client the Connect worker (:class:`OAuthWorker`,
homed on B) logs in with. Nothing of ``dr.runtime`` is used.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Protocol

from dr.kafka.oauth import ALLOWED_URLS_PROPERTY
from tests.integration.existing_estate import Broker, Worker

AUDIENCE = "kafka"
"""The ``aud`` the brokers expect (the mock identity provider puts the requested scope there)."""
ADMIN_CLIENT = "kdr-admin"
WORKER_CLIENT = "connect"
_QUICK_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""Short-lived test JVMs on a shared 2-core machine: the C1 compiler only and one GC thread start faster."""
_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class IdentityProvider(Protocol):
    """What the brokers and the worker need of an identity provider (:mod:`tests.oidc_server`,
    :mod:`tests.keycloak_server`)."""

    @property
    def issuer(self) -> str: ...
    @property
    def token_endpoint(self) -> str: ...
    @property
    def jwks(self) -> str: ...


@dataclass
class OAuthBroker(Broker):
    """One node whose client listener is SASL_PLAINTEXT with OAUTHBEARER only, validating ``idp``'s tokens."""

    idp: IdentityProvider | None = None
    extra: dict[str, str] = field(default_factory=dict)
    """More broker properties (e.g. the claim that names the principal, a re-authentication interval)."""

    def __post_init__(self) -> None:
        assert self.idp is not None
        self.jvm_options = [f"-D{ALLOWED_URLS_PROPERTY}={self.idp.jwks},{self.idp.token_endpoint}", *_QUICK_JVM]

    def properties(self) -> dict[str, str]:
        assert self.idp is not None
        props = super().properties()
        for key in [k for k in props if k.startswith("listener.name.client.")]:
            del props[key]
        props.update(
            {
                "listener.name.client.sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.client.oauthbearer.sasl.jaas.config": f"{_LOGIN_MODULE} required;",
                "listener.name.client.oauthbearer.sasl.server.callback.handler.class": _VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": self.idp.jwks,
                "sasl.oauthbearer.expected.audience": AUDIENCE,
                "sasl.oauthbearer.expected.issuer": self.idp.issuer,
                "super.users": f"User:broker;User:{ADMIN_CLIENT};User:{WORKER_CLIENT}",
                **self.extra,
            }
        )
        return props


@dataclass
class OAuthWorker(Worker):
    """The Connect worker, logging in to its home cluster as client ``connect``; its JVM allows the token URL.
    The replicator's credentials file holds the replicator's client id (``username``) and secret (``password``)."""

    idp: IdentityProvider | None = None
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def __post_init__(self) -> None:
        assert self.idp is not None
        self.jvm_options = [f"-D{ALLOWED_URLS_PROPERTY}={self.idp.token_endpoint}", *_QUICK_JVM]

    def properties(self) -> dict[str, str]:
        assert self.idp is not None
        props = super().properties()
        jaas = f'{_LOGIN_MODULE} required clientId="{WORKER_CLIENT}" clientSecret="{self.client_secret}" scope="{AUDIENCE}";'
        login = {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": _LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": self.idp.token_endpoint,
            "sasl.jaas.config": jaas,
        }
        for prefix in ("", "producer.", "consumer.", "admin."):
            props.update({prefix + k: v for k, v in login.items()})
        return props
