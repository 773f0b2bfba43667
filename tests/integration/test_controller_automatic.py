"""``mode: automatic``: the passive site's controller fails the stack over by itself — on one real local estate
(A → B, MirrorMaker 2), a real three-member etcd on loopback as the witness, and the controllers as an
operator runs them (``drctl controller`` processes, JSON-line logs): A's, and two of B's (``--metrics-port``
for the second; each with an operator name of its own, as on two hosts).

A third site's observer (``--observer C-site``) joins the last test. In order, on the same estate: (f) A's brokers SIGKILLed and started again at once, down for less than
``detect_after_s`` → nothing is failed over; (e) every etcd member stopped, then A's brokers SIGKILLed →
B's controllers see A down and the witness down, alert, and do nothing, while the manual command still
plans the failover; etcd and A back; (c) a third controller at B (``B3``) run in a network namespace of its
own (:mod:`tests.netns_bridge`, root: ``unshare --net``) that reaches B and the witness but whose connections to
A are left unanswered — a real cut for that observer only → B3 sees A down and alerts, the other observers
see A up, nothing is failed over; (a)+(g) the whole site A lost at a random instant — its brokers and its controller
SIGKILLed together — → with the third-site observer agreeing, exactly one of B's two controllers takes the
lease and runs the journaled unplanned failover, the other is told who holds it; (h) at a seeded instant
inside that failover the winner is SIGKILLed with its process group (its failover child with it, as when its
host dies) → once its lease expires the other controller resumes the same journal with a token of its own;
the journal's run ends (pending: A's verification and decommission wait for A's return, as
in every unplanned failover without A), carries the fencing token and ``started_by``, and an application writes on B;
a real Prometheus scraping every controller with ``ops/prometheus/kdr-rules.yml`` fires ``KdrAutomaticFailoverMade``
for the start and for the resume, and ``KdrClusterDown`` for A.

Timing policy: the waits have generous timeouts that only bound a hang; the detection and promotion times
are printed, never asserted.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.failover.frame.journal import Journal
from tests import REPO_ROOT
from tests.etcd_server import EtcdCluster, etcd_cluster
from tests.integration.helpers import StackEnv, drctl, produce, provisioned, write_local_stack
from tests.integration.ports import free_window, release_window, windows
from tests.processes import kill_tree

pytestmark = pytest.mark.timeout(1500)

STACK = "ctlauto"
DETECT_AFTER_S = 45
"""The detection window of (f), whose premise is an outage shorter than it: a broker's restart on a loaded
machine must fit inside with room to spare."""
QUICK_DETECT_S = 15
"""The detection window of (e) and (c)+(a)+(g)+(h), set in the stack file after (f): they wait for a detection,
and a shorter window is the same judgement made sooner (the controllers read the stack when they start)."""
SEED = int(os.environ.get("KDR_CONTROLLER_SEED", "4308"))
"""The seed of the instants this module's faults land at (``KDR_CONTROLLER_SEED=N`` replays seed N)."""


