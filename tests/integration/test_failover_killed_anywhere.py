"""A ``drctl failover`` SIGKILLed — its whole process group, as ``kill -9 -PGID`` — at seeded random instants
*inside* its steps (inside desired-state's ``pulumi up`` and, on resume, inside its repair/refresh), planned
and unplanned, always converges when run again. Then, on the same estate, every process is lost and brought
back, and the estate is destroyed with parts of it gone — by ``drctl`` and by a bare ``pulumi destroy``.

One estate (A, B, C with one broker each, module-scoped) serves every test, in order: two failovers in a row,
A→B→C (planned) and B→C→A (unplanned: B SIGKILLed first), the lost site rebuilt as the next standby between
them (``drctl estate standby``). Each failover is killed four times — once in an early step drawn at random,
twice in desired-state (the second kill hits the resumed run's repair of the first), once in a late step —
and then resumed to the end: 8 instants. The kills meant for desired-state wait for the event they must land
inside — a Pulumi engine taking the stack's lock — then a random delay. The seed is fixed
(:data:`tests.integration.failover_crash_driver.DEFAULT_SEED`), so a run is reproducible; ``KDR_CRASH_SEED=N`` replays seed N, ``KDR_CRASH_SEED=random``
draws one; it is printed either way (``-s`` shows it).

After each failover: roles as declared, the new passive replicating from the new active, the old active
stopped, ``preview --expect-no-changes`` clean, every acknowledged record on both, one failover journaled
(one promote), and no process of any killed run left (plugins of a killed engine included). The later tests
take the estate as the failovers left it (whichever cluster is active), so each thing is proven on one estate.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dr.estate.estate import Estate
from dr.estate.pulumi_locks import stack_locks
from dr.failover.drill.traffic import read_keys
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import STEPS
from dr.runtime.process import pid_alive, wait_until
from dr.topology import NAMESPACE, load_stack_file
from tests import REPO_ROOT, processes
from tests.integration.failover_crash_driver import STEP_SPAN, Kill, crash_seed, kill_inside, session_processes
from tests.integration.helpers import StackEnv, link_copied, produce, teardown_stack, write_local_stack
from tests.integration.journal_home import journal_home

STACK = "killed"
NAMES = [s.name for s in STEPS]
WAIVE = ["--skip-verify", "--force-decommission"]  # the verification has its own crash test (integrity)
CYCLES = [("planned", "A"), ("unplanned", "B")]  # mode, the active cluster that fails


def _drctl(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, "-m", "dr.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


def _kill_plan(rng: random.Random, mode: str, seen: dict[str, float]) -> list[tuple[str, float]]:
    """Four kill instants for one failover; a step's span is the driver's estimate, shortened to 80 % of the
    shortest run of that step seen so far in this estate (a CI machine faster than the estimate would
    otherwise draw instants after the step's end, and the kills meant for desired-state would land nowhere)."""
    early = [
        n
        for n in ("preflight", "fence-drain", "promote", "clients", "consumer-groups")
        if mode == "planned" or n != "fence-drain"
    ]
    late = rng.choice(["integrity", "decommission"])
    spans = [rng.choice(early), "desired-state", "desired-state (resumed)", late]

    def span(s: str) -> float:
        step = s.split(" ")[0]
        return min(STEP_SPAN[s], 0.8 * seen[step]) if step in seen and s == step else STEP_SPAN[s]

    return [(s.split(" ")[0], rng.uniform(0.0, span(s))) for s in spans]


def _durations(output: str) -> dict[str, float]:
    """The steps a run finished, with their time (its ``[k/n] step: done in 12.3s — …`` lines)."""
    return {m[1]: float(m[2]) for m in re.finditer(r"\[\d+/\d+\] (\S+): done in ([\d.]+)s", output)}


def _roles(stack_path: Path) -> dict[str, str]:
    return {c.name: c.role.value for c in load_stack_file(stack_path).clusters}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]):  # noqa: ANN201
    """The module's estate, provisioned once: (the environment drctl runs in, the stack file, the state)."""
    root = tmp_path_factory.mktemp(STACK)
    stack_path = write_local_stack(root, STACK, stack_ports)
    stack_env = StackEnv(root, STACK)
    env = {**os.environ, **stack_env}
    original = load_stack_file(stack_path)
    try:
        up = _drctl(env, "estate", "up", "--stack", STACK)
        assert up.returncode == 0, up.stderr[-3000:]
        yield env, stack_path, stack_env.state
    finally:
        os.environ.update(stack_env)
        try:
            teardown_stack(STACK, load_stack_file(stack_path), stack_env.state)
            Estate(original, stack_env.state).stop()  # what the stack said before the failovers
        finally:
            for k in stack_env:
                os.environ.pop(k, None)


