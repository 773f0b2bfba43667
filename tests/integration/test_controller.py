"""``drctl controller`` on a real local estate (A → B, MirrorMaker 2) with a real three-member etcd as its
witness: the metrics are scraped over HTTP as Prometheus would, and they follow A going down.

The controller of site A runs as an operator runs it (a ``drctl`` process, JSON-line logs). While the estate
is healthy it reports A up, the link running, ``kdr_ready 1`` and that it holds the lease. A's brokers are
stopped: A goes suspect, then down after ``detect_after_s``, ``kdr_ready`` drops to 0 with the reason
``drctl status`` gives, and a ``cluster-down`` alert is logged — nothing is failed over (mode manual). On
SIGTERM it exits 0 and gives the lease back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from dr.controller.etcd import EtcdWitness
from dr.failover.team_store import project_name
from tests import REPO_ROOT
from tests.etcd_server import EtcdCluster, etcd_cluster
from tests.integration.helpers import StackEnv, drctl, provisioned, write_local_stack
from tests.integration.ports import free_window, release_window, windows

pytestmark = pytest.mark.timeout(900)

STACK = "ctltest"


@pytest.fixture(scope="module")
def etcd3() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metrics_port() -> Iterator[int]:
    start = free_window(1)
    yield start
    release_window(start)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, etcd3: EtcdCluster, metrics_port: int) -> Iterator[StackEnv]:
    """The local example (A on one broker) with a manual policy: etcd witness, A's metrics port, a short
    detection (6 s, lease TTL 3 s + margin 1 s)."""
    root = tmp_path_factory.mktemp(STACK)
    with windows(3) as ports:
        path = write_local_stack(root, STACK, ports)
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {
            "detectAfterS": 6,
            "leaseTtlS": 3,
            "marginS": 1,
            "witness": {"kind": "etcd", "endpoints": etcd3.endpoints},
            "metricsPorts": {"A": metrics_port},
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        with provisioned(StackEnv(root, STACK)) as e:
            yield e


def _scrape(port: int) -> dict[str, float]:
    """``name{labels}`` → value of every sample the controller serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310 — loopback
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _until(
    port: int, check: Callable[[dict[str, float]], bool], what: str, proc: subprocess.Popen[str]
) -> dict[str, float]:
    """Scrape until ``check`` holds (the deadline only bounds a hang); fail naming ``what`` and the last scrape."""
    deadline = time.monotonic() + 240
    last: dict[str, float] = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the controller exited with {proc.returncode}"
        try:
            last = _scrape(port)
        except OSError:
            last = {}
        if last and check(last):
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what} never held; last scrape: {json.dumps(last, indent=1)[-3000:]}")


def _problems(samples: dict[str, float]) -> list[str]:
    return [
        re.sub(r'^kdr_problem\{reason="(.*)"\}$', r"\1", k)
        for k, v in samples.items()
        if k.startswith("kdr_problem{") and v == 1
    ]


def test_the_controller_serves_metrics_and_sees_a_go_down(env: StackEnv, etcd3: EtcdCluster, metrics_port: int) -> None:
    log = env.root / "controller-A.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, "--site", "A", "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}, cwd=REPO_ROOT,
        )  # fmt: skip
    try:
        healthy = _until(
            metrics_port,
            lambda s: (
                s.get('kdr_detection_state{cluster="A",state="up"}') == 1
                and s.get("kdr_ready") == 1
                and s.get('kdr_link_running{link="A-to-B"}') == 1
                and s.get("kdr_lease_held") == 1
            ),
            "A up, ready, the link running and the lease held",
            proc,
        )
        assert healthy['kdr_canary_produce_ok{cluster="A"}'] == 1
        assert healthy['kdr_detection_state{cluster="B",state="up"}'] == 1
        assert healthy['kdr_link_state{link="A-to-B",state="running"}'] == 1
        assert 'kdr_link_lag_records{link="A-to-B",source="A",target="B"}' in healthy
        assert healthy["kdr_witness_up"] == 1 and healthy["kdr_lease_token"] > 0
        holder = EtcdWitness(etcd3.endpoints, f"/kafka-dr/{project_name()}/{STACK}/leader", 3).current()
        assert holder is not None and holder.holder.endswith("/A") and holder.token == healthy["kdr_lease_token"]
        assert f'kdr_lease_holder{{holder="{holder.holder}"}}' in healthy

        env.estate().local_cluster("A").stop()
        down = _until(
            metrics_port,
            lambda s: s.get('kdr_detection_state{cluster="A",state="down"}') == 1 and s.get("kdr_ready") == 0,
            "A detected down and the estate not ready",
            proc,
        )
        assert down['kdr_cluster_up{cluster="A"}'] == 0
        assert down['kdr_cluster_down_seconds{cluster="A"}'] >= 6
        assert down['kdr_alerts_total{kind="cluster_down"}'] >= 1
        assert any(p.startswith("cluster A (active) is stopped") for p in _problems(down)), _problems(down)
        assert down['kdr_detection_state{cluster="B",state="up"}'] == 1

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        kinds = [e["event"] for e in events]
        assert {
            "started",
            "lease-taken",
            "cluster-suspect",
            "cluster-down",
            "stopping",
            "lease-released",
            "stopped",
        } <= set(kinds), kinds
        alert = next(e for e in events if e["event"] == "cluster-down")
        assert alert["cluster"] == "A" and "No action taken" in alert["message"]
        assert EtcdWitness(etcd3.endpoints, f"/kafka-dr/{project_name()}/{STACK}/leader", 3).current() is None
        assert env.estate().local_cluster("B").state() == "running"  # manual mode: nothing was failed over
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        start = drctl(env, "estate", "start", "--stack", STACK, "--cluster", "A")
        assert start.returncode == 0, start.stderr[-2000:]
    assert not Path(log).read_text().count("Traceback")
