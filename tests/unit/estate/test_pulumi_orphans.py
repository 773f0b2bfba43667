"""Plugins whose engine is gone are found by their backend and ended; an engine's live plugins are not (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from dr.estate.pulumi_orphans import find_orphans, reap_orphans
from dr.runtime.process import pid_alive, wait_until

SLEEPER = "import time; time.sleep(60)"


def _plugin(backend: Path, *, under: list[str] | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{backend}"}
    return subprocess.Popen([*(under or []), sys.executable, "-c", SLEEPER, "pulumi-resource-kafka"], env=env)


def test_an_orphaned_plugin_of_this_backend_is_reaped_and_others_are_left(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine", tmp_path / "other"
    orphan = _plugin(mine)
    foreign = _plugin(other)
    # a plugin whose engine (a process whose argv[0] is "pulumi") still runs
    spawn = f"import subprocess, sys, time; subprocess.Popen([{sys.executable!r}, '-c', {SLEEPER!r}, 'pulumi-resource-kafka']); time.sleep(60)"
    owned = subprocess.Popen(
        ["pulumi", "-c", spawn], executable=sys.executable, env={**os.environ, "PULUMI_BACKEND_URL": f"file://{mine}"}
    )
    try:
        time.sleep(0.5)
        found = {o.pid for o in find_orphans(mine)}
        assert orphan.pid in found and foreign.pid not in found
        assert not any(
            Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1] == str(owned.pid) for pid in found
        ), "a plugin of a live engine was taken for an orphan"
        reaped = reap_orphans(mine)
        assert orphan.pid in {o.pid for o in reaped}
        assert wait_until(lambda: orphan.poll() is not None, 10)
        assert foreign.poll() is None and owned.poll() is None
    finally:
        children = Path(f"/proc/{owned.pid}/task/{owned.pid}/children")
        kids = [int(k) for k in children.read_text().split()] if children.exists() else []
        for p in (orphan, foreign, owned):
            p.kill()
            p.wait()
        for kid in kids:
            os.kill(kid, 9)
    assert not pid_alive(orphan.pid)