def test_a_failover_killed_at_random_instants_inside_its_steps_converges(shared) -> None:  # noqa: ANN001
    env, stack_path, state = shared
    seed = crash_seed(os.environ.get("KDR_CRASH_SEED"))
    rng = random.Random(seed)
    print(f"\ncrash instants: KDR_CRASH_SEED={seed}")
    command = [sys.executable, "-m", "dr.cli", "failover", "--stack", STACK, "--yes", *WAIVE]
    acked_all: set[str] = set()
    repairs: list[str] = []
    finals: list[str] = []
    kills: list[Kill] = []
    seen: dict[str, float] = {}  # the shortest run of each step so far
    t_all = time.monotonic()
    for cycle, (mode, lost) in enumerate(CYCLES, 1):
        topology = load_stack_file(stack_path)
        estate = Estate(topology, state)
        active = topology.active().name
        assert active == lost
        passive = next(c.name for c in topology.clusters if c.role.value == "passive")
        standby = next(c.name for c in topology.clusters if c.role.value == "standby")
        app = estate.endpoint(active).with_user("orders-app", estate.app_password("orders-app"))
        acked, errors = produce(app, "orders", [f"k{cycle}-{i}" for i in range(300)])
        assert len(acked) == 300, errors[:3]
        acked_all |= set(acked)
        link = topology.links[0].name
        estate.mirror(link).wait_caught_up(["orders"], timeout=90)
        if mode == "unplanned":
            estate.local_cluster(active).kill()
        flags = ["--mode", mode]
        failover_ids = set()
        for step, delay in _kill_plan(rng, mode, seen):
            kill = kill_inside(
                [*command, *flags], env, state, step, delay, cwd=REPO_ROOT, in_engine=step == "desired-state"
            )
            kills.append(kill)
            for name, took in _durations(kill.output).items():
                seen[name] = min(took, seen.get(name, took))
            print(
                f"  cycle {cycle} ({mode} {active}→{passive}→{standby}): kill {len(kills)} "
                f"in {step} +{kill.delay_s:.2f}s landed in: {kill.landed}"
                + (" (inside a Pulumi operation: the engine's lock was left)" if kill.engine_lock else "")
            )
            assert kill.returncode in (-signal.SIGKILL, 0), kill.output[-3000:]
            flags = []  # a resumed run takes the journal's mode
            if (journal := Journal.load(journal_home(env, STACK))) is not None:
                failover_ids.add(journal.failover_id)
        final = _drctl(env, "failover", "--stack", STACK, "--yes", "--json", *WAIVE)
        assert final.returncode == 0, final.stdout[-2000:] + final.stderr[-4000:]
        finals.append(final.stderr)
        for name, took in _durations(final.stderr).items():
            seen[name] = min(took, seen.get(name, took))
        assert not stack_locks(state.parent / "pulumi", NAMESPACE, STACK), "a Pulumi lock is left"
        summary = json.loads(final.stdout)
        assert summary["status"] == "completed", summary

        # roles right; C (the new passive) replicates from B (the new active); A stopped
        assert _roles(stack_path) == {active: "decommissioned", passive: "active", standby: "passive"}
        after = Estate(load_stack_file(stack_path), state)
        assert [(lk.source, lk.target) for lk in after.topology.links] == [(passive, standby)]
        assert after.local_cluster(active).state() == "stopped"
        assert after.mirror(f"{passive}-to-{standby}").alive()
        # one failover, every run of it journaled; B promoted once
        journal = Journal.load(journal_home(env, STACK))
        assert journal is not None and journal.status == "completed" and journal.mode == mode
        assert failover_ids == {journal.failover_id}, "a resumed run started another failover"
        assert len(journal.runs) >= 2 and journal.step("promote").status == "done"
        repairs += journal.outcome("desired-state").get("recovered") or []
        assert all(journal.is_done(n) for n in NAMES)
        # no acknowledged record lost: all on B, and C holds what B holds
        on_b = read_keys(after.endpoint(passive), "orders")
        assert acked_all <= set(on_b), f"{len(acked_all - set(on_b))} acknowledged records missing on {passive}"
        assert link_copied(after, f"{passive}-to-{standby}", ["orders"], 90), f"{standby} does not replicate {passive}"
        preview = _drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
        assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
        # nothing of the killed runs is left: their sessions are empty (plugins included)
        left = [p for k in kills for p in session_processes(k.session)]
        assert not left, f"processes of killed runs still running: {left}"
        if cycle < len(CYCLES):
            rebuilt = _drctl(env, "estate", "standby", "--stack", STACK, "--cluster", active, "--yes")
            assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    inside_up = [k for k in kills if k.step == "desired-state" and k.landed == "desired-state"]
    print(
        f"  {len(kills)} kills in {time.monotonic() - t_all:.0f}s; {len(inside_up)} inside desired-state; "
        f"landed: {[k.landed for k in kills]}"
    )
    in_engine = [k for k in kills if k.engine_lock]
    print(f"  {len(in_engine)} kills inside a Pulumi operation; repairs journaled: {len(repairs)}")
    for line in repairs:
        print(f"    {line}")
    assert len(kills) == 4 * len(CYCLES)
    assert len(inside_up) >= 2, [(k.step, k.delay_s, k.landed) for k in kills]
    assert in_engine, "no kill hit a Pulumi operation"
    said = "".join(k.output for k in kills) + "".join(finals)
    assert "removed the lock of a Pulumi engine that is gone" in said, "no resumed run removed a dead engine's lock"


