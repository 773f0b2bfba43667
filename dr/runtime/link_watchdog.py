"""The watchdog of a dedicated MirrorMaker 2 process: it starts the process again when a task of it died.

Kafka Connect never restarts a task that threw an "uncaught and unrecoverable" exception (an exactly-once
task whose transaction the broker refused, a send the target rejected): the process lives on, its other
tasks copy, and the dead task's partitions stop until someone acts. A Connect cluster offers a REST call
for that; a dedicated MirrorMaker 2 offers none, so the watchdog — one small process per link, started
with it — restarts the whole process, the way Strimzi's ``autoRestart`` restarts failed connectors: once
the task has stood dead for :data:`SETTLE_S`, then with a doubling back-off (:func:`backoff`). Each
restart is a line in ``restarts.jsonl`` beside the link's log, which ``drctl status`` reads. Under
exactly-once a restart copies nothing twice; at least once, it may copy the last uncommitted records again.

The watchdog never starts a process that is not running: a stop, a SIGKILL or a crash is the operator's
or the failover's business, and the watchdog exits when it sees the process gone. It acts only while it
holds the link's control lock (:func:`control_lock`), which stop, kill and start hold too, so it never
brings back a process someone is stopping.

Run as ``python -m dr.runtime.link_watchdog <link dir> <process name>``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from dr.base.child_env import child_env
from dr.base.files import write_atomic
from dr.runtime.process import JvmProcess, dead_tasks, pid_alive, wait_until

SETTLE_S = 5.0
"""How long a task must stand dead before a restart (a stale configuration's failure at start-up is
superseded within a few seconds)."""
FIRST_BACKOFF_S = 5.0
MAX_BACKOFF_S = 300.0

_MODULE = "dr.runtime.link_watchdog"
_LOCK, _PID, _LAUNCH, _COMMAND, _RESTARTS = (
    "control.lock",
    "watchdog.pid",
    "launch.offset",
    "mm2.command.json",
    "restarts.jsonl",
)
_held: dict[Path, tuple[int, int]] = {}
_children: dict[int, subprocess.Popen[bytes]] = {}


class Restart(TypedDict):
    """One restart the watchdog made: when, which tasks were dead and why, the how-manieth."""

    at: str
    tasks: dict[str, str]
    restart: int


def backoff(restarts: int) -> float:
    """Seconds to wait after the ``restarts``-th restart before another one (pure): 5, 10, 20 … 300."""
    return float(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, restarts - 1)))


@contextmanager
def control_lock(link_dir: Path, *, create: bool = True) -> Iterator[None]:
    """Hold the link's control lock (an exclusive ``flock``; re-entrant within this process). ``create``:
    make the link's directory if it is missing (else a missing one raises ``FileNotFoundError``)."""
    path = Path(link_dir) / _LOCK
    fd, depth = _held.get(path, (-1, 0))
    if depth == 0:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
    _held[path] = (fd, depth + 1)
    try:
        yield
    finally:
        fd, depth = _held[path]
        if depth == 1:
            del _held[path]
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        else:
            _held[path] = (fd, depth - 1)


def record_launch(link_dir: Path, command: list[str], log_offset: int) -> None:
    """Remember the command a start launched and where its log begins (what a restart repeats, and
    from where dead tasks are read). The command holds no secret: the password is a file reference."""
    write_atomic(Path(link_dir) / _COMMAND, json.dumps(command))
    write_atomic(Path(link_dir) / _LAUNCH, str(log_offset))


def launch_offset(link_dir: Path) -> int:
    """Where the running process's lines begin in its log (0 when unknown)."""
    try:
        return int((Path(link_dir) / _LAUNCH).read_text().strip())
    except (OSError, ValueError):
        return 0


