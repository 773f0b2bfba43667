"""Locks of the local ``file://`` Pulumi backend: who holds a stack, and clearing the lock of a dead engine.

Every ``pulumi up``, ``refresh``, ``destroy`` and ``stack import`` writes
``<backend>/.pulumi/locks/<org>/<project>/<stack>/<lock id>.json`` holding ``{"pid", "username",
"hostname", "timestamp"}`` of the CLI process (``pkg/backend/diy/lock.go``) and deletes it when it
ends. An engine killed mid-operation leaves the file behind, and from then on every operation of
the stack refuses ("the stack is currently locked by 1 lock(s)").

:func:`clear_stale_locks` removes such a lock only when it can prove its holder is gone: the lock
was written on this host and its pid is not a live ``pulumi`` process started before the lock
was taken (a pid reused by another program does not count). A lock of a live process, or of
another host, is never removed: :class:`~dr.errors.LockHeld` names the holder instead.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dr.base.errors import LockHeld

__all__ = ["PulumiLock", "clear_stale_locks", "process_started_at", "stack_locks"]

#: A process started at most this long after the lock's timestamp may still be its writer (clock steps).
_START_SLACK_S = 2.0


@dataclass(frozen=True)
class PulumiLock:
    """One lock file of the backend and what it says about its writer."""

    path: Path
    pid: int
    username: str
    hostname: str
    since: str
    """The lock's timestamp as written (RFC 3339)."""

    @property
    def holder(self) -> str:
        """``pid P on host H (user U) since T`` — for messages."""
        return f"pid {self.pid} on host {self.hostname} (user {self.username}) since {self.since}"

    def since_epoch(self) -> float | None:
        """The lock's timestamp in seconds since the epoch, when it parses."""
        return _parse_time(self.since)

    def alive(self) -> bool:
        """True unless the writer is provably gone: a lock of another host always counts as alive."""
        if self.hostname != socket.gethostname():
            return True
        started = process_started_at(self.pid)
        if started is None:
            return False
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        if b"pulumi" not in cmdline:
            return False  # the pid now belongs to another program
        taken = self.since_epoch()
        return taken is None or started <= taken + _START_SLACK_S


def stack_locks(backend: Path, project: str, stack: str) -> list[PulumiLock]:
    """Every lock file of ``project``/``stack`` in the ``file://`` backend at ``backend``."""
    root = Path(backend) / ".pulumi" / "locks"
    found: list[PulumiLock] = []
    paths = sorted({*root.glob(f"*/{project}/{stack}/*.json"), *root.glob(f"{stack}/*.json")})
    for path in paths:
        try:
            data = json.loads(path.read_text())
            found.append(
                PulumiLock(
                    path=path,
                    pid=int(data.get("pid") or 0),
                    username=str(data.get("username") or "?"),
                    hostname=str(data.get("hostname") or "?"),
                    since=str(data.get("timestamp") or "?"),
                )
            )
        except (OSError, ValueError):
            # Half-written by an engine killed while writing it: nothing in it can hold the stack.
            found.append(PulumiLock(path=path, pid=0, username="?", hostname=socket.gethostname(), since="?"))
    return found


def clear_stale_locks(backend: Path, project: str, stack: str) -> list[PulumiLock]:
    """Delete the locks of ``stack`` whose writer is provably gone; return them.

    Raises :class:`~dr.errors.LockHeld` (nothing deleted) when any lock belongs to a live process
    or to another host, naming its holder.
    """
    locks = stack_locks(backend, project, stack)
    live = [lock for lock in locks if lock.alive()]
    if live:
        lock = live[0]
        here = lock.hostname == socket.gethostname()
        raise LockHeld(
            f"stack {stack!r} is locked by a running Pulumi operation: {lock.holder} ({lock.path}).",
            (
                f"wait until pid {lock.pid} ends, then run the command again"
                if here
                else f"this machine cannot see host {lock.hostname}'s processes: wait until its operation ends; "
                f"if you know it is gone, `pulumi cancel --stack {stack} --yes` removes the lock"
            ),
        )
    for lock in locks:
        lock.path.unlink(missing_ok=True)
        lock.path.with_name(lock.path.name + ".attrs").unlink(missing_ok=True)  # its metadata sidecar
    return locks


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None when it does not run (or is a zombie)."""
    if pid <= 0:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(") ", 1)[1].split()
        if fields[0] == "Z":
            return None
        ticks = int(fields[19])
        btime = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def _parse_time(text: str) -> float | None:
    """Go's RFC 3339 with nanoseconds (``2026-11-24T10:01:02.123456789+00:00``) in epoch seconds."""
    text = text.strip().replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
