"""The controller's idle cost (issue 43): ``drctl controller --site B`` watching a healthy local estate (A → B,
MirrorMaker 2; the example stack, ``mode: manual``, its metrics served) for ``--seconds``, against the cheapest
watcher that could replace it — a Python process that, at the controller's own pass interval, reads the
metadata of A and B with one confluent-kafka admin client each and keeps nothing else.

    .venv/bin/python -m benchmarks.controller_idle_bench [--seconds 120]

Both run on the same estate in the same run, one after the other. Printed for each: CPU seconds per minute
of wall time (user + system of the process and its children, from ``/proc/<pid>/stat``), the resident memory
at the end and its peak (``VmRSS``/``VmHWM``), and the passes made — then ``controller / baseline`` for each
figure. The controller does more per pass than the baseline (a ``drctl status`` report: topics, lag, links,
offsets snapshots; its metrics; its log); the ratio is the price of that, per pass.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

from tests import REPO_ROOT
from tests.integration.helpers import StackEnv, provisioned, write_local_stack
from tests.integration.ports import free_window, release_window, windows

STACK = "ctlbench"

BASELINE = textwrap.dedent(
    """
    import sys, time
    from dr.base.stackref import StackRef
    from dr.estate.estate import Estate
    from dr.kafka.client import admin_client
    from dr.topology import load_stack_file
    stack, interval, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    ref = StackRef.resolve(stack)
    estate = Estate(load_stack_file(ref.stack_file), ref.state_dir)
    admins = [admin_client(estate.endpoint(name)) for name in ("A", "B")]
    end, passes = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for admin in admins:
            admin.list_topics(timeout=interval)
        passes += 1
        time.sleep(interval)
    print(passes)
    """
)


def _stat(pid: int) -> tuple[float, float]:
    """(own CPU seconds, reaped children's CPU seconds) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def _memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    found = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Vm")
    )
    return tuple(int(found[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def _measure(command: list[str], env: dict[str, str], seconds: float, settle: float) -> dict[str, float]:
    """Run ``command`` for ``settle`` + ``seconds``; its CPU per minute over the last ``seconds`` and its memory."""
    proc = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # noqa: S603
    try:
        time.sleep(settle)  # its start (imports, first pass) is not idle
        own0, kids0 = _stat(proc.pid)
        t0 = time.monotonic()
        time.sleep(seconds)
        own1, kids1 = _stat(proc.pid)
        wall = time.monotonic() - t0
        rss, peak = _memory_mb(proc.pid)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=90)
    return {
        "cpu_s_per_min": ((own1 - own0) + (kids1 - kids0)) * 60 / wall,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "output_lines": len(out.splitlines()),
    }


def main() -> None:
    """Run both watchers on one estate and print the figures (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--settle", type=float, default=20.0)
    args = parser.parse_args()
    metrics = free_window(1)
    try:
        with tempfile.TemporaryDirectory(prefix="kdr-ctl-bench-") as tmp, windows(3) as ports:
            root = Path(tmp)
            path = write_local_stack(root, STACK, ports)
            doc = yaml.safe_load(path.read_text())
            doc["config"]["kafka-dr:failoverPolicy"] = {"mode": "manual", "metricsPorts": {"B": metrics}}
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            with provisioned(StackEnv(root, STACK)) as env:
                environ = {**os.environ, **env}
                interval = 5.0  # the controller's pass at the default detect_after_s (30 s / 6)
                controller = _measure(
                    [sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, "--site", "B"],
                    environ, args.seconds, args.settle,
                )  # fmt: skip
                baseline = _measure(
                    [sys.executable, "-c", BASELINE, STACK, str(interval), "1e9"],
                    environ, args.seconds, args.settle,
                )  # fmt: skip
    finally:
        release_window(metrics)
    figures = {"controller": controller, "baseline (metadata poll)": baseline}
    print(json.dumps(figures, indent=1))
    for key in ("cpu_s_per_min", "rss_mb", "peak_rss_mb"):
        print(
            f"{key}: controller {controller[key]:.2f}, baseline {baseline[key]:.2f}, "
            f"controller / baseline {controller[key] / baseline[key]:.2f}"
        )


if __name__ == "__main__":
    main()
