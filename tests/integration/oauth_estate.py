"""An existing estate whose client listeners accept only OAUTHBEARER tokens (issue 49), started OUTSIDE the
product as a platform team runs one.

Each cluster is one plain ``kafka.Kafka`` KRaft node (:class:`~tests.integration.existing_estate.Broker`) whose
``CLIENT`` listener enables only OAUTHBEARER and validates tokens with Kafka's own JWT validator
(``OAuthBearerValidatorCallbackHandler``): signatures against the identity provider's JWKS, the expected issuer
and audience, the principal from the ``sub`` claim. The JVM property
``org.apache.kafka.sasl.oauthbearer.allowed.urls`` names the JWKS URL, as Kafka 4 requires. The brokers talk to
each other over a PLAIN listener of their own; ``User:kdr-admin`` (the admin's client id at the identity
provider) is a super user. Nothing of ``dr.runtime`` is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from dr.kafka.oauth import ALLOWED_URLS_PROPERTY
from tests.integration.existing_estate import Broker
from tests.oidc_server import OidcServer

AUDIENCE = "kafka"
"""The ``aud`` the brokers expect (the mock identity provider puts the requested scope there)."""
ADMIN_CLIENT = "kdr-admin"
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass
class OAuthBroker(Broker):
    """One node whose client listener is SASL_PLAINTEXT with OAUTHBEARER only, validating ``idp``'s tokens."""

    idp: OidcServer | None = None

    def __post_init__(self) -> None:
        assert self.idp is not None
        self.jvm_options = [f"-D{ALLOWED_URLS_PROPERTY}={self.idp.jwks},{self.idp.token_endpoint}"]

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
                "super.users": f"User:broker;User:{ADMIN_CLIENT}",
            }
        )
        return props
