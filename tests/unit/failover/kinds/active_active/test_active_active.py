"""Active-active: the model, its refusals (each names the field, the problem and the fix), naming and ACLs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import TopologyError
from dr.topology import Topology, find_violations, load_stack_file, load_topology
from dr.topology.access import acl_rules
from dr.topology.active_active import remote_topics_on
from dr.topology.topics import link_topics_regex, remote_topic

REPO = Path(__file__).resolve().parents[5]

AA: dict[str, Any] = {
    "kafka-dr:architecture": "active-active",
    "kafka-dr:clusters": [
        {"name": "A", "role": "active", "brokers": 1, "base_port": 18100},
        {"name": "B", "role": "active", "brokers": 1, "base_port": 18200},
    ],
    "kafka-dr:topics": [{"name": "orders", "partitions": 3, "replication_factor": 1}],
    "kafka-dr:principals": {
        "applications": [
            {"name": "shop-a", "home": "A", "produces": ["orders"], "consumes": ["orders"], "consumer_group": "shop-a"},
            {"name": "shop-b", "home": "B", "produces": ["orders"], "consumes": ["orders"], "consumer_group": "shop-b"},
        ]
    },
    "kafka-dr:links": [
        {"name": "A-to-B", "source": "A", "target": "B"},
        {"name": "B-to-A", "source": "B", "target": "A"},
    ],
}


def _with(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(AA)
    for key, value in changes.items():
        config[f"kafka-dr:{key}"] = value
    return config


def _refused(config: dict[str, Any]) -> str:
    with pytest.raises(TopologyError) as err:
        load_topology("aa", config)
    return str(err.value)


def test_the_example_stack_is_a_valid_active_active_topology() -> None:
    topology = load_stack_file(REPO / "Pulumi.active-active.yaml")
    assert topology.architecture == "active-active"
    assert [c.role for c in topology.clusters] == ["active", "active"]
    assert {a.name: a.home for a in topology.principals.applications} == {"shop-a": "A", "shop-b": "B"}


def test_two_actives_are_still_refused_in_active_passive() -> None:
    config = _with()
    del config["kafka-dr:architecture"]
    message = _refused(config)
    assert "active-passive topology has exactly one" in message


def test_a_link_one_way_only_is_refused_with_the_missing_link_named() -> None:
    message = _refused(_with(links=[{"name": "A-to-B", "source": "A", "target": "B"}]))
    assert "links[0]" in message and "nothing copies 'B' back to 'A'" in message
    assert "add a link with source 'B' and target 'A'" in message


def test_a_link_copying_remote_topics_is_refused_as_a_loop() -> None:
    links = copy.deepcopy(AA["kafka-dr:links"])
    links[0]["topics"] = ["B\\..*"]
    message = _refused(_with(links=links))
    assert "links[0].topics[0]" in message and "replication loop" in message
    assert "'A.B.orders'" in message  # what would appear on B


def test_a_catch_all_link_is_no_loop_and_copies_declared_topics_only() -> None:
    topology = load_topology("aa", _with())
    link = topology.links[0]
    assert link.topics == [".*"]
    assert link_topics_regex(topology, link) == "orders"


def test_a_topic_named_like_a_remote_topic_is_refused() -> None:
    topics = [*AA["kafka-dr:topics"], {"name": "B.orders", "partitions": 1, "replication_factor": 1}]
    message = _refused(_with(topics=topics))
    assert "topics[1].name" in message and "remote-topic name of 'B'" in message
    assert "rename the topic" in message and "'B-orders'" in message


def test_an_application_without_a_home_is_refused() -> None:
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    del principals["applications"][1]["home"]
    message = _refused(_with(principals=principals))
    assert "principals.applications[1].home" in message and "'shop-b' has no home cluster" in message
    assert "one of: 'A', 'B'" in message


@pytest.mark.parametrize(("home", "why"), [("Z", "an unknown cluster"), ("C", "not an active peer")])
def test_an_application_whose_home_is_not_a_peer_is_refused(home: str, why: str) -> None:
    clusters = [*AA["kafka-dr:clusters"], {"name": "C", "role": "decommissioned", "brokers": 1, "base_port": 18300}]
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    principals["applications"][0]["home"] = home
    message = _refused(_with(clusters=clusters, principals=principals))
    assert "principals.applications[0].home" in message and why in message


def test_a_producer_of_a_remote_topic_is_refused() -> None:
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    principals["applications"][0]["produces"] = ["B.orders"]
    message = _refused(_with(principals=principals))
    assert "principals.applications[0].produces[0]" in message
    assert "read-only for everyone but the replicator" in message
    assert "undeclared topic" not in message  # one clear message, not two


def test_a_produce_prefix_covering_remote_topics_is_refused() -> None:
    topics = [*AA["kafka-dr:topics"], {"name": "Aorders", "partitions": 1, "replication_factor": 1}]
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    principals["applications"][0]["produces_prefix"] = "A"
    message = _refused(_with(topics=topics, principals=principals))
    assert "principals.applications[0].produces_prefix" in message and "'A.orders'" in message


def test_passive_or_standby_clusters_and_a_lone_peer_are_refused() -> None:
    clusters = copy.deepcopy(AA["kafka-dr:clusters"])
    clusters[1]["role"] = "passive"
    message = _refused(_with(clusters=clusters, links=[AA["kafka-dr:links"][0]]))
    assert "clusters[1].role" in message and "every cluster of an active-active topology is an active peer" in message
    assert "needs two or more active peers" in message


def test_every_refusal_is_reported_at_once() -> None:
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    principals["applications"][0]["produces"] = ["B.orders"]
    del principals["applications"][1]["home"]
    topics = [*AA["kafka-dr:topics"], {"name": "A.x", "partitions": 1, "replication_factor": 1}]
    message = _refused(_with(topics=topics, principals=principals))
    assert "breaks 3 rules" in message


def test_a_consumer_may_name_a_remote_topic() -> None:
    principals = copy.deepcopy(AA["kafka-dr:principals"])
    principals["applications"][0]["consumes"] = ["orders", "B.orders"]
    assert find_violations(load_topology("aa", _with(principals=principals))) == []


def test_remote_topic_names() -> None:
    topology = load_topology("aa", _with())
    assert remote_topic("A", "orders") == "A.orders"
    assert remote_topics_on(topology, "B") == ["A.orders"]


def _rules(topology: Topology, cluster: str) -> set[tuple[str, str, str, str]]:
    return {
        (r.principal, r.resource_name, r.operation, r.pattern) for r in acl_rules(topology, topology.cluster(cluster))
    }


def test_acls_apps_write_their_home_only_and_read_local_and_remote_topics() -> None:
    topology = load_topology("aa", _with())
    on_a, on_b = _rules(topology, "A"), _rules(topology, "B")
    assert ("shop-a", "orders", "Write", "Literal") in on_a
    assert ("shop-a", "orders", "Write", "Literal") not in on_b
    assert ("shop-b", "orders", "Write", "Literal") in on_b
    assert ("shop-a", "orders", "Read", "Literal") in on_a and ("shop-a", "B.orders", "Read", "Literal") in on_a
    assert ("shop-b", "A.orders", "Read", "Literal") in on_b
    # remote topics are read-only for every application, everywhere
    for rules in (on_a, on_b):
        assert not [r for r in rules if r[0] != "replicator" and "." in r[1] and r[2] != "Read" and r[2] != "Describe"]
    # the replicator reads on both and writes on both (a link each way)
    assert ("replicator", "*", "Write", "Literal") in on_a and ("replicator", "*", "Write", "Literal") in on_b
    assert not [r for r in (*on_a, *on_b) if r[0] == "replicator" and r[2] in ("All", "Delete")]


# -- region failover: the desired state and the plan ---------------------------------------------


def test_after_region_failover_moves_the_region_s_applications_and_drops_its_links() -> None:
    from dr.topology.active_active import after_region_failover, survivor_for

    topology = load_topology("aa", _with())
    assert survivor_for(topology, "A") == "B"
    desired = after_region_failover(topology, "A", "B")
    assert [(c.name, c.role) for c in desired.clusters] == [("A", "decommissioned"), ("B", "active")]
    assert desired.links == [] and desired.failover_done
    assert {a.name: a.home for a in desired.principals.applications} == {"shop-a": "B", "shop-b": "B"}
    on_b = _rules(desired, "B")
    assert ("shop-a", "orders", "Write", "Literal") in on_b and ("shop-a", "A.orders", "Read", "Literal") in on_b
    assert not [r for r in on_b if r[1] == "A.orders" and r[2] == "Write"]


def test_a_region_that_is_not_a_peer_is_refused_with_the_peers_named() -> None:
    from dr.topology.active_active import survivor_for

    with pytest.raises(TopologyError) as err:
        survivor_for(load_topology("aa", _with()), "Z")
    assert "'Z' is not an active peer" in str(err.value) and "A, B" in str(err.value)


def test_the_dry_run_plan_names_who_moves_and_shows_the_stack_file_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from dr.base.stackref import StackRef
    from dr.failover.frame.step import FailoverOptions
    from dr.failover.kinds.active_active.run import plan_region_failover

    shutil.copy(REPO / "Pulumi.active-active.yaml", tmp_path / "Pulumi.aa.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    before = (tmp_path / "Pulumi.aa.yaml").read_text()
    plan = plan_region_failover(StackRef.resolve("aa"), "A", options=FailoverOptions())
    assert (plan.region, plan.survivor, plan.moving) == ("A", "B", ["shop-a"])
    assert plan.links_stopped == ["A-to-B", "B-to-A"]
    assert "-      role: active\n+      role: decommissioned" in plan.stack_file_diff
    assert "+        home: B" in plan.stack_file_diff
    assert (tmp_path / "Pulumi.aa.yaml").read_text() == before  # a dry run changes nothing
    assert "applications moving: shop-a" in plan.render()


def test_region_failover_of_an_active_passive_stack_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from dr.base.errors import FailoverError
    from dr.base.stackref import StackRef
    from dr.failover.frame.step import FailoverOptions
    from dr.failover.kinds.active_active.run import plan_region_failover

    shutil.copy(REPO / "Pulumi.local.yaml", tmp_path / "Pulumi.ap.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(FailoverError) as err:
        plan_region_failover(StackRef.resolve("ap"), "A", options=FailoverOptions())
    assert "active-passive" in str(err.value) and "without --region" in str(err.value)


def test_drctl_failover_without_region_on_an_active_active_stack_names_the_regions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from dr.cli import main

    shutil.copy(REPO / "Pulumi.active-active.yaml", tmp_path / "Pulumi.aa.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as exit_:
        main(["failover", "--stack", "aa", "--dry-run"])
    assert exit_.value.code == 2
    assert "--region <A|B>" in capsys.readouterr().err
    main(["failover", "--stack", "aa", "--region", "B", "--dry-run"])
    out = capsys.readouterr().out
    assert "region failover of stack aa: B → A" in out and "applications moving: shop-b" in out


def test_rejoin_topology_brings_the_region_its_links_and_its_applications_back() -> None:
    from dr.failover.kinds.active_active.rejoin import rejoin_topology
    from dr.topology.active_active import after_region_failover

    before = load_topology("aa", _with())
    failed = after_region_failover(before, "A", "B")
    back = rejoin_topology(failed, before, "A")
    assert [(c.name, c.role) for c in back.clusters] == [("A", "active"), ("B", "active")]
    assert sorted(lk.name for lk in back.links) == ["A-to-B", "B-to-A"] and not back.failover_done
    assert {a.name: a.home for a in back.principals.applications} == {"shop-a": "A", "shop-b": "B"}
    assert not find_violations(back)
    on_b = _rules(back, "B")
    assert not [r for r in on_b if r[0] == "shop-a" and r[2] == "Write"], "shop-a writes its home A again"


def test_the_rejoin_keeps_the_returning_writes_on_the_peer_until_its_clients_are_published() -> None:
    """Issue 34: the first convergence of a rejoin leaves shop-a writing B; A's file is published (shop-a's
    writes granted on A) before the release's convergence removes them from B."""
    from dr.failover.kinds.active_active.rejoin import REJOIN_STEPS, rejoin_topology, staged_topology
    from dr.topology.active_active import after_region_failover

    before = load_topology("aa", _with())
    failed = after_region_failover(before, "A", "B")
    back = rejoin_topology(failed, before, "A")
    staged = staged_topology(back, failed)
    assert {a.name: a.home for a in staged.principals.applications} == {"shop-a": "B", "shop-b": "B"}
    assert [(c.name, c.role) for c in staged.clusters] == [("A", "active"), ("B", "active")]
    assert sorted(lk.name for lk in staged.links) == ["A-to-B", "B-to-A"] and not find_violations(staged)
    assert [r for r in _rules(staged, "B") if r[0] == "shop-a" and r[2] == "Write"], "still writes B"
    names = [s.name for s in REJOIN_STEPS]
    # the returning groups are positioned on A before A's client configuration is published (issue 34)
    assert names.index("rejoin-consumer-groups") < names.index("rejoin-clients") < names.index("rejoin-release")


