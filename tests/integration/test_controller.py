"""``drctl controller`` on a real local estate (A → B, MirrorMaker 2) with a real three-member etcd as its
witness: the metrics are scraped over HTTP, by the test and by a real Prometheus evaluating
``ops/prometheus/kdr-rules.yml``, and they follow A going down.

The controllers of sites A and B run as an operator runs them (``drctl`` processes, JSON-line logs). While
the estate is healthy A's reports A up, the link running, ``kdr_ready 1`` and that it holds the lease; B's
sees the same holder, and — the link's target — compares A and B every 5 s: a topic configuration changed on B by hand makes
B not ready naming it, put back B is ready again. A's brokers are stopped: A goes suspect, then down after ``detect_after_s`` at both
controllers, ``kdr_ready`` drops to 0 with the reason ``drctl status`` gives, a ``cluster-down`` alert is
logged and Prometheus fires ``KdrClusterDown`` from each site — nothing is failed over (mode manual). On
SIGTERM both exit 0 and A's gives the lease back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from dr.base.stackref import StackRef
from dr.controller.etcd import EtcdWitness
from dr.failover.frame.journal import Journal
from dr.failover.record.team_store import project_name
from dr.kafka.client import Endpoint
from tests import REPO_ROOT
from tests.etcd_server import EtcdCluster, etcd_cluster
from tests.integration.helpers import StackEnv, drctl, provisioned, write_local_stack
from tests.integration.ports import free_window, release_window, windows
from tests.prometheus_server import firing, prometheus_server

pytestmark = pytest.mark.timeout(900)

STACK = "ctltest"


@pytest.fixture(scope="module")
def etcd3() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metrics_ports() -> Iterator[tuple[int, int]]:
    start = free_window(2)
    yield start, start + 1
    release_window(start)


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, etcd3: EtcdCluster, metrics_ports: tuple[int, int]
) -> Iterator[StackEnv]:
    """The local example (A on one broker) with a manual policy: etcd witness, A's and B's metrics ports, a
    short detection (6 s, lease TTL 3 s + margin 1 s), a parity check every 5 s."""
    root = tmp_path_factory.mktemp(STACK)
    with windows(3) as ports:
        path = write_local_stack(root, STACK, ports)
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {
            "detectAfterS": 6,
            "leaseTtlS": 3,
            "marginS": 1,
            "witness": {"kind": "etcd", "endpoints": etcd3.endpoints},
            "metricsPorts": {"A": metrics_ports[0], "B": metrics_ports[1]},
            "parityEveryS": 5,
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        with provisioned(StackEnv(root, STACK)) as e:
            yield e


_LINK_RPO = 'kdr_rpo_estimate_records{link="A-to-B",source="A",target="B"}'
_LINK_LAG_S = 'kdr_link_lag_seconds{link="A-to-B",source="A",target="B"}'


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


def _until_prometheus(url: str, query: str, what: str) -> None:
    """Wait until Prometheus's instant ``query`` returns a sample (the deadline only bounds a hang)."""
    deadline = time.monotonic() + 120
    q = urllib.parse.quote(query)
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v1/query?query={q}", timeout=5) as response:  # noqa: S310 — loopback
            if json.loads(response.read().decode())["data"]["result"]:
                return
        time.sleep(0.5)
    raise AssertionError(f"{what}: {query} never returned a sample")


def _until_alert(url: str, match: Callable[[dict[str, str]], bool], sites: set[str]) -> list[dict[str, str]]:
    """Wait until Prometheus fires an alert matching ``match`` from each of ``sites``; their labels."""
    deadline = time.monotonic() + 120
    found: list[dict[str, str]] = []
    while time.monotonic() < deadline:
        found = [f["labels"] for f in firing(url) if match(f["labels"])]
        if {f["site"] for f in found} >= sites:
            return found
        time.sleep(0.5)
    raise AssertionError(f"no alert from each of {sites}; firing: {found}")


def _problems(samples: dict[str, float]) -> list[str]:
    return [
        re.sub(r'^kdr_problem\{reason="(.*)"\}$', r"\1", k)
        for k, v in samples.items()
        if k.startswith("kdr_problem{") and v == 1
    ]


