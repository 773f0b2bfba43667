"""The failover's text stays readable at 200 applications: lists past a few names are shortened,
groups alike share one line, client files are named by their folder — and the text of a small stack
is what it always was (tests/unit/snapshots)."""

from __future__ import annotations

from typing import Any

from dr.failover.frame.render import render_summary
from dr.failover.frame.shorten import MANY, names_text
from dr.failover.frame.summary import FailoverSummary, GroupLine
from dr.failover.kinds.active_passive.steps import groups_text


def _group(i: int, status: str = "no-commits", rereads: int | None = None) -> dict[str, Any]:
    will = "resume from the translated offsets" if status == "translated" else "start by auto.offset.reset"
    return {"group": f"app{i:03d}", "status": status, "rereads": rereads, "consumers_will": will}


def test_names_text_keeps_a_few_names_and_shortens_many() -> None:
    assert names_text([]) == ""
    assert names_text(["a", "b"]) == "a, b"
    few = [f"app{i}" for i in range(MANY)]
    assert names_text(few) == ", ".join(few)
    many = [f"app{i:03d}" for i in range(200)]
    assert names_text(many) == "app000, app001, app002, …, app199 (200 in all)"


def test_groups_text_counts_statuses_and_names_the_groups_worth_a_look() -> None:
    small = [_group(0), _group(1, "translated", 12)]
    assert groups_text(small) == "app000 no-commits, app001 translated (12 re-reads)", "a small stack's text kept"
    many = [_group(i) for i in range(199)] + [_group(199, "translated", 12)]
    assert groups_text(many) == "200 groups: 199 no-commits, 1 translated; app199 translated (12 re-reads)"
    gaps = [_group(i, "no-offsets-on-target") for i in range(9)] + [_group(9, "translated")]
    text = groups_text(gaps)
    assert text.startswith("10 groups: 9 no-offsets-on-target, 1 translated; app000 no-offsets-on-target")
    assert text.endswith(", … (9 in all)") and "app008" not in text


def _summary(groups: list[dict[str, Any]], apps: int) -> FailoverSummary:
    clients = [
        {
            "application": f"app{i:03d}",
            "properties": f"/s/clients/app{i:03d}.properties",
            "json": f"/s/clients/app{i:03d}.json",
        }
        for i in range(apps)
    ]
    return FailoverSummary(
        stack="big", failover_id="f1", mode="planned", status="completed", already_finished=False,
        source="A", target="B", standby="C", runs=1, steps=[], rto_s=None, rto_this_run_s=None,
        write_outage_s=None, rto_probe=None, a_b_c_s=None, a_b_c_this_run_s=None, cutoff_ms=None,
        cutoff_utc=None, interrupted_runs=0, total_s=None, rpo_estimate=None,
        consumer_groups=[GroupLine.model_validate(g) for g in groups], clients=clients, verdict=None,
        pending=[], journal="/j.json", next=[],
    )  # fmt: skip


def test_the_summary_of_200_applications_is_a_few_lines_not_400() -> None:
    groups = [_group(i) for i in range(199)] + [_group(199, "translated", 12)]
    lines = render_summary(_summary(groups, 200)).splitlines()
    assert "groups app000, app001, app002, …, app198 (199 in all): no-commits — start by auto.offset.reset" in lines
    assert "group app199: translated — resume from the translated offsets" in lines
    assert (
        "client configs of app000, app001, app002, …, app199 (200 in all): /s/clients/<application>.properties / .json"
        in lines
    )
    assert not any(line.startswith("client config app") for line in lines)
    small = render_summary(_summary(groups[:2], 2)).splitlines()
    assert "group app000: no-commits — start by auto.offset.reset" in small
    assert "client config app001: /s/clients/app001.properties / /s/clients/app001.json" in small
