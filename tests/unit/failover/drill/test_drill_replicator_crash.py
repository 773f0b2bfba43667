"""``drctl drill --kill-replicator`` (issue 35): graded from the copies the killed link left twice, printed,
kept in ``drill.json``; refused before anything changes where this machine runs no replicator of the link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr.failover.drill.frame import DrillOptions
from dr.failover.drill.grade import DEFAULT_AIMS, grade
from dr.failover.drill.render import render_drill
from dr.failover.drill.replicator_crash import crash_refusal
from dr.failover.drill.result import DrillResult, ReplicatorCrash
from dr.failover.kinds.active_active.drill import region_drill_refusal
from dr.failover.kinds.active_passive.drill import external_refusal, kill_refusal
from dr.topology import Delivery, dump_stack_config, load_stack_file, load_topology
from tests.unit.estate.test_external_clusters import _config as external_config

ROOT = Path(__file__).resolve().parents[4]
DATA = Path(__file__).resolve().parents[2] / "data" / "drill"


def _crash(**figures: object) -> ReplicatorCrash:
    base: dict[str, object] = {
        "link": "A-to-B",
        "delivery": "exactly-once",
        "killed": "MirrorMaker 2 process",
        "acknowledged_before_kill": 1000,
        "running_again_s": 6.2,
        "duplicated": 0,
    }
    return ReplicatorCrash.model_validate(base | figures)


def _options(**kw: object) -> DrillOptions:
    return DrillOptions(out=Path("/nonexistent"), kill_replicator=True, **kw)  # type: ignore[arg-type]


def test_a_crash_that_left_nothing_twice_passes_and_is_printed_and_kept() -> None:
    r = DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))
    c = r.cycles[0]
    c.replicator_crash = _crash()
    grade(c, DEFAULT_AIMS, planned=True)
    name = "replicator SIGKILLed mid-copy (MirrorMaker 2 process, exactly-once): no record twice on B (0)"
    assert {k.check: k.result for k in c.checks}[name] == "PASS"
    assert (
        "replicator crash: link A-to-B (exactly-once): MirrorMaker 2 process SIGKILLed after 1000 records "
        "acknowledged on A, copying again 6.2s later; records on B twice: 0"
    ) in render_drill(r).splitlines()
    assert DrillResult.from_json(r.to_json()).cycles[0].replicator_crash == c.replicator_crash


def test_copies_left_twice_or_no_verification_fail_the_drill() -> None:
    r = DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))
    c = r.cycles[0]
    c.replicator_crash = _crash(delivery="at-least-once", duplicated=1500, killed="Connect worker 127.0.0.1:17100")
    grade(c, DEFAULT_AIMS, planned=True)
    assert [k.check for k in c.checks if k.result == "FAIL"] == [
        "replicator SIGKILLed mid-copy (Connect worker 127.0.0.1:17100, at-least-once): no record twice on B (1500)"
    ]
    c.replicator_crash = _crash(duplicated=None)
    grade(c, DEFAULT_AIMS, planned=True)
    assert c.grade.startswith("FAIL")
    c.replicator_crash = None  # without the flag: no such check
    grade(c, DEFAULT_AIMS, planned=True)
    assert not [k for k in c.checks if "replicator" in k.check]


def test_the_crash_is_refused_before_anything_where_no_replicator_of_the_link_runs_here() -> None:
    local = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert kill_refusal(_options(), local) is None  # a dedicated MirrorMaker 2
    assert kill_refusal(DrillOptions(out=Path("/x")), local) is None  # not asked
    connect = load_stack_file(ROOT / "Pulumi.local-connect.yaml")
    assert connect.link_connect(connect.links[0]).workers >= 2  # type: ignore[union-attr]
    assert kill_refusal(_options(stack="local-connect"), connect) is None
    config = dump_stack_config(load_stack_file(ROOT / "Pulumi.local-connect.yaml"))
    config["kafka-dr:connectClusters"] = [{**config["kafka-dr:connectClusters"][0], "workers": 1}]
    one = load_topology("one-worker", config)
    refusal = crash_refusal(one, one.links[0])
    assert refusal is not None and refusal.exit_code == 2 and "workers: 2" in str(refusal), refusal
    ext = load_topology("ext", external_config(exactly_once_source=True))
    refusal = external_refusal(_options(stack="ext"), ext)
    assert refusal is not None and "--kill-replicator" in str(refusal) and "Nothing was changed" in str(refusal)
    aa = load_stack_file(ROOT / "Pulumi.active-active.yaml")
    refusal = region_drill_refusal(_options(stack="active-active"), aa)
    assert refusal is not None and "--kill-replicator" in str(refusal)


@pytest.mark.parametrize("delivery", [Delivery.EXACTLY_ONCE, Delivery.AT_LEAST_ONCE])
def test_the_crash_records_the_links_delivery(delivery: Delivery) -> None:
    assert _crash(delivery=delivery.value).delivery is delivery
