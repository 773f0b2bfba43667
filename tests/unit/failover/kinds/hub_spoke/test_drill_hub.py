"""The hub-and-spoke drill's refusals (before anything starts), its grade and its text report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dr.failover.drill.frame import DrillOptions
from dr.failover.drill.result import ApplicationRto
from dr.failover.kinds.hub_spoke.drill import EdgeProof, HubDrillResult, _grade, hub_drill_refusal
from tests import REPO_ROOT
from tests.unit.topology.test_hub_spoke import _load

EXAMPLE: dict[str, Any] = yaml.safe_load((REPO_ROOT / "Pulumi.hub-spoke.yaml").read_text())["config"]


def _options(**kw: Any) -> DrillOptions:
    return DrillOptions(stack="hub-spoke", out=Path("/nonexistent"), **kw)


def test_the_example_stack_may_be_drilled_but_not_in_cycles_nor_without_a_hub_writer() -> None:
    assert hub_drill_refusal(_options(), _load(base=EXAMPLE)) is None
    cycles = hub_drill_refusal(_options(cycles=2), _load(base=EXAMPLE))
    assert cycles is not None and "--cycles" in cycles.problem and "Nothing was changed" in (cycles.fix or "")

    def no_hub_writer(config: dict[str, Any]) -> None:
        for app in config["kafka-dr:principals"]["applications"]:
            if app.get("home", "H") == "H":
                app.pop("produces", None)

    refusal = hub_drill_refusal(_options(), _load(no_hub_writer, base=EXAMPLE))
    assert refusal is not None and "no application on hub H that writes" in refusal.problem


def _result(lost: int = 0, duplicates: int = 0, rto: float | None = 3.0) -> HubDrillResult:
    r = HubDrillResult(stack="s", mode="unplanned", out="/o", hub="H", new_hub="P", hub_topic="readings")
    r.edges = [
        EdgeProof(
            edge="E1",
            application="sensor-e1",
            topic="readings",
            acknowledged=100,
            acknowledged_during_failover=10,
            on_new_hub=100 + duplicates - lost,
            lost=lost,
            duplicates=duplicates,
        )
    ]
    r.application_rto = [
        ApplicationRto(
            application="aggregator",
            kind="writes",
            source="H",
            target="P",
            last_on_source=1.0,
            first_on_target=None if rto is None else 1.0 + rto,
            measured="m",
            rto_s=rto,
        )
    ]
    r.verification_exact = True
    return r


def test_a_lost_or_duplicated_edge_record_or_an_unmeasured_rto_fails_the_grade() -> None:
    # no failover summary at all: "failover completed" fails
    r = _result()
    _grade(r, _options())
    failed = [c.check for c in r.checks if c.result == "FAIL"]
    assert any("failover completed" in c for c in failed) and r.grade.startswith("FAIL")
    assert all("E1" not in c for c in failed), failed
    for bad, needle in (
        (_result(lost=2), "every acknowledged E1 record on P (2 lost)"),
        (_result(duplicates=3), "E1's records on P once (3 duplicates)"),
        (_result(rto=None), "application RTO ≤ 10s (aggregator writes: Nones)"),
    ):
        _grade(bad, _options())
        assert needle in [c.check for c in bad.checks if c.result == "FAIL"], bad.checks
        assert not bad.passed
    text = _result(lost=2).render()
    assert "edge E1 (sensor-e1 → readings): 100 acknowledged (10 during the failover)" in text
    assert "on P as E1.readings: 98, lost 2, duplicates 0" in text
