"""Loss of an edge of a hub-and-spoke stack: the fallback rules, the desired topology, and the dry run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr.base.errors import TopologyError
from dr.topology import Role, dump_stack_config, load_topology
from dr.topology.access import application_rules
from dr.topology.hub_spoke import after_edge_loss, after_hub_failover, remote_topic_names
from dr.topology.topics import topics_on
from tests import REPO_ROOT
from tests.unit.failover.kinds.active_passive.test_failover_plan import run
from tests.unit.topology.test_hub_spoke import HUB, _error, _load


def _with_apps(config: dict[str, Any]) -> None:
    config["kafka-dr:principals"]["applications"] += [
        {"name": "sensor-e2", "home": "E2", "produces": ["readings"], "fallback": "E1"},
        {"name": "panel-e1", "home": "E1", "consumes": ["readings"], "consumer_group": "panel", "fallback": "E2"},
        {"name": "alarm-e1", "home": "E1", "consumes": ["readings"], "consumer_group": "alarm"},
    ]


def test_the_loss_of_an_edge_moves_each_application_to_its_fallback_and_keeps_the_edge_copies() -> None:
    t = _load(_with_apps)
    after = after_edge_loss(t, "E1")
    apps = {a.name: a for a in after.principals.applications}
    assert apps["sensor-e1"].home == "H", "no fallback: the hub"
    assert apps["panel-e1"].home == "E2", "its declared fallback edge"
    assert apps["panel-e1"].consumes == ["readings"], "moved to an edge: that edge's local topic only"
    assert apps["alarm-e1"].consumes == ["readings", "E1.readings"], "moved to the hub: also the edge's copy"
    assert apps["sensor-e2"].fallback is None, "a fallback naming the lost edge falls back to the hub"
    assert after.cluster("E1").role is Role.DECOMMISSIONED
    assert after.cluster("E1").lost_edge_topics == ["readings"]
    assert [lk.name for lk in after.links] == ["E2-to-H", "H-to-P"]
    # the hub and its passive copy keep E1's copy: pulumi up must not delete it
    assert "E1.readings" in remote_topic_names(after)
    assert "E1.readings" in {topic.name for topic in topics_on(after, after.cluster("P"))}
    # the moved applications' ACLs: writes on the hub's own topic, reads of the copy; on E2 the panel's group
    hub_rules = {(r.principal, r.resource_name, r.operation) for r in application_rules(after, Role.ACTIVE, "H")}
    assert ("sensor-e1", "readings", "Write") in hub_rules
    assert ("alarm-e1", "E1.readings", "Read") in hub_rules
    assert not any(r[1] == "E1.readings" and r[2] == "Write" for r in hub_rules), "copies stay read-only"
    e2_rules = {(r.principal, r.resource_name, r.operation) for r in application_rules(after, Role.EDGE, "E2")}
    assert ("panel-e1", "panel", "Read") in e2_rules and ("panel-e1", "readings", "Read") in e2_rules
    # the stack file round-trips, and the original is unchanged
    assert load_topology("test", dump_stack_config(after)) == after
    assert t.cluster("E1").role is Role.EDGE


def test_a_later_hub_failover_keeps_the_lost_edge_copies_and_moves_fallbacks_to_the_new_hub() -> None:
    def fallback_hub(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"][0]["fallback"] = "H"

    after = after_hub_failover(after_edge_loss(_load(_with_apps), "E2"))
    assert after.active().name == "P"
    assert "E2.readings" in remote_topic_names(after), "the lost edge's copy is still declared on the new hub"
    moved = after_hub_failover(_load(fallback_hub))
    assert moved.principals.application("sensor-e1").fallback == "P"


@pytest.mark.parametrize(
    ("app", "fallback", "words"),
    [
        ({"name": "x", "home": "E1", "produces": ["readings"]}, "Z9", "unknown fallback cluster 'Z9'"),
        ({"name": "x", "home": "E1", "produces": ["readings"]}, "E1", "its own home edge"),
        ({"name": "x", "home": "E1", "produces": ["readings"]}, "P", "a passive cluster"),
        ({"name": "x", "home": "E1", "produces": ["readings"]}, "S", "a standby cluster"),
        ({"name": "x", "home": "H", "produces": ["readings"]}, "E1", "is not an edge"),
    ],
)
def test_a_fallback_that_is_unknown_the_lost_edge_itself_or_no_place_for_applications_is_refused(
    app: dict[str, Any], fallback: str, words: str
) -> None:
    def add(config: dict[str, Any]) -> None:
        config["kafka-dr:principals"]["applications"].append({**app, "fallback": fallback})

    message = _error(add)
    assert "principals.applications[2].fallback" in message
    assert words in message
    assert "use one of" in message or "remove `fallback`" in message


def test_fallback_and_lost_edge_topics_are_refused_outside_hub_spoke_and_on_a_live_cluster() -> None:
    def live(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][1]["lost_edge_topics"] = ["readings"]

    assert "clusters[1].lost_edge_topics" in _error(live) and "set role: decommissioned" in _error(live)

    def unknown(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][1].update(role="decommissioned", lost_edge_topics=["nope"])
        config["kafka-dr:links"] = [lk for lk in config["kafka-dr:links"] if lk["source"] != "E2"]

    assert "'nope', which is not a declared topic" in _error(unknown)
    ap = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())["config"]
    ap["kafka-dr:principals"]["applications"][0]["fallback"] = "B"
    with pytest.raises(TopologyError, match="only a hub-spoke estate moves an edge's applications"):
        load_topology("ap", ap)


def test_after_edge_loss_refuses_what_is_not_an_edge_naming_the_edges() -> None:
    t = _load()
    with pytest.raises(TopologyError, match=r"'H' is not an edge .*edges: E1, E2") as info:
        after_edge_loss(t, "H")
    assert "pass --edge with one of: E1, E2" in str(info.value)


def test_dry_run_of_an_edge_loss_shows_who_moves_where_and_the_diff_and_changes_nothing(
    hub_stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hub_stack.read_bytes()
    assert run("failover", "--stack", "hubunit", "--edge", "E1", "--mode", "unplanned", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "unplanned loss of edge E1 of stack hubunit (hub H)" in out
    assert "applications moving: sensor-e1 → E2" in out, "the example stack's fallback"
    assert "link stopped: E1-to-H" in out
    assert "copies kept on H and its passive copy: E1.readings" in out
    assert "drain E1→H" in out
    assert "-    role: edge" in out and "+    role: decommissioned" in out
    assert "-  - name: E1-to-H" in out
    assert hub_stack.read_bytes() == before
    assert not (hub_stack.parent.parent / "state" / "hubunit" / "failover").exists() or not list(
        (hub_stack.parent.parent / "state" / "hubunit" / "failover").glob("journal*.json")
    ), "a dry run starts no journal"


def test_an_unknown_edge_is_refused_naming_the_edges(hub_stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = hub_stack.read_bytes()
    assert run("failover", "--stack", "hubunit", "--edge", "H", "--dry-run") == 2
    err = capsys.readouterr().err
    assert "'H' is not an edge" in err and "E1, E2" in err
    assert hub_stack.read_bytes() == before


def test_edge_on_another_architecture_is_refused(hub_stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    (hub_stack.parent / "Pulumi.apunit.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run("failover", "--stack", "apunit", "--edge", "A", "--dry-run") != 0
    assert "--edge moves the applications of a lost edge of a hub-spoke stack" in capsys.readouterr().err


def test_the_example_stack_declares_a_fallback(tmp_path: Path) -> None:
    config = copy.deepcopy(yaml.safe_load((REPO_ROOT / "Pulumi.hub-spoke.yaml").read_text())["config"])
    t = load_topology("example", config)
    assert t.principals.application("sensor-e1").fallback == "E2"
    assert HUB["kafka-dr:architecture"] == "hub-spoke"
