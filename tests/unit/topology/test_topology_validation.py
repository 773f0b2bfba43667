"""One test per topology rule: each asserts the error names the offending field and the fix."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.topology import Topology, find_violations, load_topology

LOCAL: dict[str, Any] = {
    "kafka-dr:profile": "dev",
    "kafka-dr:clusters": [
        {"name": "A", "role": "active", "kind": "local", "brokers": 3, "racks": ["r1", "r2", "r3"], "base_port": 19100},
        {"name": "B", "role": "passive", "kind": "local", "brokers": 1, "base_port": 19200},
        {"name": "C", "role": "standby", "kind": "local", "brokers": 1, "base_port": 19300},
    ],
    "kafka-dr:topics": [
        {"name": "orders", "partitions": 6, "replication_factor": 1, "min_insync_replicas": 1},
        {"name": "payments", "partitions": 3, "replication_factor": 1},
    ],
    "kafka-dr:principals": {
        "admin": "admin",
        "replicator": "replicator",
        "applications": [
            {"name": "orders-app", "produces": ["orders"], "consumes": ["payments"], "consumer_group": "orders-app"},
            {"name": "billing", "consumes": ["orders"], "consumer_group": "billing"},
        ],
    },
    "kafka-dr:links": [
        {
            "name": "A-to-B",
            "source": "A",
            "target": "B",
            "engine": "mirrormaker2",
            "topics": [".*"],
            "consumer_groups": [".*"],
        },
    ],
}


def _external(name: str, role: str) -> dict[str, Any]:
    return {
        "name": name,
        "role": role,
        "kind": "external",
        "bootstrap_servers": f"broker-1.{name}.example.com:9093,broker-2.{name}.example.com:9093",
        "admin_username": "admin",
        "admin_password": {"secure": f"v1:ciphertext-{name}"},
    }


PRODUCTION: dict[str, Any] = {
    **LOCAL,
    "kafka-dr:profile": "production",
    "kafka-dr:clusters": [_external("dc1", "active"), _external("dc2", "passive"), _external("dc3", "standby")],
    "kafka-dr:topics": [
        {"name": "orders", "partitions": 12, "replication_factor": 3, "min_insync_replicas": 2},
        {"name": "payments", "partitions": 6, "replication_factor": 3, "min_insync_replicas": 2},
    ],
    "kafka-dr:links": [{"name": "dc1-to-dc2", "source": "dc1", "target": "dc2"}],
}

Mutation = Callable[[dict[str, Any]], None]


def _load(base: dict[str, Any], mutate: Mutation | None = None) -> Topology:
    config = copy.deepcopy(base)
    if mutate is not None:
        mutate(config)
    return load_topology("test", config)


def _error(base: dict[str, Any], mutate: Mutation) -> str:
    with pytest.raises(TopologyError) as info:
        _load(base, mutate)
    return str(info.value)


def _line(message: str, path: str, *fragments: str) -> str:
    """The violation line for ``path``; asserts it has a problem, a fix, and each fragment."""
    lines = [line for line in message.splitlines() if line.strip().startswith(f"- {path}: ")]
    assert lines, f"no violation for {path!r} in:\n{message}"
    for line in lines:
        if all(fragment in line for fragment in fragments):
            assert " — " in line, f"no fix in {line!r}"
            return line
    raise AssertionError(f"no violation for {path!r} mentions {fragments} in:\n{message}")


def _set(section: str, index: int, **fields: Any) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        config[f"kafka-dr:{section}"][index].update(fields)

    return mutate


# -- the defaults -----------------------------------------------------------------------------


def test_embedded_default_is_valid() -> None:
    topology = _load(LOCAL)
    assert find_violations(topology) == []


def test_production_shape_is_valid() -> None:
    assert find_violations(_load(PRODUCTION)) == []


def test_after_failover_of_default_is_valid() -> None:
    after = _load(LOCAL).after_failover()
    assert find_violations(after) == []


# -- rule 1: replication factor vs brokers ----------------------------------------------------


def test_rf_greater_than_brokers_of_a_holding_local_cluster() -> None:
    message = _error(LOCAL, _set("topics", 0, replication_factor=3))
    _line(message, "topics[0].replication_factor", "'B'", "set replication_factor to at most 1")
    _line(message, "topics[0].replication_factor", "'C'", "after a failover")


def test_rf_fits_when_every_holding_cluster_has_enough_brokers() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"][0]["replication_factor"] = 3
        for cluster in config["kafka-dr:clusters"][1:]:
            cluster["brokers"] = 3

    assert _load(LOCAL, mutate).topics[0].replication_factor == 3


def test_decommissioned_clusters_do_not_hold_topics() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"].append({"name": "old", "role": "decommissioned", "brokers": 1, "base_port": 19400})
        for cluster in config["kafka-dr:clusters"][1:3]:
            cluster["brokers"] = 3
        config["kafka-dr:topics"][0]["replication_factor"] = 3

    _load(LOCAL, mutate)


# -- rule 2: min.insync.replicas vs replication factor ----------------------------------------


def test_min_insync_greater_than_rf() -> None:
    message = _error(LOCAL, _set("topics", 1, min_insync_replicas=2))
    _line(
        message,
        "topics[1].min_insync_replicas",
        "more than replication_factor 1",
        "set min_insync_replicas to at most 1",
    )


# -- rule 3: production durability ------------------------------------------------------------


def test_production_min_insync_below_two_with_rf_three() -> None:
    message = _error(PRODUCTION, _set("topics", 0, min_insync_replicas=1))
    _line(message, "topics[0].min_insync_replicas", "production profile", "set min_insync_replicas to 2")


def test_dev_profile_allows_min_insync_one_with_rf_three() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:profile"] = "dev"
        config["kafka-dr:topics"][0]["min_insync_replicas"] = 1

    _load(PRODUCTION, mutate)


# -- rule 4: unclean leader election ----------------------------------------------------------


@pytest.mark.parametrize("value", ["true", True, "TRUE"])
def test_production_unclean_leader_election(value: Any) -> None:
    message = _error(PRODUCTION, _set("topics", 1, configs={"unclean.leader.election.enable": value}))
    _line(message, 'topics[1].configs["unclean.leader.election.enable"]', "production profile", 'set it to "false"')


def test_dev_profile_allows_unclean_leader_election() -> None:
    _load(LOCAL, _set("topics", 0, configs={"unclean.leader.election.enable": "true"}))


# -- rule 5: two active clusters --------------------------------------------------------------


def test_two_active_clusters() -> None:
    message = _error(LOCAL, _set("clusters", 1, role="active"))
    _line(message, "clusters[1].role", "so is 'A'", "make 'B' passive")


def test_no_active_cluster() -> None:
    message = _error(LOCAL, _set("clusters", 0, role="standby"))
    _line(message, "clusters", "no cluster has role active", "set role: active")


# -- rule 6: passive without incoming link ----------------------------------------------------


def test_passive_without_incoming_link() -> None:
    message = _error(LOCAL, lambda config: config["kafka-dr:links"].clear())
    _line(
        message, "clusters[1].role", "passive cluster 'B' has no incoming link", "add a link with target 'B' from 'A'"
    )


# -- rule 7: standby with a link before a failover --------------------------------------------


def test_standby_with_incoming_link_before_failover() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:links"].append({"name": "B-to-C", "source": "B", "target": "C"})

    message = _error(LOCAL, mutate)
    _line(message, "links[1].target", "into standby cluster 'C'", "remove the link")


def test_standby_with_outgoing_link_before_failover() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:links"].append({"name": "C-to-B", "source": "C", "target": "B"})

    message = _error(LOCAL, mutate)
    _line(message, "links[1].source", "out of standby cluster 'C'", "remove the link")


def test_standby_may_have_a_link_once_failover_is_done() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:failoverDone"] = True
        config["kafka-dr:links"].append({"name": "B-to-C", "source": "B", "target": "C"})

    assert _load(LOCAL, mutate).failover_done is True


# -- rule 8: link cycles ----------------------------------------------------------------------


def test_two_cluster_link_cycle() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:links"].append({"name": "B-to-A", "source": "B", "target": "A"})

    message = _error(LOCAL, mutate)
    _line(message, "links[1]", "A → B → A", "'A-to-B', 'B-to-A'", "remove one of these links")


def test_three_cluster_link_cycle() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:failoverDone"] = True
        config["kafka-dr:clusters"][2]["role"] = "passive"
        config["kafka-dr:links"] += [
            {"name": "B-to-C", "source": "B", "target": "C"},
            {"name": "C-to-A", "source": "C", "target": "A"},
        ]

    message = _error(LOCAL, mutate)
    line = _line(message, "links[2]", "A → B → C → A", "remove one of these links")
    assert message.count("replication cycle") == 1, line


def test_self_link_is_a_cycle() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:links"].append({"name": "B-to-B", "source": "B", "target": "B"})

    _line(_error(LOCAL, mutate), "links[1]", "B → B", "remove one of these links")


# -- rule 9: unknown cluster in a link --------------------------------------------------------


def test_link_to_unknown_cluster() -> None:
    message = _error(LOCAL, _set("links", 0, target="Z"))
    _line(message, "links[0].target", "unknown cluster 'Z'", "use one of the declared clusters: 'A', 'B', 'C'")
    # every error is reported at once: B also lost its incoming link
    _line(message, "clusters[1].role", "no incoming link")


def test_link_from_unknown_cluster() -> None:
    _line(
        _error(LOCAL, _set("links", 0, source="Q")),
        "links[0].source",
        "unknown cluster 'Q'",
        "use one of the declared clusters",
    )


# -- rule 10: topic names ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad topic", "orders!", ".", "..", "x" * 250, ""])
def test_invalid_topic_name(name: str) -> None:
    message = _error(LOCAL, _set("topics", 1, name=name))
    _line(message, "topics[1].name", "is not a valid Kafka topic name", "[a-zA-Z0-9._-]")


def test_longest_valid_topic_name() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"].append({"name": "x" * 249, "partitions": 1, "replication_factor": 1})

    _load(LOCAL, mutate)


# -- rule 11: duplicate names -----------------------------------------------------------------


def _append(section: str, item: dict[str, Any]) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        if section == "applications":
            config["kafka-dr:principals"]["applications"].append(item)
        else:
            config[f"kafka-dr:{section}"].append(item)

    return mutate


@pytest.mark.parametrize(
    ("mutate", "path", "first"),
    [
        (_append("clusters", {"name": "C", "role": "standby", "base_port": 19400}), "clusters[3].name", "clusters[2]"),
        (
            _append("topics", {"name": "orders", "partitions": 1, "replication_factor": 1}),
            "topics[2].name",
            "topics[0]",
        ),
        (_append("applications", {"name": "billing"}), "principals.applications[2].name", "principals.applications[1]"),
        (_append("links", {"name": "A-to-B", "source": "A", "target": "B"}), "links[1].name", "links[0]"),
    ],
    ids=["clusters", "topics", "applications", "links"],
)
def test_duplicate_names(mutate: Mutation, path: str, first: str) -> None:
    _line(_error(LOCAL, mutate), path, f"already used by {first}", "give each one a unique name")


def test_application_named_like_the_admin_principal() -> None:
    message = _error(LOCAL, _append("applications", {"name": "admin"}))
    _line(message, "principals.applications[2].name", "principals.admin", "principal name of its own")


def test_replicator_is_not_the_admin() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["replicator"] = "admin"

    _line(_error(LOCAL, mutate), "principals.replicator", "also the admin", "separate replicator user")


# -- rule 12: applications and undeclared topics ----------------------------------------------


def test_application_produces_unknown_topic() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"][0]["produces"] = ["orders", "orderz"]

    message = _error(LOCAL, mutate)
    _line(
        message,
        "principals.applications[0].produces[1]",
        "undeclared topic 'orderz'",
        "declare 'orderz' under kafka-dr:topics",
    )


def test_application_prefix_that_no_topic_starts_with() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"][1]["consumes_prefix"] = "refund."

    _line(
        _error(LOCAL, mutate),
        "principals.applications[1].consumes_prefix",
        "prefix 'refund.', which no declared topic starts with",
        "declare a topic named refund.<something>",
    )


def test_application_prefix_resolves_to_the_declared_topics_it_covers() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"][0].update(produces=[], produces_prefix="ord")
        config["kafka-dr:principals"]["applications"][1].update(consumes=["payments"], consumes_prefix="o")

    t = _load(LOCAL, mutate)
    orders_app, billing = t.principals.applications
    assert t.produced_by(orders_app) == ["orders"] and orders_app.writes
    assert t.consumed_by(billing) == ["payments", "orders"]


def test_application_consumes_unknown_topic() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"][1]["consumes"] = ["refunds"]

    _line(
        _error(LOCAL, mutate),
        "principals.applications[1].consumes[0]",
        "undeclared topic 'refunds'",
        "or use one of: 'orders', 'payments'",
    )


# -- rule 13: local port windows --------------------------------------------------------------


def test_overlapping_port_windows() -> None:
    message = _error(LOCAL, _set("clusters", 1, base_port=19150))
    _line(
        message,
        "clusters[1].base_port",
        "19150..19249",
        "overlaps 19100..19199 of 'A'",
        "its own 100-port window, e.g. base_port 19400",
    )


def test_port_windows_overlapping_by_one_port() -> None:
    message = _error(LOCAL, _set("clusters", 2, base_port=19299))
    _line(message, "clusters[2].base_port", "19299..19398", "overlaps 19200..19299 of 'B'")


def test_adjacent_port_windows_are_fine() -> None:
    topology = _load(LOCAL, _set("clusters", 2, base_port=19300))
    assert topology.cluster("B").port_window.stop == topology.cluster("C").port_window.start


def test_local_cluster_without_base_port() -> None:
    def mutate(config: dict[str, Any]) -> None:
        del config["kafka-dr:clusters"][2]["base_port"]

    _line(_error(LOCAL, mutate), "clusters[2].base_port", "has no base_port", "set base_port")


def test_port_window_outside_the_port_range() -> None:
    _line(
        _error(LOCAL, _set("clusters", 2, base_port=65500)),
        "clusters[2].base_port",
        "65500..65599",
        "choose a base_port between 1024 and 32668",
    )


def test_port_window_in_the_ephemeral_range_is_refused() -> None:
    _line(
        _error(LOCAL, _set("clusters", 2, base_port=32700)),
        "clusters[2].base_port",
        "32700..32799",
        "leaves the range 1024..32767",
        "choose a base_port between 1024 and 32668",
    )
    _load(LOCAL, _set("clusters", 2, base_port=32668))  # the last window that fits is fine


# -- rule 14: racks per broker ----------------------------------------------------------------


def test_racks_count_differs_from_brokers() -> None:
    message = _error(LOCAL, _set("clusters", 0, racks=["r1", "r2"]))
    _line(message, "clusters[0].racks", "2 rack(s) for the 3 broker(s)", "one rack per broker")


# -- rule 15: links and decommissioned clusters -----------------------------------------------


def test_link_from_decommissioned_cluster() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0]["role"] = "decommissioned"
        config["kafka-dr:clusters"][1]["role"] = "active"

    message = _error(LOCAL, mutate)
    _line(message, "links[0].source", "out of decommissioned cluster 'A'", "remove the link")
    assert "1 rule:" in message


def test_link_into_decommissioned_cluster() -> None:
    _line(
        _error(LOCAL, _set("clusters", 1, role="decommissioned")),
        "links[0].target",
        "into decommissioned cluster 'B'",
        "remove the link",
    )


# -- rule 16: external clusters ---------------------------------------------------------------


def test_external_cluster_without_bootstrap_servers() -> None:
    def mutate(config: dict[str, Any]) -> None:
        del config["kafka-dr:clusters"][1]["bootstrap_servers"]

    message = _error(PRODUCTION, mutate)
    _line(message, "clusters[1].bootstrap_servers", "external cluster 'dc2' has no bootstrap_servers", "host:port")


def test_confluent_cloud_cluster_without_bootstrap_servers() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][2]["kind"] = "confluent-cloud"
        config["kafka-dr:clusters"][2]["bootstrap_servers"] = "  "

    _line(_error(PRODUCTION, mutate), "clusters[2].bootstrap_servers", "confluent-cloud cluster 'dc3'")


def test_bootstrap_servers_must_be_host_port() -> None:
    message = _error(PRODUCTION, _set("clusters", 0, bootstrap_servers="broker-1.dc1.example.com"))
    _line(message, "clusters[0].bootstrap_servers", "is not host:port", "comma-separated")


# -- further guards ---------------------------------------------------------------------------


def test_cluster_link_needs_a_confluent_target() -> None:
    _line(
        _error(PRODUCTION, _set("links", 0, engine="cluster-link")),
        "links[0].engine",
        "target 'dc2' is external",
        "use engine: mirrormaker2",
    )


def test_invalid_link_pattern() -> None:
    _line(
        _error(LOCAL, _set("links", 0, topics=["orders("])),
        "links[0].topics[0]",
        "not a valid regular expression",
        "fix the pattern",
    )


def test_min_insync_in_configs_duplicates_the_field() -> None:
    _line(
        _error(LOCAL, _set("topics", 0, configs={"min.insync.replicas": 1})),
        'topics[0].configs["min.insync.replicas"]',
        "set min_insync_replicas instead",
    )


def test_local_cluster_with_external_settings() -> None:
    message = _error(LOCAL, _set("clusters", 1, bootstrap_servers="b:9092", admin_password="pw"))
    _line(message, "clusters[1].bootstrap_servers", "remove it")
    _line(message, "clusters[1].admin_password", "generated at runtime", "remove it")
    assert "pw" not in message.replace("passive", "")


def test_invalid_cluster_name() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][2]["name"] = "dc.three"

    _line(_error(LOCAL, mutate), "clusters[2].name", "not a valid cluster name", "letters, digits")


def test_no_clusters() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"] = []
        config["kafka-dr:links"] = []

    _line(_error(LOCAL, mutate), "clusters", "no cluster is declared", "declare at least the active cluster")


# -- the error itself -------------------------------------------------------------------------


def test_all_violations_are_reported_in_one_error() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"][0]["min_insync_replicas"] = 5
        config["kafka-dr:clusters"][0]["racks"] = ["r1"]
        config["kafka-dr:clusters"][2]["base_port"] = 19250

    with pytest.raises(TopologyError) as info:
        _load(LOCAL, mutate)
    error = info.value
    message = str(error)
    assert "breaks 3 rules" in message
    for path in ("topics[0].min_insync_replicas", "clusters[0].racks", "clusters[2].base_port"):
        _line(message, path)
    assert isinstance(error, ConfigError) and error.exit_code == 2
    assert error.fix is not None and "Pulumi.test.yaml" in error.fix
    assert "next step:" in message


def test_malformed_values_raise_config_error_not_validation_error() -> None:
    with pytest.raises(ConfigError) as info:
        _load(LOCAL, _set("topics", 0, partitions=0, replication_factor="many"))
    assert not isinstance(info.value, TopologyError)
    message = str(info.value)
    _line(message, "topics[0].partitions", "use a value of at least 1")
    _line(message, "topics[0].replication_factor", "use a whole number")


def test_unknown_key_is_refused_with_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        _load(LOCAL, _set("clusters", 1, brokerz=3))
    _line(str(info.value), "clusters[1].brokerz", "remove it or correct its spelling")


def test_enum_value_error_names_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        _load(LOCAL, _set("clusters", 1, role="replica"))
    _line(str(info.value), "clusters[1].role", "'passive'", "use one of the values named")


def test_direct_construction_validates_too() -> None:
    with pytest.raises(TopologyError):
        Topology(name="direct")
