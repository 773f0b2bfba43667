"""The repairs of a killed engine's leftovers: pending operations settled, lock files judged (real processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dr.base.errors import LockHeld
from dr.estate.pulumi_locks import _parse_time, clear_stale_locks, process_started_at, stack_locks
from dr.estate.stack_repair import TOPIC_TYPE, settle_pending, unreachable_local_clusters

P = "urn:pulumi:s::kafka-dr::"
CLUSTER = f"{P}kafka-dr:index:KafkaCluster::B"
PROVIDER = f"{P}kafka-dr:index:KafkaCluster$pulumi:providers:kafka::B-kafka"
ACCESS = f"{P}kafka-dr:index:ClusterAccess::B-access"


def _deployment(pending: list[dict]) -> dict:
    return {
        "resources": [
            {"urn": CLUSTER, "type": "kafka-dr:index:KafkaCluster"},
            {"urn": PROVIDER, "type": "pulumi:providers:kafka", "id": "p1", "parent": CLUSTER},
            {"urn": ACCESS, "type": "kafka-dr:index:ClusterAccess"},
            {"urn": f"{P}x::after", "type": "kafka:index/acl:Acl", "parent": ACCESS},
        ],
        "pending_operations": pending,
    }


def _topic_create() -> dict:
    return {
        "type": "creating",
        "resource": {
            "urn": f"{P}kafka-dr:index:ClusterAccess$kafka:index/topic:Topic::B-topic-orders",
            "custom": True,
            "type": TOPIC_TYPE,
            "inputs": {"name": "orders", "partitions": 3, "replicationFactor": 1},
            "parent": ACCESS,
            "provider": f"{PROVIDER}::p1",
        },
    }


def test_an_interrupted_topic_create_is_adopted_after_its_parent_and_provider() -> None:
    settled, notes = settle_pending(_deployment([_topic_create()]))
    assert settled["pending_operations"] == []
    urns = [r["urn"] for r in settled["resources"]]
    topic = next(r for r in settled["resources"] if r.get("type") == TOPIC_TYPE)
    assert topic["id"] == "orders" and topic["outputs"]["name"] == "orders"
    assert urns.index(topic["urn"]) == urns.index(ACCESS) + 1  # after everything it needs, before the rest
    assert notes == ["adopted topic 'orders' (B-topic-orders): its create was interrupted; the refresh reads it"]


def test_other_interrupted_operations_are_dropped_and_named() -> None:
    acl = {"type": "creating", "resource": {"urn": f"{P}x::B-acl-1", "type": "kafka:index/acl:Acl"}}
    upd = {"type": "updating", "resource": {"urn": f"{P}x::B-brokers", "type": "pulumi-python:dynamic:Resource"}}
    before = _deployment([acl, upd])
    settled, notes = settle_pending(before)
    assert settled["resources"] == before["resources"] and settled["pending_operations"] == []
    assert notes == [
        "dropped the interrupted create of B-acl-1: the next up creates it (idempotent)",
        "cleared the interrupted updating of B-brokers: the refresh reads its real state",
    ]


def test_nothing_pending_changes_nothing() -> None:
    d = _deployment([])
    assert settle_pending(d) == (d, [])


def test_unreachable_local_clusters_says_why() -> None:
    d = {
        "resources": [
            {
                "urn": f"{P}kafka-dr:index:KafkaCluster$pulumi-python:dynamic:Resource::{n}-brokers",
                "type": "pulumi-python:dynamic:Resource",
                "outputs": {"name": n, "brokers": 1, "base_port": 1, "state_dir": "/s"},
            }
            for n in ("A", "B", "C")
        ]
    }
    states = {"A": "running", "B": "stopped", "C": "absent"}
    assert unreachable_local_clusters(d, lambda props: states[props["name"]]) == {
        "B": "its brokers are stopped",
        "C": "its data directory /s/clusters/C is gone",
    }


def _lock(
    backend: Path, stack: str, pid: int, host: str | None = None, ts: str = "2026-11-24T10:07:55.573795285Z"
) -> Path:
    d = backend / ".pulumi" / "locks" / "organization" / "kafka-dr" / stack
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"lock-{pid}.json"
    path.write_text(
        json.dumps({"pid": pid, "username": "root", "hostname": host or socket.gethostname(), "timestamp": ts})
    )
    return path


def test_a_lock_of_a_dead_process_on_this_host_is_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = _lock(tmp_path, "s", dead.pid)
    cleared = clear_stale_locks(tmp_path, "kafka-dr", "s")
    assert [c.pid for c in cleared] == [dead.pid] and not path.exists()


def test_a_lock_of_a_live_pulumi_process_is_kept_and_its_holder_named(tmp_path: Path) -> None:
    # a live process whose command line says pulumi, started before the lock was taken
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "pulumi"])
    try:
        import time

        time.sleep(0.2)
        ts = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime(time.time() + 1))
        path = _lock(tmp_path, "s", live.pid, ts=ts)
        with pytest.raises(LockHeld) as err:
            clear_stale_locks(tmp_path, "kafka-dr", "s")
        assert f"pid {live.pid} on host {socket.gethostname()}" in str(err.value) and "since" in str(err.value)
        assert path.exists()
    finally:
        live.kill()
        live.wait()


def test_a_pid_reused_by_another_program_does_not_hold_the_lock(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "300"])  # alive, and its command line names no pulumi
    try:
        path = _lock(tmp_path, "s", other.pid)
        assert b"pulumi" not in Path(f"/proc/{other.pid}/cmdline").read_bytes()
        assert [c.pid for c in clear_stale_locks(tmp_path, "kafka-dr", "s")] == [other.pid]
        assert not path.exists()
    finally:
        other.kill()
        other.wait()


def test_a_lock_of_another_host_is_never_removed(tmp_path: Path) -> None:
    path = _lock(tmp_path, "s", 1, host="elsewhere.example")
    with pytest.raises(LockHeld, match=r"host elsewhere\.example") as err:
        clear_stale_locks(tmp_path, "kafka-dr", "s")
    assert "pulumi cancel --stack s --yes" in str(err.value)
    assert path.exists()


def test_locks_of_other_stacks_are_not_read(tmp_path: Path) -> None:
    _lock(tmp_path, "other", 1, host="elsewhere.example")
    assert stack_locks(tmp_path, "kafka-dr", "s") == []
    assert clear_stale_locks(tmp_path, "kafka-dr", "s") == []


def test_go_timestamps_and_process_start_times_parse() -> None:
    assert _parse_time("2026-11-24T10:07:55.573795285Z") == pytest.approx(1795514875.573795)
    assert _parse_time("2026-11-24T11:07:55+01:00") == pytest.approx(1795514875.0)
    assert _parse_time("garbage") is None
    started = process_started_at(os.getpid())
    assert started is not None and started <= __import__("time").time()
    assert process_started_at(0) is None


def test_a_dynamic_provider_process_exits_when_the_engines_pipe_closes() -> None:
    code = (
        "import sys, time, importlib.machinery as m\n"
        "sys.modules['__main__'].__spec__ = m.ModuleSpec('pulumi.dynamic.__main__', None)\n"
        "from stacks.engine_watch import die_with_engine\n"
        "die_with_engine()\n"
        "print('watching', flush=True)\n"
        "time.sleep(60)\n"
    )
    from tests import REPO_ROOT

    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO_ROOT, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "watching"
        assert child.poll() is None, "exited while the engine's pipe was open"
        assert child.stdin is not None
        child.stdin.close()  # the engine dies: its end of the pipe closes
        assert child.wait(timeout=10) == 0
    finally:
        child.kill()
        child.wait()


def test_outside_a_provider_process_nothing_is_watched() -> None:
    from stacks.engine_watch import die_with_engine, in_provider_process

    assert not in_provider_process()
    die_with_engine()  # no thread: pytest's stdin is not an engine's pipe
    import threading

    assert "kdr-engine-watch" not in [t.name for t in threading.enumerate()]
