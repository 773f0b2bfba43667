"""Where a drill's time went (:mod:`dr.failover.drill.phases`): phases timed in the order they ran, kept in
``drill.json`` and printed above the result line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr.failover.drill.phases import Phase, PhaseClock, phases_text
from dr.failover.drill.render import render_drill
from dr.failover.drill.result import DrillResult

DATA = Path(__file__).resolve().parents[2] / "data" / "drill"


def test_the_clock_keeps_phases_in_order_and_one_cut_short_by_an_error() -> None:
    clock = PhaseClock()
    with clock.phase("provision"):
        pass
    with pytest.raises(RuntimeError), clock.phase("cycle 1: failover"):
        raise RuntimeError("the failover failed")
    assert [p.name for p in clock.phases] == ["provision", "cycle 1: failover"]
    assert all(p.seconds >= 0 for p in clock.phases)


def test_the_text_names_each_phase_with_its_seconds_and_nothing_when_none_was_timed() -> None:
    assert phases_text([]) is None
    text = phases_text([Phase(name="provision", seconds=38.14), Phase(name="teardown", seconds=9.0)])
    assert text == "time per phase: provision 38.1s · teardown 9.0s"


def test_drill_json_keeps_the_phases_and_the_summary_prints_them_above_the_result_line() -> None:
    doc = json.loads((DATA / "planned.json").read_text())
    r = DrillResult.from_json(doc)
    assert r.phases == [], "a drill.json written before phases were timed still loads"
    r.phases = [Phase(name="provision", seconds=40.0), Phase(name="cycle 1: failover", seconds=75.5)]
    again = DrillResult.from_json(json.loads(json.dumps(r.to_json())))
    assert again.phases == r.phases
    lines = render_drill(again).splitlines()
    assert lines[-2] == "time per phase: provision 40.0s · cycle 1: failover 75.5s"
    assert lines[-1].startswith("drill result: ")
