"""The failover journal (atomic JSON, resume bookkeeping) and the per-stack lock."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dr.base.errors import ConfigError, LockHeld
from dr.failover.frame.journal import Journal, StackLock
from dr.failover.frame.summary import summarize
from dr.failover.kinds.active_passive.steps import STEPS
from tests.unit.failover_helpers import lock_held_elsewhere, new_journal

NAMES = [s.name for s in STEPS]


def test_steps_are_the_eight_of_the_design_in_order() -> None:
    """Clients are published right after the promotion, before C is built (DESIGN.md steps 3-6)."""
    assert NAMES == [
        "preflight",
        "fence-drain",
        "promote",
        "clients",
        "consumer-groups",
        "desired-state",
        "integrity",
        "decommission",
    ]


def test_journal_records_steps_and_reloads_identically(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    j.begin_run(mode="planned", options={"force": False})
    j.start_step("preflight", {"mode": "planned"})
    j.finish_step("preflight", "done", {"lag_total": 0}, 0.25)
    j.start_step("fence-drain", {"drain_timeout": 5})
    j.finish_step("fence-drain", "failed", {}, 5.0, error="lag not drained")
    again = Journal.load(tmp_path)
    assert again is not None and again.record == j.record
    assert again.is_done("preflight") and not again.is_done("fence-drain")
    assert again.step("preflight").inputs == {"mode": "planned"}
    assert again.step("fence-drain").error == "lag not drained"
    assert again.step("fence-drain").attempts == 1
    assert not [p for p in (tmp_path / "failover").iterdir() if p.name.endswith(".tmp")], "no temporary file left"
    assert oct(j.path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("status", "done"),
    [
        ("done", True),
        ("skipped", True),
        ("deferred", False),
        ("differences", False),
        ("failed", False),
        ("running", False),
    ],
)
def test_only_done_and_skipped_steps_are_skipped_on_resume(tmp_path: Path, status: str, done: bool) -> None:
    j = new_journal(tmp_path)
    j.start_step("integrity", {})
    j.finish_step("integrity", status, {}, 1.0)
    assert j.is_done("integrity") is done


def test_a_new_failover_archives_the_finished_one(tmp_path: Path) -> None:
    first = new_journal(tmp_path)
    first.set_status("completed")
    second = new_journal(tmp_path)
    archived = tmp_path / "failover" / f"journal-{first.failover_id}.json"
    assert archived.exists() and json.loads(archived.read_text())["status"] == "completed"
    assert second.failover_id != first.failover_id
    assert Journal.load(tmp_path).status == "running"  # type: ignore[union-attr]


def test_a_corrupt_journal_is_refused_with_a_next_step(tmp_path: Path) -> None:
    (tmp_path / "failover").mkdir()
    (tmp_path / "failover" / "journal.json").write_text("{not json")
    with pytest.raises(ConfigError) as err:
        Journal.load(tmp_path)
    assert "not valid JSON" in err.value.problem and err.value.fix


def test_summary_computes_rto_and_abc_from_the_journal(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    run = j.begin_run(mode="planned", options={})
    start = run.started_at
    j.measure(
        probe={
            "acked_at": start + 4.5,
            "timestamp_ms": int((start + 4.4) * 1000),
            "topic": "orders",
            "partition": 0,
            "offset": 7,
            "attempts": 12,
            "application": "orders-app",
        },
        rto_s=4.5,
        abc_done_at=start + 21.25,
        abc_run=1,
    )
    s = summarize(j)
    assert s.rto_s == 4.5
    assert s.a_b_c_s == pytest.approx(21.25, abs=0.01)
    assert s.rto_probe is not None and s.rto_probe.application == "orders-app"
    assert [st.name for st in s.steps] == NAMES
    assert s.pending == NAMES


def test_a_second_holder_is_refused_naming_the_pid_and_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    with lock_held_elsewhere(tmp_path) as holder, pytest.raises(LockHeld) as err:
        StackLock(tmp_path, "unit").acquire()
    assert f"pid {holder.pid}" in str(err.value)
    assert err.value.exit_code == 7
    lock = StackLock(tmp_path, "unit")
    lock.acquire()  # the kernel released the dead holder's lock: no stale lock after a crash
    assert lock.holder() == os.getpid()
    lock.release()


def test_a_run_that_ended_without_recording_it_is_marked_interrupted(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    j.begin_run(mode="planned", options={})
    j.start_step("preflight", {})
    j.finish_step("preflight", "done", {}, 0.5)
    j.start_step("fence-drain", {})  # kill -9 here: the run never records its end
    again = Journal.load(tmp_path)
    assert again is not None and again.status == "running" and again.runs[-1].outcome == "running"  # unfinished
    again.begin_run(mode="planned", options={})
    assert [r.outcome for r in again.runs] == ["interrupted", "running"]
    assert again.step("fence-drain").status == "interrupted" and not again.is_done("fence-drain")
    assert again.is_done("preflight")
    assert summarize(again).interrupted_runs == 1


def test_rto_and_abc_count_from_the_first_run_of_a_resumed_failover(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    first = j.begin_run(mode="planned", options={})
    j.end_run("failed")
    second = j.begin_run(mode="planned", options={})
    second.started_at = first.started_at + 30.0
    j.measure(
        rto_s=34.0,
        rto_this_run_s=4.0,
        abc_done_at=first.started_at + 50.0,
        abc_run=2,
        writable_from_ms=int((first.started_at + 33.0) * 1000),
    )
    s = summarize(j)
    assert s.rto_s == 34.0 and s.rto_this_run_s == 4.0
    assert s.a_b_c_s == pytest.approx(50.0, abs=0.01)
    assert s.a_b_c_this_run_s == pytest.approx(20.0, abs=0.01)
    assert s.cutoff_ms == int((first.started_at + 33.0) * 1000) - 1
    assert s.cutoff_utc is not None and s.cutoff_utc.endswith(" UTC")


def test_decommission_refusal_advice_fits_the_classes_found() -> None:
    from dr.failover.kinds.active_passive.steps import refusal_advice

    def advice(missing: int = 0, unexpected: int = 0, duplicated: int = 0, corrupted: int = 0) -> str:
        counts = {"missing": missing, "unexpected": unexpected, "duplicated": duplicated, "corrupted": corrupted}
        return refusal_advice(counts, stack="s", source="A", target="B", report_dir="/r")

    only_dupes = advice(duplicated=3)
    assert "drctl recover" in only_dupes and "does not remove them" in only_dupes
    assert "recover --report" not in only_dupes, "duplicates are not fixed by recover"
    assert "--force-decommission" in only_dupes
    missing = advice(missing=5)
    assert "drctl recover --report /r" in missing and "5 missing" in missing
    corrupted = advice(unexpected=1, corrupted=2)
    assert "2 corrupted" in corrupted and "1 unexpected" in corrupted and "recover --report" not in corrupted


def test_runs_refused_before_a_was_fenced_do_not_count_in_rto(tmp_path: Path) -> None:
    j = new_journal(tmp_path)
    first = j.begin_run(mode="planned", options={})
    j.start_step("preflight", {})
    j.finish_step("preflight", "failed", {}, 0.1)
    j.end_run("failed")
    second = j.begin_run(mode="planned", options={})
    second.started_at = first.started_at + 600.0
    j.start_step("fence-drain", {})
    j.finish_step("fence-drain", "done", {}, 1.0)
    j.measure(abc_done_at=second.started_at + 40.0, abc_run=2)
    assert j.outage_run() is second
    assert summarize(j).a_b_c_s == pytest.approx(40.0, abs=0.01)


# A journal as the code before the typed models wrote it (plain JSON: steps that never ran hold only
# status and attempts, runs and measurements only the keys that were set), including a key this
# drctl does not know.
_JOURNAL_V1 = """
{
  "version": 1,
  "failover_id": "20261101T101500-1a2b3c",
  "stack": "local",
  "mode": "unplanned",
  "status": "pending",
  "source": "A",
  "target": "B",
  "standby": "C",
  "created_at": 1793528100.125,
  "finished_at": null,
  "original_config": {"kafka-dr:failoverDone": false},
  "desired_config": {"kafka-dr:failoverDone": true},
  "measurements": {
    "rpo_estimate": {"records": 3, "basis": "snapshot", "upper_bound": 9, "snapshot_age_s": 1.5},
    "writable_from_ms": 1793528103000,
    "probe": {"acked_at": 1793528104.5, "timestamp_ms": 1793528104400, "topic": "orders", "partition": 0,
              "offset": 7, "attempts": 12, "application": "orders-app"},
    "rto_s": 4.375,
    "rto_this_run_s": 4.375,
    "abc_done_at": 1793528130.0,
    "abc_run": 1,
    "a_future_measurement": [1, 2]
  },
  "runs": [
    {"pid": 4242, "started_at": 1793528100.125, "finished_at": 1793528140.25, "mode": "unplanned",
     "options": {"mode": "unplanned", "force": false}, "outcome": "pending", "resumed": false, "seconds": 40.125}
  ],
  "steps": {
    "preflight": {"status": "done", "attempts": 1, "inputs": {"mode": "unplanned"}, "started_at": 1793528100.2,
                  "error": null, "run": 1, "outcome": {"lag_total": 0, "summary": "B healthy"},
                  "seconds": 0.5, "finished_at": 1793528100.7},
    "fence-drain": {"status": "skipped", "attempts": 1, "run": 1, "outcome": {"fenced": false, "summary": "A unreachable"},
                    "seconds": 3.0},
    "promote": {"status": "done", "attempts": 1, "run": 1, "outcome": {"summary": "link stopped"}, "seconds": 1.0},
    "clients": {"status": "done", "attempts": 1, "run": 1, "seconds": 0.1, "outcome": {"summary": "1 client",
                "files": [{"application": "orders-app", "properties": "/s/clients/orders-app.properties",
                           "json": "/s/clients/orders-app.json"}]}},
    "consumer-groups": {"status": "done", "attempts": 1, "run": 1, "seconds": 0.2, "outcome": {"summary": "g",
                        "groups": [{"group": "orders-g", "application": "orders-app", "status": "translated",
                                    "rereads": 4, "would_skip": {}, "consumers_will": "resume"}]}},
    "desired-state": {"status": "done", "attempts": 1, "run": 1, "seconds": 25.0, "outcome": {"summary": "converged"}},
    "integrity": {"status": "deferred", "attempts": 1, "run": 1, "seconds": 0.3,
                  "outcome": {"verdict": null, "reason": "A unreadable", "summary": "deferred"}},
    "decommission": {"status": "pending", "attempts": 0}
  }
}
"""


def test_a_journal_written_before_the_typed_models_loads_and_keeps_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "failover").mkdir()
    (tmp_path / "failover" / "journal.json").write_text(_JOURNAL_V1)
    j = Journal.load(tmp_path)
    assert j is not None
    assert (j.failover_id, j.mode, j.status) == ("20261101T101500-1a2b3c", "unplanned", "pending")
    assert j.is_done("fence-drain") and not j.is_done("integrity") and j.step("decommission").attempts == 0
    assert j.measurements.probe is not None and j.measurements.probe.offset == 7
    assert j.cutoff_ms() == 1793528103000 - 1
    assert j.outage_run() is j.runs[0] and j.verdict() is None
    s = summarize(j)
    assert s.rto_s == 4.375 and s.a_b_c_s == pytest.approx(29.875, abs=0.001)
    assert s.pending == ["integrity", "decommission"] and s.consumer_groups[0].rereads == 4
    assert s.clients[0]["application"] == "orders-app" and s.rto_probe is not None
    j.save()  # what the typed journal writes back loads again, the unknown key included
    again = Journal.load(tmp_path)
    assert again is not None and again.record == j.record
    written = json.loads(j.path.read_text())
    assert written["measurements"]["a_future_measurement"] == [1, 2]
    assert written["steps"]["preflight"]["outcome"] == {"lag_total": 0, "summary": "B healthy"}
    old = json.loads(_JOURNAL_V1)
    for key in old:  # every key of the old format is still written, with the same value
        assert written[key] == old[key] or key in ("measurements", "runs", "steps"), key
