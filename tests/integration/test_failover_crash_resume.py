"""A failover killed right after step k (:mod:`tests.integration.failover_crash_driver`) resumes to the same end state;
and an unplanned failover through the command line with A SIGKILLed.

Each case gets a fresh, cheap estate (A, B and C with one broker each).
Kills at random instants *inside* the steps (the whole process group, inside `pulumi up` too) are in
:mod:`tests.integration.test_failover_killed_anywhere`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.drill.traffic import read_keys
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import STEPS
from dr.topology import load_stack_file
from tests import REPO_ROOT, processes
from tests.integration.failover_crash_driver import CRASH_EXIT
from tests.integration.helpers import link_copied, produce
from tests.integration.helpers import teardown_stack as _teardown
from tests.integration.journal_home import journal_home

STACK = "crash"
NAMES = [s.name for s in STEPS]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack_ports: tuple[int, int, int]) -> Iterator[dict[str, str]]:
    """A fresh 1-broker estate (A, B, link A→B) with 500 acknowledged records on A; destroyed afterwards."""
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], stack_ports, strict=True):
        c["base_port"] = port
        if c["name"] == "A":
            c["brokers"], c["racks"] = 1, ["r1"]
    stack_path = tmp_path / f"Pulumi.{STACK}.yaml"
    stack_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {"KDR_STACK_DIR": str(tmp_path), "KDR_STATE_DIR": str(tmp_path / "state")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    original = load_stack_file(stack_path)
    try:
        EstateStack(StackRef.resolve(STACK)).up(original)
        estate = Estate.for_stack(StackRef.resolve(STACK))
        app = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
        acked, _ = produce(app, "orders", [f"c-{i}" for i in range(500)])
        assert len(acked) == 500
        yield env
    finally:
        _teardown(STACK, original, tmp_path / "state" / STACK)


def _run(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=REPO_ROOT,
    )


def drctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return _run(env, "dr.cli", *args)


def crash_failover(env: dict[str, str], crash_after: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """The failover of STACK in a process that dies right after ``crash_after`` is journaled."""
    return _run(env, "tests.integration.failover_crash_driver", "--stack", STACK, "--crash-after", crash_after, *flags)


def _cluster_id(state: Path, name: str) -> str | None:
    meta = state / "clusters" / name / "cluster.json"
    return json.loads(meta.read_text())["cluster_id"] if meta.exists() else None


# Every step but the last is a crash point; each estate takes two or three crashes in a row (a
# resumed run that crashes again), which covers all seven while paying for three estates only.
CRASH_SEQUENCES = [
    ("preflight", "promote", "clients"),
    ("fence-drain", "desired-state"),
    ("consumer-groups", "integrity"),
]


def test_the_crash_sequences_cover_every_step_but_the_last() -> None:
    assert sorted(n for seq in CRASH_SEQUENCES for n in seq) == sorted(NAMES[:-1])


@pytest.mark.parametrize("crashes", CRASH_SEQUENCES, ids=lambda seq: "+".join(seq))
def test_a_failover_killed_after_a_step_resumes_to_the_same_end_state(
    env: dict[str, str], crashes: tuple[str, ...]
) -> None:
    state = Path(env["KDR_STATE_DIR"]) / STACK
    stack_path = Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"
    # Only the sequence that crashes after the verification pays for a Spark run.
    waive = [] if "integrity" in crashes else ["--skip-verify", "--force-decommission"]

    c_created = None
    for run, crash_after in enumerate(crashes, 1):
        res = crash_failover(env, crash_after, *waive)
        assert res.returncode == CRASH_EXIT, res.stderr[-3000:]
        journal = Journal.load(journal_home(env, STACK))
        assert journal is not None and journal.status == "running" and len(journal.runs) == run
        k = NAMES.index(crash_after)
        assert all(journal.is_done(n) for n in NAMES[: k + 1])
        assert all(journal.step(n).status == "pending" for n in NAMES[k + 1 :])
        c_now = _cluster_id(state, "C")
        assert (c_now is not None) == (k >= NAMES.index("desired-state"))
        assert c_created is None or c_now == c_created, "C was created again"
        c_created = c_created or c_now

    final = drctl(env, "failover", "--stack", STACK, "--yes", "--json", *waive)
    assert final.returncode == 0, final.stderr[-3000:]
    s = json.loads(final.stdout)
    assert s["status"] == "completed" and s["runs"] == len(crashes) + 1
    assert f"{crashes[-1]}: done earlier — skipped" in final.stderr

    journal = Journal.load(journal_home(env, STACK))
    assert journal is not None
    for name in NAMES:
        assert journal.step(name).attempts == 1, f"{name} ran twice"  # no double promotion, C created once
    if c_created:
        assert _cluster_id(state, "C") == c_created
    topology = load_stack_file(stack_path)
    assert {c.name: c.role.value for c in topology.clusters} == {"A": "decommissioned", "B": "active", "C": "passive"}
    assert [(lk.source, lk.target) for lk in topology.links] == [("B", "C")]
    after = Estate(topology, state)
    assert after.local_cluster("A").state() == "stopped"
    assert after.mirror("B-to-C").alive()
    on_b = read_keys(after.endpoint("B"), "orders")
    assert {f"c-{i}" for i in range(500)} <= set(on_b)
    assert link_copied(after, "B-to-C", ["orders"], 60)
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_unplanned_failover_with_a_killed_completes_without_a_and_prints_an_rpo_estimate(env: dict[str, str]) -> None:
    status = drctl(env, "status", "--stack", STACK, "--json")  # an operator's periodic status: A's offsets noted
    assert status.returncode == 0, status.stderr[-2000:]
    estate = Estate.for_stack(StackRef.resolve(STACK))
    app = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
    estate.mirror("A-to-B").stop()  # these 50 never reach B
    acked, _ = produce(app, "orders", [f"late-{i}" for i in range(50)])
    assert len(acked) == 50
    drctl(env, "status", "--stack", STACK)
    estate.local_cluster("A").kill()

    res = drctl(env, "failover", "--stack", STACK, "--mode", "unplanned", "--yes")
    assert res.returncode == 0, res.stderr[-3000:]
    assert re.search(r"RPO estimate: 50(–\d+)? records", res.stdout), res.stdout
    assert "A UNREACHABLE" in res.stdout and "PENDING" in res.stdout
    assert "verification deferred" in res.stdout
    again = drctl(env, "failover", "--stack", STACK, "--json", "--yes")
    assert again.returncode == 0, again.stderr[-3000:]
    s = json.loads(again.stdout)
    assert (s["mode"], s["status"], s["pending"]) == ("unplanned", "pending", ["integrity", "decommission"])
    assert s["rpo_estimate"]["records"] == 50 and s["rto_s"] is not None
    assert [st["status"] for st in s["steps"][:6]] == ["done", "skipped", "done", "done", "done", "done"]

    back = drctl(env, "estate", "start", "--stack", STACK, "--cluster", "A")  # A comes back with its data
    assert back.returncode == 0, back.stderr[-2000:]
    assert estate.local_cluster("A").state() == "running"
    done = drctl(env, "failover", "--stack", STACK, "--json", "--yes", "--skip-verify", "--force-decommission")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["status"] == "completed"
    journal = Journal.load(journal_home(env, STACK))
    assert journal is not None and journal.outcome("integrity")["fenced_on_return"] >= 1
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
    assert estate.local_cluster("A").state() == "stopped"


def test_a_journal_never_outlives_its_estate_destroyed_and_rebuilt_from_the_same_stack_file(
    env: dict[str, str],
) -> None:
    """Issue 32's finding: a failover killed after promoting B and publishing the clients, the estate
    destroyed and rebuilt from the same stack file — the old journal must not be resumed ("resuming",
    promote skipped, exit 0 `completed` with B still passive and C never started)."""
    state = Path(env["KDR_STATE_DIR"]) / STACK
    home = journal_home(env, STACK)
    res = crash_failover(env, "clients", "--skip-verify", "--force-decommission")
    assert res.returncode == CRASH_EXIT, res.stderr[-3000:]
    old = Journal.load(home)
    assert old is not None and old.is_done("promote") and not old.is_done("desired-state")
    recorded = dict(old.record.clusters)
    assert recorded == {"A": _cluster_id(state, "A"), "B": _cluster_id(state, "B")}, "the run recorded its clusters"
    left_behind = old.path.read_bytes()

    down = drctl(env, "estate", "down", "--stack", STACK, "--destroy")
    assert down.returncode == 0, down.stderr[-3000:]
    assert Journal.load(home) is None, "the destroy ended the journal"
    archived = sorted((home / "failover").glob(f"abandoned-{old.failover_id}-*.json"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["status"] == "abandoned"
    assert str(archived[0]) in down.stderr

    up = drctl(env, "estate", "up", "--stack", STACK)
    assert up.returncode == 0, up.stderr[-3000:]
    now = {name: _cluster_id(state, name) for name in ("A", "B")}
    assert all(now[n] and now[n] != recorded[n] for n in now), "the rebuilt clusters are new ones"

    status = drctl(env, "status", "--stack", STACK)
    assert status.returncode == 6, status.stdout[-2000:] + status.stderr[-2000:]
    assert str(archived[0]) in status.stderr and "ended unfinished" in status.stderr

    # The same journal left by a destroy drctl did not see (`pulumi destroy`, an older drctl): refused by IDs.
    Journal.path_for(home).write_bytes(left_behind)
    status = drctl(env, "status", "--stack", STACK)
    assert status.returncode == 6, status.stderr[-2000:]
    assert f"B: journal {recorded['B']}, now {now['B']}" in status.stderr
    refused = drctl(env, "failover", "--stack", STACK, "--mode", "planned", "--yes", "--skip-verify")
    assert refused.returncode == 6, refused.stderr[-3000:]
    assert f"A: journal {recorded['A']}, now {now['A']}" in refused.stderr and "never resumed" in refused.stderr
    assert "resuming" not in refused.stderr and Journal.load(home) is None

    fresh = drctl(
        env,
        "failover",
        "--stack",
        STACK,
        "--mode",
        "planned",
        "--yes",
        "--json",
        "--skip-verify",
        "--force-decommission",
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "resuming" not in fresh.stderr and "starting planned failover" in fresh.stderr
    s = json.loads(fresh.stdout)
    assert s["status"] == "completed" and s["failover_id"] != old.failover_id and s["runs"] == 1
    topology = load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml")
    assert {c.name: c.role.value for c in topology.clusters} == {"A": "decommissioned", "B": "active", "C": "passive"}
    after = Estate(topology, state)
    assert after.local_cluster("C").state() == "running" and after.mirror("B-to-C").alive()
    assert (
        f"bootstrap.servers={after.local_cluster('B').bootstrap}"
        in (state / "clients" / "orders-app.properties").read_text()
    )
