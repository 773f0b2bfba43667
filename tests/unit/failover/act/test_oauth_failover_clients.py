"""OAUTHBEARER on the failover's clients (issue 49): each client a failover builds logs in as the client identity
of the role it acts as (admin, replicator, application) with its secret from the stack; the RTO probe's child
process gets the whole endpoint; the published client files carry no secret; Spark's Kafka source reads the
secret from a 0600 file, never from an option."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError
from dr.estate.estate import Estate
from dr.failover.act.clients import client_files, oauth_secret_file, publish_clients
from dr.failover.act.probe import endpoint_from_message, endpoint_message
from dr.kafka.client import Endpoint
from dr.kafka.oauth import JAVA_LOGIN_HANDLER, OAuthSettings
from dr.kafka.tls import TlsFiles
from dr.topology import Topology, load_topology
from dr.topology.oauth_login import oauth_identity
from verification.login import spark_login_options

_URL = "http://127.0.0.1:8080/kafka/token"


def _cluster(name: str, role: str, app_secret: str | None) -> dict[str, Any]:
    orders: dict[str, Any] = {"client_id": "orders-client", "principal": "orders"}
    if app_secret is not None:
        orders["client_secret"] = app_secret
    return {
        "name": name,
        "role": role,
        "kind": "external",
        "bootstrap_servers": f"{name.lower()}.example:9092",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "oauth": {
            "token_endpoint": _URL,
            "scope": "kafka",
            "audience": "kafka",
            "admin": {"client_id": "kdr-admin", "client_secret": f"admin-{name}"},
            "replicator": {"client_id": "kdr-replicator", "client_secret": f"repl-{name}", "principal": "replicator"},
            "applications": {"orders": orders},
        },
    }


def _topology(app_secret: str | None = "orders-secret") -> Topology:
    return load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [_cluster("A", "active", app_secret), _cluster("B", "passive", app_secret)],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {
                "applications": [{"name": "orders", "produces": ["orders"], "consumes": ["orders"]}]
            },
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )


def test_each_principal_maps_to_the_identity_of_its_role() -> None:
    assert oauth_identity("admin", admin="admin", replicator="replicator") == "admin"
    assert oauth_identity("replicator", admin="admin", replicator="replicator") == "replicator"
    assert oauth_identity("orders", admin="admin", replicator="replicator") == "applications.orders"
    assert oauth_identity("mm2", admin="admin", replicator="mm2") == "replicator"


def test_the_estate_logs_in_as_the_role_it_acts_as_with_that_clients_secret(tmp_path: Path) -> None:
    estate = Estate(_topology(), tmp_path)
    for user, client_id, secret in (
        ("admin", "kdr-admin", "admin-B"),
        ("replicator", "kdr-replicator", "repl-B"),
        ("orders", "orders-client", "orders-secret"),
    ):
        ep = estate.endpoint("B", user)
        conf = ep.config()
        assert (conf["sasl.oauthbearer.client.id"], conf["sasl.oauthbearer.client.secret"]) == (client_id, secret)
        assert conf["sasl.mechanisms"] == "OAUTHBEARER" and "sasl.username" not in conf
        assert ep.cluster == "B" and ep.oauth is not None and ep.oauth.token_endpoint == _URL


def test_an_application_whose_secret_its_team_keeps_cannot_be_acted_as(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Estate(_topology(app_secret=None), tmp_path).endpoint("B", "orders")
    assert "oauth.applications.orders.client_secret" in info.value.problem
    assert info.value.fix is not None and "oauth.applications.orders.clientSecret" in info.value.fix


def test_the_probe_process_gets_the_whole_endpoint() -> None:
    tls = TlsFiles(ca_location="/etc/ca.pem", hostname_verification=False)
    ep = Endpoint(
        "b:9093", "orders-client", "s3cr3t", "SASL_SSL", "OAUTHBEARER", tls, "B", OAuthSettings(_URL, "kafka", "kafka")
    )
    back = endpoint_from_message(json.loads(json.dumps(endpoint_message(ep))))
    assert back == ep and back.config() == ep.config()
    assert back.config()["sasl.oauthbearer.method"] == "oidc"
    scram = Endpoint("a:9092", "orders", "pw")
    assert endpoint_from_message(json.loads(json.dumps(endpoint_message(scram)))) == scram


def test_published_files_carry_the_applications_own_client_and_no_secret(tmp_path: Path) -> None:
    estate = Estate(_topology(), tmp_path)
    written = publish_clients(estate)
    assert [w["cluster"] for w in written] == ["A"] and written[0]["password"] == "provided by the application team"
    props_path, json_path = client_files(tmp_path, "orders")
    conf = json.loads(json_path.read_text())
    assert conf["sasl.mechanisms"] == "OAUTHBEARER" and conf["sasl.oauthbearer.client.id"] == "orders-client"
    assert conf["sasl.oauthbearer.token.endpoint.url"] == _URL and conf["bootstrap.servers"] == "a.example:9092"
    assert "sasl.oauthbearer.client.secret" not in conf and "sasl.username" not in conf
    props = props_path.read_text()
    secret_file = oauth_secret_file(tmp_path, "orders")
    assert f'clientSecret="${{kdroauth:{secret_file}:clientSecret}}"' in props, props
    assert "config.providers=kdroauth" in props and "OAuthBearerLoginCallbackHandler" in props
    for text in (props, json.dumps(conf)):
        assert "orders-secret" not in text and "admin-A" not in text
    # the team adds its secret to the librdkafka file; a rewrite (a failover to B) keeps it
    json_path.write_text(json.dumps({**conf, "sasl.oauthbearer.client.secret": "team-secret"}))
    b = Estate(_topology().model_copy(update={"failover_done": True}), tmp_path)
    publish_clients(b, "A")
    kept = json.loads(json_path.read_text())
    assert kept["sasl.oauthbearer.client.secret"] == "team-secret"


def test_spark_reads_the_client_secret_from_a_private_file_never_from_an_option() -> None:
    ep = Endpoint(
        "b:9092", "kdr-admin", "s3cr3t", "SASL_PLAINTEXT", "OAUTHBEARER", None, "B", OAuthSettings(_URL, "kafka")
    )
    opts = spark_login_options(ep)
    assert opts["kafka.sasl.mechanism"] == "OAUTHBEARER"
    assert opts["kafka.sasl.login.callback.handler.class"] == JAVA_LOGIN_HANDLER
    assert opts["kafka.sasl.oauthbearer.token.endpoint.url"] == _URL
    assert opts["kafka.config.providers"] == "kdroauth"
    assert not [k for k, v in opts.items() if "s3cr3t" in v], opts
    path = Path(opts["kafka.sasl.jaas.config"].split("${kdroauth:", 1)[1].split(":clientSecret}", 1)[0])
    assert path.read_text().strip() == "clientSecret=s3cr3t"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert spark_login_options(ep) == opts, "one file per identity"
    scram = spark_login_options(Endpoint("a:9092", "admin", "pw"))
    assert scram["kafka.sasl.mechanism"] == "SCRAM-SHA-512" and 'password="pw"' in scram["kafka.sasl.jaas.config"]


def test_the_declared_identity_is_found_by_name_or_by_the_form_oauth_identity_returns() -> None:
    """``oauth_client`` takes ``applications.<name>`` as :func:`oauth_identity` returns it: an application is
    never answered with the admin's or the replicator's identity, and an undeclared one names its path."""
    from dr.topology.oauth_login import oauth_client

    a = _topology().cluster("A")
    assert oauth_client(a, "applications.orders").client_id == "orders-client"
    assert oauth_client(a, "orders").client_id == "orders-client"
    assert oauth_client(a, "admin").client_id == "kdr-admin"
    assert oauth_client(a, "replicator").client_id == "kdr-replicator"
    with pytest.raises(ConfigError, match=r"oauth\.applications\.admin"):
        oauth_client(a, "applications.admin")
    with pytest.raises(ConfigError, match=r"oauth\.applications\.billing"):
        oauth_client(a, "applications.billing")
