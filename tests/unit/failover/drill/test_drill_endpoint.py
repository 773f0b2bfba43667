"""The drill's unmodified clients on the client endpoint (issue 31): graded and printed beside the
published-configuration RTO, kept in ``drill.json``; a drill without an endpoint is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from dr.failover.drill.grade import DEFAULT_AIMS, grade
from dr.failover.drill.render import render_drill
from dr.failover.drill.result import DrillResult, EndpointClientsReport

DATA = Path(__file__).resolve().parents[2] / "data" / "drill"


def _planned() -> DrillResult:
    return DrillResult.from_json(json.loads((DATA / "planned.json").read_text()))


def _lived(**figures: object) -> EndpointClientsReport:
    base: dict[str, object] = {
        "bootstrap": "127.0.0.1:16900",
        "target": "B",
        "switched_at": 1795517483.7,
        "producer": "orders-app",
        "acked_before_switch": 900,
        "acked_after_switch": 1400,
        "acknowledged_lost": 0,
        "writes_rto_s": 3.2,
        "group": "ledger",
        "read": 2300,
        "read_twice": 41,
        "skipped": 0,
        "reads_rto_s": 4.1,
    }
    return EndpointClientsReport.model_validate(base | figures)


def test_the_unmodified_client_rto_is_graded_and_printed_beside_the_published_one() -> None:
    r = _planned()
    c = r.cycles[0]
    c.endpoint_clients = _lived()
    grade(c, DEFAULT_AIMS, planned=True)
    checks = {k.check: k.result for k in c.checks}
    assert checks["unmodified client RTO ≤ 10s (orders-app writes on the endpoint: 3.2s)"] == "PASS"
    assert checks["unmodified client RTO ≤ 10s (ledger reads on the endpoint: 4.1s)"] == "PASS"
    assert checks["endpoint clients: no acknowledged record lost (0)"] == "PASS"
    assert checks["endpoint consumer skipped no record (0)"] == "PASS"
    text = render_drill(r)
    lines = text.splitlines()
    published = next(i for i, line in enumerate(lines) if line.startswith("application RTO orders-app (writes)"))
    assert lines[published + 2].startswith(
        "unmodified client RTO orders-app (writes): 3.2s — last write acknowledged before the endpoint's switch "
        "→ first after it, through the endpoint 127.0.0.1:16900, started once and never restarted"
    )
    assert lines[published + 3] == (
        "unmodified client RTO ledger (reads): 4.1s — last record read before the switch → first after it; "
        "2300 read, 41 read twice, 0 skipped"
    )
    again = DrillResult.from_json(r.to_json())  # drill.json keeps it
    assert again.cycles[0].endpoint_clients == c.endpoint_clients


def test_a_loss_a_skip_or_a_slow_move_fails_the_drill() -> None:
    r = _planned()
    c = r.cycles[0]
    c.endpoint_clients = _lived(acknowledged_lost=2, lost_sample=["endpoint-00000007"], skipped=1, writes_rto_s=14.0)
    grade(c, DEFAULT_AIMS, planned=True)
    failed = [k.check for k in c.checks if k.result == "FAIL"]
    assert failed == ["endpoint clients: no acknowledged record lost (2)", "endpoint consumer skipped no record (1)"]
    assert [k.check for k in c.checks if k.result == "MISSED"] == [
        "unmodified client RTO ≤ 10s (orders-app writes on the endpoint: 14.0s)"
    ]
    assert c.grade == f"FAIL (2 of {len(c.checks)} checks)"
    grade(c, DEFAULT_AIMS, planned=True, strict=True)  # --strict-aims: the slow move fails too
    assert c.grade == f"FAIL (3 of {len(c.checks)} checks)"
    assert "2 acknowledged and lost (e.g. endpoint-00000007)" in render_drill(r)
    c.endpoint_clients = _lived(writes_rto_s=None, group=None)  # never acknowledged after the switch; no consumer
    grade(c, DEFAULT_AIMS, planned=True)
    assert [k.check for k in c.checks if k.result == "FAIL"] == [
        "unmodified client RTO ≤ 10s (orders-app writes on the endpoint: not measured)"
    ]


def test_a_drill_without_an_endpoint_is_unchanged() -> None:
    r = _planned()
    c = r.cycles[0]
    grade(c, DEFAULT_AIMS, planned=True)
    assert not [k for k in c.checks if "endpoint" in k.check] and "unmodified" not in render_drill(r)
    assert r.to_json()["cycles"][0]["endpoint_clients"] is None
