"""``drctl failover`` without ``--yes`` and without a terminal to ask on: refused (exit 6) before anything
runs, naming the dry run to look at first — for a failover, a region failover, a rejoin and an edge loss."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.cli import main
from dr.failover.frame.journal import Journal
from tests import REPO_ROOT

PORTS = (32100, 32200, 32300, 32400, 32500)  # nothing listens: nothing could run if the refusal failed


@pytest.fixture
def stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(REPO_ROOT / "Pulumi.local.yaml", tmp_path / "Pulumi.ap.yaml")
    shutil.copy(REPO_ROOT / "Pulumi.active-active.yaml", tmp_path / "Pulumi.aa.yaml")
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.hub-spoke.yaml").read_text())
    for cluster, port in zip(doc["config"]["kafka-dr:clusters"], PORTS, strict=True):
        cluster["base_port"] = port
    (tmp_path / "Pulumi.hub.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message", "dry_run"),
    [
        (
            ["--stack", "ap"],
            "refusing to fail over stack 'ap' without confirmation.",
            "`drctl failover --dry-run`",
        ),
        (
            ["--stack", "aa", "--region", "A"],
            "refusing to fail region A of stack 'aa' over without confirmation.",
            "`drctl failover --stack aa --region A --dry-run`",
        ),
        (
            ["--stack", "aa", "--region", "A", "--rejoin"],
            "refusing to bring region A of stack 'aa' back without confirmation.",
            "`drctl failover --stack aa --region A --rejoin --dry-run`",
        ),
        (
            ["--stack", "hub", "--edge", "E1"],
            "refusing to move edge E1's applications of stack 'hub' without confirmation.",
            "`drctl failover --stack hub --edge E1 --dry-run`",
        ),
    ],
)
def test_no_terminal_no_yes_is_refused_before_anything_runs(
    stacks: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
    dry_run: str,
) -> None:
    files = {p: p.read_bytes() for p in stacks.glob("Pulumi.*.yaml")}
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)  # not a terminal
        with pytest.raises(SystemExit) as exit_:
            main(["failover", *args])
    captured = capsys.readouterr()
    assert exit_.value.code == 6
    assert f"error: {message}\n  next step: pass --yes (look at {dry_run} first)" in captured.err
    assert captured.out == "", "nothing ran, so there is no summary"
    assert {p: p.read_bytes() for p in stacks.glob("Pulumi.*.yaml")} == files
    assert Journal.load(StackRef.resolve(args[1]).failover_home) is None, "no journal begun"
