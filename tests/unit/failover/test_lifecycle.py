"""The lifecycle's pure parts: which link ``drctl link`` may act on, why a link is not started again, when
a cluster may be wiped and declared standby, and the problems that make ``drctl status`` exit non-zero.

Topologies come from stack files written into a temporary directory; journals are real ones
(:class:`~dr.failover.frame.journal.Journal`) in a temporary state directory. No cluster is needed.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr import cli
from dr.base.errors import ClusterError, ConfigError, FailoverError, TopologyError
from dr.base.stackref import StackRef
from dr.failover.act.health import ClusterHealth
from dr.failover.frame.journal import Journal, StackLock
from dr.failover.kinds.active_passive.steps import STEPS
from dr.failover.lifecycle import find_link, former_link, journals, restart_refusal, standby_refusal, standby_topology
from dr.failover.status import (
    ClusterStatus,
    HealthStatus,
    LastFailover,
    LinkStatus,
    StatusReport,
    StepState,
    lock_held,
    raise_for_problems,
    status_problems,
)
from dr.topology import Kind, Role, Topology, dump_stack_config, load_stack_file, stack_file_diff, write_stack_config
from tests import REPO_ROOT
from tests.unit.failover_helpers import journal_home

LOCAL_DOC: dict[str, Any] = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))
NAMES = [s.name for s in STEPS]


def _write(root: Path, stack: str, doc: dict[str, Any]) -> Path:
    path = root / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def before(tmp_path: Path) -> Topology:
    """The shipped local stack (A active, B passive, C standby, link A-to-B), as stack ``life``."""
    return load_stack_file(_write(tmp_path, "life", LOCAL_DOC))


@pytest.fixture
def after_path(tmp_path: Path, before: Topology) -> Path:
    """The stack file after a planned failover A→B→C, written by the round-trip editor."""
    path = tmp_path / "Pulumi.life.yaml"
    write_stack_config(path, before.after_failover("planned"))
    return path


def _journal(
    state: Path,
    before: Topology,
    *,
    status: str,
    done: list[str] | None = None,
    source: str = "A",
    target: str = "B",
    standby: str | None = "C",
) -> Journal:
    journal = Journal.create(
        state,
        stack="life",
        mode="planned",
        source=source,
        target=target,
        standby=standby,
        original_config=dump_stack_config(before),
        desired_config=dump_stack_config(before.after_failover("planned")),
        steps=NAMES,
    )
    for name in done or []:
        journal.finish_step(name, "done", {}, 0.1)
    journal.set_status(status)
    return journal


# -- links -----------------------------------------------------------------------------------------


def test_a_declared_local_link_is_found(before: Topology) -> None:
    link = find_link(before, "A-to-B", [])
    assert (link.source, link.target) == ("A", "B")
    assert restart_refusal(before, link, []) is None


def test_an_unknown_link_is_refused_naming_the_declared_ones(before: Topology) -> None:
    with pytest.raises(ConfigError) as info:
        find_link(before, "A-to-Z", [])
    assert "declares no link 'A-to-Z'" in info.value.problem and "A-to-B" in str(info.value.fix)
    assert info.value.exit_code == 2


def test_a_link_replaced_by_a_failover_is_refused_with_why(tmp_path: Path, before: Topology, after_path: Path) -> None:
    state = tmp_path / "state"
    _journal(state, before, status="completed", done=NAMES)
    after = load_stack_file(after_path)
    with pytest.raises(FailoverError) as info:
        find_link(after, "A-to-B", journals(state))
    err = info.value
    assert err.exit_code == 6
    assert "replaced it" in err.problem and "drctl recover" in err.problem and "twice" in err.problem
    assert "drctl estate standby --stack life --cluster A" in str(err.fix)
    assert find_link(after, "B-to-C", journals(state)).source == "B"


def test_a_link_whose_source_was_failed_over_is_not_started_again(tmp_path: Path, before: Topology) -> None:
    state = tmp_path / "state"
    _journal(state, before, status="failed", done=["preflight", "fence-drain", "promote"])
    refusal = restart_refusal(before, before.links[0], journals(state))
    assert isinstance(refusal, FailoverError)
    assert "was failed over" in refusal.problem and "finish the failover first" in str(refusal.fix)


def test_a_failover_refused_before_the_promotion_does_not_block_the_link(tmp_path: Path, before: Topology) -> None:
    """Refused in preflight or while draining: the link was never stopped by it, and the drain needs it."""
    state = tmp_path / "state"
    journal = _journal(state, before, status="failed", done=["preflight"])
    journal.finish_step("fence-drain", "failed", {}, 5.0, error="lag not drained")
    assert restart_refusal(before, before.links[0], journals(state)) is None


def test_an_earlier_failover_of_another_source_does_not_block_the_link(tmp_path: Path, before: Topology) -> None:
    state = tmp_path / "state"
    _journal(state, before, status="completed", done=NAMES, source="C", target="A", standby="B")
    assert restart_refusal(before, before.links[0], journals(state)) is None


def test_former_links_are_found_in_archived_journals_newest_first(tmp_path: Path, before: Topology) -> None:
    state = tmp_path / "state"
    first = _journal(state, before, status="completed", done=NAMES)
    first_id = first.failover_id
    after = before.after_failover("planned")
    second = Journal.create(
        state,
        stack="life",
        mode="planned",
        source="B",
        target="C",
        standby=None,
        original_config=dump_stack_config(after),
        desired_config={},
        steps=NAMES,
    )
    history = journals(state)
    assert [j["failover_id"] for j in history] == [second.failover_id, first_id]
    link, journal = former_link("A-to-B", history) or ({}, {})
    assert (link["source"], journal["failover_id"]) == ("A", first_id)
    assert former_link("B-to-C", history)[1]["failover_id"] == second.failover_id  # type: ignore[index]
    assert former_link("nosuch", history) is None


def test_links_not_run_on_this_machine_are_refused_naming_their_tooling(tmp_path: Path) -> None:
    prod = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    with pytest.raises(ConfigError) as info:
        find_link(prod, prod.links[0].name, [])
    assert "Kafka Connect" in info.value.problem and "drctl connect-config" in str(info.value.fix)
    confluent = load_stack_file(REPO_ROOT / "Pulumi.confluent-example.yaml")
    with pytest.raises(ConfigError) as info:
        find_link(confluent, confluent.links[0].name, [])
    assert "Confluent Cloud cluster link" in info.value.problem


# -- standby ---------------------------------------------------------------------------------------


def test_the_decommissioned_cluster_may_become_standby_after_a_completed_failover(
    tmp_path: Path, before: Topology, after_path: Path
) -> None:
    state = tmp_path / "state"
    last = _journal(state, before, status="completed", done=NAMES).record.to_json()
    after = load_stack_file(after_path)
    assert standby_refusal(after, "A", last) is None
    assert standby_refusal(after, "A", None) is None, "a cluster decommissioned by hand, no journal"
    assert standby_refusal(standby_topology(after, "A"), "A", last) is None, "again: nothing refused"


@pytest.mark.parametrize("status", ["pending", "failed", "running", "interrupted"])
def test_wiping_is_refused_while_the_last_failover_is_not_completed(
    tmp_path: Path, before: Topology, after_path: Path, status: str
) -> None:
    last = _journal(tmp_path / "state", before, status=status, done=NAMES[:6]).record.to_json()
    refusal = standby_refusal(load_stack_file(after_path), "A", last)
    assert isinstance(refusal, FailoverError)
    assert "records recovery still needs" in refusal.problem and last["failover_id"] in refusal.problem
    assert "drctl recover" in str(refusal.fix) and "drctl failover --stack life" in str(refusal.fix)


def test_wiping_is_refused_for_a_cluster_in_use_or_unknown_or_external(before: Topology, after_path: Path) -> None:
    after = load_stack_file(after_path)
    for name, role in (("B", "active"), ("C", "passive")):
        refusal = standby_refusal(after, name, None)
        assert isinstance(refusal, FailoverError) and f"is {role}" in refusal.problem
    assert "fail A over first" in str(standby_refusal(before, "A", None).fix)  # type: ignore[union-attr]
    unknown = standby_refusal(after, "Z", None)
    assert isinstance(unknown, ConfigError) and "A, B, C" in str(unknown.fix)
    prod = load_stack_file(REPO_ROOT / "Pulumi.production-example.yaml")
    external = standby_refusal(prod, "dc1", None)
    assert isinstance(external, ConfigError) and "own tooling" in str(external.fix)


def test_standby_topology_changes_only_that_role_and_is_validated(before: Topology, after_path: Path) -> None:
    after = load_stack_file(after_path)
    new = standby_topology(after, "A")
    assert {c.name: c.role for c in new.clusters} == {"A": Role.STANDBY, "B": Role.ACTIVE, "C": Role.PASSIVE}
    assert new.model_dump(exclude={"clusters"}) == after.model_dump(exclude={"clusters"})
    assert after.cluster("A").role is Role.DECOMMISSIONED, "the input is unchanged"
    with pytest.raises(TopologyError):  # a second standby breaks a rule, as in the stack file
        standby_topology(before, "A")


def test_the_stack_file_changes_by_that_one_value(after_path: Path) -> None:
    after = load_stack_file(after_path)
    text = after_path.read_text().replace("kafka-dr:clusters:", "# the estate\n  kafka-dr:clusters:", 1)
    after_path.write_text(text)
    diff = stack_file_diff(after_path, standby_topology(after, "A"))
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-    role: decommissioned", "+    role: standby"], diff
    assert write_stack_config(after_path, standby_topology(after, "A"))
    assert "# the estate" in after_path.read_text()
    assert load_stack_file(after_path).cluster("A").role is Role.STANDBY


def test_importing_the_lifecycle_starts_nothing() -> None:
    code = "import sys, dr.failover.lifecycle; print(sorted(m for m in sys.modules if m.startswith(('pulumi', 'confluent'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert out.stdout.strip() == "[]"


# -- status ----------------------------------------------------------------------------------------


def _healthy(brokers: int = 1) -> HealthStatus:
    return HealthStatus.of(
        ClusterHealth(True, brokers=list(range(1, brokers + 1)), expected_brokers=brokers), isr=False
    )


def _link(**fields: Any) -> LinkStatus:
    base: dict[str, Any] = {
        "name": "A-to-B",
        "source": "A",
        "target": "B",
        "state": "running",
        "engine": "mirrormaker2",
    }
    return LinkStatus.model_validate(base | fields)


def _report(**changes: Any) -> StatusReport:
    fields: dict[str, Any] = {
        "stack": "life",
        "failover_done": False,
        "clusters": [
            ClusterStatus(name="A", role=Role.ACTIVE, kind=Kind.LOCAL, process="running", health=_healthy()),
            ClusterStatus(name="B", role=Role.PASSIVE, kind=Kind.LOCAL, process="running", health=_healthy()),
            ClusterStatus(name="C", role=Role.STANDBY, kind=Kind.LOCAL, process="absent"),
        ],
        "links": [_link(process="running", lag={}, total_lag=0)],
        "consumer_groups": [],
        "last_failover": None,
        "problems": [],
    }
    report = StatusReport(**(fields | changes))
    report.problems = status_problems(report)
    return report


def _last(status: str, lock: bool = False, failed_step: str | None = None) -> LastFailover:
    return LastFailover(
        failover_id="f1",
        mode="planned",
        status=status,
        source="A",
        target="B",
        standby="C",
        rto_s=None,
        a_b_c_s=None,
        pending=[],
        next=["fix what step promote reported, then rerun"],
        journal="journal.json",
        steps=[StepState(name=n, status="failed" if n == failed_step else "done") for n in NAMES],
        lock_held=lock,
    )


def test_a_healthy_estate_has_no_problem_and_status_exits_0() -> None:
    report = _report()
    assert status_problems(report) == report.problems == []
    raise_for_problems(report)
    assert status_problems(_report(last_failover=_last("completed"))) == []
    assert status_problems(_report(last_failover=_last("pending"))) == [], "decommissioning may wait for A"
    assert status_problems(_report(last_failover=_last("running", lock=True))) == [], "a failover is under way"


def test_a_stopped_link_is_a_problem_naming_it() -> None:
    report = _report(links=[_link(process="stopped", lag={}, total_lag=0)])
    assert report.problems == ["link A-to-B (A → B) is stopped; the topology says it runs"]
    with pytest.raises(ClusterError) as info:
        raise_for_problems(report)
    assert info.value.exit_code == 4 and "A-to-B" in info.value.problem
    assert "`drctl link start --stack life --link A-to-B`" in str(info.value.fix)


def test_a_link_with_an_unreachable_side_and_a_down_cluster_are_problems() -> None:
    report = _report(links=[_link(process="running", error="lag unknown: a side is unreachable")])
    report.clusters[1] = ClusterStatus(name="B", role=Role.PASSIVE, kind=Kind.LOCAL, process="stopped")
    assert status_problems(report) == [
        "cluster B (passive) is stopped",
        "link A-to-B (A → B): lag unknown: a side is unreachable",
    ]
    down = ClusterHealth(False, error="nothing listens on b:9093")
    report.clusters[1] = ClusterStatus(
        name="B", role=Role.PASSIVE, kind=Kind.EXTERNAL, health=HealthStatus.of(down, isr=False)
    )
    assert status_problems(report)[0] == "cluster B (passive) is unreachable: nothing listens on b:9093"


def test_decommissioned_and_standby_clusters_and_promoted_links_are_not_problems() -> None:
    report = _report(links=[_link(state="promoted", engine="cluster-link", error="lag unknown: a side is unreachable")])
    report.clusters[0] = ClusterStatus(name="A", role=Role.DECOMMISSIONED, kind=Kind.LOCAL, process="stopped")
    assert status_problems(report) == []


@pytest.mark.parametrize(
    ("last", "fragment"),
    [
        (_last("failed", failed_step="promote"), "failed at step promote"),
        (_last("interrupted"), "was interrupted"),
        (_last("running", lock=False), "no process holds the stack's lock"),
    ],
)
def test_a_failed_or_interrupted_failover_exits_6_listing_every_problem(last: LastFailover, fragment: str) -> None:
    report = _report(last_failover=last, links=[_link(process="stopped", lag={}, total_lag=0)])
    problems = report.problems
    assert len(problems) == 2 and fragment in problems[1] and "f1" in problems[1]
    with pytest.raises(FailoverError) as info:
        raise_for_problems(report)
    assert info.value.exit_code == 6
    assert "2 problems" in info.value.problem and "A-to-B" in info.value.problem and fragment in info.value.problem


def test_lock_held_sees_a_running_failover(tmp_path: Path) -> None:
    assert not lock_held(tmp_path)
    with StackLock(tmp_path, "life"):
        assert lock_held(tmp_path)
    assert not lock_held(tmp_path), "released (the pid stays in the file)"


# -- through drctl ---------------------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    monkeypatch.setenv("KDR_STACK_DIR", str(stacks))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return stacks


def _drctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        cli.main(list(args))
    return int(info.value.code or 0), capsys.readouterr().err


def test_drctl_link_refuses_unknown_and_external_links(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(env, "life", LOCAL_DOC)
    code, err = _drctl(capsys, "link", "start", "--stack", "life", "--link", "nosuch")
    assert code == 2 and "declares no link 'nosuch'" in err and "use one of: A-to-B" in err
    code, err = _drctl(capsys, "link", "stop", "--stack", "life", "--link", "nosuch")
    assert code == 2 and "A-to-B" in err
    prod = copy.deepcopy(yaml.safe_load((REPO_ROOT / "Pulumi.production-example.yaml").read_text()))
    _write(env, "prod", prod)
    name = prod["config"]["kafka-dr:links"][0]["name"]
    code, err = _drctl(capsys, "link", "start", "--stack", "prod", "--link", name)
    assert code == 2 and "Kafka Connect" in err and "next step:" in err


def test_drctl_link_start_refuses_a_stopped_cluster(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(env, "life", LOCAL_DOC)  # never provisioned: A does not exist on this machine
    code, err = _drctl(capsys, "link", "start", "--stack", "life", "--link", "A-to-B")
    assert code == 4 and "cluster A (source of link A-to-B, active) does not exist" in err
    assert "drctl estate up --stack life" in err


def test_drctl_estate_standby_refuses_before_touching_anything(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(env, "life", LOCAL_DOC)
    before = path.read_bytes()
    code, err = _drctl(capsys, "estate", "standby", "--stack", "life", "--cluster", "A", "--yes")
    assert code == 6 and "cluster A is active" in err and "drctl failover --stack life --dry-run" in err
    write_stack_config(path, load_stack_file(path).after_failover("planned"))
    _journal(
        journal_home("life"),
        load_stack_file(_write(tmp_path, "life", LOCAL_DOC)),
        status="pending",
        done=NAMES[:6],
    )
    after = path.read_bytes()
    code, err = _drctl(capsys, "estate", "standby", "--stack", "life", "--cluster", "A", "--yes")
    assert code == 6 and "records recovery still needs" in err
    code, err = _drctl(capsys, "estate", "standby", "--stack", "life", "--cluster", "Z", "--yes")
    assert code == 2 and "no cluster named 'Z'" in err
    assert path.read_bytes() == after != before


def test_drctl_estate_standby_asks_before_deleting_data(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(env, "life", LOCAL_DOC)
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)  # not a terminal
        code, err = _drctl(capsys, "estate", "standby", "--stack", "life", "--cluster", "A")
        assert code == 6 and "cluster A is active" in err, "a refusal comes before the question"
        write_stack_config(path, load_stack_file(path).after_failover("planned"))
        before = path.read_bytes()
        code, err = _drctl(capsys, "estate", "standby", "--stack", "life", "--cluster", "A")
        assert code == 6 and "without confirmation" in err and "--dry-run" in err
        assert path.read_bytes() == before


def test_status_of_a_stack_not_provisioned_lists_its_problems(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing runs: the report keeps its keys, adds ``problems``, and drctl status exits 4 after printing."""
    from dr.failover.status import status_report

    path = _write(env, "life", LOCAL_DOC)
    report = status_report(StackRef.of_file(path, tmp_path / "state" / "life"))
    assert set(report.to_json()) == {
        "stack",
        "failover_done",
        "clusters",
        "links",
        "consumer_groups",
        "last_failover",
        "problems",
        "journal_home",
        "journal_shared",
    }
    assert report.journal_shared is True, "the local file backend keeps the journal"
    assert report.journal_home == str(tmp_path / "state" / "pulumi" / ".pulumi" / "kdr" / "kafka-dr" / "life")
    assert report.problems == [
        "cluster A (active) is absent",
        "cluster B (passive) is absent",
        "link A-to-B (A → B) is stopped; the topology says it runs",
    ]
    code, err = _drctl(capsys, "status", "--stack", "life", "--json")
    assert code == 4 and "stack life has 3 problems" in err
