"""The per-stack failover journal (JSON, written atomically) and the lock that serialises runs.

Layout under the stack's failover home (:attr:`dr.base.stackref.StackRef.failover_home`: beside the
stack in its ``file://`` backend, so every clone using that backend sees and resumes the failover;
the stack's state directory with any other backend)::

    failover.lock              flock'ed by the running failover; holds its pid
    failover/journal.json      the current failover: inputs, every step's outcome and timings
    failover/journal-<id>.json earlier, finished failovers (archived when a new one starts)
    failover/abandoned-<id>-<UTC time>.json
                               failovers ended unfinished: their estate was destroyed (`drctl estate
                               down --destroy`) or their clusters are not the ones running now

With a ``postgres://`` backend the journal and the lock live in that database instead
(:mod:`dr.failover.record.team_store`: one row per failover, a transaction per write, the lock a lease with a
heartbeat), so any operator with the URL and the passphrase sees and resumes the failover; the reports
stay in the stack's state directory. One interface (:class:`Journal`, :class:`StackLock`), two stores.

Every write goes to a temporary file first and is moved into place with ``os.replace``, so a
crash (even ``kill -9``) leaves either the previous or the new journal, never half of one. The
file is a :class:`JournalRecord` (steps :class:`StepEntry`, runs :class:`RunEntry`,
:class:`Measurements`) as JSON; keys a reader does not know are kept.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dr.base.errors import ConfigError, LockHeld
from dr.base.files import private_dir
from dr.base.files import write_json as atomic_write_json
from dr.base.pulumi_env import project_backend_url
from dr.failover.act.integrity import Verdict
from dr.failover.act.probe import ProbeResult
from dr.failover.frame.outcomes import IntegritySeen
from dr.failover.record.journal_doc import Abandonment, JournalDocument, VerdictDocument
from dr.failover.record.metrics import RpoEstimate, cutoff_ms, decode_offsets
from dr.failover.record.team_store import LeaseHandle, TeamStore, is_team_url, operator_identity, team_store
from dr.topology.stackconfig import StackConfig

if TYPE_CHECKING:
    from dr.failover.act.integrity import Verdict
M = TypeVar("M", bound=BaseModel)


__all__ = [
    "DONE_STATES",
    "Abandonment",
    "Journal",
    "JournalRecord",
    "Measurements",
    "ProbeRecord",
    "RunEntry",
    "StackLock",
    "StepEntry",
    "atomic_write_json",
    "failover_dir",
]

#: Step states that count as finished: a resumed run skips these steps.
DONE_STATES = frozenset({"done", "skipped"})

JOURNAL_VERSION = 1


def failover_dir(home: Path) -> Path:
    """``<home>/failover`` (0700), where the journal, the stack file's backups and the verification
    reports live (``home``: :attr:`dr.base.stackref.StackRef.failover_home`)."""
    return private_dir(Path(home) / "failover")


def team_store_for(home: Path) -> TeamStore | None:
    """The team database holding the journal and lock of the stack whose failover home is ``home``
    (with a ``postgres://`` backend the home is the stack's state directory, named after the stack),
    or None for the file store."""
    url = os.environ.get("PULUMI_BACKEND_URL") or project_backend_url()
    return team_store(url) if url and is_team_url(url) else None


class StackLock:
    """An exclusive ``flock`` on ``<home>/failover.lock``; refuses a second holder with :class:`LockHeld`.

    The kernel releases the lock when the holding process exits, however it exits, so a crashed
    run never leaves a stale lock behind.
    """

    def __init__(self, state: Path, stack: str) -> None:
        self.path = Path(state) / "failover.lock"
        self.stack = stack
        self._fd: int | None = None
        self.store = team_store_for(Path(state))
        self._lease: LeaseHandle | None = None

    def holder(self) -> int | None:
        """The pid written by the current (or last) holder, if any."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def acquire(self) -> None:
        """Take the lock or raise :class:`LockHeld` naming the pid that holds it (with a team database:
        the lease, naming its holder; a stale one is taken over only with ``KDR_TAKE_OVER_STALE_LEASE=1``)."""
        if self.store is not None:
            take_over = os.environ.get("KDR_TAKE_OVER_STALE_LEASE") == "1"
            self._lease = self.store.acquire(self.path.parent.name, take_over=take_over)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid = self.holder()
            who = f"pid {pid}" if pid else "another process"
            raise LockHeld(
                f"a failover of stack '{self.stack}' is already running ({who} holds {self.path}).",
                "wait for it to finish (`drctl status --stack " + self.stack + "` shows its progress); "
                "the lock is released as soon as that process exits",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (the pid stays in the file for diagnostics)."""
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StackLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _now() -> float:
    return round(time.time(), 3)


class _Record(BaseModel):
    """A journal part: keys it does not know are kept (a newer drctl may have written them) and
    assignments are validated."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class StepEntry(_Record):
    """One step in the journal; ``outcome`` is the step's :attr:`StepResult.outcome
    <dr.failover.frame.step.StepResult.outcome>` with its ``summary`` line."""

    status: str = "pending"
    """``pending``, ``running``, ``done``, ``skipped``, ``deferred``, ``differences``, ``failed`` or ``interrupted``."""
    attempts: int = 0
    inputs: dict[str, Any] | None = None
    outcome: dict[str, Any] | None = None
    started_at: float | None = None
    finished_at: float | None = None
    seconds: float | None = None
    error: str | None = None
    run: int | None = None
    """The run (1-based index into :attr:`JournalRecord.runs`) that last started the step."""

    @property
    def done(self) -> bool:
        """True when the step finished (a resumed run skips it)."""
        return self.status in DONE_STATES


class RunEntry(_Record):
    """One invocation of ``drctl failover`` (a resumed failover has several)."""

    pid: int
    started_at: float
    finished_at: float | None = None
    mode: str
    options: dict[str, Any] = Field(default_factory=dict)
    outcome: str = "running"
    """``running``, ``completed``, ``pending``, ``failed`` or ``interrupted``."""
    resumed: bool = False
    operator: str | None = None
    """Who ran it (``$KDR_OPERATOR``, else ``<user>@<host>``): a run refused for another operator's names them."""
    seconds: float | None = None
    interrupted_noticed_at: float | None = None


class ProbeRecord(ProbeResult):
    """The RTO probe's first acknowledged write and the application principal that wrote it."""

    model_config = ConfigDict(extra="allow")

    application: str | None = None


class Measurements(_Record):
    """What the steps measured, kept across runs."""

    probe: ProbeRecord | None = None
    rto_s: float | None = None
    rto_this_run_s: float | None = None
    write_outage_s: float | None = None
    fenced_at: float | None = None
    fenced_bindings: list[dict[str, str]] = Field(default_factory=list)
    """The write ACLs the fence removed (:func:`dr.failover.act.fencing.binding_to_dict`), to restore on refusal."""
    writable_from_ms: int | None = None
    target_until: dict[str, int] | None = None
    """B's end offsets (``"topic:partition": n``) of the link's topics, read once just before the promotion
    granted writes (with ``writable_from_ms``); None when B did not answer then (or a journal from before
    the bound). The verification reads B only below them (:attr:`verification.sides.KafkaSide.until`)."""
    abc_done_at: float | None = None
    abc_run: int | None = None
    rpo_estimate: RpoEstimate | None = None


class JournalRecord(_Record):
    """The journal file's content (``failover/journal.json``, version 1)."""

    version: int = JOURNAL_VERSION
    failover_id: str
    stack: str
    mode: str
    status: str
    """``running``, ``completed``, ``pending`` (decommission waits), ``failed`` or ``interrupted``."""
    source: str
    target: str
    standby: str | None = None
    created_at: float
    finished_at: float | None = None
    original_config: StackConfig
    """The stack's ``kafka-dr:`` configuration before the failover."""
    desired_config: StackConfig
    """The configuration the failover converges to."""
    measurements: Measurements = Field(default_factory=Measurements)
    runs: list[RunEntry] = Field(default_factory=list)
    steps: dict[str, StepEntry] = Field(default_factory=dict)
    clusters: dict[str, str] = Field(default_factory=dict)
    """Cluster name → Kafka cluster ID of the clusters the run acts on, read when it began (the standby's
    once the run built it): the journal is resumed only on these clusters (:mod:`dr.failover.frame.identity`).
    Empty in a journal of a drctl that did not record them: such a journal is resumed as before."""
    stack_state: str | None = None
    """The stack's Pulumi state file when the run began (``file://`` backends): gone later means the
    stack was removed from its backend, and the journal with it."""
    stack_digests: list[str] = Field(default_factory=list)
    """SHA-256 of the stack file as the run expects it now: as it was when the run began, then as the
    run itself last wrote it (two while a write is under way). Empty: not checked (an older journal)."""
    abandoned: Abandonment | None = None
    """Set when the journal was ended unfinished and archived: ``at``, ``reason``, ``by``."""

    def to_json(self) -> JournalDocument:
        """The file's JSON."""
        return cast(JournalDocument, self.model_dump(mode="json"))


class Journal:
    """The record of one stack's current failover (:class:`JournalRecord`); every change is saved at once."""

    def __init__(self, path: Path, record: JournalRecord, store: TeamStore | None = None) -> None:
        self.path = Path(path)
        self.record = record
        self.store = store
        """The team database holding the journal (None: the JSON file :attr:`path`)."""

    @property
    def _key(self) -> str:
        return self.path.parent.parent.name  # <home>/failover/journal.json: home is named after the stack

    # ------------------------------------------------------------------------------ load / create
    @classmethod
    def path_for(cls, state: Path) -> Path:
        """Where the journal of the stack whose state directory is ``state`` lives (nothing is created)."""
        return Path(state) / "failover" / "journal.json"

    @classmethod
    def load(cls, state: Path) -> Journal | None:
        """The stack's current journal, or None when no failover was ever started."""
        path = cls.path_for(state)
        store = team_store_for(Path(state))
        if store is not None:
            data = store.load(Path(state).name)
            if data is None:
                return None
            path_shown: Any = f"{store.shown} (stack {Path(state).name})"
        elif not path.exists():
            return None
        else:
            path_shown = path
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"failover journal {path} is not valid JSON ({exc.msg}).",
                    "restore it from a backup; never edit it by hand while a failover runs",
                ) from None
        version = data.get("version") if isinstance(data, dict) else None
        if version != JOURNAL_VERSION:
            raise ConfigError(
                f"failover journal {path_shown} has version {version!r}, this drctl reads version {JOURNAL_VERSION}.",
                "finish the failover with the drctl that started it",
            )
        try:
            record = JournalRecord.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                f"failover journal {path_shown} does not hold a failover journal: {_first_error(exc)}.",
                "restore it from a backup; never edit it by hand while a failover runs",
            ) from None
        return cls(path, record, store)

    @classmethod
    def create(
        cls,
        state: Path,
        *,
        stack: str,
        mode: str,
        source: str,
        target: str,
        standby: str | None,
        original_config: StackConfig,
        desired_config: StackConfig,
        steps: list[str],
    ) -> Journal:
        """Start the journal of a new failover (an earlier, finished one is archived first)."""
        failover_dir(state)
        path = cls.path_for(state)
        store = team_store_for(Path(state))
        if store is None and path.exists():
            old = json.loads(path.read_text())
            os.replace(path, path.with_name(f"journal-{old.get('failover_id', 'unknown')}.json"))
        record = JournalRecord(
            version=JOURNAL_VERSION,
            failover_id=time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6],
            stack=stack,
            mode=mode,
            status="running",
            source=source,
            target=target,
            standby=standby,
            created_at=_now(),
            finished_at=None,
            original_config=original_config,
            desired_config=desired_config,
            measurements=Measurements(),
            runs=[],
            steps={name: StepEntry(status="pending", attempts=0) for name in steps},
        )
        journal = cls(path, record, store)
        if store is not None:
            store.create(Path(state).name, record.to_json())
        else:
            journal.save()
        return journal

    def save(self) -> None:
        """Write the journal atomically (with a team database: one transaction, the row's version + 1)."""
        if self.store is not None:
            self.store.save(self._key, self.record.to_json())
        else:
            atomic_write_json(self.path, self.record.to_json())

    def abandon(self, reason: str, by: str) -> Path:
        """End this journal and move it aside (never deleted): ``failover/abandoned-<id>-<UTC time>.json``,
        with ``abandoned`` (``at``, ``reason``, ``by``) set and, when unfinished, status ``abandoned``.
        Returns where it now is; no current journal is left, so the next failover starts afresh."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"abandoned-{self.failover_id}-{stamp}.json")
        self.record.abandoned = {"at": _now(), "reason": reason, "by": by, "status_before": self.record.status}
        if self.record.status != "completed":
            self.record.status = "abandoned"
        if self.store is not None:  # kept in the database as a row that is no longer current
            self.store.save(self._key, self.record.to_json(), current=False)
        atomic_write_json(target, self.record.to_json())
        self.path.unlink(missing_ok=True)
        self.path = target
        return target

    @classmethod
    def last_abandoned(cls, home: Path) -> tuple[Path, JournalDocument] | None:
        """The newest archived abandoned journal (path, data) when it is newer than the current journal
        (or there is none): the stack's last failover ended that way. None otherwise."""
        archive = Path(home) / "failover"
        found = sorted(archive.glob("abandoned-*.json"), key=lambda p: p.stat().st_mtime) if archive.is_dir() else []
        if not found:
            return None
        newest = found[-1]
        current = cls.path_for(home)
        if current.exists() and current.stat().st_mtime >= newest.stat().st_mtime:
            return None
        try:
            data = json.loads(newest.read_text())
        except (OSError, ValueError):
            data = {}
        return newest, cast(JournalDocument, data) if isinstance(data, dict) else JournalDocument()

    # ------------------------------------------------------------------------------ queries
    @property
    def failover_id(self) -> str:
        """The failover's id (``<UTC time>-<6 hex>``), in report and backup names."""
        return self.record.failover_id

    @property
    def mode(self) -> str:
        """``planned`` or ``unplanned`` (the mode of the last run)."""
        return self.record.mode

    @property
    def status(self) -> str:
        """The failover's status (see :attr:`JournalRecord.status`)."""
        return self.record.status

    @property
    def measurements(self) -> Measurements:
        """What the steps measured (change it through :meth:`measure`, which saves)."""
        return self.record.measurements

    @property
    def runs(self) -> list[RunEntry]:
        """Every invocation, the first one first."""
        return self.record.runs

    @property
    def finished(self) -> bool:
        """True when every step is done (or skipped): the failover is complete."""
        return self.record.status == "completed"

    def step(self, name: str) -> StepEntry:
        """The journal entry of one step."""
        return self.record.steps[name]

    def is_done(self, name: str) -> bool:
        """True when ``name`` completed in an earlier run (a resumed run skips it)."""
        return self.step(name).done

    def outage_run(self) -> RunEntry | None:
        """The run the outage counts from: the one that fenced A (runs refused before it changed
        nothing and are not part of the outage); the first run when A was never fenced."""
        runs = self.record.runs
        fence = self.record.steps.get("fence-drain")
        index = fence.run if fence is not None and fence.done else None
        if index and 1 <= index <= len(runs):
            return runs[index - 1]
        return runs[0] if runs else None

    def cutoff_ms(self) -> int | None:
        """The verification cut-off of this failover: the last millisecond before anything could be
        written on the target (:func:`dr.failover.record.metrics.cutoff_ms`)."""

        m = self.record.measurements
        return cutoff_ms(m.writable_from_ms, m.probe.timestamp_ms if m.probe else None)

    def target_until(self) -> dict[str, dict[int, int]] | None:
        """B's end offsets at the promotion (``Measurements.target_until``) as topic → partition → offset, the
        verification's bound on the target; None when none was taken."""
        encoded = self.record.measurements.target_until
        if encoded is None:
            return None
        out: dict[str, dict[int, int]] = {}
        for (topic, partition), n in decode_offsets(encoded).items():
            out.setdefault(topic, {})[partition] = n
        return out

    def outcome(self, name: str) -> dict[str, Any]:
        """What a step recorded (empty when it has not run, or is not a step of this run's kind)."""
        entry = self.record.steps.get(name)
        return (entry.outcome if entry is not None else None) or {}

    def outcome_as(self, name: str, model: type[M]) -> M:
        """What step ``name`` recorded, read back as ``model`` (its summary line left out): ``model``'s
        defaults when the step has not run."""
        return model.model_validate({k: v for k, v in self.outcome(name).items() if k != "summary"})

    def verdict(self) -> Verdict | None:
        """The verdict of the integrity step, if it has one."""

        return self.outcome_as("integrity", IntegritySeen).verdict

    # ------------------------------------------------------------------------------ updates
    def begin_run(self, *, mode: str, options: dict[str, Any]) -> RunEntry:
        """Record the start of one invocation (resumed runs append another entry).

        A previous run still marked ``running`` ended without recording it (``kill -9``, a power
        cut): the caller holds the stack's lock, so that run is dead and is marked ``interrupted``.
        """
        self._mark_interrupted()
        run = RunEntry(
            pid=os.getpid(),
            started_at=_now(),
            finished_at=None,
            mode=mode,
            options=options,
            outcome="running",
            resumed=bool(self.record.runs),
            operator=operator_identity(),
        )
        self.record.runs.append(run)
        self.record.mode = mode
        self.record.status = "running"
        self.save()
        return run

    def _mark_interrupted(self) -> None:
        for run in self.record.runs:
            if run.outcome == "running":
                run.outcome, run.interrupted_noticed_at = "interrupted", _now()
        for entry in self.record.steps.values():
            if entry.status == "running":
                entry.status = "interrupted"
                entry.error = "the run ended while this step ran (process killed)"

    def end_run(self, outcome: str) -> None:
        """Record how the current invocation ended."""
        run = self.record.runs[-1]
        now = _now()
        run.finished_at, run.outcome, run.seconds = now, outcome, round(now - run.started_at, 3)
        self.save()

    def start_step(self, name: str, inputs: Mapping[str, object]) -> None:
        """Mark a step as running with its inputs."""
        entry = self.step(name)
        entry.status, entry.inputs, entry.started_at, entry.error = "running", dict(inputs), _now(), None
        entry.attempts += 1
        entry.run = len(self.record.runs)
        self.save()

    def finish_step(
        self, name: str, status: str, outcome: dict[str, Any], seconds: float, error: str | None = None
    ) -> None:
        """Record a step's result: ``done``, ``skipped``, ``deferred``, ``differences`` or ``failed``."""
        entry = self.step(name)
        entry.status, entry.outcome, entry.seconds = status, outcome, round(seconds, 3)
        entry.finished_at, entry.error = _now(), error
        self.save()
        verdict = (outcome or {}).get("verdict")
        if self.store is not None and name == "integrity" and isinstance(verdict, dict):
            self.store.record_verification(
                self._key, self.failover_id, len(self.record.runs), cast(VerdictDocument, verdict)
            )

    def record_estate(self, *, clusters: dict[str, str], stack_state: str | None, stack_digest: str | None) -> None:
        """Record, when a run begins, which estate the journal belongs to (see :attr:`JournalRecord.clusters`)."""
        self.record.clusters = dict(clusters)
        self.record.stack_state = stack_state
        self.record.stack_digests = [stack_digest] if stack_digest else []
        self.save()

    def measure(self, **values: Any) -> None:
        """Store measurements (RTO probe, writable-from time, ...) across runs."""
        for key, value in values.items():
            setattr(self.record.measurements, key, value)
        self.save()

    def set_status(self, status: str) -> None:
        """``running``, ``completed``, ``pending`` (decommission waits), ``failed`` or ``interrupted``."""
        self.record.status = status
        if status == "completed":
            self.record.finished_at = _now()
        self.save()


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'the file'}: {err['msg']}"
