"""MirrorMaker 2 connector configs for Kafka Connect, rendered from the production example."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dr.base.errors import ConfigError
from dr.cli import cli
from dr.topology import load_stack_file
from stacks.links.connect_config import CONNECTORS, connector_configs
from tests import REPO_ROOT


def test_three_connectors_for_the_production_link_with_no_inline_secret() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    link = topo.links[0]
    configs = connector_configs(topo, link)
    assert {c["connector.class"] for c in configs.values()} == set(CONNECTORS.values())
    source = configs[f"{link.name}-source"]
    assert source["source.cluster.alias"] == link.source and source["target.cluster.alias"] == link.target
    assert source["replication.policy.class"].endswith("IdentityReplicationPolicy")
    assert source["source.cluster.bootstrap.servers"] == topo.cluster(link.source).bootstrap_servers
    checkpoint = configs[f"{link.name}-checkpoint"]
    assert checkpoint["sync.group.offsets.enabled"] == "true"
    text = json.dumps(configs)
    assert "${file:" in text, "credentials come from the worker's config provider"
    for c in topo.clusters:
        if c.admin_password is not None:
            assert c.admin_password.get_secret_value() not in text


def test_producer_override_sends_records_to_the_external_target() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    link = topo.links[0]
    target = topo.cluster(link.target)
    for config in connector_configs(topo, link, secrets_file="/s/r.properties").values():
        assert config["producer.override.bootstrap.servers"] == target.bootstrap_servers
        assert config["producer.override.security.protocol"] == target.security_protocol
        assert config["producer.override.sasl.mechanism"] == target.sasl_mechanism
        assert "${file:/s/r.properties:password}" in config["producer.override.sasl.jaas.config"]


def test_local_link_bootstraps_from_base_port_over_sasl_plaintext_scram() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    link = topo.links[0]
    secrets = "/state/connect/dr/secrets/replicator.properties"
    configs = connector_configs(topo, link, secrets_file=secrets, tasks_max=2)
    assert set(configs) == {f"{link.name}-source", f"{link.name}-checkpoint", f"{link.name}-heartbeat"}
    # Pulumi.local.yaml: A has 3 brokers from 19100, B one broker at 19200.
    a, b = "127.0.0.1:19100,127.0.0.1:19101,127.0.0.1:19102", "127.0.0.1:19200"
    for config in configs.values():
        assert config["source.cluster.bootstrap.servers"] == a
        assert config["target.cluster.bootstrap.servers"] == b
        assert config["producer.override.bootstrap.servers"] == b
        for prefix in ("source.cluster", "target.cluster", "producer.override"):
            assert config[f"{prefix}.security.protocol"] == "SASL_PLAINTEXT"
            assert config[f"{prefix}.sasl.mechanism"] == "SCRAM-SHA-512"
            jaas = config[f"{prefix}.sasl.jaas.config"]
            assert jaas.startswith("org.apache.kafka.common.security.scram.ScramLoginModule required ")
            assert f'username="${{file:{secrets}:username}}"' in jaas
            assert f'password="${{file:{secrets}:password}}"' in jaas
    source = configs[f"{link.name}-source"]
    assert source["tasks.max"] == "2"
    assert source["replication.factor"] == "1", "B has one broker"
    assert source["offset-syncs.topic.location"] == "target"


def test_secrets_path_that_would_break_the_file_reference_is_refused() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    for bad in ("/a:b/secrets.properties", "/a}b", " "):
        with pytest.raises(ConfigError, match="secrets file"):
            connector_configs(topo, topo.links[0], secrets_file=bad)
    with pytest.raises(ConfigError, match="tasks_max"):
        connector_configs(topo, topo.links[0], tasks_max=0)


@pytest.mark.parametrize("stack", ["local", "production-example"])
def test_cli_prints_the_connectors_of_every_link(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_STACK_DIR", str(REPO_ROOT))
    res = CliRunner().invoke(cli, ["connect-config", "--stack", stack])
    assert res.exit_code == 0, res.output
    configs = json.loads(res.output)
    topo = load_stack_file(REPO_ROOT / f"Pulumi.{stack}.yaml")
    assert set(configs) == {f"{lk.name}-{kind}" for lk in topo.links for kind in ("source", "checkpoint", "heartbeat")}


def test_the_connect_workers_principal_is_not_an_application_name() -> None:
    import yaml

    from dr.base.errors import TopologyError
    from dr.runtime.connect import CONNECT_USER
    from dr.topology import load_topology

    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())["config"]
    doc["kafka-dr:principals"]["applications"][1]["name"] = CONNECT_USER
    with pytest.raises(TopologyError, match="Kafka Connect workers"):
        load_topology("local", doc)


def test_an_oauthbearer_end_logs_the_replicator_in_through_kafkas_login_handler_with_referenced_secrets() -> None:
    from dr.kafka.oauth import JAVA_LOGIN_HANDLER
    from dr.topology import load_topology

    def cluster(name: str, role: str) -> dict[str, object]:
        return {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": f"{name.lower()}.example:9092",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": {
                "token_endpoint": "http://127.0.0.1:8080/kafka/token",
                "scope": "kafka",
                "admin": {"client_id": "kdr-admin", "client_secret": "admin-secret"},
                "replicator": {"client_id": "replicator", "client_secret": "replicator-secret"},
                "applications": {},
            },
        }

    topo = load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [cluster("A", "active"), cluster("B", "passive")],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )
    configs = connector_configs(topo, topo.links[0], secrets_file="/s/r.properties")
    for config in configs.values():
        for prefix in ("source.cluster", "target.cluster", "producer.override", "consumer.override", "admin.override"):
            assert config[f"{prefix}.sasl.mechanism"] == "OAUTHBEARER"
            assert config[f"{prefix}.sasl.login.callback.handler.class"] == JAVA_LOGIN_HANDLER
            assert config[f"{prefix}.sasl.oauthbearer.token.endpoint.url"] == "http://127.0.0.1:8080/kafka/token"
            jaas = config[f"{prefix}.sasl.jaas.config"]
            assert 'clientId="${file:/s/r.properties:username}"' in jaas
            assert 'clientSecret="${file:/s/r.properties:password}"' in jaas
    text = json.dumps(configs)
    assert "replicator-secret" not in text and "admin-secret" not in text
