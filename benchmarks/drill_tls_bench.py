"""Benchmark: what TLS costs a failover, as the drill measures it (not a test).

In one run, one after the other on this machine: ``drctl drill`` on the example stack ``local-tls``
(``local_tls``: SASL_SSL listeners, the estate's CA) and on the same stack with ``local_tls`` removed
(SASL_PLAINTEXT; everything else identical) — each from nothing in a scratch state directory, on free
ports. Each drill is one planned game day: traffic on the published client files, the
failover, the Spark verification, C brought up from B. Read from each ``drill.json``: the applications'
RTO (the producer's and the consumer's) and A→B→C. Printed: the figures and the ratios TLS / plaintext;
``--json FILE`` keeps them::

    .venv/bin/python benchmarks/drill_tls_bench.py --json out/drill-tls.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.integration.drill_runner import drill_json  # noqa: E402
from tests.integration.helpers import write_local_stack  # noqa: E402
from tests.integration.ports import windows  # noqa: E402


def drill(stack: str, tls: bool) -> dict[str, Any]:
    """One drill of ``Pulumi.local-tls.yaml`` (``local_tls`` removed unless ``tls``) from nothing; its figures."""
    with tempfile.TemporaryDirectory(prefix=f"kdr-bench-{stack}-") as tmp, windows(3) as ports:
        root = Path(tmp)
        path = write_local_stack(root, "bench", ports, one_broker=(), example="Pulumi.local-tls.yaml")
        if not tls:
            doc = yaml.safe_load(path.read_text())
            for c in doc["config"]["kafka-dr:clusters"]:
                c.pop("local_tls", None)
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        env = {**os.environ, "KDR_STACK_DIR": str(root), "KDR_STATE_DIR": str(root / "state")}
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "dr.cli", "drill", "--stack", "bench", "--out", str(root / "out")],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=1800,
        )
        took = time.monotonic() - t0
        result = drill_json(root / "out")
        if res.returncode != 0 or not result.get("cycles"):
            raise SystemExit(f"the drill on {stack} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
        (cycle,) = result["cycles"][:1]
        return {
            "stack": stack,
            "drill_s": round(took, 1),
            "grade": result.get("grade"),
            "application_rto_s": {f"{r['application']} ({r['kind']})": r["rto_s"] for r in cycle["application_rto"]},
            "a_b_c_s": cycle["failover"]["a_b_c_s"],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    runs = {"local": drill("local", tls=False), "local-tls": drill("local-tls", tls=True)}
    plain, tls = runs["local"], runs["local-tls"]
    ratios: dict[str, float | None] = {}
    for app, rto in plain["application_rto_s"].items():
        other = tls["application_rto_s"].get(app)
        ratios[f"RTO {app}"] = round(other / rto, 2) if rto and other is not None else None
    ratios["A→B→C"] = round(tls["a_b_c_s"] / plain["a_b_c_s"], 2) if plain["a_b_c_s"] else None
    for run in runs.values():
        rtos = ", ".join(f"{k} {v}s" for k, v in run["application_rto_s"].items())
        print(
            f"{run['stack']:<10} application RTO: {rtos}; A→B→C {run['a_b_c_s']}s; drill {run['drill_s']}s, {run['grade']}"
        )
    print("TLS / plaintext: " + ", ".join(f"{k} {v}" for k, v in ratios.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": runs, "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
