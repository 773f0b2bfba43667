"""The per-stack failover journal (JSON, written atomically) and the lock that serialises runs.

Layout under the stack's failover home (:attr:`dr.base.stackref.StackRef.failover_home`: beside the
stack in its ``file://`` backend, so every clone using that backend sees and resumes the failover;
the stack's state directory with any other backend)::

    failover.lock              flock'ed by the running failover; holds its pid
    failover/journal.json      the current failover: inputs, every step's outcome and timings
    failover/journal-<id>.json earlier, finished failovers (archived when a new one starts)

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dr.base.errors import ConfigError, LockHeld
from dr.base.files import private_dir
from dr.failover.integrity import Verdict
from dr.failover.metrics import cutoff_ms
from dr.failover.probe import ProbeResult

if TYPE_CHECKING:
    from dr.failover.integrity import Verdict

__all__ = [
    "DONE_STATES",
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


def atomic_write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temporary file + ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class StackLock:
    """An exclusive ``flock`` on ``<home>/failover.lock``; refuses a second holder with :class:`LockHeld`.

    The kernel releases the lock when the holding process exits, however it exits, so a crashed
    run never leaves a stale lock behind.
    """

    def __init__(self, state: Path, stack: str) -> None:
        self.path = Path(state) / "failover.lock"
        self.stack = stack
        self._fd: int | None = None

    def holder(self) -> int | None:
        """The pid written by the current (or last) holder, if any."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def acquire(self) -> None:
        """Take the lock or raise :class:`LockHeld` naming the pid that holds it."""
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
    <dr.failover.steps.StepResult.outcome>` with its ``summary`` line."""

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
    """The write ACLs the fence removed (:func:`dr.failover.fencing.binding_to_dict`), to restore on refusal."""
    writable_from_ms: int | None = None
    abc_done_at: float | None = None
    abc_run: int | None = None
    rpo_estimate: dict[str, Any] | None = None


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
    original_config: dict[str, Any]
    """The stack's ``kafka-dr:`` configuration before the failover."""
    desired_config: dict[str, Any]
    """The configuration the failover converges to."""
    measurements: Measurements = Field(default_factory=Measurements)
    runs: list[RunEntry] = Field(default_factory=list)
    steps: dict[str, StepEntry] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The file's JSON."""
        return self.model_dump(mode="json")


class Journal:
    """The record of one stack's current failover (:class:`JournalRecord`); every change is saved at once."""

    def __init__(self, path: Path, record: JournalRecord) -> None:
        self.path = Path(path)
        self.record = record

    # ------------------------------------------------------------------------------ load / create
    @classmethod
    def path_for(cls, state: Path) -> Path:
        """Where the journal of the stack whose state directory is ``state`` lives (nothing is created)."""
        return Path(state) / "failover" / "journal.json"

    @classmethod
    def load(cls, state: Path) -> Journal | None:
        """The stack's current journal, or None when no failover was ever started."""
        path = cls.path_for(state)
        if not path.exists():
            return None
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
                f"failover journal {path} has version {version!r}, this drctl reads version {JOURNAL_VERSION}.",
                "finish the failover with the drctl that started it",
            )
        try:
            record = JournalRecord.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(
                f"failover journal {path} does not hold a failover journal: {_first_error(exc)}.",
                "restore it from a backup; never edit it by hand while a failover runs",
            ) from None
        return cls(path, record)

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
        original_config: dict[str, Any],
        desired_config: dict[str, Any],
        steps: list[str],
    ) -> Journal:
        """Start the journal of a new failover (an earlier, finished one is archived first)."""
        failover_dir(state)
        path = cls.path_for(state)
        if path.exists():
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
        journal = cls(path, record)
        journal.save()
        return journal

    def save(self) -> None:
        """Write the journal atomically."""
        atomic_write_json(self.path, self.record.to_json())

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
        written on the target (:func:`dr.failover.metrics.cutoff_ms`)."""

        m = self.record.measurements
        return cutoff_ms(m.writable_from_ms, m.probe.timestamp_ms if m.probe else None)

    def outcome(self, name: str) -> dict[str, Any]:
        """What a step recorded (empty when it has not run, or is not a step of this run's kind)."""
        entry = self.record.steps.get(name)
        return (entry.outcome if entry is not None else None) or {}

    def verdict(self) -> Verdict | None:
        """The verdict of the integrity step, if it has one."""

        found = self.outcome("integrity").get("verdict")
        return Verdict.model_validate(found) if found else None

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

    def interrupted(self) -> bool:
        """True when the last run ended without recording its end (only meaningful while nobody holds the lock)."""
        runs = self.record.runs
        return (
            self.record.status in ("running", "interrupted")
            and bool(runs)
            and runs[-1].outcome in ("running", "interrupted")
        )

    def end_run(self, outcome: str) -> None:
        """Record how the current invocation ended."""
        run = self.record.runs[-1]
        now = _now()
        run.finished_at, run.outcome, run.seconds = now, outcome, round(now - run.started_at, 3)
        self.save()

    def start_step(self, name: str, inputs: dict[str, Any]) -> None:
        """Mark a step as running with its inputs."""
        entry = self.step(name)
        entry.status, entry.inputs, entry.started_at, entry.error = "running", inputs, _now(), None
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