@pytest.fixture(scope="module")
def etcd3() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def metrics_ports() -> Iterator[tuple[int, int, int]]:
    start = free_window(3)
    yield start, start + 1, start + 2
    release_window(start)


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, etcd3: EtcdCluster, metrics_ports: tuple[int, int, int]
) -> Iterator[StackEnv]:
    """The local example (A on one broker) with an automatic policy on the etcd witness."""
    root = tmp_path_factory.mktemp(STACK)
    with windows(3) as ports:
        path = write_local_stack(root, STACK, ports)
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {
            "mode": "automatic",
            "detectAfterS": DETECT_AFTER_S,
            "leaseTtlS": 3,
            "marginS": 1,
            "maxRpoRecords": 100_000,
            "witness": {"kind": "etcd", "endpoints": etcd3.endpoints},
            "metricsPorts": {"A": metrics_ports[0], "B": metrics_ports[1]},
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        with provisioned(StackEnv(root, STACK)) as e:
            yield e


class Controllers:
    """The controllers of one test: started as an operator starts them, stopped with SIGTERM (then their
    whole tree killed, so a failover child never outlives the test)."""

    def __init__(self, env: StackEnv, name: str) -> None:
        self.env, self.name = env, name
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, Path] = {}
        self.ports: dict[str, int] = {}

    def start(self, key: str, *where: str, prefix: Sequence[str] = ()) -> None:
        """``drctl controller --stack S <where...>`` (``--site X [...]`` or ``--observer NAME``), after
        ``prefix`` (e.g. :mod:`tests.netns_bridge`'s command line)."""
        log = self.env.root / f"{self.name}-{key}.log"
        with log.open("w") as out:
            self.procs[key] = subprocess.Popen(
                [*prefix, sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, *where, "--log-format", "json"],
                stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, start_new_session=True,
                env={**os.environ, **self.env, "KDR_OPERATOR": f"ctl-{key}"},
            )  # fmt: skip
        self.logs[key] = log

    def events(self, key: str) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.logs[key].read_text().splitlines() if line.startswith("{")]

    def until(self, key: str, match: Callable[[dict[str, object]], bool], what: str, timeout: float = 300) -> dict:
        """Wait until controller ``key`` logs an event matching ``match``; that event (the deadline bounds a hang)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events(key):
                if match(event):
                    return event
            assert self.procs[key].poll() is None, f"controller {key} exited: {self.logs[key].read_text()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"{what} never happened; controller {key} logged: {self.logs[key].read_text()[-4000:]}")

    def passes(self, key: str, count: int) -> None:
        """Wait until controller ``key`` has published ``count`` more verdicts (passes), read from its metrics'
        status time: a bound on 'nothing happened' that follows the controller's pace, not a sleep."""
        from tests.integration.test_controller import _scrape

        port = self.ports[key]
        seen: set[float] = set()
        deadline = time.monotonic() + 300
        while len(seen) <= count:
            assert time.monotonic() < deadline, f"controller {key} stopped making passes"
            with contextlib.suppress(OSError):
                seen.add(_scrape(port).get("kdr_status_timestamp_seconds", 0.0))
            time.sleep(0.5)

    def stop(self) -> dict[str, int | None]:
        """SIGTERM each, wait, kill what is left with its tree; the exit codes."""
        codes: dict[str, int | None] = {}
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for key, proc in self.procs.items():
            try:
                codes[key] = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                codes[key] = None
            kill_tree(proc.pid)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return codes

    def text(self) -> str:
        return "".join(log.read_text() for log in self.logs.values())


def _is(event: str, **fields: object) -> Callable[[dict[str, object]], bool]:
    return lambda e: e.get("event") == event and all(e.get(k) == v for k, v in fields.items())


def _healthy(ctl: Controllers) -> None:
    """A's controller holds the lease and B's sees A up."""
    ctl.until("A", _is("lease-taken"), "A's controller taking the lease")
    ctl.until("B1", lambda e: e.get("event") == "started", "B's controller starting")
    ctl.passes("B1", 2)
    if "C" in ctl.procs:
        ctl.until("C", _is("started"), "the observer starting")


def _no_failover(env: StackEnv) -> None:
    topology = env.estate().topology
    assert not topology.failover_done and topology.cluster("B").role == "passive"
    assert Journal.load(StackRef.resolve(STACK).failover_home) is None


def _detect_after(env: StackEnv, seconds: int) -> None:
    """Declare ``detectAfterS: seconds`` in the stack file, as an operator edits it before starting controllers."""
    doc = yaml.safe_load(env.stack_file.read_text())
    doc["config"]["kafka-dr:failoverPolicy"]["detectAfterS"] = seconds
    env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _start(env: StackEnv, ports: tuple[int, int, int], name: str, *, second_b: bool = False) -> Controllers:
    ctl = Controllers(env, name)
    ctl.ports = {"A": ports[0], "B1": ports[1], "B2": ports[2]}
    ctl.start("A", "--site", "A")
    ctl.start("B1", "--site", "B")
    if second_b:
        ctl.start("B2", "--site", "B", "--metrics-port", str(ports[2]))
        ctl.start("C", "--observer", "C-site")
    return ctl


