"""OAUTHBEARER (issue 49): an OpenID Connect server started by the test (``tests/oidc_server.py``) in front of
Kafka brokers that validate its tokens."""

from __future__ import annotations

import base64
import json
import os

from tests.oidc_server import oidc_server


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_the_identity_provider_grants_client_credentials_and_leaves_no_process() -> None:
    with oidc_server() as idp:
        response = idp.token("orders", "orders-secret", "kafka")
        claims = _claims(response["access_token"])
        pid = idp.pid
    assert claims["sub"] == "orders"
    assert claims["aud"] == "kafka"
    assert claims["iss"] == idp.issuer
    assert not os.path.exists(f"/proc/{pid}")
