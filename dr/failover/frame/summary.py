"""The failover's result, computed from its journal: what ``drctl failover`` prints and ``--json`` emits.

:func:`summarize` is pure over the journal, so a refused, interrupted or finished failover can be
summarised again at any time (``drctl failover`` after a refusal, ``drctl status``, the drill).
"""

from __future__ import annotations

from pydantic import BaseModel

from dr.failover.act.integrity import Verdict
from dr.failover.frame.journal import Journal
from dr.failover.frame.outcomes import FilesSeen, GroupLine, GroupsSeen
from dr.failover.record.metrics import RpoEstimate, seconds_between, utc_text
from dr.topology.architectures import ARCHITECTURES
from dr.topology.stackconfig import architecture_of

__all__ = ["FailoverSummary", "GroupLine", "ProbeLine", "StepLine", "rerun_command", "summarize"]


class StepLine(BaseModel):
    """One step in the summary."""

    name: str
    status: str
    seconds: float | None
    attempts: int
    summary: str
    """The step's one-line result, or its error when it failed."""


class ProbeLine(BaseModel):
    """Where the RTO probe's first acknowledged write landed, and as whom."""

    application: str | None
    topic: str
    partition: int
    offset: int
    attempts: int


class FailoverSummary(BaseModel):
    """Per-step times, RTO, A→B→C time, RPO, groups, clients, verdict and next steps of one failover.

    The one result of every failover path — active-passive or hub, ``--region``, ``--region --rejoin``,
    ``--edge`` — printed by ``drctl failover`` (``--json``: this model) whether the run finished or a step
    failed (then ``status`` is ``failed`` and ``error`` the step's error)."""

    stack: str
    failover_id: str
    mode: str
    status: str
    already_finished: bool
    source: str
    target: str
    standby: str | None
    runs: int
    steps: list[StepLine]
    rto_s: float | None
    rto_this_run_s: float | None
    write_outage_s: float | None
    rto_probe: ProbeLine | None
    a_b_c_s: float | None
    """From the start of the run that fenced A to the moment C replicates from B."""
    a_b_c_this_run_s: float | None
    cutoff_ms: int | None
    cutoff_utc: str | None
    interrupted_runs: int
    total_s: float | None
    rpo_estimate: RpoEstimate | None
    consumer_groups: list[GroupLine]
    clients: list[dict[str, str]]
    """The client configurations published (paths, never passwords)."""
    verdict: Verdict | None
    """The integrity step's verdict."""
    pending: list[str]
    error: str | None = None
    """The failed step's error (problem and next step), when a step failed."""
    failed_step: str | None = None
    """The step that failed, when one did."""
    journal: str
    next: list[str]
    """What the operator does next, as commands."""


def summarize(journal: Journal, *, already_finished: bool = False) -> FailoverSummary:
    """The failover's results from its journal."""
    record, m = journal.record, journal.measurements
    runs = record.runs
    steps = [
        StepLine(
            name=name,
            status=entry.status,
            seconds=entry.seconds,
            attempts=entry.attempts,
            summary=(entry.outcome or {}).get("summary") or entry.error or "",
        )
        for name, entry in record.steps.items()
    ]
    abc_run = runs[m.abc_run - 1] if m.abc_run else None
    cutoff = journal.cutoff_ms()
    outage = journal.outage_run()
    verdict = journal.verdict()
    pending = [s.name for s in steps if s.status not in ("done", "skipped")]
    failed = next((name for name, entry in record.steps.items() if entry.status == "failed"), None)
    return FailoverSummary(
        stack=record.stack,
        failover_id=record.failover_id,
        mode=record.mode,
        status=record.status,
        already_finished=already_finished,
        source=record.source,
        target=record.target,
        standby=record.standby,
        runs=len(runs),
        steps=steps,
        rto_s=m.rto_s,
        rto_this_run_s=m.rto_this_run_s,
        write_outage_s=m.write_outage_s,
        rto_probe=ProbeLine.model_validate(m.probe, from_attributes=True) if m.probe else None,
        a_b_c_s=seconds_between(outage.started_at, m.abc_done_at) if outage else None,
        a_b_c_this_run_s=seconds_between(abc_run.started_at, m.abc_done_at) if abc_run else None,
        cutoff_ms=cutoff,
        cutoff_utc=utc_text(cutoff),
        interrupted_runs=sum(1 for r in runs if r.outcome == "interrupted"),
        total_s=seconds_between(runs[0].started_at, runs[-1].finished_at) if runs else None,
        rpo_estimate=m.rpo_estimate,
        consumer_groups=journal.outcome_as("consumer-groups", GroupsSeen).groups or [],
        clients=journal.outcome_as("clients", FilesSeen).files or [],
        verdict=verdict,
        pending=pending,
        error=record.steps[failed].error if failed else None,
        failed_step=failed,
        journal=str(journal.path),
        next=_next_steps(journal, pending, verdict),
    )


def rerun_command(journal: Journal) -> str:
    """The ``drctl failover`` command that resumes ``journal``'s run: with ``--region`` (``--rejoin``) or
    ``--edge`` when it is the loss of a site (its steps include ``move``) or a rejoin."""
    record = journal.record
    command = f"drctl failover --stack {record.stack}"
    if record.mode == "rejoin":
        return f"{command} --region {record.source} --rejoin"
    if "move" not in record.steps:  # an active-passive or hub failover
        return command
    site = ARCHITECTURES[architecture_of(record.original_config)].lost_site  # --region, --edge
    return command if site is None else f"{command} --{site.flag} {record.source}"


def _next_steps(journal: Journal, pending: list[str], verdict: Verdict | None) -> list[str]:
    record = journal.record
    stack, source, rerun = record.stack, record.source, rerun_command(journal)
    if not pending:
        return [
            f"point applications at {record.target}: configurations in the clients/ directory of the stack's state",
            f"watch `drctl status --stack {stack}`",
        ]
    if record.status == "failed":
        failed = next((n for n, e in record.steps.items() if e.status == "failed"), pending[0])
        return [f"fix what step {failed} reported, then rerun `{rerun}`: it resumes there"]
    if record.status in ("running", "interrupted"):
        # The journal cannot tell a live run from a killed one; `drctl status` can (the stack's lock).
        at = next((n for n in pending if record.steps[n].status in ("running", "interrupted")), pending[0])
        return [
            f"if the run was interrupted (`drctl status --stack {stack}` says so and exits 6), rerun "
            f"`{rerun}`: it resumes at step {at}"
        ]
    if verdict and not verdict.clean:
        return [f"drctl recover --report {verdict.report_dir}", rerun]
    return [
        f"when {source} is readable again: `{rerun}` verifies {source} vs "
        f"{record.target} and decommissions {source} on a clean verdict"
    ]
