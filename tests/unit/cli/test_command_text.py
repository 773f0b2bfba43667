"""The text every ``drctl`` command prints, rendered from real result objects of each kind (issue 25 §3).

The objects are the product's own result classes, built the way the product builds them:

* drill — :class:`DrillResult` from the ``drill.json`` of real ``drctl drill`` runs (one planned cycle,
  ``--unplanned``, ``--cycles 2``), trimmed (``tests/unit/data/drill/``);
* failover — :func:`summarize` over journals the product's journal code wrote during those runs and a
  real refused run (``tests/unit/data/failover/``): completed, resumed, pending, refused before any
  change, decommission refused, already finished;
* status — :func:`status_report` itself on a stack whose clusters are not running, and the
  :class:`StatusReport` of a real healthy estate (``drctl status --json``) with each problem it reports;
* verify — :class:`VerificationResult` of real ``summary.json`` files (clean, differences);
* audit — :class:`AuditResult` of real ``drctl audit --json`` runs, and of the audit harness of
  ``test_audit_runs`` for missing records;
* recover — :class:`RecoveryResult` of the drill's real recovery.

Where the text is stable it is compared with a snapshot (``tests/unit/snapshots/``;
``KDR_UPDATE_SNAPSHOTS=1`` rewrites them); the lines a person acts on are asserted as well, and
that no secret appears. How the data files were captured: ``tests/unit/data/README.md``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.failover.drill.grade import DEFAULT_AIMS, grade
from dr.failover.drill.render import render_drill
from dr.failover.drill.result import DrillResult
from dr.failover.frame.journal import Journal
from dr.failover.frame.plan import FinishedPlan
from dr.failover.frame.render import render_plan, render_summary
from dr.failover.frame.summary import FailoverSummary, summarize
from dr.failover.status import LastFailover, StatusReport, render_status, status_problems, status_report
from tests import REPO_ROOT
from tests.unit.snapshots import assert_snapshot
from verification.recover import RecoveryResult
from verification.result import VerificationResult

DATA = Path(__file__).resolve().parents[1] / "data"

#: Words that would mean a credential reached the text (the texts name files by path, never their contents).
SECRET_MARKERS = ("password", "sasl.jaas.config", "sasl.password", "secret", "credentials.json")


def _no_secret(text: str) -> None:
    low = text.lower()
    found = [w for w in SECRET_MARKERS if w in low]
    assert not found, f"the text holds {found}:\n{text}"


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _drctl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``drctl ARGS`` as a user runs it: its own process, so exit codes come from :func:`dr.cli.main`."""
    return subprocess.run(
        [sys.executable, "-m", "dr.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=REPO_ROOT,
        timeout=120,
    )


# ------------------------------------------------------------------------------------------ failover
def _journal(tmp_path: Path, name: str) -> Journal:
    """The journal ``data/failover/<name>.journal.json`` as the stack's current journal under ``tmp_path``."""
    state = tmp_path / "state"
    (state / "failover").mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "failover" / f"{name}.journal.json", state / "failover" / "journal.json")
    journal = Journal.load(state)
    assert journal is not None
    return journal


def _summary(tmp_path: Path, name: str, **kw: bool) -> tuple[FailoverSummary, str]:
    s = summarize(_journal(tmp_path, name), **kw)
    text = render_summary(s)
    _no_secret(text)
    return s, text


