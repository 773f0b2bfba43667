"""One home for the topology's repeated predicates: local link ends, expected broker count."""

from __future__ import annotations

from dr.topology import Placement, load_stack_file
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
