"""The Pulumi program of an active-active stack under Pulumi's mocks: both links with prefixed remote topics,
topics on each peer, ACLs per home, a client configuration per home."""

from __future__ import annotations

from pathlib import Path

from dr.kafka.client import Endpoint
from dr.runtime.mirrormaker import DEFAULT_POLICY, IDENTITY_POLICY, mm2_properties, target_topic
from dr.topology import load_stack_file
from tests.unit.stacks.test_stack_program import (  # noqa: F401 - the fixtures apply here too
    ACL,
    DYNAMIC,
    TOPIC,
    _no_config_leak,
    _restore_the_mocks_found,
    run_program,
)

REPO = Path(__file__).resolve().parents[3]


def test_both_links_run_mirrormaker_with_the_default_policy_on_declared_topics(tmp_path: Path) -> None:
    run = run_program(load_stack_file(REPO / "Pulumi.active-active.yaml"), tmp_path)
    links = {r.name: r.inputs for r in run.resources if r.typ == DYNAMIC and "replication_policy" in r.inputs}
    assert set(links) == {"A-to-B-mirrormaker2", "B-to-A-mirrormaker2"}, f"links: {sorted(links)}"
    for name, inputs in links.items():
        assert inputs["replication_policy"] == DEFAULT_POLICY, name
        assert inputs["topics"] == "orders", f"{name} copies declared topics only, got {inputs['topics']!r}"
    assert (links["A-to-B-mirrormaker2"]["source"], links["A-to-B-mirrormaker2"]["target"]) == ("A", "B")


def test_topics_on_each_peer_and_no_app_write_on_remote_topics(tmp_path: Path) -> None:
    run = run_program(load_stack_file(REPO / "Pulumi.active-active.yaml"), tmp_path)
    assert {r.name for r in run.resources if r.typ == TOPIC} == {"A-topic-orders", "B-topic-orders"}
    acls = [r.inputs for r in run.resources if r.typ == ACL]
    writes = {
        (a["aclPrincipal"], a["aclResourceName"])
        for a in acls
        if a["aclOperation"] == "Write" and a["aclPrincipal"] != "User:replicator"
    }
    assert writes == {("User:shop-a", "orders"), ("User:shop-b", "orders")}
    reads = {(a["aclPrincipal"], a["aclResourceName"]) for a in acls if a["aclOperation"] == "Read"}
    assert {("User:shop-a", "B.orders"), ("User:shop-b", "A.orders")} <= reads


def test_each_application_gets_its_home_peer_as_bootstrap(tmp_path: Path) -> None:
    run = run_program(load_stack_file(REPO / "Pulumi.active-active.yaml"), tmp_path)
    configs = run.outputs["clientConfigs"]
    assert configs["shop-a"]["bootstrap.servers"] == run.outputs["clusters"]["A"]["bootstrapServers"]
    assert configs["shop-b"]["bootstrap.servers"] == run.outputs["clusters"]["B"]["bootstrapServers"]


def test_the_policy_is_a_parameter_not_an_extra_override() -> None:
    ep = Endpoint("127.0.0.1:1", "replicator", "pw")
    assert mm2_properties("A", ep, "B", ep)["replication.policy.class"] == IDENTITY_POLICY
    props = mm2_properties("A", ep, "B", ep, replication_policy=DEFAULT_POLICY)
    assert props["replication.policy.class"] == DEFAULT_POLICY
    assert target_topic(DEFAULT_POLICY, "A", "orders") == "A.orders"
    assert target_topic(IDENTITY_POLICY, "A", "orders") == "orders"
