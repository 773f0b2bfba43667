"""Crash a failover: die right after one step is journaled, or SIGKILL the whole ``drctl failover`` process
group at an instant inside a step (:func:`kill_inside`) — real process deaths.

    python -m tests.integration.failover_crash_driver --stack NAME --crash-after STEP [--skip-verify] ...

The pipeline's ``on_step`` callback, called after each step's outcome is in the journal, ends the
process with ``os._exit(CRASH_EXIT)``: no ``finally`` block, no lock release, no journal update runs,
as after ``kill -9``. The stack and its state are found as ``drctl`` finds them (``KDR_STACK_DIR``,
``KDR_STATE_DIR``). Exit status: ``CRASH_EXIT`` after the crash, 0 when the failover ended before
reaching the step, a ``DRError``'s exit code when it refused.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dr.base.errors import DRError
from dr.base.stackref import StackRef
from dr.failover.frame.step import FailoverOptions, StepResult
from dr.failover.kinds.active_passive.run import run_failover
from tests.integration.journal_home import journal_home

CRASH_EXIT = 70


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the failover with the crashing callback."""
    parser = argparse.ArgumentParser(prog="failover_crash_driver")
    parser.add_argument("--stack", required=True)
    parser.add_argument("--crash-after", required=True, help="the step after whose journaling the process dies")
    parser.add_argument("--mode", choices=["planned", "unplanned"])
    parser.add_argument("--skip-verify", action="store_true")
    parser.add_argument("--force-decommission", action="store_true")
    args = parser.parse_args(argv)

    def crash(name: str, _result: StepResult) -> None:
        if name == args.crash_after:
            print(f"crash driver: dying after step {name}", file=sys.stderr, flush=True)
            os._exit(CRASH_EXIT)

    options = FailoverOptions(mode=args.mode, skip_verify=args.skip_verify, force_decommission=args.force_decommission)
    try:
        run_failover(
            StackRef.resolve(args.stack),
            options=options,
            progress=lambda message: print(message, file=sys.stderr, flush=True),
            on_step=crash,
        )
    except DRError as exc:
        print(exc, file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------------------------------------
# Kills at random instants *inside* a step: the real `drctl failover`, its whole process group SIGKILLed.

#: Roughly how long each step runs on the crash tests' 1-broker estate (seconds, --skip-verify): a kill
#: instant is drawn uniformly in [0, this) after the step's start line, so most land inside the step.
STEP_SPAN = {
    "preflight": 1.5,
    "fence-drain": 3.0,
    "promote": 2.0,
    "clients": 0.1,
    "consumer-groups": 0.8,
    "desired-state": 4.0,  # from the engine's lock: its `pulumi up` runs 10-18 s
    "desired-state (resumed)": 2.0,  # from the engine's lock: the resumed run's refresh/repair
    "integrity": 0.5,
    "decommission": 2.0,
}


@dataclass
class Kill:
    """One SIGKILL of a ``drctl failover`` process group: when, where it landed, what the run printed."""

    step: str
    delay_s: float
    landed: str
    """The step the journal shows as started and unfinished, ``between steps``, or ``run completed first``
    (the step was already done, or the run finished before the instant) / ``run exited N`` (a failure)."""
    session: int
    """The killed run's session id: every process it started (plugins too) is in it."""
    output: str
    returncode: int | None
    engine_lock: bool = False
    """True when the kill left a Pulumi lock: it hit an engine at work (``up``, ``refresh``, ``stack import``)."""


def _landed(home: Path) -> str:
    from dr.failover.frame.journal import Journal

    journal = Journal.load(home)
    if journal is None:
        return "not reached"
    running = [n for n, s in journal.record.steps.items() if s.status == "running"]
    return running[0] if running else "between steps"


def kill_inside(
    command: list[str],
    env: dict[str, str],
    state: Path,
    step: str,
    delay_s: float,
    *,
    cwd: Path,
    timeout: float = 600,
    in_engine: bool = False,
) -> Kill:
    """Run ``command`` (a ``drctl failover``) in a session of its own; ``delay_s`` after it prints the start
    of ``step`` (``[k/n] step: …``) — or, with ``in_engine``, after a Pulumi engine then takes the stack's
    lock (an ``up``, ``refresh`` or ``import`` at work: the event the kill must land inside, not a guess of
    when it starts) — SIGKILL its whole process group, as ``kill -9 -PGID`` does."""
    from dr.estate.pulumi_locks import stack_locks
    from dr.topology import NAMESPACE

    proc = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    started = threading.Event()
    marker = re.compile(rf"\[\d+/\d+\] {re.escape(step)}: (?!\S+ earlier — skipped)")

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if marker.search(line):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while not started.is_set() and proc.poll() is None and time.monotonic() < deadline:
        started.wait(0.05)
    if started.is_set() and in_engine:
        while not stack_locks(state.parent / "pulumi", NAMESPACE, state.name) and proc.poll() is None:
            time.sleep(0.02)
    if started.is_set():
        time.sleep(delay_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(10)
    engine_lock = bool(stack_locks(state.parent / "pulumi", NAMESPACE, state.name))
    if proc.returncode == -signal.SIGKILL:
        landed = _landed(journal_home(env, state.name)) if started.is_set() else "before the step"
    else:  # the run ended first: 0 when the failover completed (the step was done earlier, or quick)
        landed = "run completed first" if proc.returncode == 0 else f"run exited {proc.returncode}"
    return Kill(step, round(delay_s, 3), landed, proc.pid, "".join(lines), proc.returncode, engine_lock)


def session_processes(session: int) -> list[tuple[int, str]]:
    """Live (non-zombie) processes of session ``session``: what a killed run left running."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            left.append((int(entry.name), cmdline[:160]))
    return left


DEFAULT_SEED = 130343
"""The crash instants' seed unless ``KDR_CRASH_SEED`` says otherwise."""


def crash_seed(said: str | None) -> int:
    """The seed to draw the kill instants from: ``said`` (``KDR_CRASH_SEED``) as a number, a fresh one for
    ``random``, :data:`DEFAULT_SEED` when unset."""
    if not said:
        return DEFAULT_SEED
    return time.time_ns() % 1_000_000 if said == "random" else int(said)
