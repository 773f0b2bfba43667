"""The team backend: Pulumi state, the failover journal and its lease in one PostgreSQL database.

A real PostgreSQL (:mod:`tests.pg_server`) and the existing estate of :mod:`tests.integration.existing_estate`
(clusters started outside the product: a team backend serves clusters that do not live on the operator's
machine). Operator 1 runs ``drctl estate up`` with ``PULUMI_BACKEND_URL=postgres://…``. Then ONE planned
failover meets every fault, one after the other: operators 1 and 2 start it at the same instant (one runs,
the other exits 7); PostgreSQL is stopped (`pg_ctl stop`) inside promote and started again (the run stops
with exit 8); the winner's rerun takes its lease back and is SIGKILLed (its whole process group) inside the
step it resumes; operator 3 — another clone of the project, its own empty ``KDR_STATE_DIR``, only the URL
and the passphrase — sees it in ``drctl status`` (holder, step, since when), is refused while it has not
asked to take the stale lease over, then resumes it to completion; the winner, back with its old stack
file, is refused naming operator 3. Then: the audit continued from clone 2 at the bounds clone 1 reached
(audit state in the database), recovery and `drctl verify` resolving the stack through the database, and
a drill. One estate, one database for the module; the tests run in order.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr.failover.drill.traffic import read_keys
from dr.failover.record.team_store import TeamStore
from dr.runtime.process import wait_until
from tests import REPO_ROOT, processes
from tests.integration.drill_runner import assert_graded
from tests.integration.existing_estate import ExistingEstate
from tests.integration.failover_crash_driver import crash_seed, kill_inside
from tests.integration.helpers import ProjectEnv, produce
from tests.integration.ports import windows
from tests.integration.test_external_estate import _admin, _stack_doc, wipe_and_stand_by
from tests.pg_server import PgUrl, pg_server

STACK = "existing"
OUTPUTS: list[str] = []
REPORTS: list[str] = []
FINISHER: list[Operator] = []
"""The operator whose clone finished the failover (its stack file is the one the failover rewrote)."""


class Operator(ProjectEnv):
    """One operator's clone (:class:`ProjectEnv`'s layout: project dir, own state dir) on the team's backend URL
    and passphrase."""

    def __init__(self, root: Path, name: str, url: str, passphrase: Path) -> None:
        super().__init__(root, STACK)
        self.vars.update(
            {
                "PULUMI_BACKEND_URL": url,
                "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
                "KDR_OPERATOR": name,
                "KDR_LEASE_STALE_S": "3",
            }
        )

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.vars}

    def drctl(self, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        res = processes.run(
            [sys.executable, "-m", "dr.cli", *args],
            capture_output=True, text=True, env={**self.env(), **(extra or {})}, timeout=900, cwd=REPO_ROOT,
        )  # fmt: skip
        OUTPUTS.append(res.stdout + res.stderr)
        return res


@pytest.fixture(scope="module")
def pg_url() -> Iterator[PgUrl]:
    with pg_server() as url:
        yield url


@pytest.fixture(scope="module")
def existing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExistingEstate]:
    root = tmp_path_factory.mktemp("team-estate")
    with windows(3) as ports:  # with the team's client endpoint, which the shared stack declares
        estate = ExistingEstate(root, (ports[0], ports[1], ports[2]), endpoint=True)
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


def _start(op: Operator, *args: str, extra: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    """``drctl failover`` of ``op`` in the background; its output lines collected as they come."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dr.cli", "failover", "--stack", STACK, "--yes", *args],
        env={**op.env(), **extra}, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def test_one_failover_through_every_fault_simultaneous_starts_postgresql_stopped_killed_taken_over(
    ops: tuple[Operator, Operator], existing: ExistingEstate, pg_url: PgUrl, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One planned failover A→B meets each fault a team backend answers, one after the other. Both operators
    start it at the same instant: exactly one runs, the other exits 7 naming it. PostgreSQL is stopped
    (pg_ctl stop) while the winner's promote step runs: the step finishes, its journal write waits
    (KDR_TEAM_DB_WAIT_S=2), the run stops cleanly (exit 8). PostgreSQL started again, the winner reruns: it
    takes its own dead lease back and resumes at promote — and is SIGKILLed (its whole process group) there.
    A third operator, a clone of the project only (no state directory), sees it in `drctl status` (holder,
    step, since when), is refused while it has not asked to take the stale lease over, then resumes it to
    completion; the winner, back with the stack file its failover started from, is refused naming who
    finished it. Nothing acknowledged is lost."""
    one, two = ops
    shutil.copytree(one.project, two.project)  # operator 2's clone of the project
    acked, _ = produce(_admin(existing, "A"), "orders", [f"k-{i}" for i in range(300)])
    assert len(acked) == 300
    store = TeamStore(pg_url)
    extra = {"KDR_TEAM_DB_WAIT_S": "2"}
    t0 = time.monotonic()
    runs = {"op1": _start(one, extra=extra), "op2": _start(two, extra=extra)}
    deadline = time.monotonic() + 60
    while all(p.poll() is None for p, _ in runs.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [loser] = [name for name, (p, _) in runs.items() if p.poll() is not None]
    winner = "op2" if loser == "op1" else "op1"
    refused = "".join(runs[loser][1])
    OUTPUTS.append(refused)
    assert runs[loser][0].returncode == 7 and f"held by {winner}" in refused, refused[-2000:]
    proc, lines = runs[winner]
    deadline = time.monotonic() + 300
    while not any("] promote: " in line for line in lines) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "".join(lines)[-3000:]
    pg_url.stop()
    stopped = time.monotonic()
    proc.wait(timeout=300)
    out = "".join(lines)
    OUTPUTS.append(out)
    print(
        f"\nPostgreSQL stopped in promote; the run stopped {time.monotonic() - stopped:.1f}s later, exit {proc.returncode}"
    )
    assert proc.returncode == 8 and ("went away" in out or "unreachable" in out), out[-3000:]
    pg_url.start()
    store = TeamStore(pg_url)  # the old connection went with the server
    record = store.load(STACK)
    assert record is not None and record["status"] == "running" and record["steps"]["fence-drain"]["status"] == "done"
    # promote's start or its end was the write that found the database gone: the row holds the one before
    assert record["steps"]["promote"]["status"] in ("pending", "running"), record["steps"]["promote"]

    # the winner reruns (its own dead lease taken back) and is killed inside the promote it resumes: a
    # random instant early in it, as the step redoes less the second time (the link is already stopped)
    op = one if winner == "op1" else two
    seed = crash_seed(os.environ.get("KDR_CRASH_SEED"))
    delay = random.Random(seed).uniform(0.01, 0.2)
    print(f"\nthe resumed promote is killed {delay:.3f} s in (seed {seed}; KDR_CRASH_SEED=N replays N)")
    kill = kill_inside(
        [sys.executable, "-m", "dr.cli", "failover", "--stack", STACK, "--yes"],
        op.env(), op.root / "state" / STACK, "promote", delay, cwd=REPO_ROOT,
    )  # fmt: skip
    OUTPUTS.append(kill.output)
    assert kill.returncode == -9, kill.output[-3000:]
    assert "done earlier — skipped" in kill.output, "the rerun resumed after the journaled steps"
    record = store.load(STACK)
    assert record is not None and record["status"] == "running"
    inside = [name for name, step in record["steps"].items() if step["status"] == "running"]
    print(f"\nkilled {kill.delay_s}s into the resumed promote: journal shows {inside or 'between steps'} running")
    lease = store.lease(STACK)
    assert lease is not None and lease.holder == winner
    assert ("lease-reclaimed", winner) in [(e["kind"], e["actor"]) for e in store.events(STACK)]

    # a third operator's clone: a copy of the project only — no state directory, no shared files
    passphrase = Path(one.vars["PULUMI_CONFIG_PASSPHRASE_FILE"])
    three = Operator(tmp_path_factory.mktemp("operator-3"), "op3", one.vars["PULUMI_BACKEND_URL"], passphrase)
    shutil.copytree(one.project, three.project)
    assert not (three.root / "state").exists()
    assert wait_until(lambda: (held := store.lease(STACK)) is not None and held.stale, 60, interval=0.2), (
        f"{winner}'s lease never went stale (KDR_LEASE_STALE_S=3)"
    )
    status = three.drctl("status", "--stack", STACK, "--json")
    assert status.returncode in (0, 1, 6), status.stderr[-3000:]
    last = json.loads(status.stdout)["last_failover"]
    assert last["status"] == "running" and not last["lock_held"], last
    assert last["holder"].startswith(f"{winner} (pid") and "STALE" in last["holder"] and "since" in last["holder"], last
    assert not inside or last["holder"].endswith(f"step {inside[0]}"), last
    assert json.loads(status.stdout)["journal_shared"] is True
    refused_3 = three.drctl("failover", "--stack", STACK, "--yes")
    assert refused_3.returncode == 7 and f"stale: {winner}" in refused_3.stderr, refused_3.stderr[-2000:]
    assert "--take-over" in refused_3.stderr, refused_3.stderr[-2000:]
    t1 = time.monotonic()
    res = three.drctl("failover", "--stack", STACK, "--yes", "--json", "--take-over")
    print(f"\nresume by operator 3: {time.monotonic() - t1:.1f}s; the whole failover {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stderr[-5000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "completed" and summary["runs"] == 3, summary
    assert summary["verdict"]["clean"] and summary["verdict"]["counts"]["missing"] == 0
    events = [(e["kind"], e["actor"]) for e in store.events(STACK)]
    assert ("lease-taken-over", "op3") in events and events[-1] == ("lease-released", "op3"), events
    assert store.lease(STACK) is None
    on_b = read_keys(_admin(existing, "B"), "orders")
    assert not [k for k in acked if k not in on_b], "acknowledged records lost"
    # the run's verification summary is in the database: its verdict and the digest of its report files
    [checked] = [v for v in store.verifications(STACK) if v["failover_id"] == summary["failover_id"]]
    assert checked["operator"] == "op3" and checked["clean"] and len(checked["report_digest"]) == 64
    REPORTS.append(checked["report_dir"])
    # the winner comes back with the stack file its failover started from: refused, naming who finished it
    back = op.drctl("failover", "--stack", STACK, "--yes")
    assert back.returncode == 7, back.stdout[-2000:] + back.stderr[-2000:]
    assert f"failover {summary['failover_id']} of stack '{STACK}' was finished by op3" in back.stderr, back.stderr
    assert store.load(STACK)["status"] == "completed" and store.lease(STACK) is None  # type: ignore[index]
    # operators 1 and 2 take the stack file the failover rewrote (git pull) and find nothing left to do
    for clone in (one, two):
        (clone.project / f"Pulumi.{STACK}.yaml").write_bytes((three.project / f"Pulumi.{STACK}.yaml").read_bytes())
    preview = op.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-3000:]
    FINISHER.append(three)


def test_audit_and_recovery_continue_from_the_second_clone(
    ops: tuple[Operator, Operator], existing: ExistingEstate, pg_url: str
) -> None:
    """The link's audit state lives in the database: operator 2 (empty state directory) continues the
    audit at the bounds operator 1's run reached, reading only what came since; recovery resolves the
    stack through the PostgreSQL backend."""
    one, two = ops
    first = one.drctl("audit", "--stack", STACK, "--json", "--first-run", "python")
    assert first.returncode in (0, 1), first.stderr[-3000:]
    [run1] = json.loads(first.stdout.strip().splitlines()[-1])["links"]
    assert run1["first_run"] and run1["run"] == 1, run1
    acked, _ = produce(_admin(existing, run1["source"]), "orders", [f"audit-{i}" for i in range(40)])
    assert len(acked) == 40
    shutil.copytree(one.project, two.project, dirs_exist_ok=True)
    assert not (two.root / "state" / STACK / "audit").exists()
    second = two.drctl("audit", "--stack", STACK, "--json")
    assert second.returncode in (0, 1), second.stderr[-3000:]
    [run2] = json.loads(second.stdout.strip().splitlines()[-1])["links"]
    assert not run2["first_run"] and run2["run"] == 2, run2
    assert run2["read_source"] == 40, "operator 2 read only what came after operator 1's bounds"
    assert not (two.root / "state" / STACK / "audit" / f"{run1['link']}.json").exists(), "the database holds it"
    row = TeamStore(pg_url).load_audit(STACK, run1["link"])
    assert row is not None and row["runs"] == 2
    assert REPORTS, "the failover recorded its verification"
    dry = two.drctl("recover", "--report", REPORTS[0], "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert json.loads(dry.stdout)["written"] == 0


def test_verify_resolves_the_stack_through_postgresql(ops: tuple[Operator, Operator], tmp_path: Path) -> None:
    """`drctl verify --stack` from the second clone: endpoints and the default cut-off come from the database."""
    _, two = ops
    assert FINISHER, "the failover test ran"
    shutil.copyfile(FINISHER[0].project / f"Pulumi.{STACK}.yaml", two.project / f"Pulumi.{STACK}.yaml")
    t0 = time.monotonic()
    res = two.drctl(
        "verify", "--stack", STACK, "--source", "B", "--target", "C", "--topics", "orders", "--json", "--quiet",
        "--out", str(tmp_path / "verify"),
    )  # fmt: skip
    print(f"\nverify with the PostgreSQL backend: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads(res.stdout)["totals"]["missing"] == 0


def test_the_drill_runs_with_its_journal_in_postgresql(
    ops: tuple[Operator, Operator], existing: ExistingEstate, pg_url: str, tmp_path: Path
) -> None:
    """B active, C passive, A decommissioned: A is wiped and declared the next standby, and `drctl drill`
    runs one graded planned game day B→C→A with its journal and lease in the database."""
    assert FINISHER, "the failover test ran"
    op = FINISHER[0]
    wipe_and_stand_by(op, existing, "A")
    t0 = time.monotonic()
    res = op.drctl(
        "drill",
        "--stack",
        STACK,
        "--out",
        str(tmp_path / "drill"),
        "--warmup",
        "1",
        "--rate",
        "100",
        "--json",
        extra={"PYTHONFAULTHANDLER": "1"},
    )
    print(f"\ndrill with the PostgreSQL backend: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    result = json.loads(res.stdout)
    (cycle,) = result["cycles"]
    assert cycle["chain"] == "B→C→A" and result["grade"].startswith("PASS"), cycle["checks"]
    assert_graded(cycle["checks"])
    assert cycle["lost_after_recovery"] == 0
    store = TeamStore(pg_url)
    record = store.load(STACK)
    assert record is not None and record["status"] == "completed" and (record["source"], record["target"]) == ("B", "C")
    assert store.lease(STACK) is None
    assert not list((op.root / "state").rglob("journal*.json")), "the journal is in the database, not in a file"


def test_a_bare_pulumi_refresh_then_destroy_through_postgresql(
    ops: tuple[Operator, Operator], pg_url: str, tmp_path: Path
) -> None:
    """The platform team's own `pulumi refresh` and `pulumi destroy`, from a clone of the repository (its
    `Pulumi.yaml`, `main: stacks/`) holding only the stack file, with the state in PostgreSQL: both succeed
    and the stack holds no resource after."""
    assert FINISHER, "the failover test ran"
    op = FINISHER[0]
    clone = Operator(tmp_path / "clone", "op3", pg_url, Path(op.vars["PULUMI_CONFIG_PASSPHRASE_FILE"]))
    clone.project.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "Pulumi.yaml", clone.project / "Pulumi.yaml")
    (clone.project / "stacks").symlink_to(REPO_ROOT / "stacks")
    shutil.copy(op.project / f"Pulumi.{STACK}.yaml", clone.project / f"Pulumi.{STACK}.yaml")
    for verb in ("refresh", "destroy"):
        t0 = time.monotonic()
        res = clone.pulumi(verb, "--stack", STACK, "--yes", "--skip-preview")
        OUTPUTS.append(res.stdout + res.stderr)
        print(f"\npulumi {verb} with the PostgreSQL backend: {time.monotonic() - t0:.1f}s")
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-3000:]
    res = clone.pulumi("stack", "export", "--stack", STACK)
    assert res.returncode == 0, res.stderr[-2000:]
    assert not json.loads(res.stdout)["deployment"].get("resources"), "resources left in the stack after destroy"


def test_no_database_password_in_any_output(pg_url: str, existing: ExistingEstate) -> None:
    password = pg_url.partition("://")[2].rpartition("@")[0].split(":", 1)[1]
    secrets = [password, *(b.admin_password for b in existing.clusters.values())]
    assert OUTPUTS
    for out in OUTPUTS:
        for s in secrets:
            assert s not in out
