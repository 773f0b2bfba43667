"""``drctl failover --dry-run`` on a hub-and-spoke stack without clusters: the plan and the stack-file diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.failover.kinds.active_passive.test_failover_plan import run


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
