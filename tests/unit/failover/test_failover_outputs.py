"""One result for every failover path: ``drctl failover --json`` prints the same
:class:`~dr.failover.frame.summary.FailoverSummary` for the active-passive, hub, ``--region``, ``--rejoin`` and
``--edge`` paths — when they finish and when a step fails (``status`` failed, the step's ``error``, exit 6);
progress lines name the real clusters; the hub plan verifies what the run compares.

No cluster runs: the runs fail at their first step (nothing listens on the stacks' ports), and a finished
run is a journal written here whose desired state is the stack file (the run then changes nothing).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.cli import main
from dr.failover.frame.journal import Journal
from dr.failover.frame.step import Context, FailoverOptions, Step, named_roles
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.active_active.rejoin import REJOIN_STEPS
from dr.failover.kinds.active_active.steps import REGION_STEPS
from dr.failover.kinds.active_passive.steps import STEPS
from dr.failover.kinds.hub_spoke.steps import EDGE_STEPS, EdgeContext
from dr.topology import Topology, dump_stack_config, load_stack_file
from dr.topology.active_active import after_region_failover
from dr.topology.hub_spoke import after_edge_loss
from dr.topology.stackfile import write_stack_config
from tests import REPO_ROOT

PORTS = (32100, 32200, 32300, 32400, 32500)  # nothing listens there: every run fails at its first step
KEYS = set(FailoverSummary.model_fields)


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for source, name in (
        ("Pulumi.local.yaml", "ap"),
        ("Pulumi.active-active.yaml", "aa"),
        ("Pulumi.hub-spoke.yaml", "hub"),
    ):
        doc = yaml.safe_load((REPO_ROOT / source).read_text())
        for cluster, port in zip(doc["config"]["kafka-dr:clusters"], PORTS, strict=False):
            cluster["base_port"] = port
        (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def _drctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code: Any = 0
    try:
        main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 0), out.out, out.err


def _finished(stack: str, steps: list[Step], mode: str, source: str, target: str, desired: Topology) -> None:
    """A finished run of ``steps`` whose desired state ``desired`` is now the stack file's."""
    ref = StackRef.resolve(stack)
    original = load_stack_file(ref.stack_file)
    write_stack_config(ref.stack_file, desired)
    journal = Journal.create(
        ref.made_failover_home(),
        stack=stack,
        mode=mode,
        source=source,
        target=target,
        standby=None,
        original_config=dump_stack_config(original),
        desired_config=dump_stack_config(load_stack_file(ref.stack_file)),
        steps=[s.name for s in steps],
    )
    for step in steps:
        journal.start_step(step.name, {})
        journal.finish_step(step.name, "done", {"summary": f"{step.name} done"}, 0.1)
    journal.set_status("completed")


FAILING = [
    (["--stack", "ap"], "drctl failover --stack ap"),
    (["--stack", "hub"], "drctl failover --stack hub"),
    (["--stack", "aa", "--region", "A"], "drctl failover --stack aa --region A"),
    (["--stack", "hub", "--edge", "E1"], "drctl failover --stack hub --edge E1"),
]


@pytest.mark.parametrize(("args", "rerun"), FAILING, ids=["active-passive", "hub", "region", "edge"])
def test_a_failed_step_prints_the_one_summary_with_its_error(
    stacks: Path, capsys: pytest.CaptureFixture[str], args: list[str], rerun: str
) -> None:
    code, out, err = _drctl(capsys, "failover", *args, "--mode", "unplanned", "--yes", "--json")
    assert code == 6, err
    summary = json.loads(out)  # on main the region path printed nothing here
    assert set(summary) == KEYS
    assert summary["status"] == "failed"
    assert summary["failed_step"] == "preflight"
    journal = Journal.load(StackRef.resolve(args[1]).failover_home)
    assert journal is not None
    assert summary["error"] == journal.step("preflight").error
    assert summary["error"].splitlines()[0] in err, "the same error as on stderr"
    assert summary["next"] == [f"fix what step preflight reported, then rerun `{rerun}`: it resumes there"]
    text_code, text, _ = _drctl(capsys, "failover", *args, "--mode", "unplanned", "--yes")
    assert text_code == 6 and "preflight" in text and "failed" in text, "the text result too"


