"""A drill never touches the stack it rehearses, whatever backend the environment names.

One live local stack ``mini`` (A on one broker, B, the link), provisioned by ``drctl estate up`` with its
``file://`` backend exported as the clone's ``.env`` exports it; its checkpoint is also imported into a real
PostgreSQL (:mod:`tests.pg_server`) as a team would hold it — one set of processes, two backends naming
them. ``drctl drill --stack mini --base-port …`` then runs with each backend exported in turn: once the
drill's ``pulumi up`` is done (its own estate provisioned) it is interrupted (SIGINT: its teardown runs
``pulumi destroy``). Before the fix the drill's ``up`` and teardown acted on the live stack of the same name
(its clusters replaced, then destroyed). Now the live stack's checkpoint holds the same resources and its
brokers and MirrorMaker 2 the same pids, alive; the drill left none of its own processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.base.pulumi_env import pulumi_env
from dr.runtime.process import pid_alive
from tests import REPO_ROOT
from tests.integration.helpers import StackEnv, jvms_under, provisioned, write_local_stack
from tests.integration.ports import windows
from tests.pg_server import pg_server

STACK = "mini"


def _pulumi(env: dict[str, str], cwd: Path, *args: str) -> str:
    full = {**os.environ, **pulumi_env(env["PULUMI_BACKEND_URL"]), **env}
    res = subprocess.run(
        ["pulumi", "--cwd", str(cwd), "--non-interactive", *args], capture_output=True, text=True, env=full, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def _resources(env: dict[str, str], cwd: Path) -> list[tuple[str, str]]:
    """The stack's checkpoint in the exported backend, as (URN, ID) of each resource."""
    doc = json.loads(_pulumi(env, cwd, "stack", "export", "--stack", STACK))
    return sorted((r["urn"], r.get("id", "")) for r in doc["deployment"].get("resources", []))


def _pids(live: StackEnv) -> dict[str, int]:
    estate = live.estate()
    found = {f"{c}/{n}": p for c in ("A", "B") for n, p in estate.local_cluster(c).pids().items()}
    mm2 = estate.mirror("A-to-B").process.pid
    assert mm2 is not None and found, "the live estate runs"
    return {**found, "A-to-B": mm2}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackEnv]:
    root = tmp_path_factory.mktemp("live")
    with windows(3) as ports:
        write_local_stack(root, STACK, ports)
        env = StackEnv(root, STACK)
        env["PULUMI_BACKEND_URL"] = f"file://{root / 'state' / 'pulumi'}"  # as `.env` exports it
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(root / "state" / "passphrase")
        (root / "state").mkdir(mode=0o700)
        (root / "state" / "passphrase").write_text("the live stack's passphrase\n")
        (root / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
        with provisioned(env) as e:
            yield e


@pytest.fixture(scope="module")
def team(live: StackEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackEnv]:
    """A second clone whose exported backend is PostgreSQL, holding the live stack's checkpoint."""
    clone = tmp_path_factory.mktemp("team-clone")
    for name in ("Pulumi.yaml", f"Pulumi.{STACK}.yaml"):
        shutil.copy(live.root / name, clone / name)
    exported = clone / "mini.json"
    exported.write_text(_pulumi(live, live.root, "stack", "export", "--stack", STACK))
    with pg_server() as url:
        env = StackEnv(clone, STACK)
        env["PULUMI_BACKEND_URL"] = str(url)
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = live["PULUMI_CONFIG_PASSPHRASE_FILE"]
        _pulumi(env, clone, "stack", "init", STACK)
        _pulumi(env, clone, "stack", "import", "--stack", STACK, "--file", str(exported))
        assert _resources(env, clone) == _resources(live, live.root)
        try:
            yield env
        finally:  # the processes are the live stack's: removed from this backend only, not destroyed
            subprocess.run(
                ["pulumi", "--cwd", str(clone), "--non-interactive", "stack", "rm", STACK, "--force", "--yes"],
                env={**os.environ, **pulumi_env(str(url)), **env}, capture_output=True, timeout=120,
            )  # fmt: skip


def _interrupted_drill(env: StackEnv, out: Path, base_port: int) -> tuple[bool, str]:
    """``drctl drill`` with ``env`` exported, SIGINTed once its ``pulumi up`` is done; whether it got that
    far, and its whole output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dr.cli", "drill", "--stack", STACK, "--out", str(out), "--base-port", str(base_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, env={**os.environ, **env},
    )  # fmt: skip
    lines: list[str] = []
    provisioned_ = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if f"stack {STACK}: up done" in line:
                provisioned_.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while not provisioned_.wait(1) and proc.poll() is None:
            pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # its teardown runs `pulumi destroy`
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    return provisioned_.is_set(), "".join(lines)


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_a_drill_leaves_the_live_stack_of_the_same_name_untouched(
    backend: str, live: StackEnv, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    exported = live if backend == "file" else request.getfixturevalue("team")
    before, pids = _resources(exported, exported.root), _pids(live)
    out = tmp_path / "drill"
    with windows(1, size=300) as (base,):
        provisioned_, text = _interrupted_drill(exported, out, base)
    assert _resources(exported, exported.root) == before, f"the live checkpoint changed:\n{text[-4000:]}"
    assert _pids(live) == pids and all(pid_alive(p) for p in pids.values()), text[-4000:]
    assert provisioned_, f"the drill provisioned its own estate:\n{text[-4000:]}"
    assert not jvms_under(out), "the drill's own estate is torn down"
    assert (out / "pulumi" / ".kdr-drill-owner").exists(), "the drill ran on a backend of its own"
    assert out.stat().st_mode & 0o077 == 0, "the drill's directory is private"
