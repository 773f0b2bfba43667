"""The README's first command, as a new user runs it: ``make demo`` in a fresh copy of the repository.

It must exit 0 and print the graded summary §6 of "What `make demo` shows" (docs/getting-started/demo.md) lists. The copy
holds the repository's files only (no ``.venv``, ``.env``, ``.state`` or ``out``); set-up runs in it
as on a new machine, reusing the toolchain cache outside the clone (``$KDR_HOME``), as CI's second run
would. The demo uses its stack's own ports (16100+, the client endpoint 16900+), as the README's command does.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests import REPO_ROOT, processes
from tests.integration.drill_runner import assert_drill_text, assert_graded, drill_json
from tests.integration.helpers import jvms_under

# Variables of the outer run that a new user's shell does not have.
_OUTER = ("VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "KDR_STACK_DIR", "KDR_STATE_DIR", "PYTHONPATH")


def _fresh_copy(dest: Path) -> Path:
    """The repository's tracked and new (not ignored) files, copied as a clone would hold them."""
    listed = processes.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        src = REPO_ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)
    return dest


@pytest.mark.timeout(2100)  # above the 1800 s its command may take: the inner timeout kills its tree first
def test_make_demo_passes_and_prints_the_graded_summary(tmp_path: Path) -> None:
    repo = _fresh_copy(tmp_path / "kafka-dr")
    env = {k: v for k, v in os.environ.items() if k not in _OUTER and not k.startswith("PULUMI_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    t0 = time.monotonic()
    res = processes.run(["make", "demo"], cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    took = time.monotonic() - t0
    out = repo / "out" / "demo"
    try:
        print(f"\nmake demo: exit {res.returncode} in {took:.0f}s\n{res.stdout[-3000:]}")
        assert res.returncode == 0, f"make demo exited {res.returncode}:\n{res.stderr[-5000:]}"
        assert "internal error" not in res.stderr, res.stderr[-3000:]
        r = drill_json(out)
        assert r["grade"].startswith("PASS") and r["stack"] == "local-endpoint" and r["mode"] == "planned", r.get(
            "grade"
        )
        assert r["endpoint_clients"]["acknowledged_lost"] == 0 and r["endpoint_clients"]["skipped"] == 0, r["checks"]
        assert len(r["cycles"]) == 1 and r["cycles"][0]["chain"] == "A→B→C"
        assert_graded(r["checks"])
        assert_drill_text(res.stdout, r)
    finally:
        assert not jvms_under(repo), "make demo left JVMs running"