def test_f_a_down_for_less_than_detect_after_s_fails_nothing_over(
    env: StackEnv, metrics_ports: tuple[int, int, int]
) -> None:
    ctl = _start(env, metrics_ports, "f")
    try:
        _healthy(ctl)
        time.sleep(random.uniform(0, 3))  # a random instant within a pass
        a = env.estate().local_cluster("A")
        killed = time.monotonic()
        a.kill()
        ctl.until("B1", _is("cluster-suspect", cluster="A"), "B's controller seeing A fail")
        a.start()
        back_after = time.monotonic() - killed
        ctl.until("B1", _is("cluster-up", cluster="A"), "B's controller seeing A again")
        ctl.passes("B1", 3)
        print(f"\n(f) A killed and back after {back_after:.1f} s (detect_after_s {DETECT_AFTER_S})")
        # the premise: the restart was shorter than the detection window (else this is test (a), not (f))
        assert back_after < DETECT_AFTER_S, f"A took {back_after:.0f} s to restart: the outage was not short"
        events = ctl.events("B1")
        assert not [e for e in events if e["event"] in ("cluster-down", "automatic-failover-started")], events
        assert "lease-given-up" not in [e["event"] for e in ctl.events("A")]
        _no_failover(env)
    finally:
        codes = ctl.stop()
    assert codes == {"A": 0, "B1": 0}, (codes, ctl.text()[-3000:])
    assert "Traceback" not in ctl.text()


def test_e_the_witness_down_means_no_automatic_action_but_an_alert_and_the_manual_command_works(
    env: StackEnv, etcd3: EtcdCluster, metrics_ports: tuple[int, int, int]
) -> None:
    from tests.integration.test_controller import _scrape

    _detect_after(env, QUICK_DETECT_S)
    ctl = _start(env, metrics_ports, "e")
    a = env.estate().local_cluster("A")
    try:
        _healthy(ctl)
        etcd3.kill_all()
        a.kill()
        ctl.until("B1", _is("witness-down"), "B's controller alerting on the witness")
        ctl.until("B1", _is("cluster-down", cluster="A"), "B's controller seeing A down", timeout=QUICK_DETECT_S + 300)
        waiting = ctl.until("B1", _is("automatic-wait", reason="witness-down"), "B's controller waiting on the witness")
        assert "nobody acts" in str(waiting["message"])
        ctl.passes("B1", 3)
        samples = _scrape(metrics_ports[1])
        assert samples["kdr_witness_up"] == 0 and samples['kdr_alerts_total{kind="witness_down"}'] >= 1
        assert not [e for e in ctl.events("B1") if str(e["event"]).startswith("automatic-failover")]
        _no_failover(env)
        # a person can still fail over: the manual command never asks the witness (its plan, not run here)
        plan = drctl(env, "failover", "--stack", STACK, "--mode", "unplanned", "--dry-run")
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert "B" in plan.stdout and "unplanned" in plan.stdout.lower()
    finally:
        codes = ctl.stop()
        etcd3.restart_all()
        a.start()
    assert codes == {"A": 0, "B1": 0}, (codes, ctl.text()[-3000:])
    assert "Traceback" not in ctl.text()


