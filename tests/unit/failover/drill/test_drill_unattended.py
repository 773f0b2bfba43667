"""``drctl drill --unplanned --automatic`` (issue 43, item 6): the drill's copy gets an automatic policy on a
witness of the drill's own, the controllers' failover is graded from the site's loss, and a bad combination
is refused before anything changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dr.failover.drill.frame import DrillOptions
from dr.failover.drill.grade import DEFAULT_AIMS, grade
from dr.failover.drill.render import render_drill
from dr.failover.drill.result import DrillResult, EndpointClientsReport
from dr.failover.drill.unattended import DRILL_MAX_RPO_RECORDS, drill_policy, figures
from dr.failover.frame.journal import Journal, JournalRecord, RunEntry, StepEntry
from dr.failover.kinds.active_passive.drill import automatic_refusal
from dr.topology.failover_policy import FailoverPolicy

DATA = Path(__file__).resolve().parents[2] / "data" / "drill"


def _config(**policy: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "kafka-dr:clusters": [
            {"name": "A", "role": "active", "base_port": 20000},
            {"name": "B", "role": "passive", "base_port": 20100},
            {"name": "C", "role": "standby", "base_port": 20200},
        ]
    }
    if policy:
        config["kafka-dr:failoverPolicy"] = policy
    return config


def test_the_copy_keeps_the_stacks_detection_and_budget_and_gets_the_drills_own_witness() -> None:
    declared = {
        "mode": "manual",
        "detectAfterS": 20,
        "leaseTtlS": 4,
        "marginS": 1,
        "maxRpoRecords": 500,
        "witness": {"kind": "etcd", "endpoints": ["http://team-etcd:2379"]},
        "metricsPorts": {"A": 9100},
    }
    policy = drill_policy(_config(**declared))
    assert policy["mode"] == "automatic"
    assert policy["detectAfterS"] == 20 and policy["leaseTtlS"] == 4 and policy["maxRpoRecords"] == 500
    assert policy["witness"] == {"kind": "etcd", "endpoints": ["http://127.0.0.1:20291"]}, (
        "the team's witness is never used"
    )
    assert policy["metricsPorts"] == {"A": 20090, "B": 20190}
    FailoverPolicy.model_validate(policy)  # a policy the controllers accept


def test_a_stack_without_a_policy_gets_the_defaults_and_a_budget() -> None:
    policy = drill_policy(_config())
    assert policy["maxRpoRecords"] == DRILL_MAX_RPO_RECORDS
    parsed = FailoverPolicy.model_validate(policy)
    assert parsed.mode == "automatic" and parsed.detect_after_s == 30.0


def test_without_a_standby_the_witness_sits_at_the_passives_ports() -> None:
    config = _config()
    config["kafka-dr:clusters"] = config["kafka-dr:clusters"][:2]
    assert drill_policy(config)["witness"]["endpoints"] == ["http://127.0.0.1:20191"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ({"unplanned": False}, "it needs --unplanned"),
        ({"unplanned": True, "cycles": 2}, "--automatic runs one cycle"),
    ],
)
def test_automatic_without_unplanned_or_with_cycles_is_refused(flags: dict[str, Any], says: str) -> None:
    refusal = automatic_refusal(DrillOptions(out=Path("/nonexistent"), automatic=True, **flags))  # type: ignore[arg-type]
    assert refusal is not None and says in refusal.problem and "Nothing was changed" in refusal.fix
    assert automatic_refusal(DrillOptions(out=Path("/nonexistent"), automatic=True, unplanned=True)) is None


def _journal(started_by: str | None, promoted: float | None) -> Journal:
    record = JournalRecord.model_validate(
        {
            "failover_id": "f",
            "stack": "s",
            "mode": "unplanned",
            "status": "pending",
            "source": "A",
            "target": "B",
            "created_at": 100.0,
            "original_config": {},
            "desired_config": {},
            "runs": [
                RunEntry(
                    pid=1, started_at=131.0, mode="unplanned", options={"started_by": started_by, "fencing_token": 7}
                )
            ],
            "steps": {"promote": StepEntry(status="done", finished_at=promoted)},
        }
    )
    return Journal(Path("/nonexistent/failover/journal.json"), record)


def test_the_figures_count_from_the_loss_and_a_write_on_a_after_the_promotion_fails_the_drill() -> None:
    u = figures(_journal("controller drill-B", 140.0), 100.0, 30.0, [99.0, 150.5, 151.0], [98.0, 141.0], [])
    assert (u.detection_s, u.promotion_s, u.unattended_rto_s) == (31.0, 40.0, 50.5)
    assert u.writes_on_source_after_promotion == 1 and u.fencing_token == 7

    r = DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))
    c = r.cycles[0]
    c.unattended = u
    grade(c, DEFAULT_AIMS, planned=False)
    results = {k.check: k.result for k in c.checks}
    assert results["the failover was made by a controller, nobody typed it (controller drill-B)"] == "PASS"
    assert results[f"no write acknowledged by {c.source} after {c.target}'s promotion (1)"] == "FAIL"
    assert results[f"unattended RTO ≤ 60s (site lost → first write on {c.target}: 50.5s)"] == "PASS"
    assert any(line.startswith("unattended: site") for line in render_drill(r).splitlines())
    assert DrillResult.from_json(r.to_json()).cycles[0].unattended == u


def test_a_failover_nobody_started_is_a_failed_check() -> None:
    u = figures(_journal(None, None), 100.0, 30.0, [], [], [])
    assert u.unattended_rto_s is None and u.promotion_s is None
    r = DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))
    c = r.cycles[0]
    c.unattended = u
    grade(c, DEFAULT_AIMS, planned=False)
    failed = [k.check for k in c.checks if k.result == "FAIL"]
    assert "the failover was made by a controller, nobody typed it (nobody)" in failed
    assert any(name.startswith("unattended RTO") for name in failed), "not measured: something did not happen"


def test_a_pinned_state_directory_is_that_stacks_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dr.base.stackref import PINNED_STATE, StackRef

    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "states"))
    monkeypatch.setenv(PINNED_STATE, f"gameday={tmp_path / 'drill' / 'state'}")
    assert StackRef.resolve("gameday").state_dir == tmp_path / "drill" / "state"
    assert StackRef.resolve("other").state_dir == tmp_path / "states" / "other"


def test_the_endpoint_clients_unattended_rto_counts_from_the_loss_and_is_graded_beside_the_applications() -> None:
    u = figures(_journal("controller drill-B", 140.0), 100.0, 30.0, [150.5], [], [], endpoint_first_ack=141.75)
    assert u.endpoint_unattended_rto_s == 41.75
    assert (
        figures(_journal("controller drill-B", 140.0), 100.0, 30.0, [150.5], [], []).endpoint_unattended_rto_s is None
    )

    r = DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))
    c = r.cycles[0]
    c.unattended = u
    grade(c, DEFAULT_AIMS, planned=False)
    assert not [k for k in c.checks if "client endpoint" in k.check], "no endpoint: no endpoint check"
    c.endpoint_clients = EndpointClientsReport(
        bootstrap="127.0.0.1:16900", target=c.target, switched_at=140.0, producer="orders-app",
        acked_before_switch=10, acked_after_switch=5, acknowledged_lost=0, writes_rto_s=1.5,
        first_write_after_switch_at=141.75,
    )  # fmt: skip
    grade(c, DEFAULT_AIMS, planned=False)
    results = {k.check: k.result for k in c.checks}
    assert (
        results["unattended RTO ≤ 60s through the client endpoint (site lost → first write through it: 41.75s)"]
        == "PASS"
    )
    assert "(through the client endpoint: 41.8s)" in render_drill(r)
    c.unattended = u.model_copy(update={"endpoint_unattended_rto_s": None})
    grade(c, DEFAULT_AIMS, planned=False)
    failed = [k.check for k in c.checks if k.result == "FAIL"]
    assert any("through the client endpoint" in name for name in failed), "not measured: it did not happen"