def test_a_failed_rejoin_prints_the_one_summary_with_its_error(
    stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    current = load_stack_file(StackRef.resolve("aa").stack_file)
    _finished("aa", REGION_STEPS, "unplanned", "A", "B", after_region_failover(current, "A", "B"))
    code, out, err = _drctl(capsys, "failover", "--stack", "aa", "--region", "A", "--rejoin", "--yes", "--json")
    assert code == 6, err
    summary = json.loads(out)
    assert set(summary) == KEYS
    assert (summary["status"], summary["failed_step"], summary["mode"]) == ("failed", "rejoin-preflight", "rejoin")
    assert summary["error"].splitlines()[0] in err
    assert "`drctl failover --stack aa --region A --rejoin`" in summary["next"][0]


def test_a_run_refused_before_it_began_prints_no_stale_summary(
    stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unfinished loss of E1 blocks the loss of E2: E1's journal is not that run's result."""
    code, out, _ = _drctl(capsys, "failover", "--stack", "hub", "--edge", "E1", "--mode", "unplanned", "--yes")
    assert code == 6 and out
    code, out, err = _drctl(capsys, "failover", "--stack", "hub", "--edge", "E2", "--yes", "--json")
    assert code == 6 and "of E1 is unfinished" in err
    assert out == "", "nothing ran: no summary, least of all the loss of E1's (main printed it)"


def _hub_failover(stack: str) -> Topology:
    return load_stack_file(StackRef.resolve(stack).stack_file).after_failover("unplanned")


FINISHED: list[tuple[list[str], Any]] = [
    (["--stack", "ap"], lambda: ("ap", STEPS, "planned", "A", "B", _hub_failover("ap"))),
    (["--stack", "hub"], lambda: ("hub", STEPS, "unplanned", "H", "P", _hub_failover("hub"))),
    (
        ["--stack", "aa", "--region", "A"],
        lambda: (
            "aa",
            REGION_STEPS,
            "unplanned",
            "A",
            "B",
            after_region_failover(load_stack_file(StackRef.resolve("aa").stack_file), "A", "B"),
        ),
    ),
    (
        ["--stack", "hub", "--edge", "E1"],
        lambda: (
            "hub",
            EDGE_STEPS,
            "unplanned",
            "E1",
            "H",
            after_edge_loss(load_stack_file(StackRef.resolve("hub").stack_file), "E1"),
        ),
    ),
    (
        ["--stack", "aa", "--region", "A", "--rejoin"],
        lambda: ("aa", REJOIN_STEPS, "rejoin", "A", "B", load_stack_file(StackRef.resolve("aa").stack_file)),
    ),
]


@pytest.mark.parametrize(("args", "run"), FINISHED, ids=["active-passive", "hub", "region", "edge", "rejoin"])
def test_a_finished_run_prints_the_same_shape(
    stacks: Path, capsys: pytest.CaptureFixture[str], args: list[str], run: Any
) -> None:
    _finished(*run())
    code, out, err = _drctl(capsys, "failover", *args, "--yes", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert set(summary) == KEYS
    assert (summary["status"], summary["already_finished"], summary["error"], summary["failed_step"]) == (
        "completed",
        True,
        None,
        None,
    )


# ------------------------------------------------------------------------------- progress text


def test_progress_lines_name_the_clusters_not_the_role_letters(
    stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _drctl(capsys, "failover", "--stack", "hub", "--mode", "unplanned", "--yes")
    _, _, err = _drctl(capsys, "failover", "--stack", "hub", "--mode", "unplanned", "--yes")  # resumed
    assert "[1/8] preflight: check the topology, P's health, link lag per partition and H's reachability" in err
    shutil.rmtree(stacks / "state")
    _, _, err = _drctl(capsys, "failover", "--stack", "hub", "--edge", "E1", "--mode", "unplanned", "--yes")
    assert "[1/8] preflight: check the hub's and the fallbacks' health, E1's reachability, the lag of E1→H" in err


@pytest.mark.parametrize(
    ("steps", "names", "decommission"),
    [
        (STEPS, Context.role_names(SimpleNamespace(source="hub", target="copy", standby="spare")), "stop hub"),  # type: ignore[arg-type]
        (REGION_STEPS, Context.role_names(SimpleNamespace(source="east", target="west", standby=None)), "stop east"),  # type: ignore[arg-type]
        (EDGE_STEPS, EdgeContext.role_names(SimpleNamespace(edge="edge1", hub="hub")), "stop edge1"),  # type: ignore[arg-type]
    ],
    ids=["failover", "region", "edge"],
)
def test_every_role_letter_of_every_step_has_a_cluster(
    steps: list[Step], names: dict[str, str], decommission: str
) -> None:
    """The clusters here are not single letters, so a letter left standing is a role nobody named."""
    for step in [*steps, *(REJOIN_STEPS if steps is REGION_STEPS else [])]:
        named = named_roles(step.description, **names)
        assert not re.search(r"\b[A-Z]\b", named), (step.name, named)
    assert named_roles(steps[-1].description, **names).startswith(decommission)


# ------------------------------------------------------------------------------- the hub's plan


def test_the_hub_plan_verifies_what_the_run_compares(stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dr.failover.kinds.active_passive.steps as steps
    from dr.failover.frame.plan import FailoverPlan
    from dr.failover.kinds.active_passive.run import plan_failover

    ref = StackRef.resolve("hub")
    options = FailoverOptions(mode="unplanned")
    plan = plan_failover(ref, options=options, observe=False)
    assert isinstance(plan, FailoverPlan)
    action = next(s.action for s in plan.steps if s.name == "integrity")
    found = re.search(r"verify H vs P over (.+?) with the PySpark job", action)
    assert found, action
    planned = found.group(1).split(", ")

    original = load_stack_file(ref.stack_file)
    journal = Journal.create(
        ref.made_failover_home(),
        stack="hub",
        mode="unplanned",
        source="H",
        target="P",
        standby="S",
        original_config=dump_stack_config(original),
        desired_config=dump_stack_config(original.after_failover("unplanned")),
        steps=[s.name for s in STEPS],
    )
    ctx = Context(ref, original, original.after_failover("unplanned"), "unplanned", options, journal, None, print)  # type: ignore[arg-type]
    ctx.__dict__.update(a_ep=None, b_ep=None)  # the cached endpoints: never used, verify is stubbed
    compared: dict[str, Any] = {}

    def verify(**kwargs: Any) -> Any:
        compared.update(kwargs)
        raise RuntimeError("stubbed")

    monkeypatch.setattr(steps, "reachability", lambda _ep: {"reachable": True})
    monkeypatch.setattr(steps, "_fence_a", lambda _ctx: [])
    monkeypatch.setattr(steps.integrity, "verify", verify)
    with pytest.raises(RuntimeError, match="stubbed"):
        steps.integrity_check(ctx)
    assert compared["topics"] == planned == ["readings"]
    assert "E1.readings, E2.readings are not compared with H" in action
    assert "`drctl verify --stack hub --edge E1`" in action


def test_a_hub_failover_does_not_resume_an_unfinished_edge_loss(
    stacks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = _drctl(capsys, "failover", "--stack", "hub", "--edge", "E1", "--mode", "unplanned", "--yes")
    assert code == 6
    home = StackRef.resolve("hub").failover_home
    before = Journal.load(home)
    assert before is not None
    for args in (["--yes", "--json"], ["--dry-run"]):
        code, out, err = _drctl(capsys, "failover", "--stack", "hub", *args)
        assert code == 6, err
        assert f"failover {before.failover_id} of E1 (unplanned) is unfinished" in err
        assert "finish it first: `drctl failover --stack hub --edge E1 --yes`" in err
        assert out == "", "main resumed the edge loss's journal as a hub failover and printed it"
    after = Journal.load(home)
    assert after is not None and len(after.record.runs) == len(before.record.runs), "no run began"


@pytest.mark.parametrize("site", [["--stack", "aa", "--region", "A"], ["--stack", "hub", "--edge", "E1"]])
def test_recover_has_no_dry_run(stacks: Path, capsys: pytest.CaptureFixture[str], site: list[str]) -> None:
    """On main ``--recover --dry-run`` ran the replay (the dry run was never looked at)."""
    code, out, err = _drctl(capsys, "failover", *site, "--recover", "--dry-run")
    assert code == 2, err
    assert "error: --recover replays records now; it has no --dry-run." in err and out == ""