def test_c_a_g_h_site_a_lost_is_failed_over_by_one_of_two_racing_controllers_and_resumed_by_the_other(
    env: StackEnv, metrics_ports: tuple[int, int, int], etcd3: EtcdCluster
) -> None:
    rng = random.Random(SEED)
    print(f"KDR_CONTROLLER_SEED={SEED}")
    from tests.integration.test_controller import _until_alert, _until_prometheus
    from tests.prometheus_server import prometheus_server

    _detect_after(env, QUICK_DETECT_S)  # (e) set it too; said again so this test stands alone
    ctl = _start(env, metrics_ports, "a", second_b=True)
    ctl.start("B3", "--site", "B", prefix=_cut_from_a(env, etcd3))  # (c): a third controller at B that cannot see A
    servers = contextlib.ExitStack()
    try:
        targets = [
            (f"127.0.0.1:{port}", {"stack": STACK, "site": key[0], "controller": key})
            for key, port in ctl.ports.items()
        ]
        prom = servers.enter_context(prometheus_server(targets, [REPO_ROOT / "ops" / "prometheus" / "kdr-rules.yml"]))
        _healthy(ctl)
        # (c) A healthy, unreachable from B3 only: B3 sees A down and alerts, the other observers see A up, so
        # nothing is failed over
        down = ctl.until("B3", _is("cluster-down", cluster="A"), "B3 seeing A down through its cut")
        assert down["level"] == "error", down
        wait = ctl.until(
            "B3", _is("automatic-wait", reason="observers-disagree"), "B3 told that other observers see A up"
        )
        assert "C-site" in str(wait["message"]), wait
        ctl.passes("B1", 2)
        assert Journal.load(StackRef.resolve(STACK).failover_home) is None
        assert not [e for k in ctl.procs for e in ctl.events(k) if str(e["event"]).startswith("automatic-failover")]
        assert not [e for e in ctl.events("A") if e["event"] in ("lease-lost", "lease-given-up", "self-fence")]
        ctl.procs["B3"].send_signal(signal.SIGTERM)
        assert ctl.procs["B3"].wait(timeout=90) == 0, ctl.logs["B3"].read_text()[-3000:]
        print(f"\n(c) B3 cut from A: A down for B3 at {down['ts']}, no failover ({wait['message']})")
        for key in ("B1", "B2"):  # each has measured the link's lag (the RPO budget is checked against it)
            _until_scraped(ctl.ports[key], 'kdr_link_lag_records{link="A-to-B",source="A",target="B"}')
        time.sleep(rng.uniform(0, 5))  # a random instant within a pass
        killed_at = time.time()
        env.estate().local_cluster("A").kill()
        ctl.procs["A"].kill()  # the whole site: A's controller with its brokers
        home = StackRef.resolve(STACK).failover_home
        # (a)+(g): exactly one of B's controllers starts the failover
        deadline = time.monotonic() + 600
        while not (winners := [k for k in ("B1", "B2") if _logged(ctl, k, "automatic-failover-started")]):
            assert time.monotonic() < deadline, "no automatic failover started"
            time.sleep(0.5)
        winner, loser = winners[0], ({"B1", "B2"} - set(winners)).pop()
        started = next(e for e in ctl.events(winner) if e["event"] == "automatic-failover-started")
        token = started["token"]
        _until_prometheus(  # the team's Prometheus has seen it before the winner dies
            prom, f'kdr_automatic_failovers_total{{outcome="started",controller="{winner}"}} == 1', "the start scraped"
        )
        # A down fires from site B while B's controllers judge it so (after the failover A is decommissioned, a
        # role no controller watches: dr/controller/loop.py run_pass)
        _until_alert(prom, lambda f: f["alertname"] == "KdrClusterDown" and f["cluster"] == "A", {"B"})
        # (g): the loser is told who holds the lease (when it tried to take it, waited on it, or wanted it)
        ctl.until(loser, partial(_told, f"ctl-{winner}/B"), "the other controller told who holds the lease")
        # (h): the winner dies inside its failover, at a seeded instant after the journal's first step began
        while (journal := Journal.load(home)) is None or not any(
            step.status != "pending" for step in journal.record.steps.values()
        ):
            assert time.monotonic() < deadline, "the automatic failover never began a step"
            time.sleep(0.1)
        time.sleep(rng.uniform(0, 2))
        os.killpg(ctl.procs[winner].pid, signal.SIGKILL)
        ctl.procs[winner].wait()
        at_kill = Journal.load(home)
        assert at_kill is not None and at_kill.status == "running", "the kill did not land inside the failover"
        done_at_kill = [name for name, step in at_kill.record.steps.items() if step.done]
        resumed = ctl.until(loser, _is("automatic-failover-resumed"), "the other controller resuming", timeout=600)
        # the run ends "pending" without A (its verification and decommission wait for A's return), or completed
        while (journal := Journal.load(home)) is None or journal.runs[-1].outcome == "running":
            assert time.monotonic() < deadline + 600, "the resumed failover never finished"
            assert ctl.procs[loser].poll() is None, ctl.logs[loser].read_text()[-3000:]
            time.sleep(1)
        assert journal.status in ("pending", "completed"), journal.record.model_dump_json(indent=1)[-3000:]
        assert journal.is_done("promote") and journal.is_done("desired-state")
        assert journal.failover_id == at_kill.failover_id  # the same failover, resumed from its journal
        ctl.until(loser, _is("automatic-failover-done"), "the resuming controller reporting the failover done")
        assert sum(_logged(ctl, k, "automatic-failover-started") for k in ("B1", "B2")) == 1
        assert _logged(ctl, loser, "automatic-failover-resumed") == 1
        ctl.until("C", _is("cluster-down", cluster="A"), "the observer seeing A down")
        assert not [e for e in ctl.events("C") if str(e["event"]).startswith(("lease", "automatic"))]
        # the journal is the one record of the run: unplanned, started by the winner with its token, its run
        # interrupted, then resumed by the loser with a later token
        runs = journal.runs
        assert journal.mode == "unplanned" and runs[0].options["fencing_token"] == token
        assert runs[0].options["started_by"] == f"controller ctl-{winner}/B" and runs[0].outcome == "interrupted"
        assert runs[-1].resumed and runs[-1].options["started_by"] == f"controller ctl-{loser}/B"
        assert runs[-1].options["fencing_token"] == resumed["token"] > token
        # the team's Prometheus shows what happened: A down, the failover started, and resumed by the other controller
        alerts = _until_alert(
            prom,
            lambda f: f["alertname"] == "KdrAutomaticFailoverMade" and f.get("controller") in (winner, loser),
            {"B"},
        )
        assert {(f["controller"], f["outcome"]) for f in alerts} >= {(winner, "started"), (loser, "resumed")}, alerts
        # B accepts an application's write
        estate = env.estate()
        b = estate.local_cluster("B").endpoint().with_user("orders-app", estate.app_password("orders-app"))
        acked, errors = produce(b, "orders", ["after-automatic-failover"])
        assert acked == ["after-automatic-failover"] and not errors, errors
        down = next(e for e in ctl.events(winner) if e["event"] == "cluster-down" and e.get("cluster") == "A")
        detected_s = _epoch(str(down["ts"])) - killed_at
        promoted = journal.record.steps.get("promote")
        probe = journal.measurements.probe
        print(
            f"\n(a) detection {detected_s:.1f} s after the kill (detect_after_s {QUICK_DETECT_S}); failover started "
            f"{_epoch(str(started['ts'])) - killed_at:.1f} s after; promote done "
            f"{(promoted.finished_at - killed_at) if promoted and promoted.finished_at else float('nan'):.1f} s; "
            f"first application write on B {((probe.acked_at or 0) - killed_at) if probe else float('nan'):.1f} s; "
            f"journal {journal.failover_id} {journal.status}, token {token}, winner {winner}"
            f"\n(h) {winner} killed with steps {done_at_kill or 'none'} done; {loser} resumed "
            f"{_epoch(str(resumed['ts'])) - _epoch(str(started['ts'])):.1f} s after the start, token {resumed['token']}"
        )
    finally:
        codes = ctl.stop()
        servers.close()
    assert codes == {"A": -signal.SIGKILL, winner: -signal.SIGKILL, loser: 0, "C": 0, "B3": 0}, (
        codes,
        ctl.text()[-3000:],
    )
    assert "Traceback" not in ctl.text()


