"""The Pulumi program on the example hub-and-spoke stack, under Pulumi's mocks: what each role gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from dr.kafka.client import Endpoint
from dr.runtime.mirrormaker import DEFAULT_POLICY, IDENTITY_POLICY, mm2_properties
from dr.topology import load_stack_file
from tests.unit.stacks.test_stack_program import (
    DYNAMIC,
    KAFKA_CLUSTER,
    TOPIC,
    Run,
    _no_config_leak,  # noqa: F401 - autouse fixtures, shared
    _restore_the_mocks_found,  # noqa: F401
    acls,
    application_writes,
    owner_cluster,
    run_program,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Run:
    topology = load_stack_file(ROOT / "Pulumi.hub-spoke.yaml")
    return run_program(topology, tmp_path_factory.mktemp("hub-spoke-state"))


def _topics(run: Run, cluster: str) -> set[str]:
    return {r.inputs["name"] for r in run.of_type(TOPIC) if owner_cluster(r) == cluster}


def _process(run: Run, link: str) -> dict[str, object]:
    return run.named(DYNAMIC, f"{link}-mirrormaker2").inputs


def test_edges_hub_and_passive_run_and_the_standby_gets_nothing(hub: Run) -> None:
    assert {r.name for r in hub.of_type(KAFKA_CLUSTER)} == {"E1", "E2", "H", "P"}


def test_the_hub_and_its_passive_copy_hold_each_edge_copy_edges_only_their_own(hub: Run) -> None:
    assert _topics(hub, "E1") == {"readings"}
    assert _topics(hub, "E2") == {"readings"}
    assert _topics(hub, "H") == {"readings", "E1.readings", "E2.readings"}
    assert _topics(hub, "P") == {"readings", "E1.readings", "E2.readings"}


def test_edge_links_are_prefixed_and_the_hub_link_keeps_names(hub: Run) -> None:
    assert _process(hub, "E1-to-H")["replication_policy"] == DEFAULT_POLICY
    assert _process(hub, "E2-to-H")["replication_policy"] == DEFAULT_POLICY
    assert "replication_policy" not in _process(hub, "H-to-P"), "an identity link keeps the inputs it always had"


def test_applications_write_only_on_their_home_and_never_the_aggregated_copies(hub: Run) -> None:
    assert application_writes(hub, "E1") == {
        ("User:sensor-e1", "Topic", "readings", "Write", "Literal"),
    }
    assert application_writes(hub, "E2") == {("User:sensor-e2", "Topic", "readings", "Write", "Literal")}
    assert application_writes(hub, "H") == {("User:aggregator", "Topic", "readings", "Write", "Literal")}
    assert application_writes(hub, "P") == set(), "the passive copy lets an application write"
    for cluster in ("H", "P"):
        written = {a[2] for a in application_writes(hub, cluster)}
        assert not written & {"E1.readings", "E2.readings"}, f"{cluster}: an aggregated topic is writable"
        assert ("User:aggregator", "Topic", "E1.readings", "Read", "Literal") in acls(hub, cluster)


def test_the_replicator_reads_on_edges_and_writes_on_the_hub(hub: Run) -> None:
    assert ("User:replicator", "Topic", "*", "Read", "Literal") in acls(hub, "E1")
    assert ("User:replicator", "Topic", "*", "All", "Literal") not in acls(hub, "E1")
    assert ("User:replicator", "Topic", "*", "Write", "Literal") in acls(hub, "H")
    assert not [a for a in acls(hub, "H") if a[0] == "User:replicator" and a[3] in ("All", "Delete")]


def test_mm2_properties_take_the_replication_policy_as_a_parameter() -> None:
    ep = Endpoint("127.0.0.1:1", "replicator", "pw")
    assert mm2_properties("E1", ep, "H", ep)["replication.policy.class"] == IDENTITY_POLICY
    props = mm2_properties("E1", ep, "H", ep, replication_policy=DEFAULT_POLICY)
    assert props["replication.policy.class"] == DEFAULT_POLICY
