"""How long the estate takes through Pulumi, each figure beside a baseline measured in the same run
(not a test).

    .venv/bin/python benchmarks/pulumi_bench.py [--rounds 2] [--skip-drill]

1. ``pulumi up`` of the local stack from nothing (A with 3 brokers, B, users, topics, ACLs,
   MirrorMaker 2 A→B), run as a user runs it (CLI, language host, Kafka provider) — against the
   baseline of the runtime starting the same clusters and MirrorMaker 2 directly, no Pulumi.
2. a no-op ``pulumi preview`` of that stack — against the preview of a program with no resource
   (what the engine, the language host and Python cost by themselves).
3. a planned ``drctl drill`` on the same stack shape: application RTO and A→B→C through the
   Pulumi path (the aims: up ≤ 90 s, no-op preview ≤ 10 s, RTO ≤ 10 s, A→B→C ≤ 60 s).
4. warm ``make setup`` (every cache filled).

Ports 29100+ (below the ephemeral range). Every process it starts is stopped before it exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from dr.base.pulumi_env import pulumi_env
from dr.base.toolchain import toolchain
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker

BASE = 29100
#: The clone this benchmark runs from: its Pulumi.yaml, example stack and stacks/ program are copied.
REPO_ROOT = Path(__file__).resolve().parent.parent


def _stack_doc(base: int) -> dict:
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for i, c in enumerate(doc["config"]["kafka-dr:clusters"]):
        c["base_port"] = base + 100 * i
    return doc


class Project:
    """A scratch Pulumi project: the repository's Pulumi.yaml, stacks/ linked in, its own backend."""

    def __init__(self, root: Path, stack: str, doc: dict | None) -> None:
        self.root, self.stack = root, stack
        if doc is None:  # the empty program: same runtime, no main directory
            (root / "Pulumi.yaml").write_text("name: kdr-empty\nruntime:\n  name: python\n")
        else:
            shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
        if doc is not None:
            (root / "stacks").symlink_to(REPO_ROOT / "stacks")
            (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        (root / "passphrase").write_text("bench\n")
        self.env = {
            **os.environ,
            **pulumi_env(root / "backend"),
            "KDR_STATE_DIR": str(root / "state"),
            "KDR_STACK_DIR": str(root),
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(root / "passphrase"),
        }
        self.run("stack", "select", "--create", stack)

    def run(self, *args: str) -> float:
        t0 = time.monotonic()
        out = subprocess.run(
            [str(toolchain().pulumi_bin / "pulumi"), *args, "--non-interactive"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            raise SystemExit(f"pulumi {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
        return time.monotonic() - t0


def runtime_start(state: Path, base: int) -> float:
    """Baseline: the same clusters and MirrorMaker 2 started by the runtime alone; then stopped."""
    a = LocalCluster(ClusterSpec("A", brokers=3, base_port=base, racks=("r1", "r2", "r3")), state)
    b = LocalCluster(ClusterSpec("B", brokers=1, base_port=base + 100), state)
    mm = MirrorMaker(a, b, state)
    t0 = time.monotonic()
    try:
        a.start()
        b.start()
        mm.start()
        return time.monotonic() - t0
    finally:
        mm.stop()
        a.destroy()
        b.destroy()


def pulumi_rounds(rounds: int) -> dict:
    ups, baselines, previews, empty_previews = [], [], [], []
    for r in range(rounds):
        with tempfile.TemporaryDirectory(prefix="kdr-bench-") as tmp:
            root = Path(tmp)
            baselines.append(runtime_start(root / "baseline", BASE + 500))
            (root / "p").mkdir()
            project = Project(root / "p", "bench", _stack_doc(BASE))
            try:
                ups.append(project.run("up", "--yes", "--skip-preview"))
                previews.append(project.run("preview", "--expect-no-changes"))
            finally:
                project.run("destroy", "--yes", "--skip-preview")
            (root / "e").mkdir()
            (root / "e" / "__main__.py").write_text("import pulumi\npulumi.export('nothing', 0)\n")
            empty = Project(root / "e", "empty", None)
            empty.run("up", "--yes", "--skip-preview")
            empty_previews.append(empty.run("preview", "--expect-no-changes"))
        print(
            f"round {r + 1}: up {ups[-1]:.1f}s (runtime alone {baselines[-1]:.1f}s); "
            f"no-op preview {previews[-1]:.1f}s (empty program {empty_previews[-1]:.1f}s)",
            flush=True,
        )
    med = statistics.median
    return {
        "up_s": med(ups),
        "runtime_start_s": med(baselines),
        "up_over_runtime": med(ups) / med(baselines),
        "preview_s": med(previews),
        "empty_preview_s": med(empty_previews),
        "preview_over_empty": med(previews) / med(empty_previews),
        "rounds": rounds,
        "all": {"up": ups, "runtime": baselines, "preview": previews, "empty_preview": empty_previews},
    }


def drill() -> dict:
    with tempfile.TemporaryDirectory(prefix="kdr-bench-drill-") as tmp:
        root = Path(tmp)
        (root / "Pulumi.benchdrill.yaml").write_text(yaml.safe_dump(_stack_doc(BASE + 1000), sort_keys=False))
        out = subprocess.run(
            [sys.executable, "-m", "dr.cli", "drill", "--stack", "benchdrill", "--out", str(root / "out"), "--json"],
            env={**os.environ, "KDR_STACK_DIR": str(root)},
            capture_output=True,
            text=True,
            timeout=1200,
            cwd=REPO_ROOT,
        )
        if out.returncode != 0:
            raise SystemExit(f"drill failed:\n{out.stderr[-4000:]}")
        r = json.loads(out.stdout)
        f = r["failover"]
        steps = {s["name"]: s["seconds"] for s in f["steps"]}
        return {
            "grade": r["grade"],
            "rto_s": f["rto_s"],
            "a_b_c_s": f["a_b_c_s"],
            "desired_state_s": steps.get("desired-state"),
            "preview_after_failover": r["preview_after_failover"],
        }


def warm_setup() -> float:
    t0 = time.monotonic()
    subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO_ROOT, check=True, capture_output=True, timeout=600)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-drill", action="store_true")
    args = ap.parse_args()
    result = {"pulumi": pulumi_rounds(args.rounds)}
    if not args.skip_drill:
        result["drill"] = drill()
    result["warm_setup_s"] = warm_setup()
    p, d = result["pulumi"], result.get("drill")
    print(
        f"pulumi up from nothing: {p['up_s']:.1f}s = {p['up_over_runtime']:.2f}x the runtime starting the same "
        f"clusters and MM2 ({p['runtime_start_s']:.1f}s) [aim <= 90 s]"
    )
    print(
        f"no-op preview: {p['preview_s']:.1f}s = {p['preview_over_empty']:.2f}x the preview of an empty program "
        f"({p['empty_preview_s']:.1f}s) [aim <= 10 s]"
    )
    if d:
        print(
            f"planned drill through Pulumi: {d['grade']}; RTO {d['rto_s']}s [aim <= 10 s]; A->B->C {d['a_b_c_s']}s "
            f"[aim <= 60 s] (desired-state step {d['desired_state_s']}s); preview after: "
            f"{d['preview_after_failover'] or 'no changes'}"
        )
    print(f"warm setup: {result['warm_setup_s']:.1f}s [aim <= 5 s]")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