def test_failover_refused_before_any_change(tmp_path: Path) -> None:
    """A planned failover whose preflight found B unreachable (run twice): nothing changed, the error
    and its next step stay in the step's column, and the next step is to rerun."""
    s, text = _summary(tmp_path, "refused-preflight")
    assert_snapshot("failover-refused-preflight", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == f"planned failover {s.failover_id} of stack local: A → B → C — FAILED (2 runs)"
    assert re.match(
        r"  1\. preflight +failed +0\.0s  cluster B \(the passive cluster to promote\) is unreachable", lines[1]
    )
    assert lines[2].strip().startswith("next step: start it") and lines[2].startswith(" " * 30)
    assert "nothing was changed" in lines[2]
    assert all(re.match(rf"  {n}\. \S+ +pending$", line) for n, line in zip(range(2, 9), lines[3:10], strict=True))
    assert (
        "next: fix what step preflight reported, then rerun `drctl failover --stack local`: it resumes there" in lines
    )
    assert lines[-1] == f"journal: {tmp_path}/state/failover/journal.json"


def test_failover_completed(tmp_path: Path) -> None:
    """The planned failover of a real drill: every step done with its time, RTO, A→B→C, the cut-off in
    UTC and epoch ms, RPO, groups, client configuration paths (never their content), the verdict, next steps."""
    s, text = _summary(tmp_path, "completed")
    assert_snapshot("failover-completed", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == f"planned failover {s.failover_id} of stack local: A → B → C — COMPLETED"
    for i, st in enumerate(s.steps, 1):
        assert re.match(rf"  {i}\. {re.escape(st.name)} +done +{st.seconds:.1f}s  \S", lines[i]), lines[i]
    assert f"RTO probe (the run that fenced A → first probe write acknowledged by B): {s.rto_s:.1f}s" in lines
    assert f"A→B→C (A → B → C, fencing run start → C converged): {s.a_b_c_s:.1f}s   total: {s.total_s:.1f}s" in lines
    assert s.cutoff_utc and s.cutoff_ms
    assert any(line.startswith(f"verification cut-off: {s.cutoff_utc} ({s.cutoff_ms} ms)") for line in lines)
    assert "RPO estimate: 0 records (link lag left after the drain)" in lines
    assert "group billing: translated — resume from the translated offsets" in lines
    for c in s.clients:
        assert f"client config {c['application']}: {c['properties']} / {c['json']}" in lines
    assert s.verdict is not None and f"; report {s.verdict.html}" in text
    assert "next: watch `drctl status --stack local`" in lines
    assert not any(line.startswith("pending:") for line in lines)


def test_failover_pending_without_a(tmp_path: Path) -> None:
    """The unplanned failover's first run while A is dead: B promoted, C built, integrity deferred,
    A kept — PENDING, exit 0 — with the RPO estimate and how to finish once A is back."""
    s, text = _summary(tmp_path, "pending")
    assert_snapshot("failover-pending", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == f"unplanned failover {s.failover_id} of stack local: A → B → C — PENDING"
    assert re.match(r"  2\. fence-drain +skipped .* A unreachable", lines[2]), lines[2]
    assert re.match(r"  7\. integrity +deferred .* A unreadable", lines[7]), lines[7]
    assert re.match(r"  8\. decommission +deferred .* A kept", lines[8]), lines[8]
    assert any(line.startswith("RPO estimate: ") and "snapshot" in line for line in lines), text
    assert "pending: integrity, decommission" in lines
    assert lines[-2] == (
        "next: when A is readable again: `drctl failover --stack local` verifies A vs B and decommissions A "
        "on a clean verdict"
    )


def test_failover_decommission_refused(tmp_path: Path) -> None:
    """A came back; the resumed run fenced it and verified: records missing, so A is not decommissioned
    (FAILED, exit 6): the report, the counts and `drctl recover --report <dir>` then rerun."""
    s, text = _summary(tmp_path, "decommission-refused")
    assert_snapshot("failover-decommission-refused", text, tmp=tmp_path)
    v = s.verdict
    assert v is not None and not v.clean and v.counts["missing"] > 0
    lines = text.splitlines()
    assert lines[0] == f"unplanned failover {s.failover_id} of stack local: A → B → C — FAILED ({s.runs} runs)"
    assert re.match(r"  7\. integrity +differences .* verdict: DIFFERENCES", lines[7]), lines[7]
    assert re.match(rf"  8\. decommission +failed .* {v.counts['missing']} missing", lines[8]), lines[8]
    assert f"verification: DIFFERENCES ({v.counts['missing']} missing, " in text and f"report {v.html}" in text
    assert f"`drctl recover --report {v.report_dir}`" in text
    assert (
        "next: fix what step decommission reported, then rerun `drctl failover --stack local`: it resumes there"
        in lines
    )


def test_failover_resumed_to_completion(tmp_path: Path) -> None:
    """The same unplanned failover after recovery: three runs, RTO still counted from the run that got
    past fence-drain, the second verdict clean, A stopped."""
    s, text = _summary(tmp_path, "resumed")
    assert_snapshot("failover-resumed", text, tmp=tmp_path)
    assert s.runs == 3 and s.status == "completed" and s.verdict is not None and s.verdict.clean
    lines = text.splitlines()
    assert lines[0] == f"unplanned failover {s.failover_id} of stack local: A → B → C — COMPLETED (3 runs)"
    assert f"RTO probe (the run that fenced A → first probe write acknowledged by B): {s.rto_s:.1f}s" in text
    assert f"[3 runs; from the start of the run that measured it: {s.rto_this_run_s:.1f}s]" in text
    assert re.match(r"  8\. decommission +done .* A stopped \(data kept in ", lines[8]), lines[8]


def test_failover_already_finished_through_drctl(tmp_path: Path) -> None:
    """`drctl failover` again on the finished failover: it says so, changes nothing and exits 0; its
    dry run says nothing would change."""
    journal = _journal(tmp_path, "completed")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.local.yaml").write_text(yaml.safe_dump({"config": journal.record.desired_config}))
    home = tmp_path / "pulumi" / ".pulumi" / "kdr" / "kafka-dr" / "local"  # with the stack's (file) backend
    home.mkdir(parents=True)
    (tmp_path / "state" / "failover").rename(home / "failover")
    env = {"KDR_STACK_DIR": str(stacks), "KDR_STATE_DIR": str(tmp_path)}
    res = _drctl("failover", "--stack", "local", env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"failover {journal.failover_id} of stack local (A → B → C) already finished; nothing changed."
    assert lines[1].endswith("— COMPLETED") and lines[-1] == f"journal: {home}/failover/journal.json"
    _no_secret(res.stdout + res.stderr)
    dry = _drctl("failover", "--stack", "local", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == lines[0] and dry.stdout.rstrip().endswith("(dry run: nothing would change)")
    finished = FinishedPlan(stack="local", summary=summarize(journal, already_finished=True))
    assert dry.stdout.rstrip("\n") == render_plan(finished).replace(str(tmp_path / "state"), str(home))


# ------------------------------------------------------------------------------------------ drill
def _drill(name: str) -> DrillResult:
    doc = _json(DATA / "drill" / f"{name}.json")
    result = DrillResult.from_json(doc)
    if len(result.cycles) > 1:
        assert DrillResult.model_validate(doc) == result, "a drill of several cycles has no top-level copies"
    return result


def _assert_drill_lines(r: DrillResult, text: str) -> None:
    """What a person reads in every cycle: the grade, each application's RTO, the probe, A→B→C, the
    steps, the cut-off, RPO and losses, re-reads, the report and the result file."""
    lines = text.splitlines()
    assert lines[0].startswith(f"DRILL ({r.mode}) on stack {r.stack}: {r.grade}")
    assert lines[-1] == f"drill result: {r.out}/drill.json ({r.seconds:.0f}s)"
    for c in r.cycles:
        s = c.failover
        for app in c.application_rto:
            assert f"application RTO {app.application} ({app.kind}): {app.rto_s:.1f}s — {app.measured}" in text
        assert f"RTO probe {s.rto_s:.1f}s (supplement) · {c.chain} {s.a_b_c_s:.1f}s" in text
        assert s.cutoff_ms is not None and f"verification cut-off: {s.cutoff_utc} ({s.cutoff_ms} ms)" in text
        assert (
            f"never reached {c.target} {c.rpo.actual_never_replicated}; acknowledged and lost before recovery "
            f"{c.lost_before_recovery}; after recovery {c.lost_after_recovery}"
        ) in text
        assert c.consumer is not None and f"{c.consumer.read_twice} read twice, {c.consumer.skipped} skipped" in text
        assert f"HTML report: {c.report_html}" in text
        assert all(f"[{k.result:>4}] {k.check}" in text for k in c.checks)
    _no_secret(text)


def test_drill_one_planned_cycle() -> None:
    r = _drill("planned")
    assert r.passed and len(r.cycles) == 1 and r.cycles[0].recovery is None
    text = render_drill(r)
    assert_snapshot("drill-planned", text)
    _assert_drill_lines(r, text)
    assert "recovery:" not in text and "cycle 1" not in text


def test_drill_unplanned() -> None:
    """A killed mid-traffic: the RPO estimate beside what really never reached B, the recovery, and the
    failover's last run (resumed after recovery)."""
    r = _drill("unplanned")
    c = r.cycles[0]
    assert r.mode == "unplanned" and c.recovery is not None and c.recovery.written > 0
    text = render_drill(r)
    assert_snapshot("drill-unplanned", text)
    _assert_drill_lines(r, text)
    rec = c.recovery
    assert f"recovery: {rec.missing} missing, {rec.written} written, {rec.already_present} already present" in text
    assert (
        f"unplanned failover {c.failover.failover_id} of stack local: A → B → C — COMPLETED ({c.failover.runs} runs)"
        in text
    )


def test_drill_two_cycles() -> None:
    """`--cycles 2`: A→B→C then B→C→A, each graded with its own figures, A rebuilt as the standby between."""
    r = _drill("cycles")
    assert [c.chain for c in r.cycles] == ["A→B→C", "B→C→A"]
    text = render_drill(r)
    assert_snapshot("drill-cycles", text)
    _assert_drill_lines(r, text)
    assert text.splitlines()[0] == f"DRILL (planned) on stack local: {r.grade} — A→B→C then B→C→A"
    rebuild = r.cycles[0].standby_rebuild
    assert rebuild is not None
    assert f"then A declared, wiped, as the next standby ({rebuild.seconds:.1f}s)" in text
    assert "cycle 2: B→C→A — " in text and "planned failover" in text
    assert "RTO probe (the run that fenced B → first probe write acknowledged by C)" in text


# ------------------------------------------------------------------------------------------ status
def _stack(tmp_path: Path, journal: str | None, config: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """``Pulumi.local.yaml`` (the repository's, or ``config``) in ``tmp_path/stacks`` and the stack's state
    directory ``tmp_path/state/local`` holding the journal ``data/failover/<journal>.journal.json``."""
    stacks, state = tmp_path / "stacks", tmp_path / "state" / "local"
    stacks.mkdir()
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    if config is not None:
        doc["config"] = config
    (stacks / "Pulumi.local.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    state.mkdir(parents=True)
    home = StackRef.of_file(stacks / "Pulumi.local.yaml", state).failover_home  # with the stack's backend
    (home / "failover").mkdir(parents=True)
    if journal is not None:
        shutil.copy(DATA / "failover" / f"{journal}.journal.json", home / "failover" / "journal.json")
    return stacks / "Pulumi.local.yaml", state


def test_status_of_a_stack_whose_clusters_do_not_run(tmp_path: Path) -> None:
    """`status_report` itself (no cluster answers: none runs) after the refused failover: every problem
    listed, and `drctl status` prints the same text then exits 6 naming each problem and what to run."""
    stack_path, state = _stack(tmp_path, "refused-preflight")
    report = status_report(StackRef.of_file(stack_path, state))
    text = render_status(report)
    _no_secret(text)
    assert_snapshot("status-not-running-after-refused-failover", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == "stack local"
    assert re.match(r"  cluster A +active +absent ", lines[1]) and re.match(r"  cluster C +standby +absent ", lines[3])
    assert re.match(r"  link +A-to-B +stopped +lag unknown: a side is unreachable", lines[4])
    assert (
        "      next: fix what step preflight reported, then rerun `drctl failover --stack local`: it resumes there"
        in lines
    )
    assert lines[-5:] == [
        "problems (4):",
        "  - cluster A (active) is absent",
        "  - cluster B (passive) is absent",
        "  - link A-to-B (A → B) is stopped; the topology says it runs",
        f"  - last failover {report.last_failover.failover_id} (A → B) failed at step preflight",  # type: ignore[union-attr]
    ]
    res = _drctl(
        "status", "--stack", "local", env={"KDR_STACK_DIR": str(stack_path.parent), "KDR_STATE_DIR": str(state.parent)}
    )
    assert res.returncode == 6, res.stderr
    assert res.stdout.rstrip("\n") == text
    assert res.stderr.startswith("error: stack local has 4 problems:\n  - cluster A (active) is absent")
    assert "start link A-to-B again: `drctl link start --stack local --link A-to-B`" in res.stderr
    assert "`drctl estate up --stack local --refresh`" in res.stderr
    _no_secret(res.stderr)


# ------------------------------------------------------------------------------------------ verify
def _verification(name: str, tmp_path: Path) -> VerificationResult:
    """The :class:`VerificationResult` of the ``summary.json`` ``data/verify/<name>.summary.json``, whose
    report directory is ``tmp_path/<name>``."""
    from verification.report import load_summary

    out = tmp_path / name
    out.mkdir()
    shutil.copy(DATA / "verify" / f"{name}.summary.json", out / "summary.json")
    return VerificationResult(summary=load_summary(out), out_dir=out)


def test_verify_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clean verification of B against C after a real drill: the verdict, the table, the report; no next step."""
    from verification.command import print_result

    result = _verification("clean", tmp_path)
    print_result(result, as_json=False)
    text = capsys.readouterr().out
    _no_secret(text)
    assert_snapshot("verify-clean", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == "verdict: CLEAN (exit code 0)"
    assert lines[1].split() == [
        "topic",
        "source",
        "target",
        "after",
        "cut-off",
        "missing",
        "unexpected",
        "duplicated",
        "corrupted",
    ]
    total = result.summary["totals"]
    assert lines[-2].split()[:3] == ["TOTAL", f"{total['source_read']:,}", f"{total['target_read']:,}"]
    assert lines[-1] == f"report: {tmp_path}/clean/report.html"
    assert "next:" not in text


def test_verify_differences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verification of A against B in an unplanned drill: missing records, the report, the recover
    command to run next, and exit code 1 (VerificationFailed) naming the report."""
    from dr.base.errors import VerificationFailed
    from verification.command import print_result

    result = _verification("differences", tmp_path)
    missing = result.summary["totals"]["missing"]
    assert missing > 0
    with pytest.raises(VerificationFailed) as err:
        print_result(result, as_json=False)
    text = capsys.readouterr().out
    _no_secret(text)
    assert_snapshot("verify-differences", text, tmp=tmp_path)
    lines = text.splitlines()
    assert lines[0] == "verdict: DIFFERENCES FOUND (exit code 1)"
    assert re.match(rf"TOTAL +[\d,]+ +[\d,]+ +[\d,]+/[\d,]+ +{missing:,} ", lines[-3]), lines[-3]
    assert lines[-2] == f"report: {tmp_path}/differences/report.html"
    assert lines[-1] == f"next: drctl recover --report {tmp_path}/differences --dry-run"
    assert err.value.exit_code == 1 and f"{missing} missing" in str(err.value)
    assert f"drctl recover --report {tmp_path}/differences" in str(err.value)


# ------------------------------------------------------------------------------------------ recover
def _recovery(dry_run: bool) -> RecoveryResult:
    """The real recovery of the unplanned drill (``drill.json``'s ``recovery``) as the product's result;
    the dry run is what the same report planned before writing (nothing written)."""
    rec = DrillResult.from_json(_json(DATA / "drill" / "unplanned.json")).cycles[0].recovery
    assert rec is not None
    result = RecoveryResult(
        report_dir=Path(rec.report_dir),
        dry_run=False,
        missing=rec.missing,
        already_present=rec.already_present,
        to_write=rec.to_write,
        written=rec.written,
        per_topic=rec.per_topic,
        ledger=Path(rec.ledger) if rec.ledger else None,
        run_id=rec.run_id,
        seconds=rec.seconds,
    )
    if dry_run:
        per_topic = {t: {**c, "written": 0} for t, c in result.per_topic.items()}
        result = replace(result, dry_run=True, written=0, per_topic=per_topic, ledger=None)
    return result


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "written"])
def test_recover(dry_run: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """`drctl recover` (and `--dry-run`): the counts a person checks, per topic, and the next step."""
    from dr.cli.verify import _print_recovery

    result = _recovery(dry_run)
    _print_recovery(result, dry_run=dry_run, as_json=False)
    text = capsys.readouterr().out
    _no_secret(text)
    assert_snapshot(f"recover-{'dry-run' if dry_run else 'written'}", text)
    lines = text.splitlines()
    assert lines[0] == (
        f"{'dry run — ' if dry_run else ''}missing in report: {result.missing:,}; already in target: "
        f"{result.already_present:,}; to write: {result.to_write:,}; written: {result.written:,}"
    )
    assert result.missing > 0 and (result.written > 0) is not dry_run
    for topic, c in result.per_topic.items():
        assert f"  {topic}: missing {c['missing']:,}, to write {c['to_write']:,}, written {c['written']:,}" in lines
    assert ("next: run the same drctl verify again; it should report 0 missing" in lines) is not dry_run


# ------------------------------------------------------------------------------------------ audit
def test_audit_first_run_of_a_real_link() -> None:
    """The first (full) audit of the link B-to-C after a real drill (`drctl audit --json`): what was read
    on each side, verified, in flight, missing, the link's lag and the oldest unreplicated record."""
    from dr.cli.verify import _audit_lines
    from verification.audit import AuditResult

    doc = _json(DATA / "audit" / "first-run.json")
    results = [AuditResult(**link) for link in doc["links"]]
    text = "\n".join(line for r in results for line in _audit_lines(r))
    _no_secret(text)
    assert_snapshot("audit-first-run", text)
    r = results[0]
    assert r.first_run and r.verified > 0
    lines = text.splitlines()
    assert lines[0].startswith(f"{r.link} ({r.source} → {r.target}), first (full) audit in {r.seconds:.2f} s: ")
    assert f"read {r.read_source:,} new on {r.source}, {r.read_target:,} on {r.target}" in lines[0]
    assert lines[1].startswith(f"  verified {r.verified:,} (total {r.verified_total:,}) · in flight {r.in_flight:,} · ")
    assert f"missing beyond the link's lag {r.missing:,}" in lines[1]


def test_audit_runs_in_flight_then_missing_with_retention_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Later runs of `audit_link` (the in-memory link of test_audit_runs): in flight while the link is
    behind, then missing with the sample of each record, and the warnings a person must act on."""
    from dr.cli.verify import _audit_lines, audit_link
    from tests.unit.verification.test_audit_runs import FakeLink

    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    link = FakeLink()
    link.install(monkeypatch)
    link.write(100)
    link.copy()
    audit_link(StackRef.resolve("s"), "A-to-B")
    link.write(30)
    link.copy(10)
    behind = audit_link(StackRef.resolve("s"), "A-to-B")
    link.write(20)
    link.copy(drop={112, 113})
    missing = audit_link(StackRef.resolve("s"), "A-to-B", sample=2)
    # Retention is a property of real clusters; the in-memory link has none: set what a real run counts.
    missing = missing.model_copy(update={"lost_to_retention": 1200, "target_lost_to_retention": 3})
    texts = ["\n".join(_audit_lines(r)) for r in (behind, missing)]
    text = "\n".join(texts).replace(str(tmp_path), "<tmp>")
    text = re.sub(r"in \d+\.\d\d s", "in 0.00 s", text)
    text = re.sub(r"oldest unreplicated [\d.]+ (s|min|h)", "oldest unreplicated <age>", text)
    _no_secret(text)
    assert_snapshot("audit-in-flight-then-missing", text)
    first, second = texts[0].splitlines(), texts[1].splitlines()
    assert first[0].startswith("A-to-B (A → B), run 2 in ") and first[0].endswith("read 30 new on A, 10 on B")
    assert "verified 10 (total 110) · in flight 20 · missing beyond the link's lag 0 · " in first[1]
    assert "missing beyond the link's lag 2 · " in second[1] and "oldest unreplicated" in second[1]
    assert second[2] == (
        "  warning: 1,200 source offsets were deleted by retention before this audit read them "
        "(audit more often than the retention)"
    )
    assert second[3].startswith("  warning: 3 target offsets were deleted before this audit read them")
    assert second[4:] == [
        "  missing: orders-0@112 (ts 1112 = 1970-01-01 00:00:01.112 UTC)",
        "  missing: orders-0@113 (ts 1113 = 1970-01-01 00:00:01.113 UTC)",
    ]


def _captured_status(name: str) -> StatusReport:
    """A :class:`StatusReport` as `drctl status --json` printed it on the estate a real drill kept."""
    return StatusReport.model_validate(_json(DATA / "status" / f"{name}.json"))


def test_status_healthy_after_a_failover() -> None:
    report = _captured_status("healthy")
    assert report.problems == status_problems(report) == []
    text = render_status(report)
    _no_secret(text)
    assert_snapshot("status-healthy", text)
    lines = text.splitlines()
    assert lines[0] == "stack local (after a failover)"
    assert re.match(r"  cluster A +decommissioned +stopped +127\.0\.0\.1:\d+,", lines[1])
    assert re.match(
        r"  cluster B +active +running +127\.0\.0\.1:\d+ +1/1 brokers, 0 offline, 0 under-replicated$", lines[2]
    )
    assert re.match(r"  link +B-to-C +running +lag 0 records$", lines[4])
    assert "      next: watch `drctl status --stack local`" in lines
    assert lines[-1] == "problems: none"


def test_status_with_a_stopped_link() -> None:
    """`drctl link stop` on the kept estate, then `drctl status --json`: the problem and its exit code 4."""
    from dr.base.errors import ClusterError
    from dr.failover.status import raise_for_problems

    report = _captured_status("link-stopped")
    text = render_status(report)
    assert_snapshot("status-link-stopped", text)
    assert re.search(r"^  link +B-to-C +stopped +lag 0 records$", text, re.M)
    assert text.endswith("problems (1):\n  - link B-to-C (B → C) is stopped; the topology says it runs")
    with pytest.raises(ClusterError) as err:
        raise_for_problems(report)
    assert err.value.exit_code == 4 and "`drctl link start --stack local --link B-to-C`" in str(err.value)


def _problem(report: StatusReport, name: str) -> str:
    report.problems = status_problems(report)
    text = render_status(report)
    _no_secret(text)
    assert_snapshot(f"status-{name}", text)
    return text


def test_status_with_each_problem_of_a_cluster() -> None:
    """The healthy report with what `status_report` sets when B is down, degraded, unreachable, short of
    brokers or has offline partitions: each named in the cluster's line and in the problems."""
    from dr.failover.status import HealthStatus

    healthy = _captured_status("healthy")

    def variant(**cluster: Any) -> StatusReport:
        report = healthy.model_copy(deep=True)
        b = report.clusters[1]
        for key, value in cluster.items():
            setattr(b, key, value)
        return report

    stopped = variant(process="stopped", health=None, end_offsets=None)
    text = _problem(stopped, "cluster-stopped")
    assert re.search(r"^  cluster B +active +stopped +127\.0\.0\.1:\d+$", text, re.M)
    assert "  - cluster B (active) is stopped" in text
    b = healthy.clusters[1].health
    assert b is not None
    down = HealthStatus.model_validate(
        {
            **b.model_dump(),
            "reachable": False,
            "brokers": [],
            "healthy": False,
            "error": "nothing listens on 127.0.0.1:20100",
        }
    )
    text = _problem(variant(health=down, end_offsets=None), "cluster-unreachable")
    assert re.search(r"^  cluster B .* UNREACHABLE \(nothing listens on 127\.0\.0\.1:20100\)$", text, re.M)
    assert "  - cluster B (active) is unreachable: nothing listens on 127.0.0.1:20100" in text
    short = HealthStatus.model_validate(
        {**b.model_dump(), "brokers": [1], "expected_brokers": 3, "brokers_down": 2, "healthy": False}
    )
    text = _problem(variant(health=short, brokers_declared=3), "cluster-brokers-down")
    assert "1/3 brokers, 0 offline" in text and "  - cluster B (active) has 2 of 3 brokers down" in text
    degraded = variant(process="degraded", running_nodes=[1], brokers_declared=3, health=short)
    text = _problem(degraded, "cluster-degraded")
    assert "  - cluster B (active) is degraded: nodes [1] of 3 brokers run" in text
    offline = HealthStatus.model_validate({**b.model_dump(), "offline": ["orders:0", "orders:3"], "healthy": False})
    text = _problem(variant(health=offline), "cluster-offline-partitions")
    assert "1/1 brokers, 2 offline, 0 under-replicated" in text
    assert "  - cluster B (active) has 2 offline partitions" in text


def test_status_with_a_failover_interrupted_mid_step(tmp_path: Path) -> None:
    """The journal of the drill's failover as it was while desired-state ran, and no process holds the
    lock: `status_report` reports the failover interrupted and `drctl status` exits 6 saying how to resume."""
    stack_path, state = _stack(tmp_path, "interrupted")
    journal = Journal.load(StackRef.of_file(stack_path, state).failover_home)
    assert journal is not None
    stack_path, state = tmp_path / "stacks" / "Pulumi.local.yaml", tmp_path / "state" / "local"
    report = status_report(StackRef.of_file(stack_path, state))
    assert report.last_failover is not None and not report.last_failover.lock_held
    text = render_status(report)
    _no_secret(text)
    assert_snapshot("status-failover-interrupted", text, tmp=tmp_path)
    rto = summarize(journal).rto_s
    assert f"  last failover {journal.failover_id} (planned): running; RTO {rto:.1f}s; A→B→C —" in text
    assert (
        "      next: if the run was interrupted (`drctl status --stack local` says so and exits 6), rerun "
        "`drctl failover --stack local`: it resumes at step desired-state"
    ) in text
    assert "desired-state=running integrity=pending" in text
    problem = (
        f"  - last failover {journal.failover_id} (A → B) was interrupted: its journal says running, "
        "but no process holds the stack's lock"
    )
    assert problem in text.splitlines()
    res = _drctl(
        "status", "--stack", "local", env={"KDR_STACK_DIR": str(stack_path.parent), "KDR_STATE_DIR": str(state.parent)}
    )
    assert res.returncode == 6 and problem.strip()[2:] in res.stderr
    assert "rerun `drctl failover --stack local --yes`: it resumes where the interrupted run stopped" in res.stderr


def test_last_failover_of_each_kind_in_status(tmp_path: Path) -> None:
    """The `last failover` lines of `drctl status` for every journal kept: its status, RTO, steps, next steps."""
    lines = []
    for name in sorted(p.name.removesuffix(".journal.json") for p in (DATA / "failover").glob("*.journal.json")):
        journal = _journal(tmp_path / name, name)
        report = _captured_status("healthy").model_copy(update={"last_failover": LastFailover.of(journal, False)})
        text = render_status(report)
        block = text[text.index("  last failover") : text.index("problems")].rstrip("\n")
        s = summarize(journal)
        assert block.startswith(f"  last failover {s.failover_id} ({s.mode}): {s.status}; RTO ")
        assert all(f"      next: {n}" in block for n in s.next)
        lines += [f"# {name}", block]
    text = "\n".join(lines)
    _no_secret(text)
    assert_snapshot("status-last-failover-kinds", text, tmp=tmp_path)


def test_regrading_a_real_cycle_names_each_measured_figure_in_its_check() -> None:
    cycle = _drill("planned").cycles[0]
    grade(cycle, DEFAULT_AIMS, planned=True)
    chain = next(k for k in cycle.checks if "→" in k.check and "≤" in k.check)
    assert chain.check == f"A→B→C ≤ 120s ({cycle.failover.a_b_c_s:.1f}s)", chain.check
    slow = cycle.model_copy(deep=True)
    grade(slow, {**DEFAULT_AIMS, "a_b_c_s": (cycle.failover.a_b_c_s or 0) / 2}, planned=True)
    assert slow.grade == "PASS (1 timing aim missed)", slow.grade
    grade(slow, {**DEFAULT_AIMS, "a_b_c_s": (cycle.failover.a_b_c_s or 0) / 2}, planned=True, strict=True)
    assert slow.grade.startswith("FAIL (1 of"), slow.grade
