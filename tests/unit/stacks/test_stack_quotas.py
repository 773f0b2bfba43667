"""Client quotas: the stack file's ``quota`` per application and ``principals.default_quota`` (validated
by the model), and the ``pulumi_kafka`` Quota resources the program declares for them under Pulumi's
mocks — on every cluster that carries the applications' users, in both provisioning modes, in every
architecture, and on the clusters a failover leaves serving (B and C)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.topology import Quota, Topology, dump_stack_config, load_stack_file, load_topology
from dr.topology.active_active import after_region_failover
from dr.topology.hub_spoke import after_edge_loss
from dr.topology.quotas import UserQuota, user_quotas
from tests.unit.stacks.test_stack_program import (
    CLUSTER_ACCESS,
    KAFKA_CLUSTER,
    USER,
    Run,
    _no_config_leak,  # noqa: F401 - autouse fixture
    _restore_the_mocks_found,  # noqa: F401 - autouse fixture
    owner_cluster,
    provider_name,
    run_program,
)

ROOT = Path(__file__).resolve().parents[3]
QUOTA = "kafka:index/quota:Quota"
DEFAULT = {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}
ORDERS = {"producerByteRate": 4194304, "requestPercentage": 200}  # camelCase, as the stack file may write it
ORDERS_CONFIG = {"producer_byte_rate": "4194304", "request_percentage": "200"}
DEFAULT_CONFIG = {"producer_byte_rate": "1048576", "consumer_byte_rate": "2097152"}


def with_quotas(topology: Topology, app: str, quota: dict[str, Any] | None = None) -> Topology:
    """``topology`` with the default quota and ``app``'s own (both through the model's validation)."""
    data = topology.model_dump(mode="json", exclude_defaults=True)
    data["principals"]["default_quota"] = DEFAULT
    for a in data["principals"]["applications"]:
        if a["name"] == app:
            a["quota"] = quota if quota is not None else ORDERS
    return Topology.model_validate(data)


def quotas(run: Run) -> dict[str, dict[str | None, dict[str, str]]]:
    """Cluster → entity (None: the default user) → quota configs, checking each is a user entity."""
    out: dict[str, dict[str | None, dict[str, str]]] = {}
    for r in run.of_type(QUOTA):
        assert r.inputs["entityType"] == "user", f"{r.name}: entity type {r.inputs['entityType']!r}"
        cluster, _, rest = r.name.partition("-quota-")
        entity = r.inputs.get("entityName")
        assert rest == ("default" if entity is None else f"user-{entity}"), f"{r.name} is named after {entity!r}"
        out.setdefault(cluster, {})[entity] = r.inputs["config"]
    return out


def serving_users(run: Run) -> set[str]:
    """The clusters on which the program declared the applications' SCRAM users."""
    return {owner_cluster(r) for r in run.of_type(USER)}


# -- the program ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("provisioning", ["individual", "batched"])
def test_every_serving_cluster_gets_the_default_and_each_applications_quota(provisioning: str, tmp_path: Path) -> None:
    topology = with_quotas(load_stack_file(ROOT / "Pulumi.local.yaml"), "orders-app")
    run = run_program(topology.model_copy(update={"provisioning": provisioning}), tmp_path)
    expected = {None: DEFAULT_CONFIG, "orders-app": ORDERS_CONFIG}
    assert quotas(run) == {"A": expected, "B": expected}, "the active and the passive; the standby C waits"
    for r in run.of_type(QUOTA):
        cluster = r.name.split("-quota-")[0]
        assert r.parent == run.named(CLUSTER_ACCESS, f"{cluster}-access").urn, f"{r.name} under {cluster}-access"
        assert provider_name(r.provider) == f"{cluster}-kafka", f"{r.name} through {cluster}'s own provider"


def test_a_planned_failover_carries_the_quotas_to_b_and_c_and_none_stay_declared_on_a(tmp_path: Path) -> None:
    """The failover writes ``after_failover()`` to the stack file and runs ``pulumi up`` of the same program:
    B (now active) keeps its quotas, C (now passive) gets them with its users, A (decommissioned) none."""
    after = with_quotas(load_stack_file(ROOT / "Pulumi.local.yaml"), "orders-app").after_failover()
    assert after.principals.default_quota == Quota.model_validate(DEFAULT), "the failover keeps the default"
    run = run_program(after, tmp_path)
    expected = {None: DEFAULT_CONFIG, "orders-app": ORDERS_CONFIG}
    assert quotas(run) == {"B": expected, "C": expected}
    assert serving_users(run) == {"B", "C"}, "quotas go exactly where the users go"


