"""The per-stack failover journal (JSON, written atomically) and the lock that serialises runs.

Layout under the stack's state directory::

    failover.lock              flock'ed by the running failover; holds its pid
    failover/journal.json      the current failover: inputs, every step's outcome and timings
    failover/journal-<id>.json earlier, finished failovers (archived when a new one starts)

Every write goes to a temporary file first and is moved into place with ``os.replace``, so a
crash (even ``kill -9``) leaves either the previous or the new journal, never half of one.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dr.errors import ConfigError, LockHeld

__all__ = [
    "DONE_STATES",
    "Journal",
    "StackLock",
    "atomic_write_json",
    "failover_dir",
]

#: Step states that count as finished: a resumed run skips these steps.
DONE_STATES = frozenset({"done", "skipped"})

JOURNAL_VERSION = 1


def failover_dir(state: Path) -> Path:
    """``<state>/failover`` (0700), where the journal and verification reports live."""
    path = Path(state) / "failover"
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


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
    """An exclusive ``flock`` on ``<state>/failover.lock``; refuses a second holder with :class:`LockHeld`.

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


class Journal:
    """The record of one stack's current failover; every change is saved at once.

    ``data`` is plain JSON: ``failover_id``, ``stack``, ``mode``, ``status``, the original and
    desired ``kafka-dr:`` config, ``runs`` (one entry per invocation) and ``steps`` (name →
    ``status``, ``inputs``, ``outcome``, ``started_at``, ``seconds``, ``attempts``, ``error``).
    """

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = Path(path)
        self.data = data

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
        if data.get("version") != JOURNAL_VERSION:
            raise ConfigError(
                f"failover journal {path} has version {data.get('version')!r}, "
                f"this drctl reads version {JOURNAL_VERSION}.",
                "finish the failover with the drctl that started it",
            )
        return cls(path, data)

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
        data = {
            "version": JOURNAL_VERSION,
            "failover_id": time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6],
            "stack": stack,
            "mode": mode,
            "status": "running",
            "source": source,
            "target": target,
            "standby": standby,
            "created_at": _now(),
            "finished_at": None,
            "original_config": original_config,
            "desired_config": desired_config,
            "measurements": {},
            "runs": [],
            "steps": {name: {"status": "pending", "attempts": 0} for name in steps},
        }
        journal = cls(path, data)
        journal.save()
        return journal

    def save(self) -> None:
        """Write the journal atomically."""
        atomic_write_json(self.path, self.data)

    # ------------------------------------------------------------------------------ queries
    @property
    def finished(self) -> bool:
        """True when every step is done (or skipped): the failover is complete."""
        return bool(self.data["status"] == "completed")

    def step(self, name: str) -> dict[str, Any]:
        """The journal entry of one step."""
        entry: dict[str, Any] = self.data["steps"][name]
        return entry

    def is_done(self, name: str) -> bool:
        """True when ``name`` completed in an earlier run (a resumed run skips it)."""
        return self.step(name)["status"] in DONE_STATES

    def outage_run(self) -> dict[str, Any] | None:
        """The run the outage counts from: the one that fenced A (runs refused before it changed
        nothing and are not part of the outage); the first run when A was never fenced."""
        runs: list[dict[str, Any]] = self.data["runs"]
        fence = self.data["steps"].get("fence-drain") or {}
        index: int | None = fence.get("run") if fence.get("status") in DONE_STATES else None
        if index and 1 <= index <= len(runs):
            return runs[index - 1]
        return runs[0] if runs else None

    def cutoff_ms(self) -> int | None:
        """The verification cut-off of this failover: the last millisecond before anything could be
        written on the target (:func:`dr.failover.metrics.cutoff_ms`)."""
        from dr.failover.metrics import cutoff_ms

        m = self.data["measurements"]
        return cutoff_ms(m.get("writable_from_ms"), (m.get("probe") or {}).get("timestamp_ms"))

    def outcome(self, name: str) -> dict[str, Any]:
        """What a step recorded (empty when it has not run)."""
        return self.step(name).get("outcome") or {}

    # ------------------------------------------------------------------------------ updates
    def begin_run(self, *, mode: str, options: dict[str, Any]) -> dict[str, Any]:
        """Record the start of one invocation (resumed runs append another entry).

        A previous run still marked ``running`` ended without recording it (``kill -9``, a power
        cut): the caller holds the stack's lock, so that run is dead and is marked ``interrupted``.
        """
        self._mark_interrupted()
        run = {
            "pid": os.getpid(),
            "started_at": _now(),
            "finished_at": None,
            "mode": mode,
            "options": options,
            "outcome": "running",
            "resumed": bool(self.data["runs"]),
        }
        self.data["runs"].append(run)
        self.data["mode"] = mode
        self.data["status"] = "running"
        self.save()
        return run

    def _mark_interrupted(self) -> None:
        for run in self.data["runs"]:
            if run.get("outcome") == "running":
                run.update(outcome="interrupted", interrupted_noticed_at=_now())
        for entry in self.data["steps"].values():
            if entry.get("status") == "running":
                entry.update(status="interrupted", error="the run ended while this step ran (process killed)")

    def interrupted(self) -> bool:
        """True when the last run ended without recording its end (only meaningful while nobody holds the lock)."""
        runs = self.data["runs"]
        return (
            self.data["status"] in ("running", "interrupted")
            and bool(runs)
            and runs[-1].get("outcome") in ("running", "interrupted")
        )

    def end_run(self, outcome: str, **extra: Any) -> None:
        """Record how the current invocation ended."""
        run = self.data["runs"][-1]
        run.update(finished_at=_now(), outcome=outcome, seconds=round(_now() - run["started_at"], 3), **extra)
        self.save()

    def start_step(self, name: str, inputs: dict[str, Any]) -> None:
        """Mark a step as running with its inputs."""
        entry = self.step(name)
        entry.update(
            status="running",
            inputs=inputs,
            started_at=_now(),
            error=None,
            attempts=entry.get("attempts", 0) + 1,
            run=len(self.data["runs"]),
        )
        self.save()

    def finish_step(
        self, name: str, status: str, outcome: dict[str, Any], seconds: float, error: str | None = None
    ) -> None:
        """Record a step's result: ``done``, ``skipped``, ``deferred`` or ``failed``."""
        entry = self.step(name)
        entry.update(status=status, outcome=outcome, seconds=round(seconds, 3), finished_at=_now(), error=error)
        self.save()

    def measure(self, **values: Any) -> None:
        """Store measurements (RTO probe, writable-from time, ...) across runs."""
        self.data["measurements"].update(values)
        self.save()

    def set_status(self, status: str) -> None:
        """``running``, ``completed``, ``pending`` (decommission waits), ``failed`` or ``interrupted``."""
        self.data["status"] = status
        if status == "completed":
            self.data["finished_at"] = _now()
        self.save()


@contextmanager
def locked(state: Path, stack: str) -> Iterator[StackLock]:
    """Hold the stack's failover lock for the duration of the block."""
    lock = StackLock(state, stack)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()
