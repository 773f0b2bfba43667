"""``drctl failover --dry-run`` on a hub-and-spoke stack without clusters: the plan and the stack-file diff."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests import REPO_ROOT
from tests.unit.failover.kinds.active_passive.test_failover_plan import run

PORTS = (32100, 32200, 32300, 32400, 32500)  # nothing listens: every cluster is "down"


@pytest.fixture
def hub_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.hub-spoke.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], PORTS, strict=True):
        c["base_port"] = port
    path = tmp_path / "stacks" / "Pulumi.hubunit.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KDR_STACK_DIR", str(path.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return path


def test_dry_run_of_a_hub_failover_shows_the_edges_re_pointed_and_changes_nothing(
    hub_stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hub_stack.read_bytes()
    assert run("failover", "--stack", "hubunit", "--mode", "unplanned", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "stop the edge links E1-to-H, E2-to-H" in out
    assert "where P's copy ended" in out
    assert "+  - name: E1-to-P" in out and "-  - name: E1-to-H" in out
    assert "+  - name: P-to-S" in out
    assert "-      home: H" in out and "+      home: P" in out, "the hub's application moves to the new hub"
    assert ".json (mode 0600) for aggregator\n" in out, "edge applications keep their edge's client files"
    assert "grant write ACLs on P to aggregator" in out, "only the hub's applications are granted on P"
    assert hub_stack.read_bytes() == before
