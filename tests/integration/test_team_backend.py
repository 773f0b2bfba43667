"""The team backend: Pulumi state, the failover journal and its lease in one PostgreSQL database.

A real PostgreSQL (:mod:`tests.pg_server`) and the existing estate of :mod:`tests.integration.existing_estate`
(clusters started outside the product: a team backend serves clusters that do not live on the operator's
machine). Operator 1 runs ``drctl estate up`` with ``PULUMI_BACKEND_URL=postgres://…`` and a planned
failover that is SIGKILLed (its whole process group) inside a step; operator 2 — another clone of the
project, its own empty ``KDR_STATE_DIR``, only the URL and the passphrase — sees it in ``drctl status``
(holder, step, since when), is refused while it has not asked to take the stale lease over, then resumes
it to completion. One estate, one database for the module; the tests run in order.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr.base.pulumi_env import pulumi_env
from dr.failover.kinds.active_passive.drill import read_keys
from dr.failover.team_store import TeamStore
from tests import REPO_ROOT
from tests.integration.existing_estate import ExistingEstate
from tests.integration.failover_crash_driver import kill_inside
from tests.integration.helpers import produce
from tests.integration.ports import windows
from tests.integration.test_external_estate import _admin, _stack_doc
from tests.pg_server import pg_server

STACK = "existing"
OUTPUTS: list[str] = []


class Operator:
    """One operator's clone: project dir, own state dir, the team's backend URL and passphrase."""

    def __init__(self, root: Path, name: str, url: str, passphrase: Path) -> None:
        self.root, self.project = root, root / "project"
        self.vars = {
            "KDR_STACK_DIR": str(self.project),
            "KDR_STATE_DIR": str(root / "state"),
            "PULUMI_BACKEND_URL": url,
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
            "KDR_OPERATOR": name,
            "KDR_LEASE_STALE_S": "3",
        }

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.vars}

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **pulumi_env(self.vars["PULUMI_BACKEND_URL"]), **self.vars}
        res = subprocess.run(
            ["pulumi", "--cwd", str(self.project), "--non-interactive", *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        return res

    def drctl(self, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [sys.executable, "-m", "dr.cli", *args],
            capture_output=True, text=True, env={**self.env(), **(extra or {})}, timeout=900, cwd=REPO_ROOT,
        )  # fmt: skip
        OUTPUTS.append(res.stdout + res.stderr)
        return res


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_server() as url:
        yield url


@pytest.fixture(scope="module")
def existing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExistingEstate]:
    root = tmp_path_factory.mktemp("team-estate")
    with windows(3) as ports:
        estate = ExistingEstate(root, (ports[0], ports[1], ports[2]))
        try:
            estate.start()
            yield estate
        finally:
            estate.stop()
            assert not estate.pids(), "a process of the existing estate was left running"


@pytest.fixture(scope="module")
def ops(pg_url: str, existing: ExistingEstate, tmp_path_factory: pytest.TempPathFactory) -> tuple[Operator, Operator]:
    """Two clones of one project; the stack created in the database with its secrets set by operator 1."""
    passphrase = tmp_path_factory.mktemp("team-secrets") / "passphrase"
    passphrase.write_text("correct horse battery staple\n")
    passphrase.chmod(0o600)
    one = Operator(tmp_path_factory.mktemp("operator-1"), "op1", pg_url, passphrase)
    one.project.mkdir()
    (one.project / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
    (one.project / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(_stack_doc(existing), sort_keys=False))
    res = one.pulumi("stack", "init", STACK)
    assert res.returncode == 0, res.stderr
    for i, name in enumerate("ABC"):
        res = one.pulumi(
            "config", "set", "--stack", STACK, "--path", "--secret", "--",
            f"kafka-dr:clusters[{i}].adminPassword", existing.clusters[name].admin_password,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
    res = one.pulumi(
        "config", "set", "--stack", STACK, "--path", "--secret", "--",
        "kafka-dr:principals.replicatorPassword", existing.connect.replicator_password,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    two = Operator(tmp_path_factory.mktemp("operator-2"), "op2", pg_url, passphrase)
    return one, two


def test_pulumi_state_lives_in_postgresql(ops: tuple[Operator, Operator], pg_url: str) -> None:
    one, _ = ops
    t0 = time.monotonic()
    res = one.drctl("estate", "up", "--stack", STACK)
    print(f"\nestate up with the PostgreSQL backend: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stderr[-4000:]
    assert not (one.root / "state" / "pulumi").exists(), "no file backend was used"
    with TeamStore(pg_url).connect() as conn:  # the CLI's own tables hold the stack and its resources
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert "kdr_schema" in tables and len(tables - {"kdr_schema", "kdr_failover", "kdr_lease", "kdr_event"}) >= 1
    res = one.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_failover_killed_inside_a_step_is_resumed_by_a_second_operator(
    ops: tuple[Operator, Operator], existing: ExistingEstate, pg_url: str
) -> None:
    one, two = ops
    acked, _ = produce(_admin(existing, "A"), "orders", [f"k-{i}" for i in range(300)])
    assert len(acked) == 300
    kill = kill_inside(
        [sys.executable, "-m", "dr.cli", "failover", "--stack", STACK, "--yes"],
        one.env(), one.root / "state" / STACK, "promote", 0.3, cwd=REPO_ROOT,
    )  # fmt: skip
    OUTPUTS.append(kill.output)
    assert kill.returncode == -9, kill.output[-3000:]
    store = TeamStore(pg_url)
    record = store.load(STACK)
    assert record is not None and record["status"] == "running"
    inside = [name for name, step in record["steps"].items() if step["status"] == "running"]
    print(f"\nkilled {kill.delay_s}s into promote: journal shows {inside or 'between steps'} running")
    lease = store.lease(STACK)
    assert lease is not None and lease.holder == "op1"
    # the second operator's clone: a copy of the project only — no state directory, no shared files
    shutil.copytree(one.project, two.project)
    assert not (two.root / "state").exists()
    time.sleep(3.5)  # op1's lease goes stale (KDR_LEASE_STALE_S=3)
    status = two.drctl("status", "--stack", STACK, "--json")
    assert status.returncode in (0, 1, 6), status.stderr[-3000:]
    last = json.loads(status.stdout)["last_failover"]
    assert last["status"] == "running" and not last["lock_held"], last
    assert last["holder"].startswith("op1 (pid") and "STALE" in last["holder"] and "since" in last["holder"], last
    assert not inside or last["holder"].endswith(f"step {inside[0]}"), last
    assert json.loads(status.stdout)["journal_shared"] is True
    refused = two.drctl("failover", "--stack", STACK, "--yes")
    assert refused.returncode == 7 and "stale: op1" in refused.stderr, refused.stderr[-2000:]
    assert "--take-over" in refused.stderr, refused.stderr[-2000:]
    t0 = time.monotonic()
    res = two.drctl("failover", "--stack", STACK, "--yes", "--json", "--take-over")
    print(f"\nresume by operator 2: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stderr[-5000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "completed" and summary["runs"] == 2
    assert summary["verdict"]["clean"] and summary["verdict"]["counts"]["missing"] == 0
    events = [(e["kind"], e["actor"]) for e in store.events(STACK)]
    assert ("lease-taken-over", "op2") in events and events[-1] == ("lease-released", "op2")
    assert store.lease(STACK) is None
    on_b = read_keys(_admin(existing, "B"), "orders")
    assert not [k for k in acked if k not in on_b], "acknowledged records lost"
    # operator 1 takes the stack file the failover rewrote (git pull) and finds nothing left to do
    (one.project / f"Pulumi.{STACK}.yaml").write_bytes((two.project / f"Pulumi.{STACK}.yaml").read_bytes())
    preview = one.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-3000:]


def test_no_database_password_in_any_output(pg_url: str, existing: ExistingEstate) -> None:
    password = pg_url.partition("://")[2].rpartition("@")[0].split(":", 1)[1]
    secrets = [password, *(b.admin_password for b in existing.clusters.values())]
    assert OUTPUTS
    for out in OUTPUTS:
        for s in secrets:
            assert s not in out
