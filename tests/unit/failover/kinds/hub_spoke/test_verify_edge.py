"""``drctl verify --stack S --edge E``: an edge's topics against their copies ``E.<topic>`` on the hub its
link feeds — the runbook's proof after a hub failover, as a command. The comparison itself
(:func:`dr.failover.act.edge_resume.edge_copy_report`) runs on real clusters in tests/integration/test_hub_spoke.py;
here it is stubbed, and the refusals need no cluster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dr.cli import main
from tests import REPO_ROOT


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(REPO_ROOT / "Pulumi.hub-spoke.yaml", tmp_path / "Pulumi.hub.yaml")
    shutil.copy(REPO_ROOT / "Pulumi.local.yaml", tmp_path / "Pulumi.ap.yaml")
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


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The stubbed comparison: what it was asked, and the counts it answers (``counts``)."""
    import dr.estate.estate as estate
    import dr.failover.act.edge_resume as hub

    seen: dict[str, Any] = {"counts": {"records": 40, "missing": 0, "duplicates": 0, "unexpected": 0}}

    def report(edge: str, edge_ep: Any, hub_ep: Any, topics: list[str]) -> dict[str, Any]:
        seen.update(edge=edge, edge_ep=edge_ep, hub_ep=hub_ep, topics=topics)
        return {"edge": edge, **seen["counts"]}

    monkeypatch.setattr(hub, "edge_copy_report", report)
    monkeypatch.setattr(estate.Estate, "endpoint", lambda _self, name: f"endpoint of {name}")
    return seen


def test_a_clean_edge(stacks: Path, capsys: pytest.CaptureFixture[str], compared: dict[str, Any]) -> None:
    code, out, err = _drctl(capsys, "verify", "--stack", "hub", "--edge", "E1", "--json")
    assert code == 0, err
    assert (compared["edge"], compared["edge_ep"], compared["hub_ep"]) == ("E1", "endpoint of E1", "endpoint of H")
    assert compared["topics"] == ["readings"], "the topics E1's link carries"
    assert json.loads(out) == {
        "edge": "E1",
        "records": 40,
        "missing": 0,
        "duplicates": 0,
        "unexpected": 0,
        "hub": "H",
        "topics": ["readings"],
        "clean": True,
    }
    code, out, _ = _drctl(capsys, "verify", "--stack", "hub", "--edge", "E2")
    assert code == 0
    assert out.startswith("edge E2 → H (E2.readings): CLEAN — 40 records on E2, 0 missing on H")


@pytest.mark.parametrize("count", ["missing", "duplicates", "unexpected"])
def test_a_record_not_there_exactly_once_exits_1(
    stacks: Path, capsys: pytest.CaptureFixture[str], compared: dict[str, Any], count: str
) -> None:
    compared["counts"][count] = 2
    code, out, err = _drctl(capsys, "verify", "--stack", "hub", "--edge", "E1", "--json")
    assert code == 1
    assert json.loads(out)["clean"] is False
    assert f"error: edge E1's copies on H differ: 2 {count}." in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--edge", "E1"], "--edge compares an edge of a stack with the hub its link feeds; --stack is missing."),
        (["--stack", "hub", "--edge", "E1", "--source", "E1"], "; --source does not apply."),
        (["--stack", "hub", "--edge", "E1", "--cutoff", "none"], "; --cutoff does not apply."),
        (["--stack", "hub", "--edge", "H"], "stack 'hub' has no edge 'H' with a link."),
        (["--stack", "hub", "--edge", "E1", "--topics", "orders"], "link E1-to-H does not carry orders."),
        (["--stack", "ap", "--edge", "A"], "stack 'ap' is active-passive: --edge compares an edge of a hub-spoke"),
    ],
)
def test_bad_input_is_refused(
    stacks: Path, capsys: pytest.CaptureFixture[str], compared: dict[str, Any], args: list[str], message: str
) -> None:
    code, out, err = _drctl(capsys, "verify", *args)
    assert code == 2, err
    assert message in err and "next step:" in err
    assert out == "" and "edge" not in compared, "nothing compared"


def test_a_lost_edge_is_compared_by_its_own_failover(
    stacks: Path, capsys: pytest.CaptureFixture[str], compared: dict[str, Any]
) -> None:
    from dr.base.stackref import StackRef
    from dr.topology import load_stack_file
    from dr.topology.hub_spoke import after_edge_loss
    from dr.topology.stackfile import write_stack_config

    path = StackRef.resolve("hub").stack_file
    write_stack_config(path, after_edge_loss(load_stack_file(path), "E1"))
    code, _, err = _drctl(capsys, "verify", "--stack", "hub", "--edge", "E1")
    assert code == 2
    assert "stack 'hub' has lost edge 'E1': no link of it feeds the hub." in err
    assert "`drctl failover --stack hub --edge E1`" in err