def _set_topic_config(endpoint: Endpoint, topic: str, key: str, value: str) -> Callable[[], None]:
    """Set ``key`` of ``topic`` as a platform team would by hand; return what puts the previous value back."""
    admin = AdminClient(endpoint.config())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([resource])[resource].result(timeout=30)[key]
    dynamic = entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    def alter(op: AlterConfigOpType, to: str | None) -> None:
        change = ConfigResource(
            ConfigResource.Type.TOPIC, topic, incremental_configs=[ConfigEntry(key, to, incremental_operation=op)]
        )
        admin.incremental_alter_configs([change])[change].result(timeout=30)

    alter(AlterConfigOpType.SET, value)
    return lambda: alter(AlterConfigOpType.SET, entry.value) if dynamic else alter(AlterConfigOpType.DELETE, None)


def _controller(env: StackEnv, site: str) -> tuple[subprocess.Popen[str], Path]:
    """``drctl controller --site <site> --log-format json`` as an operator starts it; its log file."""
    log = env.root / f"controller-{site}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, "--site", site, "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}, cwd=REPO_ROOT,
        )  # fmt: skip
    return proc, log


def _events(log: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def test_the_controllers_serve_metrics_and_see_a_go_down(
    env: StackEnv, etcd3: EtcdCluster, metrics_ports: tuple[int, int]
) -> None:
    port_a, port_b = metrics_ports
    leader = EtcdWitness(etcd3.endpoints, f"/kafka-dr/{project_name()}/{STACK}/leader", 3)
    a, log_a = _controller(env, "A")
    b, log_b = _controller(env, "B")
    targets = [
        (f"127.0.0.1:{port_a}", {"stack": STACK, "site": "A"}),
        (f"127.0.0.1:{port_b}", {"stack": STACK, "site": "B"}),
    ]
    servers = ExitStack()
    try:
        prom = servers.enter_context(prometheus_server(targets, [REPO_ROOT / "ops" / "prometheus" / "kdr-rules.yml"]))
        healthy = _until(
            port_a,
            lambda s: (
                s.get('kdr_detection_state{cluster="A",state="up"}') == 1
                and s.get("kdr_ready") == 1
                and s.get('kdr_link_running{link="A-to-B"}') == 1
                and s.get("kdr_lease_held") == 1
                and 'kdr_app_writes_allowed{cluster="A"}' in s
                and _LINK_RPO in s
            ),
            "A up, ready, the link running, the lease held, the fence state and the RPO estimate read",
            a,
        )
        assert healthy['kdr_canary_produce_ok{cluster="A"}'] == 1
        assert healthy['kdr_detection_state{cluster="B",state="up"}'] == 1
        assert healthy['kdr_link_state{link="A-to-B",state="running"}'] == 1
        assert 'kdr_link_lag_records{link="A-to-B",source="A",target="B"}' in healthy
        assert healthy["kdr_witness_up"] == 1 and healthy["kdr_lease_token"] > 0
        assert healthy['kdr_app_writes_allowed{cluster="A"}'] == 1  # not fenced
        # the live lag is the RPO estimate while A answers; the lag in seconds is a lower bound, never negative
        assert healthy[_LINK_RPO] >= 0 and healthy[_LINK_LAG_S] >= 0
        assert healthy['kdr_automatic_failovers_total{outcome="started"}'] == 0 and healthy["kdr_self_fence_total"] == 0
        holder = leader.current()
        assert holder is not None and holder.holder.endswith("/A") and holder.token == healthy["kdr_lease_token"]
        assert f'kdr_lease_holder{{holder="{holder.holder}"}}' in healthy
        # B's controller (the passive site) only watches the lease, and sees the same holder
        seen_by_b = _until(
            port_b,
            lambda s: (
                s.get(f'kdr_lease_holder{{holder="{holder.holder}"}}') == 1
                and s.get('kdr_detection_state{cluster="B",state="up"}') == 1
            ),
            "B's controller up, seeing A's controller hold the lease",
            b,
        )
        assert seen_by_b["kdr_lease_held"] == 0 and seen_by_b["kdr_lease_token"] == holder.token
        # B, the link's target, compares A and B as `drctl status --parity` does: equal; a topic configuration
        # changed on B behind the product's back makes B not ready, naming it; put back, B is ready again
        parity = 'kdr_parity_differences{cluster="B"}'
        _until(port_b, lambda s: s.get(parity) == 0 and s.get("kdr_ready") == 1, "B's controller: A and B equal", b)
        assert not any(k.startswith("kdr_parity_differences") for k in _scrape(port_a)), "A is no link's target"
        restore = _set_topic_config(env.estate().endpoint("B"), "orders", "retention.ms", "3600000")
        drift = _until(
            port_b, lambda s: s.get(parity, 0) >= 1 and s.get("kdr_ready") == 0, "B's controller naming the drift", b
        )
        assert any("'orders'" in p and "retention.ms" in p for p in _problems(drift)), _problems(drift)
        restore()
        _until(port_b, lambda s: s.get(parity) == 0 and s.get("kdr_ready") == 1, "B ready again once put back", b)
        parity_events = [e["event"] for e in _events(log_b) if str(e["event"]).startswith("parity-")]
        assert parity_events == ["parity-drift", "parity-equal"], parity_events
        _until_prometheus(
            prom, 'kdr_detection_state{cluster="A",state="up",site="B"} == 1', "Prometheus scraping B's A up"
        )
        assert not [f for f in firing(prom) if f["labels"]["alertname"] == "KdrClusterDown"]

        env.estate().local_cluster("A").stop()
        # the readiness reasons come from drctl status's report, read beside the passes: the one read while A
        # was stopping may still say its brokers are down; the next says it is stopped
        down = _until(
            port_a,
            lambda s: (
                s.get('kdr_detection_state{cluster="A",state="down"}') == 1
                and s.get("kdr_ready") == 0
                and any(p.startswith("cluster A (active) is stopped") for p in _problems(s))
            ),
            "A detected down, the estate not ready, the reason named",
            a,
        )
        assert down['kdr_cluster_up{cluster="A"}'] == 0
        assert down['kdr_cluster_down_seconds{cluster="A"}'] >= 6
        assert down['kdr_alerts_total{kind="cluster_down"}'] >= 1
        assert down['kdr_detection_state{cluster="B",state="up"}'] == 1
        from_b = _until(
            port_b,
            lambda s: s.get('kdr_detection_state{cluster="A",state="down"}') == 1,
            "B's controller seeing A down",
            b,
        )
        assert from_b["kdr_ready"] == 0 and from_b['kdr_alerts_total{kind="cluster_down"}'] >= 1
        # A lost: its lag is unknown, the RPO is estimated from A's last snapshot as the unplanned failover would
        rpo_b = _until(
            port_b, lambda s: _LINK_RPO in s and _LINK_LAG_S not in s, "B's controller estimating A's RPO", b
        )
        upper = 'kdr_rpo_estimate_upper_records{link="A-to-B",source="A",target="B"}'
        assert 0 <= rpo_b[_LINK_RPO] <= rpo_b.get(upper, rpo_b[_LINK_RPO])
        # the real Prometheus scraping both controllers fires the rule file's alert, from each site
        alerts = _until_alert(prom, lambda f: f["alertname"] == "KdrClusterDown" and f["cluster"] == "A", {"A", "B"})
        assert {(f["stack"], f["severity"], f["state"]) for f in alerts} == {(STACK, "critical", "down")}

        for proc in (a, b):
            proc.send_signal(signal.SIGTERM)
        assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
        events = _events(log_a)
        kinds = [e["event"] for e in events]
        expected = {
            "started",
            "lease-taken",
            "cluster-suspect",
            "cluster-down",
            "stopping",
            "lease-released",
            "stopped",
        }
        assert expected <= set(kinds), kinds
        alert = next(e for e in events if e["event"] == "cluster-down")
        assert alert["cluster"] == "A" and "No action taken" in alert["message"]
        assert "lease-taken" not in [e["event"] for e in _events(log_b)]
        assert leader.current() is None  # A's controller gave the lease back
        after = env.estate().topology  # manual mode: nothing was failed over
        assert not after.failover_done and after.cluster("B").role == "passive"
        assert Journal.load(StackRef.resolve(STACK).failover_home) is None
    finally:
        servers.close()
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        start = drctl(env, "estate", "start", "--stack", STACK, "--cluster", "A")
        assert start.returncode == 0, start.stderr[-2000:]
    assert "Traceback" not in log_a.read_text() + log_b.read_text()
