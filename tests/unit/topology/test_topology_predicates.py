"""One home for the topology's repeated predicates: local link ends, expected broker count."""

from __future__ import annotations

from dr.topology import Naming, Placement, Role, load_stack_file
from dr.topology.topics import copied_topics_regex, target_topic
from tests import REPO_ROOT


def test_expected_brokers_is_declared_only_for_local_clusters() -> None:
    local = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    assert all(c.expected_brokers == c.brokers for c in local.clusters)
    prod = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    assert all(c.expected_brokers is None for c in prod.clusters if not c.is_local)


def test_both_local_names_links_between_clusters_run_here() -> None:
    local = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    assert local.links and all(local.both_local(link) for link in local.links)
    prod = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    assert not any(prod.both_local(link) for link in prod.links)


def test_placement_says_where_each_example_link_runs() -> None:
    """One value per link picks its runner and its stack component (dr/runtime/links.py, stacks/links/)."""
    placed = {}
    for example in ("local", "local-connect", "confluent-example", "production-example"):
        topology = load_stack_file(REPO_ROOT / f"Pulumi.{example}.yaml")
        placed[example] = {topology.placement(link) for link in topology.links}
    assert placed == {
        "local": {Placement.DEDICATED},
        "local-connect": {Placement.CONNECT},
        "confluent-example": {Placement.CLUSTER_LINK},
        "production-example": {Placement.ELSEWHERE},
    }


def test_naming_says_what_each_example_link_names_its_copies() -> None:
    """One value per link, decided once: identity names, an edge's prefixed copies, a peer's prefixed
    declared topics."""
    named = {}
    for example in ("local", "hub-spoke", "active-active"):
        topology = load_stack_file(REPO_ROOT / f"Pulumi.{example}.yaml")
        named[example] = {link.name: topology.naming(link) for link in topology.links}
    assert set(named["local"].values()) == {Naming.IDENTITY}
    hub = load_stack_file(REPO_ROOT / "Pulumi.hub-spoke.yaml")
    edges = {c.name for c in hub.clusters_with(Role.EDGE)}
    assert edges and {link.name: link.source in edges for link in hub.links} == {
        name: naming is Naming.PREFIXED for name, naming in named["hub-spoke"].items()
    }
    assert Naming.IDENTITY in named["hub-spoke"].values()
    assert set(named["active-active"].values()) == {Naming.PEER}


def test_a_link_names_and_selects_topics_as_its_naming_says() -> None:
    peers = load_stack_file(REPO_ROOT / "Pulumi.active-active.yaml")
    link = peers.links[0]
    assert target_topic(peers, link, "orders") == f"{link.source}.orders"
    assert copied_topics_regex(peers, link) != link.topics_regex
    local = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    link = local.links[0]
    assert target_topic(local, link, "orders") == "orders"
    assert copied_topics_regex(local, link) == link.topics_regex
