"""One shape for the verification's routes (the choice made in :func:`verification.routes.run`), and the
failover's typed step outcomes journaled as the JSON the steps wrote as dicts before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dr.failover.act.integrity import Verdict
from dr.failover.frame.outcomes import (
    DecommissionOutcome,
    Drained,
    IntegrityOutcome,
    IntegritySkipped,
    LinkState,
    PreflightOutcome,
)
from dr.kafka.client import Endpoint
from verification import routes
from verification.link_ref import LinkRef
from verification.result import VerificationResult
from verification.route import AuditStart, RecoverRequest, RouteResult, VerifyRequest
from verification.sides import KafkaSide

ZEROS = {c: 0 for c in ("missing", "unexpected", "duplicated", "corrupted")}


def _request(tmp_path: Path, audit: AuditStart | None = None) -> VerifyRequest:
    a, b = Endpoint("a:9092", "admin", "pw-a"), Endpoint("b:9092", "admin", "pw-b")
    return VerifyRequest(
        source=KafkaSide(endpoint=a, name="A"),
        target=KafkaSide(endpoint=b, name="B"),
        out_dir=tmp_path,
        topics=["orders"],
        cutoff_ms=7,
        audit=audit,
    )


def test_a_verification_without_an_audit_runs_the_full_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import verification.job as job

    seen: dict[str, Any] = {}

    def full(**kw: Any) -> VerificationResult:
        seen.update(kw)
        return VerificationResult({"verdict": "clean", "topics": {}, "totals": ZEROS}, Path(kw["out_dir"]))

    monkeypatch.setattr(job, "run_verification", full)
    result = routes.run(_request(tmp_path))
    assert isinstance(result, RouteResult) and result.verdict == "clean" and result.exit_code == 0
    assert result.started_from is None and result.report == tmp_path
    assert (seen["topics"], seen["cutoff_ms"]) == (["orders"], 7)


def test_an_audit_that_cannot_be_used_runs_the_full_job_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import verification.job as job

    monkeypatch.setattr(
        job,
        "run_verification",
        lambda **kw: VerificationResult({"verdict": "clean", "topics": {}, "totals": ZEROS}, Path(kw["out_dir"])),
    )
    start = AuditStart(state_dir=tmp_path, ref=LinkRef(stack="s", link="no/such link", source="A", target="B"))
    result = routes.run(_request(tmp_path, start))
    assert result.started_from is not None and result.started_from["audit"] is False
    assert "cannot name a state file" in result.started_from["reason"]


def test_a_recovery_request_refuses_a_report_that_is_not_there(tmp_path: Path) -> None:
    from dr.base.errors import ConfigError

    with pytest.raises(ConfigError):
        routes.run(RecoverRequest(report_dir=tmp_path / "none", target=Endpoint("b:9092", "admin", "pw")))


def test_step_outcomes_journal_the_keys_the_steps_wrote_in_their_order() -> None:
    link = LinkState(name="A-to-B")
    link.process = "running"
    pre = PreflightOutcome(source={"name": "A"}, target={"name": "B"}, link=link, target_end_offsets={"t:0": 3})
    pre.lag_total = 0
    assert json.dumps(pre.journaled()) == json.dumps(
        {
            "source": {"name": "A"},
            "target": {"name": "B"},
            "link": {"name": "A-to-B", "process": "running"},
            "target_end_offsets": {"t:0": 3},
            "lag_total": 0,
        }
    )
    skipped = IntegritySkipped(verdict=None, reason="--skip-verify", fenced_on_return=0)
    assert list(skipped.journaled()) == ["verdict", "reason", "fenced_on_return"]
    gone = DecommissionOutcome(forced=True)
    gone.stopped, gone.note = False, "A is external"
    gone.role = "decommissioned"
    assert gone.journaled() == {"forced": True, "stopped": False, "note": "A is external", "role": "decommissioned"}
    pending = {"g": {"rereads": 2, "missing_on_target": [], "undiscovered": False}}
    drained = Drained(
        fenced=True,
        removed_acls=1,
        drained=True,
        drain_s=0.5,
        residual_lag={},
        source_end_offsets={"t:0": 3},
        groups_synced=False,
        group_wait_s=1.5,
        groups_pending=pending,
    )
    assert drained.journaled()["groups_pending"] == pending
    verdict = Verdict(clean=True, counts=ZEROS)
    checked = IntegrityOutcome(verdict=verdict, fenced_on_return=0, cutoff_ms=None, cutoff_utc=None, started_from=None)
    assert checked.journaled()["verdict"] == verdict.to_dict()  # a nested model whole, defaults included
