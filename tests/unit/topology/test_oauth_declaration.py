"""OAUTHBEARER clusters (issue 49): the model and the rules checked before anything runs — every missing piece
named by its field (exit 2); secrets masked and listed with the stack's other secrets."""

from __future__ import annotations

from typing import Any

import pytest

from dr.base.errors import TopologyError
from dr.runtime.certificates import make_ca
from dr.topology import Topology, load_topology

_TOKEN_URL = "https://idp.example.com/realms/kafka/protocol/openid-connect/token"


def _oauth(**over: Any) -> dict[str, Any]:
    oauth: dict[str, Any] = {
        "token_endpoint": _TOKEN_URL,
        "scope": "kafka",
        "audience": "kafka",
        "tls": {"ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
        "admin": {"client_id": "kdr-admin", "client_secret": "admin-secret"},
        "replicator": {"client_id": "kdr-replicator", "client_secret": "repl-secret", "principal": "replicator"},
        "applications": {"orders": {"client_id": "orders"}},
    }
    return {**oauth, **over}


def _topology(a: dict[str, Any], b: dict[str, Any] | None = None) -> Topology:
    base = {"name": "A", "role": "active", "kind": "external", "bootstrap_servers": "a.example:9093"}
    other = {"name": "B", "role": "passive", "kind": "external", "bootstrap_servers": "b.example:9093"}
    other |= b or {"admin_username": "admin", "admin_password": "pw"}
    return load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [{**base, **a}, other],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {"applications": [{"name": "orders", "produces": ["orders"]}]},
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )


def _refused(a: dict[str, Any], b: dict[str, Any] | None = None) -> str:
    with pytest.raises(TopologyError) as info:
        _topology(a, b)
    assert info.value.exit_code == 2
    return str(info.value)


def test_a_complete_declaration_is_valid_and_its_secrets_are_masked_and_listed() -> None:
    t = _topology({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth()})
    a = t.cluster("A")
    assert a.oauth is not None and a.oauth.admin is not None
    assert a.oauth.admin.client_secret is not None
    assert a.oauth.admin.client_secret.get_secret_value() == "admin-secret"
    assert "admin-secret" not in repr(a) and "repl-secret" not in repr(a)
    assert a.oauth.applications["orders"].kafka_principal == "orders"
    paths = [path for path, _key, _v in t.secret_fields()]
    assert "clusters[0].oauth.admin.client_secret" in paths
    assert "clusters[0].oauth.replicator.client_secret" in paths


def test_camel_case_keys_and_a_ciphertext_secret_are_read_as_pulumi_writes_them() -> None:
    oauth = _oauth(admin={"clientId": "kdr-admin", "clientSecret": {"secure": "v1:abc"}})
    oauth["tokenEndpoint"] = oauth.pop("token_endpoint")
    t = _topology({"saslMechanism": "OAUTHBEARER", "oauth": oauth})
    assert t.cluster("A").oauth.token_endpoint == _TOKEN_URL  # type: ignore[union-attr]
    admin = t.cluster("A").oauth.admin  # type: ignore[union-attr]
    assert admin is not None and admin.client_secret is not None and admin.client_secret.is_encrypted


def test_an_oauthbearer_cluster_without_its_oauth_block_is_refused_naming_what_is_missing() -> None:
    message = _refused({"sasl_mechanism": "OAUTHBEARER"})
    assert "clusters[0].oauth:" in message
    assert "token endpoint" in message and "oauth.admin" in message


def test_every_missing_piece_is_named_at_once() -> None:
    message = _refused(
        {"sasl_mechanism": "OAUTHBEARER", "oauth": {"scope": "kafka", "applications": {}}},
    )
    assert "clusters[0].oauth.token_endpoint: cluster 'A': the identity provider's token endpoint is missing" in message
    assert "clusters[0].oauth.admin: cluster 'A': the admin's client identity is missing" in message
    assert "clusters[0].oauth.replicator: cluster 'A' is an end of a link" in message
    assert "clusters[0].oauth.applications.orders: cluster 'A': application 'orders' has no client identity" in message
    assert "breaks 4 rules" in message


