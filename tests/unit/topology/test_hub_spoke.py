"""Hub-and-spoke: the model, the topics each cluster holds, and one test per refusal (field named, fix given)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import TopologyError
from dr.topology import Architecture, Role, Topology, load_stack_file, load_topology
from dr.topology.hub_spoke import edges, is_edge_link
from dr.topology.stackconfig import dump_stack_config
from dr.topology.topics import remote_topic, topics_on

ROOT = Path(__file__).resolve().parents[3]

HUB: dict[str, Any] = {
    "kafka-dr:architecture": "hub-spoke",
    "kafka-dr:clusters": [
        {"name": "E1", "role": "edge", "base_port": 18400},
        {"name": "E2", "role": "edge", "base_port": 18500},
        {"name": "H", "role": "active", "base_port": 18600},
        {"name": "P", "role": "passive", "base_port": 18700},
        {"name": "S", "role": "standby", "base_port": 18800},
    ],
    "kafka-dr:topics": [{"name": "readings", "partitions": 2, "replication_factor": 1}],
    "kafka-dr:principals": {
        "applications": [
            {"name": "sensor-e1", "home": "E1", "produces": ["readings"]},
            {"name": "aggregator", "home": "H", "consumes": ["E1.readings", "E2.readings"], "consumer_group": "agg"},
        ]
    },
    "kafka-dr:links": [
        {"name": "E1-to-H", "source": "E1", "target": "H", "topics": ["readings"]},
        {"name": "E2-to-H", "source": "E2", "target": "H", "topics": ["readings"]},
        {"name": "H-to-P", "source": "H", "target": "P"},
    ],
}

Mutation = Callable[[dict[str, Any]], None]


def _load(mutate: Mutation | None = None, base: dict[str, Any] = HUB) -> Topology:
    config = copy.deepcopy(base)
    if mutate is not None:
        mutate(config)
    return load_topology("test", config)


def _error(mutate: Mutation, base: dict[str, Any] = HUB) -> str:
    with pytest.raises(TopologyError) as info:
        _load(mutate, base)
    return str(info.value)


def test_a_valid_hub_spoke_topology_loads_with_its_roles() -> None:
    t = _load()
    assert t.architecture is Architecture.HUB_SPOKE
    assert [c.name for c in edges(t)] == ["E1", "E2"]
    assert t.active().name == "H" and t.cluster("E1").role is Role.EDGE


def test_hub_and_passive_hold_every_edge_copy_edges_hold_only_their_own() -> None:
    t = _load()
    assert [x.name for x in topics_on(t, t.cluster("H"))] == ["readings", "E1.readings", "E2.readings"]
    assert [x.name for x in topics_on(t, t.cluster("P"))] == ["readings", "E1.readings", "E2.readings"]
    assert [x.name for x in topics_on(t, t.cluster("E1"))] == ["readings"]
    assert topics_on(t, t.cluster("S")) == []
    assert remote_topic("E1", "readings") == "E1.readings"


def test_only_edge_links_are_prefixed() -> None:
    t = _load()
    assert [is_edge_link(t, link) for link in t.links] == [True, True, False]


def test_the_example_stack_file_loads_and_dumps_its_architecture() -> None:
    t = load_stack_file(ROOT / "Pulumi.hub-spoke.yaml")
    assert t.architecture is Architecture.HUB_SPOKE
    assert len(edges(t)) == 2
    assert dump_stack_config(t)["kafka-dr:architecture"] == "hub-spoke"


def test_an_active_passive_stack_file_keeps_no_architecture_key() -> None:
    t = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert t.architecture is Architecture.ACTIVE_PASSIVE
    assert "kafka-dr:architecture" not in dump_stack_config(t)


# -- refusals -----------------------------------------------------------------------------------


def test_an_edge_outside_hub_spoke_is_refused() -> None:
    message = _error(lambda c: c.pop("kafka-dr:architecture"))
    assert "clusters[0].role" in message and "set kafka-dr:architecture: hub-spoke" in message


def test_no_edge_is_refused() -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["kafka-dr:clusters"] = c["kafka-dr:clusters"][2:]
        c["kafka-dr:links"] = c["kafka-dr:links"][2:]
        c["kafka-dr:principals"]["applications"] = []

    message = _error(mutate)
    assert "declares no edge cluster" in message and "role: edge" in message


def test_an_edge_without_a_link_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:links"].pop(1))
    assert "edge 'E2' has no link into the hub" in message and "source 'E2' and target 'H'" in message


def test_an_edge_linked_to_something_other_than_the_hub_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:links"][0].update(target="P"))
    assert "links[0].target" in message and "not to the hub" in message and "set target: 'H'" in message


def test_a_link_into_an_edge_is_refused_as_a_loop() -> None:
    message = _error(lambda c: c["kafka-dr:links"].append({"name": "H-to-E1", "source": "H", "target": "E1"}))
    assert "links[3].target" in message and "a loop" in message and "remove the link" in message


def test_a_second_link_out_of_an_edge_is_refused() -> None:
    extra = {"name": "E1-to-H-again", "source": "E1", "target": "H", "topics": ["readings"]}
    message = _error(lambda c: c["kafka-dr:links"].append(extra))
    assert "links[3]" in message and "second link" in message and "keep one link per edge" in message


def test_an_edge_link_on_connect_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:links"][0].update(connect="cc"))
    assert "links[0].connect" in message and "use engine: mirrormaker2 without `connect`" in message


def test_a_hub_topic_named_like_an_edge_copy_is_refused() -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["kafka-dr:topics"].append({"name": "E1.orders", "partitions": 1, "replication_factor": 1})

    message = _error(mutate)
    assert "topics[1].name" in message and "edge 'E1'" in message and "does not start with 'E1.'" in message


def test_producing_to_an_aggregated_topic_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:principals"]["applications"][1].update(produces=["E1.readings"]))
    assert "principals.applications[1].produces[0]" in message and "read-only" in message
    assert "produce to 'readings' on the edge 'E1'" in message


def test_a_write_prefix_covering_aggregated_topics_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:principals"]["applications"][1].update(produces_prefix="E"))
    assert "principals.applications[1].produces_prefix" in message and "read-only" in message


def test_an_unknown_home_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:principals"]["applications"][0].update(home="E9"))
    assert "principals.applications[0].home" in message and "unknown home cluster 'E9'" in message
    assert "'E1', 'E2', 'H'" in message


def test_a_home_on_the_passive_copy_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:principals"]["applications"][0].update(home="P"))
    assert "principals.applications[0].home" in message and "a passive cluster" in message


def test_an_edge_application_reading_an_aggregated_topic_is_refused() -> None:
    message = _error(lambda c: c["kafka-dr:principals"]["applications"][1].update(home="E2"))
    assert "principals.applications[1].consumes" in message and "lives on edge 'E2'" in message


def test_a_home_in_an_active_passive_stack_is_refused() -> None:
    def mutate(c: dict[str, Any]) -> None:
        c.pop("kafka-dr:architecture")
        c["kafka-dr:clusters"] = c["kafka-dr:clusters"][2:]
        c["kafka-dr:links"] = c["kafka-dr:links"][2:]
        c["kafka-dr:principals"]["applications"] = [{"name": "app", "home": "H", "produces": ["readings"]}]

    message = _error(mutate)
    assert "principals.applications[0].home" in message and "remove `home`" in message


def test_the_hub_linked_to_an_edge_shape_is_refused_even_without_the_edge_link() -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["kafka-dr:links"][0] = {"name": "H-to-E1", "source": "H", "target": "E1"}

    message = _error(mutate)
    assert "edge 'E1' has no link into the hub" in message and "links[0].target" in message


# -- hub failover (desired state) -----------------------------------------------------------------


def test_hub_failover_promotes_the_passive_copy_and_re_points_every_edge() -> None:
    after = _load().after_failover("unplanned")
    assert {c.name: c.role for c in after.clusters} == {
        "E1": Role.EDGE,
        "E2": Role.EDGE,
        "H": Role.DECOMMISSIONED,
        "P": Role.ACTIVE,
        "S": Role.PASSIVE,
    }
    assert [(lk.name, lk.source, lk.target) for lk in after.links] == [
        ("E1-to-P", "E1", "P"),
        ("E2-to-P", "E2", "P"),
        ("P-to-S", "P", "S"),
    ]
    assert after.links[0].topics == ["readings"], "an edge's link keeps its topics"
    assert after.architecture is Architecture.HUB_SPOKE and after.failover_done
    assert after.principals.application("aggregator").home == "P", "the hub's applications move to the new hub"
    assert after.principals.application("sensor-e1").home == "E1", "edge applications stay on their edge"


def test_a_second_hub_failover_moves_on_to_the_next_copy() -> None:
    after = _load().after_failover().after_failover()
    assert after.active().name == "S" and after.cluster("P").role is Role.DECOMMISSIONED
    assert sorted(lk.name for lk in after.links) == ["E1-to-S", "E2-to-S"]


# -- where an edge's link resumes (pure parts of dr.failover.act.edge_resume) ----------------------------------


def test_the_offset_key_is_mirrormaker_2s_own_bytes() -> None:
    from dr.failover.act.edge_resume import offset_key, offsets_topic

    # Connect's JsonConverter of [connector, partition map]; Java's HashMap iterates cluster, partition, topic
    assert (
        offset_key("E1", "readings", 1)
        == b'["MirrorSourceConnector",{"cluster":"E1","partition":1,"topic":"readings"}]'
    )
    assert offsets_topic("E1") == "mm2-offsets.E1.internal"


def test_a_resume_point_starts_after_the_last_copied_record_or_at_the_edge_start() -> None:
    from dr.failover.act.edge_resume import ResumePoint

    copied = ResumePoint("E1", "readings", 0, copied=40, last_copied=41, edge_end=50)
    assert copied.resume_at == 42 and copied.to_dict()["to_copy"] == 8
    empty = ResumePoint("E1", "readings", 1, copied=0, last_copied=None, edge_end=7)
    assert empty.to_dict()["resume_at"] == "earliest" and empty.to_dict()["to_copy"] is None


def test_the_last_record_of_a_copy_is_looked_for_below_its_end_in_growing_windows() -> None:
    from dr.failover.act.edge_resume import tail_windows

    # an exactly-once copy ends in a commit marker: the last offset alone is no record
    assert tail_windows(0, 100) == [(98, 100), (82, 98), (0, 82)]
    assert tail_windows(95, 100) == [(98, 100), (95, 98)]
    assert tail_windows(5, 5) == []
    covered = [o for lo, hi in tail_windows(3, 2000) for o in range(lo, hi)]
    assert sorted(covered) == list(range(3, 2000)) and len(covered) == len(set(covered))