def test_a_region_failover_and_its_rejoin_keep_every_other_field_of_the_stack() -> None:
    from dr.failover.kinds.active_active.rejoin import rejoin_topology
    from dr.topology.active_active import after_region_failover

    before = load_topology("aa", _with(provisioning="batched"))
    failed = after_region_failover(before, "A", "B")
    back = rejoin_topology(failed, before, "A")
    assert (failed.provisioning, back.provisioning) == ("batched", "batched"), "the rejoin kept it too"
    assert back.architecture == before.architecture and back.topics == before.topics


def test_rejoin_without_a_finished_region_failover_is_refused_naming_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from dr.cli import main

    shutil.copy(REPO / "Pulumi.active-active.yaml", tmp_path / "Pulumi.aa.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    before = (tmp_path / "Pulumi.aa.yaml").read_text()
    with pytest.raises(SystemExit) as exit_:
        main(["failover", "--stack", "aa", "--region", "A", "--rejoin", "--dry-run"])
    assert exit_.value.code == 6
    err = capsys.readouterr().err
    assert "no region failover of A to fail back from" in err and "drctl failover --stack aa --region A" in err
    with pytest.raises(SystemExit) as exit_:
        main(["failover", "--stack", "aa", "--rejoin", "--yes"])
    assert exit_.value.code == 2 and "--region" in capsys.readouterr().err
    assert (tmp_path / "Pulumi.aa.yaml").read_text() == before


def test_plan_steps_name_the_region_and_its_peer_in_one_pass() -> None:
    from dr.failover.frame.site_loss import named_roles

    text = "write A active, links A↔B, apps home A; check B's health (Apps, Brokers)"
    assert named_roles(text, A="B", B="A") == "write B active, links B↔A, apps home B; check A's health (Apps, Brokers)"


def _journal(home: Path, mode: str, *, forced: bool = False, finished: bool = True) -> Any:
    from dr.failover.frame.journal import Journal

    config = _with()
    steps = ["decommission"] if mode != "rejoin" else ["rebuild"]
    journal = Journal.create(
        home,
        stack="aa",
        mode=mode,
        source="A",
        target="B",
        standby=None,
        original_config=config,
        desired_config=config,
        steps=steps,
    )
    journal.finish_step(steps[0], "done", {"details": {"forced": forced}}, 0.1)
    journal.set_status("completed" if finished else "running")
    return journal


def test_rejoin_refusals_name_the_state_and_the_next_step_never_a_traceback(tmp_path: Path) -> None:
    from dr.base.stackref import StackRef
    from dr.failover.kinds.active_active.rejoin import _refusal
    from dr.failover.kinds.active_active.run import recovered_marker

    ref = StackRef("aa", tmp_path, tmp_path / "state")
    home = ref.made_failover_home()
    # after a finished rejoin (a rejoin journal has no decommission step): said, not a KeyError
    refusal = _refusal(ref, _journal(home, "rejoin"), "A")
    assert refusal is not None and "already rejoined" in refusal.problem, refusal
    assert "drctl failover --stack aa --region A" in refusal.fix
    # forced past a compare: refused until a --recover left nothing missing, then allowed
    forced = _journal(home, "unplanned", forced=True)
    refusal = _refusal(ref, forced, "A")
    assert refusal is not None and "--force-decommission" in refusal.problem and "--recover" in refusal.fix
    recovered_marker(ref, forced.failover_id).write_text('{"replayed": 3, "missing_before": 3}')
    assert _refusal(ref, forced, "A") is None
    assert _refusal(ref, _journal(home, "planned"), "A") is None
