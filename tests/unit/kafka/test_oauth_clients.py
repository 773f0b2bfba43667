"""OAUTHBEARER on the product's clients (issue 49): the librdkafka and Java settings an endpoint renders, the
admin endpoint of a declared cluster, and the errors that name the cause of a refused login."""

from __future__ import annotations

import stat
from pathlib import Path

from dr.kafka.client import Endpoint
from dr.kafka.oauth import JAVA_LOGIN_HANDLER, OAuthSettings, oauth_refusal
from dr.runtime.certificates import make_ca
from dr.topology import load_topology
from dr.topology.external import external_endpoint

_URL = "http://127.0.0.1:8080/kafka/token"


def _endpoint(secret: str = "s3cr3t") -> Endpoint:
    settings = OAuthSettings(_URL, "kafka", "kafka")
    return Endpoint("127.0.0.1:9092", "kdr-admin", secret, "SASL_PLAINTEXT", "OAUTHBEARER", None, "A", settings)


def test_librdkafka_fetches_its_own_tokens_with_the_client_credentials() -> None:
    conf = _endpoint().config()
    assert conf["sasl.mechanisms"] == "OAUTHBEARER"
    assert conf["sasl.oauthbearer.method"] == "oidc"
    assert conf["sasl.oauthbearer.token.endpoint.url"] == _URL
    assert conf["sasl.oauthbearer.client.id"] == "kdr-admin"
    assert conf["sasl.oauthbearer.client.secret"] == "s3cr3t"
    assert conf["sasl.oauthbearer.scope"] == "kafka"
    assert "sasl.username" not in conf and "sasl.password" not in conf
    assert "s3cr3t" not in repr(_endpoint())


def test_another_principal_is_another_client_of_the_same_provider() -> None:
    conf = _endpoint().with_user("orders", "orders-secret").config()
    assert conf["sasl.oauthbearer.client.id"] == "orders"
    assert conf["sasl.oauthbearer.client.secret"] == "orders-secret"
    assert conf["sasl.oauthbearer.token.endpoint.url"] == _URL


def test_java_clients_log_in_through_kafkas_oauth_login_handler() -> None:
    props = _endpoint().java_config()
    assert props["sasl.mechanism"] == "OAUTHBEARER"
    assert props["sasl.login.callback.handler.class"] == JAVA_LOGIN_HANDLER
    assert props["sasl.oauthbearer.token.endpoint.url"] == _URL
    assert props["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="kdr-admin" clientSecret="s3cr3t" scope="kafka";'
    )


def test_the_admin_endpoint_of_a_declared_cluster_uses_its_admin_client(tmp_path: Path) -> None:
    ca = make_ca("idp CA").certificate_pem.decode()
    oauth = {
        "token_endpoint": "https://idp.example.com/realms/kafka/protocol/openid-connect/token",
        "scope": "kafka",
        "tls": {"ca_pem": ca},
        "admin": {"client_id": "kdr-admin", "client_secret": "admin-secret"},
        "applications": {},
    }
    t = load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [
                {
                    "name": "A",
                    "role": "active",
                    "kind": "external",
                    "bootstrap_servers": "a.example:9092",
                    "security_protocol": "SASL_PLAINTEXT",
                    "sasl_mechanism": "OAUTHBEARER",
                    "oauth": oauth,
                }
            ],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
        },
    )
    ep = external_endpoint(t.cluster("A"), state=tmp_path)
    conf = ep.config()
    assert (ep.username, ep.password) == ("kdr-admin", "admin-secret")
    assert conf["sasl.oauthbearer.token.endpoint.url"] == oauth["token_endpoint"]
    ca_file = Path(conf["https.ca.location"])
    assert ca_file.read_text() == ca and stat.S_IMODE(ca_file.stat().st_mode) == 0o600


def test_an_unreachable_identity_provider_is_named_with_its_endpoint() -> None:
    err = oauth_refusal(
        "cluster 'A' (127.0.0.1:9092)",
        "kdr-admin",
        OAuthSettings(_URL, "kafka"),
        ["Failed to acquire SASL OAUTHBEARER token: Failed to connect to 127.0.0.1 port 8080: Could not connect"],
    )
    assert err.exit_code == 5
    assert "cluster 'A'" in err.problem and _URL in err.problem and "cannot be reached" in err.problem
    assert err.fix is not None and "identity provider is up" in err.fix


def test_a_client_the_identity_provider_refuses_is_named_with_the_next_step() -> None:
    err = oauth_refusal(
        "cluster 'A' (127.0.0.1:9092)",
        "orders",
        OAuthSettings(_URL),
        ["Failed to acquire SASL OAUTHBEARER token: HTTP 401 Unauthorized: invalid_client"],
    )
    assert "client 'orders' got no token" in err.problem and "refused the request" in err.problem
    assert err.fix is not None and "registered and enabled" in err.fix


def test_a_token_the_brokers_refuse_names_audience_and_issuer() -> None:
    err = oauth_refusal(
        "cluster 'A' (127.0.0.1:9092)",
        "kdr-admin",
        OAuthSettings(_URL, "other", "kafka"),
        ['sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: {"status":"invalid_token"}'],
    )
    assert "the brokers refused the token of client 'kdr-admin'" in err.problem and "invalid_token" in err.problem
    assert err.fix is not None and "'kafka'" in err.fix and "scope asked: other" in err.fix


def test_kafkas_java_tools_allow_the_token_endpoint_over_oauthbearer(tmp_path: Path) -> None:
    """ConfigCommand (status --parity, adopt) and TransactionsCommand log in with the endpoint's Java settings; over
    OAUTHBEARER Kafka 4 refuses a token endpoint the JVM does not list, so the command line lists it (and only then)."""
    from dr.kafka.oauth import ALLOWED_URLS_PROPERTY, jvm_allowed_urls
    from dr.runtime.quota_reader import describe_command

    settings = OAuthSettings("http://127.0.0.1:8080/kafka/token", "kafka")
    oauth = Endpoint("a:9092", "kdr-admin", "s3cret", "SASL_PLAINTEXT", "OAUTHBEARER", None, "A", settings)
    cmd = describe_command(oauth, tmp_path / "admin.properties", ("users",), tmp_path)
    assert f"-D{ALLOWED_URLS_PROPERTY}=http://127.0.0.1:8080/kafka/token" in cmd
    assert cmd.index(f"-D{ALLOWED_URLS_PROPERTY}=http://127.0.0.1:8080/kafka/token") < cmd.index("-cp")
    assert not any("s3cret" in word for word in cmd), "the secret is in the 0600 config file, not the command"
    scram = Endpoint("a:9092", "admin", "pw", "SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert not any(
        ALLOWED_URLS_PROPERTY in word for word in describe_command(scram, tmp_path / "p", ("users",), tmp_path)
    )
    assert jvm_allowed_urls(None) == []
