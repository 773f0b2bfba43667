"""Run (or resume) a stack's failover and die right after one step is journaled — a real process death.

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
import sys

from dr.base.errors import DRError
from dr.base.stackref import StackRef
from dr.failover.pipeline import run_failover
from dr.failover.steps import FailoverOptions, StepResult

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
