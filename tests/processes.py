"""Nothing the suite starts outlives it.

The product starts its JVMs (brokers, MirrorMaker 2, Connect, Spark) in sessions of their own, so killing a
``drctl`` or ``make`` that a test ran does not reach them. Three things hold the line:

* every pytest process is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a process whose parent dies
  is re-parented to the nearest pytest process instead of init, so it stays findable as a descendant;
* :func:`run` is ``subprocess.run`` for the tests' commands, except that when the command does not end by
  itself (its timeout, pytest-timeout's signal, Ctrl-C) it kills the command's whole tree, across sessions;
* at the end of the run :func:`leftovers` lists what is still alive below the pytest process, which fails the
  run (``tests/conftest.py``) after the processes are killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["become_subreaper", "descendants", "kill_tree", "leftovers", "run"]

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); False where that is not possible."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process now (from /proc; processes that end meanwhile are left out)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: the fields after its last ')' are fixed.
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z":  # a zombie is already dead; its parent reaps it
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, their children, ...), nearest first."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def _kill(pids: Sequence[int]) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(p) == p:  # a group leader (a JVM in its own session): its whole group
                os.killpg(p, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything below it, whatever session or group each runs in. The tree is read
    before anything is killed, while the parents that link it are still alive."""
    _kill([pid, *descendants(pid)])


def leftovers(grace_s: float = 30.0) -> list[str]:
    """What still runs below this process, after waiting up to ``grace_s`` for it to end by itself (a Spark
    gateway ends once the worker that held it is gone): ``pid command`` for each, after they were killed."""
    deadline = time.monotonic() + grace_s
    alive = descendants(os.getpid())
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        _reap()
        alive = descendants(os.getpid())
    named = [f"{p} {_cmdline(p)}" for p in alive]
    _kill(alive)
    _reap()
    return named


def _reap() -> None:
    """Collect the exit of re-parented children (a subreaper must, or they stay zombies)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def run(
    args: Sequence[str],
    *,
    timeout: float | None = None,
    input: str | bytes | None = None,
    check: bool = False,
    capture_output: bool = False,
    **popen: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(args, ...)``, but a command that does not end by itself — its ``timeout`` passed, or
    the test interrupted (pytest-timeout, Ctrl-C) — is killed with its whole tree (:func:`kill_tree`)."""
    if capture_output:
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(args, **popen) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            kill_tree(proc.pid)
            proc.wait()
            raise
        code = proc.poll()
    assert code is not None
    done = subprocess.CompletedProcess(proc.args, code, out, err)
    if check:
        done.check_returncode()
    return done