def _all_jvms(estate: Estate) -> list[int]:
    pids = [p for c in estate.topology.clusters if c.is_local for p in estate.local_cluster(c.name).pids().values()]
    for link in estate.topology.links:
        if (pid := estate.mirror(link.name).process.pid) is not None:
            pids.append(pid)
    return pids


def _roles_now(stack_path: Path) -> tuple[Estate, str, str, str]:
    """The estate as the stack file now says, its active cluster, its passive and the link between them."""
    topology = load_stack_file(stack_path)
    link = topology.links[0]
    return Estate(topology, stack_path.parent / "state" / STACK), link.source, link.target, link.name


def test_after_a_total_loss_refresh_then_up_restores_and_a_removed_data_directory_refills(shared) -> None:  # noqa: ANN001
    """On the estate the failovers left (its active and passive, whichever they are now)."""
    env, stack_path, state = shared
    estate, active, passive, link = _roles_now(stack_path)
    app = estate.endpoint(active).with_user("orders-app", estate.app_password("orders-app"))
    acked, _ = produce(app, "orders", [f"t-{i}" for i in range(200)])
    assert len(acked) == 200
    estate.mirror(link).wait_caught_up(["orders"], timeout=90)

    # total loss of every process (data kept): refresh-then-up adopts the topics that exist
    for pid in _all_jvms(estate):
        os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not _all_jvms(estate), 30)
    back = _drctl(env, "estate", "up", "--stack", STACK, "--refresh")
    assert back.returncode == 0, back.stderr[-4000:]
    assert "already exists" not in back.stdout + back.stderr
    assert estate.local_cluster(active).state() == "running" and estate.mirror(link).alive()
    assert set(acked) <= set(read_keys(estate.endpoint(passive), "orders"))
    clean = _drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert clean.returncode == 0, clean.stdout[-3000:]

    # the passive's data directory removed under it: refresh-then-up creates it again, empty, and its link
    # refills it
    shutil.rmtree(state / "clusters" / passive)
    again = _drctl(env, "estate", "up", "--stack", STACK, "--refresh")
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"cluster {passive} cannot be reached" in again.stderr
    assert estate.local_cluster(passive).state() == "running"
    estate.mirror(link).wait_caught_up(["orders"], timeout=120)
    assert set(acked) <= set(read_keys(estate.endpoint(passive), "orders"))


def test_pulumi_destroy_after_a_data_directory_removed_under_running_brokers(shared) -> None:  # noqa: ANN001
    """Plain `pulumi destroy` (no drctl repair): the users, topics and ACLs go with their cluster (`deletedWith`)."""
    from dr.base.pulumi_env import pulumi_env
    from dr.base.toolchain import toolchain

    env, stack_path, state = shared
    estate, _active, passive, _link = _roles_now(stack_path)
    jvms = _all_jvms(estate)
    assert jvms
    root = stack_path.parent
    shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "stacks").symlink_to(REPO_ROOT / "stacks")
    try:
        shutil.rmtree(state / "clusters" / passive)  # its broker still runs, its pid file gone with the directory
        down = processes.run(
            [str(toolchain().pulumi_bin / "pulumi"), "destroy", "--yes", "--skip-preview", "--stack", STACK],
            cwd=root,
            env={**env, **pulumi_env(state.parent / "pulumi")},
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        (root / "stacks").unlink()
        (root / "Pulumi.yaml").unlink()
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-2000:]
    assert wait_until(lambda: not any(pid_alive(p) for p in jvms), 30), "a JVM of the destroyed estate still runs"
    assert not (state / "clusters").exists() or not any((state / "clusters").iterdir())


def test_estate_down_destroy_after_every_jvm_killed_and_a_data_directory_removed(shared) -> None:  # noqa: ANN001
    """The estate brought up again from the stack file, then lost: every JVM SIGKILLed and the active's data
    directory removed. `drctl estate down --destroy` leaves the unreachable parts' resources with a warning,
    destroys the rest, and nothing runs afterwards."""
    env, stack_path, state = shared
    up = _drctl(env, "estate", "up", "--stack", STACK)
    assert up.returncode == 0, up.stderr[-3000:]
    estate, active, passive, _link = _roles_now(stack_path)
    jvms = _all_jvms(estate)
    assert jvms
    for pid in jvms:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(state / "clusters" / active)
    down = _drctl(env, "estate", "down", "--stack", STACK, "--destroy")
    assert down.returncode == 0, down.stderr[-4000:]
    assert (
        f"warning: cluster {active} cannot be reached" in down.stderr
        and f"warning: cluster {passive} cannot be reached" in down.stderr
    ), down.stderr[-3000:]
    assert not any(pid_alive(p) for p in jvms)
    assert not (state / "clusters" / passive).exists()
