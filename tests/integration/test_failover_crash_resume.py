"""A failover killed right after each step in turn (:mod:`tests.integration.failover_crash_driver`) resumes
to the same end state; a journal never outlives its estate; an unplanned failover through the command line
with A SIGKILLed.

One cheap estate (A, B and C with one broker each) for the module; the tests run in order, each from the
state the previous one left: the unplanned failover takes it A→B→C; A is then wiped and declared the next
standby (`drctl estate standby`), and the journal's case kills a B→C→A failover, destroys the estate and
rebuilds it from the same stack file; the failover killed after each step runs B→C→A on the rebuilt
estate. A test run alone (or after a failed one) gets the estate it needs rebuilt (A active).
Kills at random instants *inside* the steps (the whole process group, inside `pulumi up` too) are in
:mod:`tests.integration.test_failover_killed_anywhere`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.failover.drill.traffic import read_keys
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import STEPS
from dr.topology import load_stack_file
from tests import REPO_ROOT, processes
from tests.integration.failover_crash_driver import CRASH_EXIT
from tests.integration.helpers import StackEnv, drctl, link_copied, produce, write_local_stack
from tests.integration.helpers import teardown_stack as _teardown
from tests.integration.journal_home import journal_home

STACK = "crash"
NAMES = [s.name for s in STEPS]


def _run(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=REPO_ROOT,
    )


def crash_failover(env: dict[str, str], crash_after: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """The failover of STACK in a process that dies right after ``crash_after`` is journaled."""
    return _run(env, "tests.integration.failover_crash_driver", "--stack", STACK, "--crash-after", crash_after, *flags)


def _cluster_id(state: Path, name: str) -> str | None:
    meta = state / "clusters" / name / "cluster.json"
    return json.loads(meta.read_text())["cluster_id"] if meta.exists() else None


def _with_a_active(env: StackEnv, ports: tuple[int, int, int], *, rebuild: bool = False) -> Estate:
    """The module's estate as its first failover finds it: A active, B passive (both running), no journal
    — destroyed and rebuilt from the original stack file when an earlier test left it otherwise (or
    ``rebuild``)."""
    topology = load_stack_file(env.stack_file)
    if not rebuild and topology.active().name == "A" and Journal.load(journal_home(env, STACK)) is None:
        estate = Estate(topology, env.state)
        if all(estate.local_cluster(n).state() == "running" for n in ("A", "B")):
            return estate
    write_local_stack(env.root, STACK, ports)
    _teardown(STACK, load_stack_file(env.stack_file), env.state)
    up = drctl(env, "estate", "up", "--stack", STACK)
    assert up.returncode == 0, up.stderr[-3000:]
    return Estate.for_stack(StackRef.resolve(STACK))


def _roles(estate: Estate) -> tuple[str, str, str]:
    """The estate's (active, passive, standby) clusters."""
    by_role = {c.role.value: c.name for c in estate.topology.clusters}
    return by_role["active"], by_role["passive"], by_role["standby"]


def _ready(env: StackEnv, ports: tuple[int, int, int]) -> Estate:
    """The module's estate ready for a new failover — active and passive running, a standby declared, no
    unfinished journal: as the previous test left it, or after a completed failover with the cluster it
    decommissioned wiped and declared the next standby (``drctl estate standby``, as A→B→C then B→C→A);
    otherwise destroyed and rebuilt from the original stack file (A active)."""
    journal = Journal.load(journal_home(env, STACK))
    if journal is None or journal.finished:
        for c in load_stack_file(env.stack_file).clusters:
            if c.role.value == "decommissioned":
                standby = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", c.name, "--yes")
                assert standby.returncode == 0, standby.stderr[-3000:]
        estate = Estate(load_stack_file(env.stack_file), env.state)
        roles = sorted(c.role.value for c in estate.topology.clusters)
        if roles == ["active", "passive", "standby"] and all(
            estate.local_cluster(n).state() == "running" for n in _roles(estate)[:2]
        ):
            return estate
    return _with_a_active(env, ports, rebuild=True)