def test_hub_and_spoke_every_edge_hub_and_passive_copy_and_after_an_edge_loss(tmp_path: Path) -> None:
    topology = with_quotas(load_stack_file(ROOT / "Pulumi.hub-spoke.yaml"), "sensor-e1")
    expected = {None: DEFAULT_CONFIG, "sensor-e1": ORDERS_CONFIG}
    run = run_program(topology, tmp_path / "hub")
    assert quotas(run) == dict.fromkeys(("E1", "E2", "H", "P"), expected)
    assert set(quotas(run)) == serving_users(run)
    hub_lost = run_program(topology.after_failover(), tmp_path / "hub-failover")
    assert quotas(hub_lost) == dict.fromkeys(("E1", "E2", "P", "S"), expected), "the promoted copy and the new passive"
    edge_lost = run_program(after_edge_loss(topology, "E1"), tmp_path / "edge-loss")
    assert quotas(edge_lost) == dict.fromkeys(("E2", "H", "P"), expected), "sensor-e1 keeps its quota where it moved"


def test_active_active_both_peers_and_the_survivor_of_a_region_failover(tmp_path: Path) -> None:
    topology = with_quotas(load_stack_file(ROOT / "Pulumi.active-active.yaml"), "shop-a")
    expected = {None: DEFAULT_CONFIG, "shop-a": ORDERS_CONFIG}
    assert quotas(run_program(topology, tmp_path / "both")) == {"A": expected, "B": expected}
    survivor = run_program(after_region_failover(topology, "A", "B"), tmp_path / "region")
    assert quotas(survivor) == {"B": expected}


def test_a_stack_without_quotas_declares_no_quota_resource(tmp_path: Path) -> None:
    run = run_program(load_stack_file(ROOT / "Pulumi.local.yaml"), tmp_path)
    assert run.of_type(QUOTA) == []
    assert {r.name for r in run.of_type(KAFKA_CLUSTER)} == {"A", "B"}


def test_an_application_quota_without_a_default_is_the_only_quota(tmp_path: Path) -> None:
    data = load_stack_file(ROOT / "Pulumi.local.yaml").model_dump(mode="json", exclude_defaults=True)
    data["principals"]["applications"][1]["quota"] = {"consumer_byte_rate": 1000}
    topology = Topology.model_validate(data)
    app = topology.principals.applications[1].name
    assert user_quotas(topology) == [UserQuota(app, {"consumer_byte_rate": "1000"})]
    run = run_program(topology, tmp_path)
    assert quotas(run) == {"A": {app: {"consumer_byte_rate": "1000"}}, "B": {app: {"consumer_byte_rate": "1000"}}}


# -- the model -----------------------------------------------------------------------------------------


def test_quotas_survive_the_stack_file_the_failover_writes_back() -> None:
    topology = with_quotas(load_stack_file(ROOT / "Pulumi.local.yaml"), "orders-app")
    again = load_topology(topology.name, dump_stack_config(topology))
    assert again.principals.default_quota == topology.principals.default_quota
    assert again.principals.application("orders-app").quota == Quota(producer_byte_rate=4194304, request_percentage=200)


@pytest.mark.parametrize(
    ("quota", "field", "fix"),
    [
        ({"producer_byte_rate": 0}, "quota.producer_byte_rate", "use a value of at least 1"),
        ({"consumer_byte_rate": -5}, "quota.consumer_byte_rate", "use a value of at least 1"),
        ({"request_percentage": 0}, "quota.request_percentage", "use a value of at least 1"),
        ({"request_percentage": 12.5}, "quota.request_percentage", "use a whole number"),
        ({"request_percentage": True}, "quota.request_percentage", "use a whole number"),
        ({"producer_byte_rate": "fast"}, "quota.producer_byte_rate", "use a whole number"),
        ({"producer_byte_rate": 2**63}, "quota.producer_byte_rate", "use a value of at most"),
        ({"producerByteRates": 10}, "quota.producerByteRates", "remove it or correct its spelling"),
        ({"connection_creation_rate": 10}, "quota.connection_creation_rate", "remove it or correct its spelling"),
        ({}, "quota", "a quota sets no limit"),
    ],
)
def test_a_bad_application_quota_is_refused_naming_the_field(quota: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(ConfigError) as refused:
        with_quotas(load_stack_file(ROOT / "Pulumi.local.yaml"), "orders-app", quota)
    message = str(refused.value)
    assert f"principals.applications[0].{field}" in message, message
    assert fix in message, message


def test_a_bad_default_quota_is_refused_naming_the_field() -> None:
    data = load_stack_file(ROOT / "Pulumi.local.yaml").model_dump(mode="json", exclude_defaults=True)
    data["principals"]["defaultQuota"] = {"request_percentage": -1, "bytes": 3}
    with pytest.raises(ConfigError) as refused:
        Topology.model_validate(data)
    message = str(refused.value)
    assert "principals.default_quota.request_percentage" in message and "use a value of at least 1" in message
    assert "principals.default_quota.bytes" in message and "remove it or correct its spelling" in message


def test_quotas_are_refused_on_an_estate_with_a_confluent_cloud_cluster() -> None:
    confluent = load_stack_file(ROOT / "Pulumi.confluent-example.yaml").model_dump(mode="json", exclude_defaults=True)
    confluent["principals"]["default_quota"] = {"producer_byte_rate": 1000}
    with pytest.raises(TopologyError) as refused:
        Topology.model_validate(confluent)
    message = str(refused.value)
    assert "principals.default_quota" in message and "confluent-cloud cluster" in message, message
    assert "Client Quotas" in message
