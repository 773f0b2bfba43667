"""The cost of detection (issue 43): the unattended RTO of ``drctl drill --unplanned --automatic`` against the
RTO of the same unplanned drill run by a person at once (``drctl drill --unplanned``), on the same stack.

    .venv/bin/python -m benchmarks.unattended_rto_bench [--detect-after 15] [--lease-ttl 4] [--margin 1] [--repeat 1]

The stack is the local example (A on one broker, B, C) with a failover policy declaring ``--detect-after``,
``--lease-ttl`` and ``--margin`` (30, 10 and 5 are the policy's defaults); each drill builds its own estate from it (its own ports) and tears it
down. The runs alternate, manual first. Printed per run: the writing application's RTO on its own traffic
(last write acknowledged by A → first by B), and for the automatic drill detection, promotion and the
unattended RTO, each from the instant site A was lost; then the medians and the ratio automatic / manual of
the application's RTO. The difference is what nobody typing costs: ``detectAfterS`` plus the lease's expiry
and margin, plus a controller pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests import REPO_ROOT, processes
from tests.integration.helpers import write_local_stack
from tests.integration.ports import windows

STACK = "rtobench"


def _drill(root: Path, out: Path, automatic: bool, base_port: int) -> dict[str, Any]:
    flags = ["--unplanned", *(["--automatic"] if automatic else []), "--warmup", "4", "--base-port", str(base_port)]
    res = processes.run(  # its own process group, killed whole on a timeout: no JVM outlives the benchmark
        [sys.executable, "-m", "dr.cli", "drill", "--stack", STACK, "--out", str(out), *flags],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=3600,
        env={**os.environ, "KDR_STACK_DIR": str(root), "KDR_STATE_DIR": str(root / "state")},
    )  # fmt: skip
    (out.parent / f"{out.name}.log").write_text(res.stdout + res.stderr)
    doc = json.loads((out / "drill.json").read_text()) if (out / "drill.json").exists() else {}
    if not doc.get("cycles"):
        raise SystemExit(f"the drill ran no failover (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return doc


def _writes_rto(doc: dict[str, Any]) -> float | None:
    return next((a["rto_s"] for a in doc.get("application_rto", []) if a["kind"] == "writes"), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detect-after", type=float, default=15.0, help="the policy's detectAfterS (seconds)")
    parser.add_argument(
        "--lease-ttl", type=float, default=4.0, help="the policy's leaseTtlS (the policy's default: 10)"
    )
    parser.add_argument("--margin", type=float, default=1.0, help="the policy's marginS (the policy's default: 5)")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of drills (manual, automatic)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", type=Path, default=None, help="run in this directory and keep the drills' logs")
    args = parser.parse_args()
    manual: list[float] = []
    unattended: list[float] = []
    runs: list[dict[str, Any]] = []
    # one window for all: the drill moves the clusters to --base-port, +100, +200 (its endpoint and witness after
    # them), so three separate windows would leave B's and C's ports unreserved
    with tempfile.TemporaryDirectory(prefix="kdr-rto-bench-") as tmp, windows(1, size=500) as (base,):
        ports = (base, base + 100, base + 200)
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {
            "mode": "manual", "detectAfterS": args.detect_after, "leaseTtlS": args.lease_ttl, "marginS": args.margin,
            "maxRpoRecords": 100_000,
        }  # fmt: skip
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        for i in range(args.repeat):
            for automatic in (False, True):
                result = _drill(root, root / f"drill-{i}-{'auto' if automatic else 'manual'}", automatic, ports[0])
                rto = _writes_rto(result)
                row: dict[str, Any] = {"automatic": automatic, "grade": result["grade"], "application_rto_s": rto}
                if automatic:
                    u = result.get("unattended") or {}
                    row.update({k: u.get(k) for k in ("detection_s", "promotion_s", "unattended_rto_s", "acted_by")})
                    if u.get("unattended_rto_s") is not None:
                        unattended.append(u["unattended_rto_s"])
                elif rto is not None:
                    manual.append(rto)
                runs.append(row)
                print(json.dumps(row), flush=True)
    if manual and unattended:
        m, u = statistics.median(manual), statistics.median(unattended)
        print(
            f"median application RTO: manual {m:.1f}s, unattended {u:.1f}s (detectAfterS {args.detect_after:g}); "
            f"automatic / manual = {u / m:.1f}x"
        )
    if args.json:
        policy = {"detect_after_s": args.detect_after, "lease_ttl_s": args.lease_ttl, "margin_s": args.margin}
        args.json.write_text(json.dumps({"runs": runs, **policy}, indent=2))


if __name__ == "__main__":
    main()
