"""The journal, and what the team database records beside it, as JSON documents. The journal: what :meth:`JournalRecord.to_json
<dr.failover.frame.journal.JournalRecord.to_json>` writes, what the team database keeps in a row
(:mod:`dr.failover.record.team_store`) and what the lifecycle checks read back from archived journals.

Every key is optional here: an archived journal of an older drctl, or a damaged one, may lack any of
them, so readers ``.get`` them. Nothing else is imported at run time, so the team store can name them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

if TYPE_CHECKING:
    from dr.topology.stackconfig import StackConfig
    from verification.result import StartedFrom

__all__ = [
    "Abandonment",
    "JournalDocument",
    "LeaseDetail",
    "LeaseEvent",
    "RunDocument",
    "StepDocument",
    "VerdictDocument",
    "VerificationRow",
]


class Abandonment(TypedDict, total=False):
    """How a journal was ended unfinished and archived (:meth:`Journal.abandon
    <dr.failover.frame.journal.Journal.abandon>`)."""

    at: float
    reason: str
    by: str
    status_before: str


class StepDocument(TypedDict, total=False):
    """One step of the journal (:class:`~dr.failover.frame.journal.StepEntry`)."""

    status: str
    attempts: int
    inputs: dict[str, Any] | None
    """What the step was given: its own keys per step."""
    outcome: dict[str, Any] | None
    """The step's outcome with its ``summary`` line: its own keys per step (:mod:`dr.failover.frame.outcomes`)."""
    started_at: float | None
    finished_at: float | None
    seconds: float | None
    error: str | None
    run: int | None


class RunDocument(TypedDict, total=False):
    """One invocation of ``drctl failover`` (:class:`~dr.failover.frame.journal.RunEntry`)."""

    pid: int
    started_at: float
    finished_at: float | None
    mode: str
    options: dict[str, Any]
    """The ``drctl failover`` flags of the run (:meth:`FailoverOptions.to_dict
    <dr.failover.frame.step.FailoverOptions.to_dict>`)."""
    outcome: str
    resumed: bool
    operator: str | None
    seconds: float | None
    interrupted_noticed_at: float | None


class JournalDocument(TypedDict, total=False):
    """The journal file's content (:class:`~dr.failover.frame.journal.JournalRecord`), version 1."""

    version: int
    failover_id: str
    stack: str
    mode: str
    status: str
    source: str
    target: str
    standby: str | None
    created_at: float
    finished_at: float | None
    original_config: StackConfig
    desired_config: StackConfig
    measurements: dict[str, object]
    """What the steps measured (:class:`~dr.failover.frame.journal.Measurements`)."""
    runs: list[RunDocument]
    steps: dict[str, StepDocument]
    clusters: dict[str, str]
    stack_state: str | None
    stack_digests: list[str]
    abandoned: Abandonment | None


class VerdictDocument(TypedDict, total=False):
    """A verification's verdict as the journal and the team database keep it
    (:meth:`Verdict.to_dict <dr.failover.act.integrity.Verdict.to_dict>`)."""

    clean: bool
    counts: dict[str, int]
    per_topic: dict[str, dict[str, int]]
    report_dir: str
    html: str
    cutoff_ms: int | None
    seconds: float
    started_from: StartedFrom | None


class VerificationRow(TypedDict):
    """A failover run's recorded verification (``kdr_verification``, :meth:`TeamStore.verifications
    <dr.failover.record.team_store.TeamStore.verifications>`)."""

    failover_id: str
    run: int
    operator: str
    clean: bool
    verdict: VerdictDocument
    report_dir: str
    report_digest: str


LeaseDetail = TypedDict(
    "LeaseDetail",
    {
        "host": str,
        "pid": int,
        "purpose": str,
        "epoch": int,
        "from": str,
        "from_host": str,
        "from_pid": int,
        "from_epoch": int,
        "age_s": float,
        "stale_after_s": float,
        "from_stale_after_s": float,
        "from_db_user": str,
        "db_user": str,
        "db_client": str,
        "db_pid": int,
    },
    total=False,
)
"""What a lease event records: who took the lease (host, pid, purpose, its epoch) and, taken over, from
whom (``from``, ``from_host``, ``from_pid``, ``from_epoch``, the threshold and database user it had recorded)
after how long without a heartbeat (``age_s``); the taker's threshold (``stale_after_s``); and the database's
identity of the writing session (``db_user``, ``db_client``, ``db_pid``), added by the database itself."""


class LeaseEvent(TypedDict):
    """One event of a stack's lease (``kdr_event``, :meth:`TeamStore.events
    <dr.failover.record.team_store.TeamStore.events>`): ``lease-taken``, ``lease-reclaimed``, ``lease-taken-over``,
    ``lease-released``."""

    at: float
    kind: str
    actor: str
    detail: LeaseDetail