def test_missing_secrets_are_named_with_the_command_that_sets_them() -> None:
    message = _refused(
        {
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": _oauth(admin={"client_id": "kdr-admin"}, replicator={"client_id": "replicator"}),
        }
    )
    assert "clusters[0].oauth.admin.client_secret: cluster 'A': the admin's client secret is missing" in message
    assert "clusters[0].oauth.replicator.client_secret" in message
    assert "pulumi config set --path --secret 'kafka-dr:clusters[0].oauth.admin.clientSecret'" in message


def test_principals_that_would_not_match_the_acls_are_refused() -> None:
    message = _refused(
        {
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": _oauth(
                replicator={"client_id": "mm2", "client_secret": "s"},
                applications={"orders": {"client_id": "svc-orders"}, "billing": {"client_id": "billing"}},
            ),
        }
    )
    assert "clusters[0].oauth.replicator.principal" in message and "'mm2'" in message
    assert "clusters[0].oauth.applications.orders.principal" in message and "'svc-orders'" in message
    assert "clusters[0].oauth.applications.billing: cluster 'A': 'billing' is not a declared application" in message


def test_an_application_identity_may_map_its_client_id_to_its_principal() -> None:
    oauth = _oauth(applications={"orders": {"client_id": "svc-orders", "principal": "orders"}})
    t = _topology({"sasl_mechanism": "OAUTHBEARER", "oauth": oauth})
    assert t.cluster("A").oauth.applications["orders"].client_id == "svc-orders"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://idp.example.com/token", "plain http to another machine"),
        ("ftp://idp.example.com/token", "is not an http(s) URL"),
        ("idp.example.com/token", "is not an http(s) URL"),
    ],
)
def test_a_token_endpoint_clients_cannot_use_safely_is_refused(endpoint: str, expected: str) -> None:
    message = _refused({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth(token_endpoint=endpoint)})
    assert "clusters[0].oauth.token_endpoint" in message and expected in message


def test_plain_http_on_loopback_is_accepted_and_https_needs_a_ca() -> None:
    _topology({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth(token_endpoint="http://127.0.0.1:8080/kafka/token")})
    message = _refused({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth(tls=None)})
    assert "clusters[0].oauth.tls.ca_file: cluster 'A': the https token endpoint has no CA declared" in message


def test_the_cluster_ca_serves_for_the_identity_provider_when_it_declares_none() -> None:
    ca = {"ca_pem": make_ca("kdr test CA").certificate_pem.decode()}
    _topology({"sasl_mechanism": "OAUTHBEARER", "tls": ca, "oauth": _oauth(tls=None)})


def test_passwords_oauth_on_other_mechanisms_and_local_clusters_are_refused() -> None:
    message = _refused(
        {"sasl_mechanism": "OAUTHBEARER", "admin_username": "admin", "admin_password": "pw", "oauth": _oauth()}
    )
    assert "clusters[0].admin_username: is set on cluster 'A', whose clients log in with OAUTHBEARER" in message
    assert "clusters[0].admin_password" in message
    message = _refused({"admin_username": "admin", "admin_password": "pw", "oauth": _oauth()})
    assert "clusters[0].oauth: is set on cluster 'A', whose sasl_mechanism is SCRAM-SHA-512" in message
    message = _refused(
        {"kind": "local", "bootstrap_servers": None, "sasl_mechanism": "OAUTHBEARER"},
    )
    assert "clusters[0].sasl_mechanism: OAUTHBEARER is declared on local cluster 'A'" in message


def test_a_client_certificate_for_the_identity_provider_is_refused() -> None:
    tls = {"ca_file": "/etc/ca.pem", "client_certificate_file": "/etc/c.pem", "client_key_file": "/etc/c.key"}
    message = _refused({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth(tls=tls)})
    assert "clusters[0].oauth.tls: cluster 'A': oauth.tls declares a client certificate or key" in message


def test_the_replicator_may_not_share_the_admin_client() -> None:
    same = {"client_id": "kdr-admin", "client_secret": "s", "principal": "replicator"}
    message = _refused({"sasl_mechanism": "OAUTHBEARER", "oauth": _oauth(replicator=same)})
    assert "clusters[0].oauth.replicator.client_id: cluster 'A': the replicator uses the admin's client" in message
