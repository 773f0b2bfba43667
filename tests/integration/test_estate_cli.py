"""`drctl estate up/preview/status/down` on a real stack: `pulumi up` through the Automation API; roles
become processes, ACLs follow roles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.runtime.process import pid_alive
from tests.integration.helpers import StackEnv, consume_all, drctl, produce, write_local_stack


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]) -> Iterator[dict[str, str]]:
    """A copy of the local stack on its own ports (A with 1 broker to save time)."""
    d = tmp_path_factory.mktemp("estate-cli")
    write_local_stack(d, "clitest", stack_ports)
    env = StackEnv(d, "clitest")
    yield env
    with pytest.MonkeyPatch.context() as mp:  # whatever a test left running is stopped and removed
        for k, v in env.items():
            mp.setenv(k, v)
        try:
            EstateStack(StackRef.resolve("clitest")).destroy()
        finally:
            Estate.for_stack(StackRef.resolve("clitest")).stop()


def test_estate_up_status_and_down_leave_nothing_running(
    stack_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in stack_env.items():
        monkeypatch.setenv(k, v)
    up = drctl(stack_env, "estate", "up", "--stack", "clitest", "--json")
    assert up.returncode == 0, up.stderr[-2000:]
    assert set(json.loads(up.stdout)["timings_s"]) == {"pulumi up"}
    preview = drctl(stack_env, "estate", "preview", "--stack", "clitest", "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-2000:] + preview.stderr[-2000:]

    status = json.loads(drctl(stack_env, "estate", "status", "--stack", "clitest", "--json").stdout)
    states = {c["name"]: c.get("state") for c in status["clusters"]}
    assert states == {"A": "running", "B": "running", "C": "absent"}, "a standby is not provisioned"
    assert status["links"][0]["process"] == "running"

    estate = Estate.for_stack(StackRef.resolve("clitest"))
    app_a = estate.endpoint("A").with_user("orders-app", estate.app_password("orders-app"))
    app_b = estate.endpoint("B").with_user("orders-app", estate.app_password("orders-app"))
    acked, errors = produce(app_a, "orders", [f"o{i}" for i in range(200)])
    assert not errors and len(acked) == 200, errors[:3]
    estate.mirror("A-to-B").wait_caught_up(["orders"], timeout=90)
    billing_b = estate.endpoint("B").with_user("billing", estate.app_password("billing"))
    # billing reads B, the passive, by assignment: it holds no group right there (docs/security.md)
    assert sorted(consume_all(billing_b, "orders", 200, assigned=True)) == sorted(acked)
    refused, errors = produce(app_b, "orders", ["nope"], retries=0, **{"message.timeout.ms": 10000})
    assert refused == [] and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    again = drctl(stack_env, "estate", "up", "--stack", "clitest")
    assert again.returncode == 0, "estate up is idempotent"

    pids = [p for name in ("A", "B") for p in estate.local_cluster(name).pids().values()]
    stop = drctl(stack_env, "estate", "down", "--stack", "clitest")
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert not any(pid_alive(p) for p in pids), "down stops every process"
    assert (Path(stack_env["KDR_STATE_DIR"]) / "clitest" / "clusters" / "A").exists(), "down keeps the data"
    back = drctl(stack_env, "estate", "up", "--stack", "clitest", "--refresh")
    assert back.returncode == 0, back.stderr[-2000:]
    assert estate.local_cluster("A").state() == "running" and estate.mirror("A-to-B").alive()
    assert len(consume_all(billing_b, "orders", 200, assigned=True)) >= 200, "records kept across the stop"

    pids = [p for name in ("A", "B") for p in estate.local_cluster(name).pids().values()]
    mm_pid = estate.mirror("A-to-B").process.pid
    down = drctl(stack_env, "estate", "down", "--stack", "clitest", "--destroy")
    assert down.returncode == 0, down.stderr[-2000:]
    assert pids and not any(pid_alive(p) for p in [*pids, mm_pid or 0] if p)
    assert not (Path(stack_env["KDR_STATE_DIR"]) / "clitest" / "clusters" / "A").exists()


def test_unknown_stack_exits_2_naming_known_stacks(stack_env: dict[str, str]) -> None:
    res = drctl(stack_env, "estate", "status", "--stack", "nosuch")
    assert res.returncode == 2
    assert "unknown stack 'nosuch'" in res.stderr and "clitest" in res.stderr
