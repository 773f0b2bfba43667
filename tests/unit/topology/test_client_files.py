"""Every application's client file and ``clientConfigs`` entry name the cluster where its grants are — an
edge's applications their edge, an active-active application its home peer, the others the active — in
every architecture and after every kind of failover (:func:`dr.topology.access.client_cluster`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr.estate.estate import Estate
from dr.failover.act.clients import client_files, publish_clients
from dr.failover.kinds.active_active.rejoin import rejoin_topology
from dr.topology import Topology, load_stack_file
from dr.topology.access import acl_rules, client_cluster
from dr.topology.active_active import after_region_failover
from dr.topology.hub_spoke import after_edge_loss, after_hub_failover
from tests import REPO_ROOT
from tests.unit.stacks.test_stack_program import (  # noqa: F401 - the fixtures apply here too
    _no_config_leak,
    _restore_the_mocks_found,
    run_program,
)

HUB = REPO_ROOT / "Pulumi.hub-spoke.yaml"
PEERS = REPO_ROOT / "Pulumi.active-active.yaml"
LOCAL = REPO_ROOT / "Pulumi.local.yaml"


def _clusters(t: Topology) -> dict[str, str]:
    return {app.name: client_cluster(t, app) for app in t.principals.applications}


def _hub_stages() -> dict[str, tuple[Topology, dict[str, str]]]:
    t = load_stack_file(HUB)
    hub_failed = after_hub_failover(t, "unplanned")
    return {
        "declared": (t, {"sensor-e1": "E1", "sensor-e2": "E2", "aggregator": "H"}),
        "hub failover": (hub_failed, {"sensor-e1": "E1", "sensor-e2": "E2", "aggregator": "P"}),
        "E1 lost (fallback E2)": (after_edge_loss(t, "E1"), {"sensor-e1": "E2", "sensor-e2": "E2", "aggregator": "H"}),
        "E2 lost (no fallback: the hub)": (
            after_edge_loss(t, "E2"),
            {"sensor-e1": "E1", "sensor-e2": "H", "aggregator": "H"},
        ),
        "E2 lost, then hub failover": (
            after_hub_failover(after_edge_loss(t, "E2")),
            {"sensor-e1": "E1", "sensor-e2": "P", "aggregator": "P"},
        ),
        "hub failover, then E2 lost": (
            after_edge_loss(hub_failed, "E2"),
            {"sensor-e1": "E1", "sensor-e2": "P", "aggregator": "P"},
        ),
    }


def _peer_stages() -> dict[str, tuple[Topology, dict[str, str]]]:
    t = load_stack_file(PEERS)
    failed = after_region_failover(t, "A", "B")
    return {
        "declared": (t, {"shop-a": "A", "shop-b": "B"}),
        "region A failed over": (failed, {"shop-a": "B", "shop-b": "B"}),
        "A rejoined": (rejoin_topology(failed, t, "A"), {"shop-a": "A", "shop-b": "B"}),
    }


def _passive_stages() -> dict[str, tuple[Topology, dict[str, str]]]:
    t = load_stack_file(LOCAL)
    return {
        "declared": (t, {"orders-app": "A", "billing": "A"}),
        "failover": (t.after_failover("unplanned"), {"orders-app": "B", "billing": "B"}),
    }


STAGES = {
    **{f"hub-spoke {k}": v for k, v in _hub_stages().items()},
    **{f"active-active {k}": v for k, v in _peer_stages().items()},
    **{f"active-passive {k}": v for k, v in _passive_stages().items()},
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_each_application_is_pointed_where_its_grants_are(stage: str) -> None:
    topology, expected = STAGES[stage]
    assert _clusters(topology) == expected
    for app in topology.principals.applications:
        cluster = topology.cluster(client_cluster(topology, app))
        rules = acl_rules(topology, cluster)
        writes = {r.resource_name for r in rules if r.principal == app.name and r.operation == "Write"}
        assert set(app.produces) <= writes, f"{app.name} named {cluster.name}, where it cannot write {app.produces}"
        if app.consumer_group:
            assert any(r.principal == app.name and r.resource_type == "Group" for r in rules), (app.name, cluster.name)


def test_a_hub_application_declared_without_home_follows_the_hub() -> None:
    t = load_stack_file(HUB)
    apps = [a.model_copy(update={"home": None}) if a.name == "aggregator" else a for a in t.principals.applications]
    t = t.revised(principals=t.principals.model_copy(update={"applications": apps}))
    assert _clusters(t)["aggregator"] == "H"
    assert _clusters(after_hub_failover(t))["aggregator"] == "P"


def _estate(topology: Topology, state: Path) -> Estate:
    estate = Estate(topology, state)
    for app in topology.principals.applications:
        estate.credentials.password(app.name)  # generated as `estate up` does: no stack to read them from
    return estate


@pytest.mark.parametrize("stage", [s for s in STAGES if s.startswith(("hub-spoke", "active-active"))])
def test_every_application_gets_a_private_file_naming_its_cluster(stage: str, tmp_path: Path) -> None:
    topology, expected = STAGES[stage]
    estate = _estate(topology, tmp_path)
    written = publish_clients(estate)  # what `drctl estate up` publishes
    assert {w["application"]: w["cluster"] for w in written} == expected
    for app, cluster in expected.items():
        props, conf_path = client_files(tmp_path, app)
        conf = json.loads(conf_path.read_text())
        bootstrap = estate.local_cluster(cluster).bootstrap
        assert conf["bootstrap.servers"] == bootstrap, f"{app}'s file names {conf['bootstrap.servers']}, not {cluster}"
        assert conf["sasl.username"] == app and conf["sasl.password"] == estate.app_password(app)
        assert f"bootstrap.servers={bootstrap}" in props.read_text()
        for f in (props, conf_path):
            assert oct(f.stat().st_mode & 0o777) == "0o600", f
        assert estate.app_password(app) not in json.dumps(written)


def test_a_failover_step_publishing_one_cluster_writes_only_the_applications_moving_there(tmp_path: Path) -> None:
    topology = after_edge_loss(load_stack_file(HUB), "E1")
    written = publish_clients(_estate(topology, tmp_path), "E2", apps=["sensor-e1"])
    assert [(w["application"], w["cluster"]) for w in written] == [("sensor-e1", "E2")]
    assert not client_files(tmp_path, "aggregator")[1].exists()


@pytest.mark.parametrize("stage", list(STAGES))
def test_the_client_configs_output_names_each_applications_cluster(stage: str, tmp_path: Path) -> None:
    topology, expected = STAGES[stage]
    run = run_program(topology, tmp_path)
    configs = run.outputs["clientConfigs"]
    bootstraps = {name: c["bootstrapServers"] for name, c in run.outputs["clusters"].items()}
    assert {app: bootstraps.get(expected[app]) for app in configs} == {
        app: cfg["bootstrap.servers"] for app, cfg in configs.items()
    }
    assert set(configs) == set(expected), "an application without a client configuration"
    assert run.secret_outputs["clientConfigs"] is True