def _cut_from_a(env: StackEnv, etcd3: EtcdCluster) -> list[str]:
    """The :mod:`tests.netns_bridge` command line of a controller in a network namespace of its own that
    reaches B's ports and the witness, and whose every connection to A's ports is left unanswered."""
    topology = env.estate().topology
    a, b = (topology.cluster(name).port_window for name in ("A", "B"))
    assert a is not None and b is not None
    witness = [int(url.rsplit(":", 1)[1]) for url in etcd3.endpoints]
    ports = [*a, *b, *witness]
    directory = env.root / "netns-b3"
    directory.mkdir(exist_ok=True)
    return [
        sys.executable, "-m", "tests.netns_bridge", "--dir", str(directory),
        "--ports", ",".join(map(str, ports)), "--cut", ",".join(map(str, a)), "--",
    ]  # fmt: skip


def _told(holder: str, e: dict[str, object]) -> bool:
    """A log event telling this controller that ``holder`` holds the lease."""
    return (e["event"] == "lease-held-elsewhere" and e.get("holder") == holder) or (
        e["event"] == "automatic-wait" and e.get("reason") == "lease-held" and holder in str(e["message"])
    )


def _logged(ctl: Controllers, key: str, event: str) -> int:
    """How many times controller ``key`` logged ``event``."""
    return sum(1 for e in ctl.events(key) if e["event"] == event)


def _until_scraped(port: int, sample: str) -> None:
    """Wait until the controller at ``port`` serves ``sample`` (the deadline bounds a hang)."""
    from tests.integration.test_controller import _scrape

    deadline = time.monotonic() + 300
    while True:
        with contextlib.suppress(OSError):
            if sample in _scrape(port):
                return
        assert time.monotonic() < deadline, f"{sample} never served at {port}"
        time.sleep(0.5)


def _epoch(ts: str) -> float:
    """A log line's ``ts`` as seconds since the epoch."""
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