def restarts(link_dir: Path) -> list[Restart]:
    """The restarts the watchdog made, oldest first."""
    try:
        lines = (Path(link_dir) / _RESTARTS).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _watchdog_pid(link_dir: Path) -> int | None:
    try:
        pid = int((Path(link_dir) / _PID).read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if _MODULE.encode() in cmdline and str(link_dir).encode() in cmdline else None


def watchdog_alive(link_dir: Path) -> bool:
    """True while the link's watchdog runs."""
    return _watchdog_pid(Path(link_dir)) is not None


def spawn(link_dir: Path, process_name: str) -> int:
    """Start the link's watchdog, detached, unless it runs; return its pid."""
    link_dir = Path(link_dir)
    pid = _watchdog_pid(link_dir)
    if pid is not None:
        return pid
    root = str(Path(__file__).resolve().parents[2])
    # only what it needs: never the operator's passphrase or backend URL (dr.base.child_env)
    env = child_env({"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)})
    with open(link_dir / "watchdog.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", _MODULE, str(link_dir), process_name],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=root,
        )
    _children[proc.pid] = proc
    write_atomic(link_dir / _PID, str(proc.pid))
    return proc.pid


def stop_watchdog(link_dir: Path) -> None:
    """Stop the link's watchdog (SIGTERM) and wait until it is gone; hold :func:`control_lock` around it
    so the watchdog is never stopped half-way through a restart."""
    link_dir = Path(link_dir)
    pid = _watchdog_pid(link_dir)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)

        def gone() -> bool:
            child = _children.get(pid)
            if child is not None:
                child.poll()  # our own child: reap it, so it is no zombie
            return not pid_alive(pid)

        wait_until(gone, 10, interval=0.05)
        _children.pop(pid, None)
    (link_dir / _PID).unlink(missing_ok=True)


def _note(text: str) -> None:
    print(f"{datetime.now(UTC).isoformat(timespec='seconds')} {text}", flush=True)


def watch(link_dir: Path, process_name: str, interval: float = 1.0) -> int:
    """The watchdog's loop (see the module's text); returns 0 once the process or its directory is gone."""
    proc = JvmProcess(process_name, link_dir / "pid", link_dir / "mm2.log")
    marks = _Marks(proc.log_file)
    done = 0
    dead_since: float | None = None
    not_before = 0.0
    _note(f"watching {process_name}")
    while True:
        time.sleep(interval)
        if not link_dir.is_dir():  # removed with the estate's data: nothing to watch, nothing to recreate
            return 0
        with control_lock(link_dir, create=False):
            if proc.pid is None:
                _note(f"{process_name} is not running: the watchdog ends")
                return 0
            start = launch_offset(link_dir)
            dead = dead_tasks(proc.log_since(start)) if marks.seen_since(start) else {}
            now = time.monotonic()
            if not dead:
                marks.clear()  # every failure seen was superseded: parse again only on a new one
                dead_since = None
                continue
            dead_since = dead_since or now
            if now - dead_since < SETTLE_S or now < not_before:
                continue
            done += 1
            entry: Restart = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "tasks": dead, "restart": done}
            with open(link_dir / _RESTARTS, "a") as f:
                f.write(json.dumps(entry) + "\n")
            _note(f"restart {done}: dead tasks {dead}")
            command = json.loads((link_dir / _COMMAND).read_text())
            proc.stop(timeout=30)
            write_atomic(link_dir / _LAUNCH, str(proc.log_size()))
            proc.start(command)
            dead_since, not_before = None, time.monotonic() + backoff(done)


_MARKS = (b"unrecoverable", b"Failed to start task")


class _Marks:
    """Where in a growing log a task-failure record was last seen, reading only what was appended since
    the previous look (a link's log grows for days; the watchdog looks every second)."""

    def __init__(self, log_file: Path) -> None:
        self.log_file = log_file
        self.read_to = 0
        self.last_mark = -1

    def seen_since(self, offset: int) -> bool:
        """True when a task-failure record stands at or after byte ``offset``."""
        try:
            size = self.log_file.stat().st_size
        except OSError:
            return False
        if offset > self.read_to or size < self.read_to:
            self.read_to, self.last_mark = offset, -1  # a new launch (or a new log): its lines only
        overlap = 64  # a mark split across two reads
        begin = max(offset, self.read_to - overlap)
        try:
            with open(self.log_file, "rb") as f:
                f.seek(begin)
                data = f.read()
        except OSError:
            return False
        for mark in _MARKS:
            found = data.rfind(mark)
            if found >= 0 and begin + found + len(mark) > self.read_to:  # not one read before
                self.last_mark = max(self.last_mark, begin + found)
        self.read_to = begin + len(data)
        return self.last_mark >= offset

    def clear(self) -> None:
        """Forget the marks seen so far (each was superseded by a later start of its task)."""
        self.last_mark = -1


def _dead_task_text(proc: JvmProcess, offset: int) -> str:
    """The running process's log, or ``""`` when it records no task failure at all (the common case,
    decided on bytes without decoding the log)."""
    try:
        with open(proc.log_file, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return ""
    if not any(mark in data for mark in _MARKS):
        return ""
    return data.decode(errors="replace")


def dead_tasks_of(link_dir: Path, proc: JvmProcess) -> dict[str, str]:
    """Per dead task of the running process (its log since its launch), the root cause."""
    return dead_tasks(_dead_task_text(proc, launch_offset(link_dir)))


if __name__ == "__main__":  # pragma: no cover - the detached process
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        sys.exit(watch(Path(sys.argv[1]), sys.argv[2]))
    except FileNotFoundError:  # its directory went away between two looks
        sys.exit(0)
