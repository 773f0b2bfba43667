"""The failover journal's write cost per step: the file store (JSON + fsync + rename) vs the team
store (one PostgreSQL transaction), measured in one run on this machine.

    .venv/bin/python -m benchmarks.journal_store_bench [--steps 200]

A "step" is what the pipeline writes for one step: ``start_step`` then ``finish_step`` (two writes),
under the stack's lock as a failover holds it (PostgreSQL: each write checks the lease's epoch).
PostgreSQL is the throwaway server of :mod:`tests.pg_server` (127.0.0.1, fsync off as in the tests:
a production server with fsync on adds its WAL flush to each commit).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from dr.failover.frame.journal import Journal, StackLock
from tests.pg_server import pg_server


def _per_step(home: Path, steps: int) -> list[float]:
    with StackLock(home, home.name):  # as a failover writes: under the stack's lock (PostgreSQL: fenced by its lease)
        return _writes(home, steps)


def _writes(home: Path, steps: int) -> list[float]:
    names = [f"s{i}" for i in range(steps)]
    journal = Journal.create(
        home, stack=home.name, mode="planned", source="A", target="B", standby=None,
        original_config={}, desired_config={}, steps=names,
    )  # fmt: skip
    journal.begin_run(mode="planned", options={})
    out = []
    for name in names:
        t0 = time.perf_counter()
        journal.start_step(name, {"n": 1})
        journal.finish_step(name, "done", {"summary": "ok"}, 0.0)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    """Measure both stores and print a Markdown table (ms per step: median, p95)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    os.environ.pop("PULUMI_BACKEND_URL", None)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(("file (JSON, fsync, rename)", _per_step(Path(tmp) / "filestack", args.steps)))
        with pg_server() as url:
            os.environ["PULUMI_BACKEND_URL"] = url
            rows.append(("PostgreSQL (one transaction per write)", _per_step(Path(tmp) / "pgstack", args.steps)))
    print("| store | ms per step (2 writes), median | p95 | steps |\n|---|---|---|---|")
    for name, ms in rows:
        p95 = sorted(ms)[int(len(ms) * 0.95) - 1]
        print(f"| {name} | {statistics.median(ms):.2f} | {p95:.2f} | {len(ms)} |")


if __name__ == "__main__":
    main()
