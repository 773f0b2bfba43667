"""The topology model: loading stack config, helpers, secrets, after_failover, dump round-trip."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr, ValidationError

from dr.base.errors import ConfigError, TopologyError
from dr.topology import (
    NAMESPACE,
    PORT_WINDOW,
    Cluster,
    Engine,
    Kind,
    LinkIntervals,
    Profile,
    Role,
    StackSecret,
    Topology,
    dump_stack_config,
    find_violations,
    load_stack_file,
    load_topology,
)

ROOT = Path(__file__).resolve().parents[3]
LOCAL_FILE = ROOT / "Pulumi.local.yaml"
PRODUCTION_FILE = ROOT / "Pulumi.production-example.yaml"


def _raw_config(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["config"]


@pytest.fixture
def local() -> Topology:
    return load_stack_file(LOCAL_FILE)


@pytest.fixture
def production() -> Topology:
    return load_stack_file(PRODUCTION_FILE)


# -- the example stack files ------------------------------------------------------------------


def test_local_stack_file_is_the_embedded_default(local: Topology) -> None:
    assert local.name == "local"
    assert local.profile is Profile.DEV
    assert local.failover_done is False
    a, b, c = local.clusters
    assert (a.name, a.role, a.kind, a.brokers, a.racks, a.base_port) == (
        "A",
        Role.ACTIVE,
        Kind.LOCAL,
        3,
        ["r1", "r2", "r3"],
        19100,
    )
    assert (b.name, b.role, b.brokers, b.racks, b.base_port) == ("B", Role.PASSIVE, 1, ["rack-1"], 19200)
    assert (c.name, c.role, c.brokers, c.base_port) == ("C", Role.STANDBY, 1, 19300)
    assert [(t.name, t.partitions, t.replication_factor, t.min_insync_replicas) for t in local.topics] == [
        ("orders", 6, 1, 1),
        ("payments", 3, 1, 1),
    ]
    assert (local.principals.admin, local.principals.replicator) == ("admin", "replicator")
    orders_app, billing = local.principals.applications
    assert (orders_app.produces, orders_app.consumes, orders_app.consumer_group) == (
        ["orders"],
        ["payments"],
        "orders-app",
    )
    assert (billing.produces, billing.consumes, billing.consumer_group) == ([], ["orders"], "billing")
    (link,) = local.links
    assert (link.name, link.source, link.target, link.engine) == ("A-to-B", "A", "B", Engine.MIRRORMAKER2)
    assert (link.topics, link.consumer_groups, link.intervals) == ([".*"], [".*"], LinkIntervals())
    assert find_violations(local) == []


def test_local_stack_file_holds_no_secret(local: Topology) -> None:
    assert "secure:" not in LOCAL_FILE.read_text(encoding="utf-8")
    assert all(c.admin_password is None and c.admin_username is None for c in local.clusters)
    assert all(app.password is None for app in local.principals.applications)


def test_production_example_loads_and_validates(production: Topology) -> None:
    assert production.name == "production-example"
    assert production.profile is Profile.PRODUCTION
    assert [c.role for c in production.clusters] == [Role.ACTIVE, Role.PASSIVE, Role.STANDBY]
    for cluster in production.clusters:
        assert cluster.kind is Kind.EXTERNAL
        assert cluster.bootstrap_servers and cluster.bootstrap_servers.startswith(
            f"broker-1.{cluster.name}.example.com:9093"
        )
        assert cluster.sasl_mechanism == "SCRAM-SHA-512" and cluster.security_protocol == "SASL_SSL"
        assert cluster.admin_password is not None and cluster.admin_password.is_encrypted
        assert cluster.port_window is None
    assert all((t.replication_factor, t.min_insync_replicas) == (3, 2) for t in production.topics)
    assert production.links[0].intervals.refresh_topics_s == 30
    assert find_violations(production) == []


# -- defaults and helpers ---------------------------------------------------------------------


def test_defaults() -> None:
    cluster = Cluster(name="X", role="active")
    assert (cluster.kind, cluster.brokers, cluster.racks) == (Kind.LOCAL, 1, ["rack-1"])
    assert Cluster(name="X", role="active", brokers=3).racks == ["rack-1", "rack-2", "rack-3"]
    assert Cluster(name="X", role="active", kind="external").racks == []
    assert (cluster.sasl_mechanism, cluster.security_protocol) == ("SCRAM-SHA-512", "SASL_SSL")
    assert LinkIntervals().model_dump() == {
        "emit_checkpoints_s": 1,
        "sync_group_offsets_s": 1,
        "refresh_topics_s": 5,
        "refresh_groups_s": 5,
    }


def test_lookups(local: Topology) -> None:
    assert local.cluster("B").role is Role.PASSIVE
    assert local.active().name == "A"
    assert local.passive() is not None and local.passive().name == "B"
    assert local.standby() is not None and local.standby().name == "C"
    assert [link.name for link in local.links_into("B")] == ["A-to-B"]
    assert [link.name for link in local.links_from("A")] == ["A-to-B"]
    assert local.links_into("A") == [] and local.links_from("C") == []
    assert [t.name for t in local.topics_for(local.links[0])] == ["orders", "payments"]
    assert local.cluster("A").port_window == range(19100, 19100 + PORT_WINDOW)
    assert local.cluster("A").holds_topics and not local.cluster("C").holds_topics


def test_unknown_cluster_lookup_names_the_known_ones(local: Topology) -> None:
    with pytest.raises(ConfigError) as info:
        local.cluster("Z")
    assert "'Z'" in str(info.value) and "A, B, C" in str(info.value)


def test_link_selection_is_a_full_regex_match() -> None:
    topology = load_topology(
        "t",
        {
            **_raw_config(LOCAL_FILE),
            "kafka-dr:links": [
                {"name": "A-to-B", "source": "A", "target": "B", "topics": ["ord.*"], "consumer_groups": ["billing"]}
            ],
        },
    )
    link = topology.links[0]
    assert [t.name for t in topology.topics_for(link)] == ["orders"]
    assert link.selects_group("billing") and not link.selects_group("billing-2")


def test_models_are_frozen(local: Topology) -> None:
    with pytest.raises(ValidationError, match="frozen"):
        local.cluster("A").role = Role.PASSIVE  # type: ignore[misc]
    assert local.cluster("A").role is Role.ACTIVE


# -- loading ----------------------------------------------------------------------------------


def test_camel_case_keys_are_accepted(local: Topology) -> None:
    camel = {
        "kafka-dr:profile": "dev",
        "kafka-dr:failoverDone": False,
        "kafka-dr:clusters": [
            {"name": "A", "role": "active", "brokers": 3, "racks": ["r1", "r2", "r3"], "basePort": 19100},
            {"name": "B", "role": "passive", "basePort": 19200},
            {"name": "C", "role": "standby", "basePort": 19300},
        ],
        "kafka-dr:topics": [
            {"name": "orders", "partitions": 6, "replicationFactor": 1, "minInsyncReplicas": 1},
            {"name": "payments", "partitions": 3, "replicationFactor": 1},
        ],
        "kafka-dr:principals": {
            "applications": [
                {"name": "orders-app", "produces": ["orders"], "consumes": ["payments"], "consumerGroup": "orders-app"},
                {"name": "billing", "consumes": ["orders"], "consumerGroup": "billing"},
            ]
        },
        "kafka-dr:links": [
            {
                "name": "A-to-B",
                "source": "A",
                "target": "B",
                "consumerGroups": [".*"],
                "intervals": {"emitCheckpointsS": 1},
            }
        ],
    }
    assert load_topology("local", camel) == local


def test_engine_style_config_with_json_text_values(local: Topology) -> None:
    """The Pulumi engine hands structured config to the program as JSON text."""
    engine = {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in _raw_config(LOCAL_FILE).items()
    }
    engine["kafka-dr:failoverDone"] = "false"
    assert load_topology("local", engine) == local


def test_other_namespaces_are_ignored_and_unknown_settings_refused() -> None:
    config = {**_raw_config(LOCAL_FILE), "aws:region": "eu-west-1", "kafka:bootstrapServers": "x:1"}
    assert load_topology("local", config).name == "local"
    with pytest.raises(ConfigError) as info:
        load_topology("local", {**config, "kafka-dr:clsuters": []})
    assert "kafka-dr:clsuters" in str(info.value) and "kafka-dr:clusters" in str(info.value)


def test_setting_given_in_both_spellings_is_refused() -> None:
    config = {**_raw_config(LOCAL_FILE), "kafka-dr:failover_done": False}
    with pytest.raises(ConfigError, match="given twice"):
        load_topology("local", config)


def test_invalid_json_text_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_topology("local", {**_raw_config(LOCAL_FILE), "kafka-dr:topics": "[{"})


def test_wholly_encrypted_section_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="encrypted"):
        load_topology("local", {**_raw_config(LOCAL_FILE), "kafka-dr:links": {"secure": "v1:abc"}})


def test_stack_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_stack_file(tmp_path / "Pulumi.missing.yaml")
    other = tmp_path / "stack.yaml"
    other.write_text("config: {}\n")
    with pytest.raises(ConfigError, match=r"Pulumi\.<stack>\.yaml"):
        load_stack_file(other)
    broken = tmp_path / "Pulumi.broken.yaml"
    broken.write_text("config:\n  kafka-dr:profile: [dev\n")
    with pytest.raises(ConfigError, match=r"not valid YAML.*line"):
        load_stack_file(broken)
    empty = tmp_path / "Pulumi.empty.yaml"
    empty.write_text("")
    with pytest.raises(TopologyError, match="no cluster is declared"):
        load_stack_file(empty)


# -- secrets ----------------------------------------------------------------------------------


def test_encrypted_secret_is_kept_as_ciphertext_and_never_shown(production: Topology) -> None:
    secret = production.cluster("dc1").admin_password
    assert isinstance(secret, StackSecret) and isinstance(secret, SecretStr)
    assert secret.is_encrypted
    assert secret.get_secret_value().startswith("v1:")
    for text in (repr(production), str(production), repr(production.cluster("dc1")), str(secret)):
        assert "PLACEHOLDER" not in text
    assert production.principals.applications[0].password is not None
    assert production.principals.applications[0].password.is_encrypted


def test_plaintext_secret_from_the_engine_is_usable_and_hidden() -> None:
    config = _raw_config(PRODUCTION_FILE)
    config["kafka-dr:clusters"][0]["admin_password"] = "s3cr3t-pw"
    topology = load_topology("production-example", config)
    secret = topology.cluster("dc1").admin_password
    assert secret is not None and not secret.is_encrypted
    assert secret.get_secret_value() == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(topology) and "s3cr3t-pw" not in str(topology)
    assert "s3cr3t-pw" not in json.dumps(topology.model_dump(mode="json"))


def test_secret_equality_tells_ciphertext_from_plaintext() -> None:
    assert StackSecret("v1:x", encrypted=True) == StackSecret("v1:x", encrypted=True)
    assert StackSecret("v1:x", encrypted=True) != StackSecret("v1:x")
    assert StackSecret("pw") == SecretStr("pw")


# -- after_failover ---------------------------------------------------------------------------


def test_after_failover_promotes_b_and_links_b_to_c(local: Topology) -> None:
    after = local.after_failover()
    assert [(c.name, c.role) for c in after.clusters] == [
        ("A", Role.DECOMMISSIONED),
        ("B", Role.ACTIVE),
        ("C", Role.PASSIVE),
    ]
    (link,) = after.links
    old = local.links[0]
    assert (link.name, link.source, link.target) == ("B-to-C", "B", "C")
    assert (link.engine, link.topics, link.consumer_groups, link.intervals) == (
        old.engine,
        old.topics,
        old.consumer_groups,
        old.intervals,
    )
    assert after.failover_done is True
    assert (after.name, after.profile, after.topics, after.principals) == (
        local.name,
        local.profile,
        local.topics,
        local.principals,
    )
    assert find_violations(after) == []
    # pure: the original is untouched
    assert local.active().name == "A" and local.failover_done is False and local.links == [old]


def test_after_failover_keeps_link_settings(production: Topology) -> None:
    after = production.after_failover()
    (link,) = after.links
    assert link.name == "dc2-to-dc3"
    assert link.intervals == production.links[0].intervals
    assert after.cluster("dc1").admin_password == production.cluster("dc1").admin_password


def test_after_failover_keeps_the_failover_policy(local: Topology) -> None:
    # a stack declaring kafka-dr:failoverPolicy must still declare it after a failover: the desired-state
    # step refused the edit of the stack file (its check found the policy gone), so no failover could finish
    from dr.topology.failover_policy import FailoverPolicy

    policy = FailoverPolicy(detect_after_s=45, metrics_ports={"A": 9464, "B": 9465})
    after = local.model_copy(update={"failover_policy": policy}).after_failover(mode="unplanned")
    assert after.failover_policy == policy


def test_second_failover_without_standby(local: Topology) -> None:
    twice = local.after_failover().after_failover()
    assert [(c.name, c.role) for c in twice.clusters] == [
        ("A", Role.DECOMMISSIONED),
        ("B", Role.DECOMMISSIONED),
        ("C", Role.ACTIVE),
    ]
    assert twice.links == []
    with pytest.raises(TopologyError, match="no passive cluster"):
        twice.after_failover()


# -- dump / round trip ------------------------------------------------------------------------


@pytest.mark.parametrize("path", [LOCAL_FILE, PRODUCTION_FILE], ids=["local", "production-example"])
def test_dump_round_trips(path: Path) -> None:
    topology = load_stack_file(path)
    for state in (topology, topology.after_failover()):
        dumped = dump_stack_config(state)
        assert all(key.startswith(f"{NAMESPACE}:") for key in dumped)
        reloaded = load_topology(state.name, yaml.safe_load(yaml.safe_dump(dumped)))
        assert reloaded == state


def test_dump_writes_the_desired_state_after_failover(local: Topology) -> None:
    dumped = dump_stack_config(local.after_failover())
    assert dumped["kafka-dr:failoverDone"] is True
    assert dumped["kafka-dr:profile"] == "dev"
    assert [(c["name"], c["role"]) for c in dumped["kafka-dr:clusters"]] == [
        ("A", "decommissioned"),
        ("B", "active"),
        ("C", "passive"),
    ]
    assert [(link["source"], link["target"]) for link in dumped["kafka-dr:links"]] == [("B", "C")]


def test_dump_keeps_encrypted_secrets_as_they_were(production: Topology) -> None:
    raw = _raw_config(PRODUCTION_FILE)
    dumped = dump_stack_config(production)
    assert dumped["kafka-dr:clusters"][0]["admin_password"] == raw["kafka-dr:clusters"][0]["admin_password"]
    assert (
        dumped["kafka-dr:principals"]["applications"][1]["password"]
        == (raw["kafka-dr:principals"]["applications"][1]["password"])
    )


def test_dump_refuses_plaintext_secrets() -> None:
    config = copy.deepcopy(_raw_config(PRODUCTION_FILE))
    config["kafka-dr:principals"]["applications"][0]["password"] = "app-plain-pw"
    topology = load_topology("production-example", config)
    with pytest.raises(ConfigError) as info:
        dump_stack_config(topology)
    message = str(info.value)
    assert "principals.applications[0].password" in message
    assert "app-plain-pw" not in message
    assert "pulumi config set" in message
