"""A planned failover A→B→C on real local clusters: refusals first, then the whole pipeline.

One estate for the module (A with 3 brokers, B and C with 1), driven through the command line as
an operator would. The tests run in order: each leaves the estate in the state the next expects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import client_files
from dr.failover.act.groups import translated_within
from dr.failover.act.probe import PROBE_KEY
from dr.failover.drill.traffic import read_keys
from dr.failover.frame.journal import Journal
from dr.kafka.client import Endpoint
from dr.kafka.offsets import committed_offsets
from dr.runtime.process import wait_until
from dr.topology import load_stack_file
from tests import REPO_ROOT, processes
from tests.integration.helpers import link_copied, produce
from tests.integration.helpers import teardown_stack as _teardown
from tests.integration.journal_home import journal_home

STACK = "planned"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]) -> Iterator[dict[str, str]]:
    """The stack on its own ports and directories, provisioned (A, B, link A→B) once for the module."""
    d = tmp_path_factory.mktemp("failover-planned")
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], stack_ports, strict=True):
        c["base_port"] = port
    (d / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {"KDR_STACK_DIR": str(d), "KDR_STATE_DIR": str(d / "state")}
    original = load_stack_file(d / f"Pulumi.{STACK}.yaml")
    state = d / "state" / STACK
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        try:
            EstateStack(StackRef.resolve(STACK)).up(
                load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml")
            )
            yield env
        finally:  # A, B and C, whatever the tests left running
            _teardown(STACK, original, state)


@pytest.fixture
def estate(env: dict[str, str]) -> Estate:
    """The estate as declared before the failover."""
    return Estate(
        load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"), Path(env["KDR_STATE_DIR"]) / STACK
    )


OUTPUTS: list[str] = []


def drctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``drctl <args>`` (the failover commands) in a subprocess; keep its output for secret checks."""
    res = processes.run(
        [sys.executable, "-m", "dr.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=REPO_ROOT,
    )
    OUTPUTS.append(res.stdout + res.stderr)
    return res


def app(estate: Estate, cluster: str, name: str) -> Endpoint:
    return estate.endpoint(cluster).with_user(name, estate.app_password(name))


ACKED: list[str] = []  # every key acknowledged by A in this module: none may be lost


def test_a_failover_is_refused_while_b_is_down_and_nothing_changes(env: dict[str, str], estate: Estate) -> None:
    stack_file = Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"
    before = stack_file.read_bytes()
    b = estate.local_cluster("B")
    b.stop()
    try:
        res = drctl(env, "failover", "--stack", STACK, "--yes")
        assert res.returncode == 6, res.stderr[-2000:]
        assert "cluster B (the passive cluster to promote) is unreachable" in res.stderr
        assert stack_file.read_bytes() == before
        acked, errors = produce(app(estate, "A", "orders-app"), "orders", ["while-b-down"])
        assert acked == ["while-b-down"] and not errors, "A was not fenced by a refused preflight"
        ACKED.extend(acked)
    finally:
        b.start()
    assert estate.mirror("A-to-B").alive()


def test_a_link_that_does_not_drain_is_refused_and_a_is_unfenced(env: dict[str, str], estate: Estate) -> None:
    mirror = estate.mirror("A-to-B")
    mirror.stop()
    try:
        keys = [f"lag-{i}" for i in range(200)]
        acked, _ = produce(app(estate, "A", "orders-app"), "orders", keys)
        assert len(acked) == 200
        ACKED.extend(acked)
        res = drctl(env, "failover", "--stack", STACK, "--yes", "--drain-timeout", "2")
        assert res.returncode == 6, res.stderr[-2000:]
        assert "link A-to-B (its process is NOT running) still lags by" in res.stderr
        assert "A was unfenced" in res.stderr and "--force" in res.stderr
        again, errors = produce(app(estate, "A", "orders-app"), "orders", ["after-refusal"])
        assert again == ["after-refusal"] and not errors, "the refused failover gave A its write ACLs back"
        ACKED.extend(again)
        journal = Journal.load(journal_home(env, STACK))
        assert journal is not None
        assert journal.step("fence-drain").status == "failed"
        assert journal.step("promote").status == "pending"
        assert journal.measurements.fenced_bindings == []
    finally:
        mirror.start()


def _read_group(conf: dict[str, Any], topic: str, until: int, timeout: float = 60) -> list[str]:
    consumer = Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(keys) < until and time.monotonic() < deadline:
            keys += [m.key().decode() for m in consumer.consume(500, timeout=0.5) if m.error() is None]
    finally:
        if until and len(keys) >= until:
            consumer.commit(asynchronous=False)
        consumer.close()
    return keys


def test_planned_failover_loses_no_acknowledged_record_and_builds_c(env: dict[str, str], estate: Estate) -> None:
    state = Path(env["KDR_STATE_DIR"]) / STACK
    keys = [f"p-{i}" for i in range(3000)]
    acked, errors = produce(app(estate, "A", "orders-app"), "orders", keys)
    assert len(acked) == 3000 and not errors
    ACKED.extend(acked)
    billing_a = app(estate, "A", "billing").config(**{"group.id": "billing"})
    read_on_a = _read_group(billing_a, "orders", until=1700)  # the group is half-way when A is failed over
    assert len(read_on_a) >= 1700
    # as the runbook says: start once the link shows the group's position on B
    within = translated_within(estate.topology, "B")
    assert wait_until(lambda: bool(committed_offsets(estate.endpoint("B"), "billing")), within, interval=0.5)

    res = drctl(env, "failover", "--stack", STACK, "--yes", "--json")
    assert res.returncode == 0, res.stderr[-4000:]
    s = json.loads(res.stdout)
    print(
        f"\nplanned: RTO {s['rto_s']}s, A→B→C {s['a_b_c_s']}s, total {s['total_s']}s, runs {s['runs']}, "
        + ", ".join(f"{st['name']} {st['seconds']}s" for st in s["steps"])
    )
    assert s["status"] == "completed"
    assert [st["status"] for st in s["steps"]] == ["done"] * 8
    assert s["runs"] == 3, "it resumed the journal of the two refused runs"
    assert s["rto_s"] is not None and 0 < s["rto_s"] < 30
    assert s["a_b_c_s"] is not None and s["a_b_c_s"] < 120
    assert s["verdict"]["clean"] and s["verdict"]["counts"]["missing"] == 0
    assert s["rpo_estimate"]["records"] == 0

    # zero acknowledged records lost: every key A acknowledged is on B, and nothing else from A is missing
    b_admin = estate.endpoint("B")
    on_b = read_keys(b_admin, "orders")
    assert not set(ACKED) - set(on_b)
    assert on_b[PROBE_KEY.decode()] == 1, "exactly one RTO probe record"
    assert sum(on_b.values()) == len(ACKED) + 1

    # the group resumes on B from its translated offsets: it re-reads some records, skips none
    groups = {g["group"]: g for g in s["consumer_groups"]}
    assert groups["billing"]["status"] in ("translated", "partial") and not groups["billing"]["would_skip"]
    translated = committed_offsets(b_admin, "billing")
    assert translated, "MirrorMaker 2 translated the group's offsets"
    conf = json.loads(client_files(state, "billing")[1].read_text())  # what the moved application loads
    assert conf["bootstrap.servers"] == estate.local_cluster("B").bootstrap
    everything = {k for k in on_b if k != PROBE_KEY.decode()}
    read_on_b = [
        k
        for k in _read_group(conf, "orders", until=len(everything) - len(read_on_a) + 3000, timeout=30)
        if k != PROBE_KEY.decode()
    ]
    rereads = len(set(read_on_b) & set(read_on_a))
    print(f"billing: read {len(read_on_a)} on A, {len(read_on_b)} on B, {rereads} read twice")
    assert everything <= set(read_on_a) | set(read_on_b), "the resumed group skipped records"

    # B is the active cluster; C is the new passive one, created with its users, ACLs and topics
    after = Estate(load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"), state)
    roles = {c.name: c.role.value for c in after.topology.clusters}
    assert roles == {"A": "decommissioned", "B": "active", "C": "passive"}
    assert after.local_cluster("A").state() == "stopped"
    assert after.local_cluster("C").state() == "running" and after.mirror("B-to-C").alive()
    late, errors = produce(app(after, "B", "orders-app"), "orders", ["on-b"])
    assert late == ["on-b"] and not errors
    assert link_copied(after, "B-to-C", ["orders"], 60), "C replicates B"
    refused, denied = produce(app(after, "C", "orders-app"), "orders", ["on-c"], **{"message.timeout.ms": 5000})
    assert not refused and denied and denied[0].name() == "TOPIC_AUTHORIZATION_FAILED", "C is read-only for apps"
    assert read_keys(app(after, "C", "billing"), "orders")["on-b"] == 1, "billing may read on C"

    for path in (state / "clients").iterdir():
        assert oct(path.stat().st_mode & 0o777) == "0o600"

    # the fence and the promotion are desired state: Pulumi proposes no change after the failover
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_the_finished_failover_run_again_changes_nothing(env: dict[str, str]) -> None:
    stack_file = Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"
    journal = Journal.path_for(journal_home(env, STACK))
    before = (stack_file.read_bytes(), journal.read_bytes())
    res = drctl(env, "failover", "--stack", STACK, "--yes")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "already finished; nothing changed" in res.stdout
    assert (stack_file.read_bytes(), journal.read_bytes()) == before


def test_status_shows_the_new_roles_the_link_b_to_c_and_the_last_failover(env: dict[str, str]) -> None:
    res = drctl(env, "status", "--stack", STACK, "--json", "--isr")
    assert res.returncode == 0, res.stderr[-2000:]
    st = json.loads(res.stdout)
    clusters = {c["name"]: c for c in st["clusters"]}
    assert (clusters["B"]["role"], clusters["B"]["health"]["healthy"]) == ("active", True)
    assert (clusters["C"]["role"], clusters["C"]["health"]["healthy"]) == ("passive", True)
    assert clusters["B"]["health"]["partitions"]["orders:0"]["isr"] == [1]
    assert clusters["A"]["process"] == "stopped"
    assert [(lk["name"], lk["process"]) for lk in st["links"]] == [("B-to-C", "running")]
    assert st["last_failover"]["status"] == "completed"
    text = drctl(env, "status", "--stack", STACK)
    assert "last failover" in text.stdout and "B-to-C" in text.stdout


def test_no_password_was_ever_printed(env: dict[str, str], estate: Estate) -> None:
    secrets = [estate.credentials.password(u) for u in estate.credentials.users()]
    assert len(secrets) >= 4
    assert OUTPUTS and not [s for s in secrets for out in OUTPUTS if s in out]
