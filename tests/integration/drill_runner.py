"""``drctl drill`` as the integration tests run it: a subprocess on a stack file written under a temporary
directory, printing the text a person reads; the figures are read back from ``<out>/drill.json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import REPO_ROOT, processes


def drctl_drill(stack_dir: Path, stack: str, out: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``drctl drill --stack STACK --out OUT ARGS...`` (text output) with the stack file in ``stack_dir``."""
    return processes.run(
        [sys.executable, "-m", "dr.cli", "drill", "--stack", stack, "--out", str(out), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KDR_STACK_DIR": str(stack_dir)},
        timeout=timeout,
        cwd=REPO_ROOT,
    )


def drill_json(out: Path) -> dict[str, Any]:
    """The drill's result as ``drill.json`` holds it ({} when the drill wrote none)."""
    path = out / "drill.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}s"


def assert_drill_text(text: str, r: dict[str, Any]) -> None:
    """The printed summary holds every line §6 of "What `make demo` shows" (docs/getting-started/demo.md) lists,
    with drill.json's figures:
    the grade, RTO per application on its own traffic, the RTO probe, A→B→C, time per step, the verification
    cut-off (UTC and epoch ms), RPO, messages lost before and after recovery, records read twice, the HTML report."""
    lines = text.splitlines()
    header = f"DRILL ({r['mode']}) on stack {r['stack']}: {r['grade']}"
    assert any(line.startswith(header) for line in lines), f"no line starts {header!r} in:\n{text}"
    assert f"drill result: {Path(r['out']) / 'drill.json'}" in text, text
    for c in r["cycles"]:
        s = c["failover"]
        for app in c["application_rto"]:
            line = f"application RTO {app['application']} ({app['kind']}): {_secs(app['rto_s'])} — {app['measured']}"
            assert line in text, f"missing {line!r} in:\n{text}"
        assert f"RTO probe {_secs(s['rto_s'])} (supplement) · {c['chain']} {_secs(s['a_b_c_s'])}" in text, text
        assert f"A→B→C ({s['source']} → {s['target']}" in text, text
        for step in s["steps"]:
            assert re.search(rf"^\s+\d+\. {re.escape(step['name'])}\s+{re.escape(step['status'])}\b", text, re.M), (
                f"step {step['name']} is not printed with its status {step['status']}:\n{text}"
            )
        if s["cutoff_ms"] is not None:
            assert f"verification cut-off: {s['cutoff_utc']} ({s['cutoff_ms']} ms)" in text, text
        assert (
            f"never reached {c['target']} {c['rpo']['actual_never_replicated']}; acknowledged and lost before "
            f"recovery {c['lost_before_recovery']}; after recovery {c['lost_after_recovery']}"
        ) in text, text
        if c["consumer"]:
            assert f"{c['consumer']['read_twice']} read twice, {c['consumer']['skipped']} skipped" in text, text
        e = c.get("endpoint_clients")
        if e:  # the unmodified clients on the client endpoint, beside the published-configuration RTO
            assert f"unmodified client RTO {e['producer']} (writes): {_secs(e['writes_rto_s'])} — " in text, text
            if e["group"]:
                assert f"unmodified client RTO {e['group']} (reads): {_secs(e['reads_rto_s'])} — " in text, text
        k = c.get("replicator_crash")
        if k:  # --kill-replicator: what was killed and the copies it left twice
            assert f"replicator crash: link {k['link']} ({k['delivery']}): {k['killed']} SIGKILLed after " in text, text
            assert f"records on {c['target']} twice: {k['duplicated']}" in text, text
        assert f"HTML report: {c['report_html']}" in text, text
        assert c["report_html"] and Path(c["report_html"]).is_file(), c["report_html"]


def assert_graded(checks: list[dict[str, Any]]) -> None:
    """The suite's one timing policy: every correctness check passed (or does not apply) and every timing aim
    was measured. A measured aim over its bound is graded MISSED and passes here: load alone can miss it, so
    aims are enforced only by ``drctl drill --strict-aims`` and ``benchmarks/``, never by a correctness test."""
    assert checks, "the drill graded nothing"
    failed = [c["check"] for c in checks if c["result"] == "FAIL"]
    assert not failed, f"checks failed (an aim FAILs only when its figure was not measured): {failed}"
    aims = [c for c in checks if c.get("aim")]
    assert aims and all(c["result"] in ("PASS", "MISSED") for c in aims), aims


def kept_stack_env(out: Path, stack: str) -> dict[str, str]:
    """The environment in which ``drctl`` (and :class:`dr.base.stackref.StackRef`) sees the estate a
    ``drctl drill --keep --out OUT`` left as an operator's stack ``stack``: the drill's copy of the stack file
    (``OUT/stack``), its backend ``OUT/pulumi`` (whose passphrase file sits beside it) and its state
    ``OUT/state`` — pinned as that stack's state directory (``KDR_PINNED_STATE``: the very path the drill's
    program declared, so a ``pulumi up`` from here changes nothing), and reachable for the tests as
    ``$KDR_STATE_DIR/<stack>`` through a directory beside ``OUT`` linking that name to it."""
    from dr.base.stackref import PINNED_STATE

    base = out.parent / f"kept-{stack}"
    base.mkdir()
    (base / stack).symlink_to(out / "state")
    return {
        "KDR_STACK_DIR": str(out / "stack"),
        "KDR_STATE_DIR": str(base),
        PINNED_STATE: f"{stack}={out / 'state'}",
        "PULUMI_BACKEND_URL": f"file://{out / 'pulumi'}",
    }


def teardown_kept(stack_dir: Path, out: Path, stack: str) -> None:
    """What a drill does at its end without ``--keep``: ``pulumi destroy`` of its copy of the stack (the
    processes of the original topology and of the copy's current one stopped should the destroy fail)."""
    from dr.base.stackref import StackRef
    from dr.failover.drill.frame import current_topology, teardown
    from dr.topology import load_stack_file

    copy = out / "stack" / f"Pulumi.{stack}.yaml"
    if copy.exists():
        original = load_stack_file(stack_dir / f"Pulumi.{stack}.yaml")
        teardown(StackRef.of_file(copy, out / "state"), (original, *current_topology(copy)), print)