def test_unplanned_failover_with_a_killed_completes_without_a_and_prints_an_rpo_estimate(
    env: StackEnv, stack_ports: tuple[int, int, int]
) -> None:
    estate = _with_a_active(env, stack_ports)
    link = estate.mirror("A-to-B")
    link.wait_caught_up(["orders"], timeout=90)  # every record before the 50 copied and its position committed
    status = drctl(env, "status", "--stack", STACK, "--json")  # an operator's periodic status: A's offsets noted
    assert status.returncode == 0, status.stdout[-2000:] + status.stderr[-2000:]
    app = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
    link.stop()  # these 50 never reach B
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
    env: StackEnv, stack_ports: tuple[int, int, int]
) -> None:
    """Issue 32's finding: a failover killed after promoting the passive cluster and publishing the
    clients, the estate destroyed and rebuilt from the same stack file — the old journal must not be
    resumed ("resuming", promote skipped, exit 0 `completed` with the passive cluster still passive and
    the standby never started). The new failover on the rebuilt estate, which must start afresh, is the
    next test's. After the unplanned failover: B→C→A, with A made the standby."""
    active, passive, _ = _roles(_ready(env, stack_ports))
    state = env.state
    home = journal_home(env, STACK)
    res = crash_failover(env, "clients", "--skip-verify", "--force-decommission")
    assert res.returncode == CRASH_EXIT, res.stderr[-3000:]
    old = Journal.load(home)
    assert old is not None and old.is_done("promote") and not old.is_done("desired-state")
    recorded = dict(old.record.clusters)
    assert recorded == {n: _cluster_id(state, n) for n in (active, passive)}, "the run recorded its clusters"
    left_behind = old.path.read_bytes()

    down = drctl(env, "estate", "down", "--stack", STACK, "--destroy")
    assert down.returncode == 0, down.stderr[-3000:]
    assert Journal.load(home) is None, "the destroy ended the journal"
    archived = sorted((home / "failover").glob(f"abandoned-{old.failover_id}-*.json"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["status"] == "abandoned"
    assert str(archived[0]) in down.stderr

    up = drctl(env, "estate", "up", "--stack", STACK)
    assert up.returncode == 0, up.stderr[-3000:]
    now = {name: _cluster_id(state, name) for name in (active, passive)}
    assert all(now[n] and now[n] != recorded[n] for n in now), "the rebuilt clusters are new ones"

    status = drctl(env, "status", "--stack", STACK)
    assert status.returncode == 6, status.stdout[-2000:] + status.stderr[-2000:]
    assert str(archived[0]) in status.stderr and "ended unfinished" in status.stderr

    # The same journal left by a destroy drctl did not see (`pulumi destroy`, an older drctl): refused by IDs.
    Journal.path_for(home).write_bytes(left_behind)
    status = drctl(env, "status", "--stack", STACK)
    assert status.returncode == 6, status.stderr[-2000:]
    assert f"{passive}: journal {recorded[passive]}, now {now[passive]}" in status.stderr
    refused = drctl(env, "failover", "--stack", STACK, "--mode", "planned", "--yes", "--skip-verify")
    assert refused.returncode == 6, refused.stderr[-3000:]
    assert f"{active}: journal {recorded[active]}, now {now[active]}" in refused.stderr
    assert "never resumed" in refused.stderr
    assert "resuming" not in refused.stderr and Journal.load(home) is None


def test_a_failover_killed_after_each_step_in_turn_resumes_to_the_same_end_state(
    env: StackEnv, stack_ports: tuple[int, int, int]
) -> None:
    """One failover, its process killed right after each step but the last in turn (every resumed run
    crashes again after the next step), then completed by ``drctl failover``: each step ran once, by a
    run of its own, and the end state is a clean failover's. On the previous test's rebuilt estate (B→C→A)
    its first run must start a new failover, not resume the abandoned one."""
    estate = _ready(env, stack_ports)
    active, passive, standby = _roles(estate)
    app = estate.endpoint(active).with_user("orders-app", estate.app_password("orders-app"))
    acked, _ = produce(app, "orders", [f"c-{i}" for i in range(500)])
    assert len(acked) == 500
    state = env.state
    home = journal_home(env, STACK)
    abandoned = {json.loads(p.read_text())["failover_id"] for p in (home / "failover").glob("abandoned-*.json")}

    created = None  # the standby's cluster ID once desired-state built it
    for run, crash_after in enumerate(NAMES[:-1], 1):
        res = crash_failover(env, crash_after)
        assert res.returncode == CRASH_EXIT, res.stderr[-3000:]
        assert f"crash driver: dying after step {crash_after}" in res.stderr
        if run == 1:
            assert "resuming" not in res.stderr and "starting planned failover" in res.stderr
        journal = Journal.load(home)
        assert journal is not None and journal.status == "running" and len(journal.runs) == run
        assert journal.failover_id not in abandoned
        k = NAMES.index(crash_after)
        assert all(journal.is_done(n) for n in NAMES[: k + 1])
        assert all(journal.step(n).status == "pending" for n in NAMES[k + 1 :])
        now = _cluster_id(state, standby)
        assert (now is not None) == (k >= NAMES.index("desired-state"))
        assert created is None or now == created, f"{standby} was created again"
        created = created or now

    final = drctl(env, "failover", "--stack", STACK, "--yes", "--json")
    assert final.returncode == 0, final.stderr[-3000:]
    s = json.loads(final.stdout)
    assert s["status"] == "completed" and s["runs"] == len(NAMES)
    assert f"{NAMES[-2]}: done earlier — skipped" in final.stderr

    journal = Journal.load(home)
    assert journal is not None
    for name in NAMES:
        assert journal.step(name).attempts == 1, f"{name} ran twice"  # no double promotion, one creation
    # Every step was done by a run of its own: a crash after each step but the last, which the final run did.
    assert [journal.step(n).run for n in NAMES] == list(range(1, len(NAMES) + 1))
    assert created is not None and _cluster_id(state, standby) == created
    topology = load_stack_file(env.stack_file)
    roles = {c.name: c.role.value for c in topology.clusters}
    assert roles == {active: "decommissioned", passive: "active", standby: "passive"}
    assert [(lk.source, lk.target) for lk in topology.links] == [(passive, standby)]
    after = Estate(topology, state)
    assert after.local_cluster(active).state() == "stopped"
    assert after.local_cluster(standby).state() == "running" and after.mirror(f"{passive}-to-{standby}").alive()
    assert (
        f"bootstrap.servers={after.local_cluster(passive).bootstrap}"
        in (state / "clients" / "orders-app.properties").read_text()
    )
    on_new_active = read_keys(after.endpoint(passive), "orders")
    assert {f"c-{i}" for i in range(500)} <= set(on_new_active)
    assert link_copied(after, f"{passive}-to-{standby}", ["orders"], 60)
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
