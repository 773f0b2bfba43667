"""The hub's failover wraps the active-passive one (issue 33): the same steps, fence-drain and promote
wrapped for the edges' links; the promote's outcome gains where each edge resumes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dr.failover.frame.outcomes import PromoteOutcome
from dr.failover.frame.step import StepResult
from dr.failover.kinds.active_passive import steps as active_passive
from dr.failover.kinds.hub_spoke import steps as hub


def test_the_hub_steps_are_the_active_passive_ones_with_two_wrapped() -> None:
    assert [s.name for s in hub.HUB_STEPS] == [s.name for s in active_passive.STEPS]
    wrapped = {s.name for s, a in zip(hub.HUB_STEPS, active_passive.STEPS, strict=True) if s.run is not a.run}
    assert wrapped == {"fence-drain", "promote"}
    assert all(s.description == a.description for s, a in zip(hub.HUB_STEPS, active_passive.STEPS, strict=True))


def test_the_hub_promote_journals_where_each_edge_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    base = PromoteOutcome(
        link_stopped="H-to-P",
        link_was_running=True,
        link_stop_s=0.1,
        link_stop="stopped",
        acls_granted=2,
        writable_from_ms=1,
    )
    monkeypatch.setattr(active_passive, "promote", lambda _ctx: StepResult("done", base, "link H-to-P stopped"))
    links = [SimpleNamespace(source="E1", name="E1-to-H"), SimpleNamespace(source="E2", name="E2-to-H")]
    monkeypatch.setattr(hub, "edge_links_into", lambda _topology, _hub: links)
    monkeypatch.setattr(hub, "stop_edge_links", lambda _ctx, found: [lk.name for lk in found])
    monkeypatch.setattr(hub, "seed_edges", lambda _ctx, _found: [{"edge": "E1", "resume_at": 7}])
    ctx: Any = SimpleNamespace(original=None, source="H", target="P")

    done = hub.hub_promote(ctx)

    journaled = done.journaled()
    assert journaled["edge_links_stopped"] == ["E1-to-H", "E2-to-H"]
    assert journaled["edge_resume"] == [{"edge": "E1", "resume_at": 7}]
    assert journaled["link_stopped"] == "H-to-P" and done.summary.endswith("; edges E1, E2 resume into P")


def test_without_edge_links_the_hub_promote_is_the_active_passive_one(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = StepResult(
        "done",
        PromoteOutcome(
            link_stopped="A-to-B",
            link_was_running=True,
            link_stop_s=0.1,
            link_stop="stopped",
            acls_granted=1,
            writable_from_ms=1,
        ),
        "promoted",
    )
    monkeypatch.setattr(active_passive, "promote", lambda _ctx: plain)
    monkeypatch.setattr(hub, "edge_links_into", lambda _topology, _hub: [])
    ctx: Any = SimpleNamespace(original=None, source="A", target="B")
    assert hub.hub_promote(ctx) is plain
