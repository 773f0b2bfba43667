"""Issue 43's test (d): the active site's controller cut from the witness while A serves fences A itself
before its lease can expire — on a real local estate (A → B, MirrorMaker 2), a real three-member etcd and
``drctl controller`` run as an operator runs it.

The cut is real: A's controller reaches etcd only through :mod:`tests.stall_proxy` (an asyncio TCP proxy run
as a child process, one port per member), which on SIGUSR1 silently stalls every path — A's requests time
out, nothing is refused — while this test still reaches etcd directly. The instant of the cut is drawn from a
seeded RNG (``KDR_FENCE_SEED``, default printed). An application producer (``orders-app``, with only its
published client file) writes to A throughout and keeps its own ledger: when each record was sent, and when
it was acknowledged or refused. The assertions come from that ledger, the fence's durable record and the
lease as etcd itself expires it: every acknowledgement on A precedes the lease's earliest expiry; no record
sent after the fence was acknowledged and such records were refused by the broker; the fence carries the
token A held. Healed, the controller takes the lease again and — nobody else took it, nothing was failed
over — lifts its own fence, and the producer writes again.

Issue 43's test (b), the grey failure: A's broker and controller processes frozen with SIGSTOP at a seeded
instant, resumed with SIGCONT (in a seeded order) once etcd expired the lease. The controller fences A before
it takes the lease again, with the token it held, then lifts the fence (nobody else held the lease, nothing
was failed over). The stack's policy is ``automatic``, so A's brokers run the broker-side lease fence
(``kafkadr.fence.LeaseFenceAuthorizer``, :mod:`dr.controller.permit`): the resumed broker judges the produce
requests queued during the freeze against a permit that ran out before the lease could expire, and refuses
them — before the ACL deletion (which waits for A's KRaft controller, frozen too) can act. From the
producer's own ledger: no record sent after the freeze is acknowledged between the lease's earliest expiry
and the lift of the fence, and such records were refused by the broker (authorization).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaException, Producer

from dr.base.stackref import StackRef
from dr.controller.etcd import EtcdWitness
from dr.controller.fence import FenceRecord, FenceStore
from dr.failover.act.clients import client_files
from dr.failover.act.fencing import write_bindings
from dr.failover.frame.journal import Journal
from dr.failover.record.team_store import project_name
from tests import REPO_ROOT
from tests.etcd_server import EtcdCluster, etcd_cluster
from tests.integration.helpers import StackEnv, provisioned, write_local_stack
from tests.integration.ports import free_window, release_window, windows

pytestmark = pytest.mark.timeout(900)

STACK = "fencetest"
TTL_S, MARGIN_S = 12, 8  # the margin is the fence's time budget: seen up to 2.8 s on this loaded machine
SEED = int(os.environ.get("KDR_FENCE_SEED", "4301"))


@pytest.fixture(scope="module")
def etcd3() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def proxy(etcd3: EtcdCluster) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """The stall proxy in front of the three members: the process and the endpoints through it."""
    start = free_window(3)
    targets = [int(e.rsplit(":", 1)[1]) for e in etcd3.endpoints]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.stall_proxy", *(f"{start + i}:{t}" for i, t in enumerate(targets))],
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc, [f"http://127.0.0.1:{start + i}" for i in range(3)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        release_window(start)


@pytest.fixture(scope="module")
def metrics_port() -> Iterator[int]:
    start = free_window(1)
    yield start
    release_window(start)


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory,
    proxy: tuple[subprocess.Popen[str], list[str]],
    metrics_port: int,
) -> Iterator[StackEnv]:
    """The local example (A on one broker), its witness the etcd members *through the proxy*."""
    root = tmp_path_factory.mktemp(STACK)
    with windows(3) as ports:
        path = write_local_stack(root, STACK, ports)
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {
            "mode": "automatic",  # the brokers run the broker-side lease fence; A's controller never acts (active)
            "maxRpoRecords": 100_000,
            "detectAfterS": TTL_S + MARGIN_S,
            "leaseTtlS": TTL_S,
            "marginS": MARGIN_S,
            "witness": {"kind": "etcd", "endpoints": proxy[1]},
            "metricsPorts": {"A": metrics_port},
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        with provisioned(StackEnv(root, STACK)) as e:
            yield e


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310 — loopback
        text = response.read().decode()
    return {
        name: float(value)
        for line in text.splitlines()
        if line and not line.startswith("#")
        for name, _, value in [line.rpartition(" ")]
    }


def _until(
    check: Callable[[], object], what: str, proc: subprocess.Popen[str] | None = None, limit: float = 240
) -> object:
    """Wait until ``check()`` is truthy (the deadline only bounds a hang); its value."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, f"the controller exited with {proc.returncode}"
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} never held")


@dataclass
class Ledger:
    """An application producer writing to A in a thread: each record's send time, and its ack or refusal."""

    conf: dict[str, object]
    sent: dict[int, float] = field(default_factory=dict)
    acked: dict[int, float] = field(default_factory=dict)
    refused: dict[int, tuple[float, str]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        producer = Producer({**self.conf, "message.timeout.ms": 5000, "log_level": 0})
        n = 0

        def delivered(i: int) -> Callable[[object, object], None]:
            def on(err: object, _msg: object) -> None:
                if err is None:
                    self.acked[i] = time.time()
                else:
                    self.refused[i] = (time.time(), str(err))

            return on

        while not self.stop.is_set():
            n += 1
            self.sent[n] = time.time()
            try:
                producer.produce("orders", key=f"fence-{n}".encode(), value=b"x", on_delivery=delivered(n))
            except (KafkaException, BufferError) as exc:
                self.refused[n] = (time.time(), str(exc))
            producer.poll(0.02)
        producer.flush(30)


def _events(log: Path) -> list[str]:
    """The controller's log events, in order."""
    return [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]


def _record(env: StackEnv) -> FenceRecord | None:
    return FenceStore(StackRef.resolve(STACK).failover_home, STACK, None).latest()


def test_a_controller_cut_from_the_witness_fences_its_site_before_the_lease_expires(
    env: StackEnv, etcd3: EtcdCluster, proxy: tuple[subprocess.Popen[str], list[str]], metrics_port: int
) -> None:
    rng = random.Random(SEED)
    print(f"KDR_FENCE_SEED={SEED}")
    cut_proxy, _ = proxy
    direct = EtcdWitness(etcd3.endpoints, f"/kafka-dr/{project_name()}/{STACK}/leader", TTL_S)
    a_ep = env.estate().endpoint("A")
    log = env.root / "controller-A.log"
    with log.open("w") as out:
        controller = subprocess.Popen(
            [sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, "--site", "A", "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}, cwd=REPO_ROOT,
        )  # fmt: skip
    conf = json.loads(client_files(env.state, "orders-app")[1].read_text())
    ledger = Ledger(conf)
    writer = threading.Thread(target=ledger.run, daemon=True)
    try:
        _until(
            lambda: (
                (s := _scrape(metrics_port)).get("kdr_lease_held") == 1
                and s.get('kdr_app_writes_allowed{cluster="A"}') == 1
            ),
            "A's controller holding the lease, A not fenced",
            controller,
        )
        held = direct.current()
        assert held is not None and held.holder.endswith("/A")
        assert write_bindings(a_ep, ["orders-app"]), "the application may write on A before the cut"
        writer.start()
        _until(lambda: len(ledger.acked) >= 50, "the application's writes acknowledged on A", controller)
        time.sleep(rng.uniform(0, (TTL_S - MARGIN_S) / 3))  # the cut falls anywhere in a renewal period
        cut_at = time.time()
        cut_proxy.send_signal(signal.SIGUSR1)

        # etcd itself expires the lease: the test sees the key gone (directly, not through the proxy)
        _until(lambda: direct.current() is None, "the lease expiring in etcd", controller)
        expired_seen_at = time.time()
        record = _until(lambda: _record(env), "the self-fence recorded", controller)
        assert isinstance(record, FenceRecord)
        # keep writing past the expiry, so that refusals after the fence are in the ledger
        _until(lambda: sum(1 for i in ledger.refused if ledger.sent[i] > record.fenced_at) >= 20, "refusals")
        ledger.stop.set()
        writer.join(timeout=60)

        assert record.cluster == "A" and record.reason == "renew-deadline", record
        assert record.token == held.token  # the last fencing token A's controller held
        assert cut_at < record.fenced_at < record.lease_expires_at <= expired_seen_at
        assert record.removed and all(b["principal"] == "User:orders-app" for b in record.removed)
        assert write_bindings(a_ep, ["orders-app"]) == []
        # the producer's own ledger
        before = [i for i, t in ledger.acked.items() if t < cut_at]
        late = {i: t for i, t in ledger.acked.items() if t >= record.lease_expires_at}
        after_fence = [i for i, t in ledger.sent.items() if t > record.fenced_at]
        print(
            f"acked {len(ledger.acked)} ({len(before)} before the cut), refused {len(ledger.refused)}, "
            f"cut→fence {record.fenced_at - cut_at:.2f} s, fence→earliest expiry "
            f"{record.lease_expires_at - record.fenced_at:.2f} s"
        )
        assert before, "writes were acknowledged on A before the cut"
        assert not late, f"writes acknowledged on A after the lease could expire: {sorted(late.items())[:5]}"
        assert not [i for i in after_fence if i in ledger.acked], "a write sent after the fence was acknowledged"
        refusals = {ledger.refused[i][1] for i in after_fence if i in ledger.refused}
        assert any("AUTHORIZATION" in r.upper() for r in refusals), refusals
        seen = _scrape(metrics_port)
        assert seen['kdr_app_writes_allowed{cluster="A"}'] == 0
        assert seen["kdr_self_fence_total"] == 1

        # healed: nobody else took the lease and nothing was failed over, so the controller lifts its fence
        cut_proxy.send_signal(signal.SIGUSR2)
        lifted = _until(lambda: (r := _record(env)) is not None and r.lifted_at is not None and r, "the fence lifted")
        assert isinstance(lifted, FenceRecord) and lifted.fenced_at == record.fenced_at
        again = direct.current()
        assert again is not None and again.holder == held.holder and lifted.lifted_token == again.token > held.token
        assert Journal.load(StackRef.resolve(STACK).failover_home) is None
        _until(lambda: write_bindings(a_ep, ["orders-app"]), "the write ACLs back on A")
        after = Ledger(conf)
        again_writer = threading.Thread(target=after.run, daemon=True)
        again_writer.start()
        _until(lambda: after.acked, "a write acknowledged on A after the fence was lifted")
        after.stop.set()
        again_writer.join(timeout=60)

        controller.send_signal(signal.SIGTERM)
        assert controller.wait(timeout=60) == 0
        events = _events(log)
        assert events.index("self-fenced") < events.index("self-fence-lifted"), events
    finally:
        ledger.stop.set()
        cut_proxy.send_signal(signal.SIGUSR2)
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    assert "Traceback" not in log.read_text()


def test_a_frozen_site_and_controller_fence_first_thing_after_sigcont(
    env: StackEnv, etcd3: EtcdCluster, metrics_port: int
) -> None:
    rng = random.Random(SEED + 1)
    direct = EtcdWitness(etcd3.endpoints, f"/kafka-dr/{project_name()}/{STACK}/leader", TTL_S)
    estate = env.estate()
    log = env.root / "controller-A-frozen.log"
    previous = _record(env)
    with log.open("w") as out:
        controller = subprocess.Popen(
            [sys.executable, "-m", "dr.cli", "controller", "--stack", STACK, "--site", "A", "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}, cwd=REPO_ROOT,
        )  # fmt: skip
    conf = json.loads(client_files(env.state, "orders-app")[1].read_text())
    ledger = Ledger(conf)
    writer = threading.Thread(target=ledger.run, daemon=True)
    cluster = estate.local_cluster("A")
    nodes = [p for n in cluster.running_nodes() if (p := cluster.process(n).pid) is not None]
    frozen: list[int] = []
    try:
        _until(
            lambda: (
                (s := _scrape(metrics_port)).get("kdr_lease_held") == 1
                and s.get('kdr_app_writes_allowed{cluster="A"}') == 1
                and s.get('kdr_broker_fence{cluster="A"}') == 1
            ),
            "A's controller holding the lease, A not fenced, A's brokers running the lease fence",
            controller,
        )
        held = direct.current()
        assert held is not None and nodes
        writer.start()
        _until(lambda: len(ledger.acked) >= 50, "the application's writes acknowledged on A", controller)
        time.sleep(rng.uniform(0, (TTL_S - MARGIN_S) / 3))
        frozen_at = time.time()
        for pid in [*nodes, controller.pid]:
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)
        _until(lambda: direct.current() is None, "the lease expiring in etcd")
        expired_seen_at = time.time()
        order = [*nodes, controller.pid]
        rng.shuffle(order)
        for pid in order:
            os.kill(pid, signal.SIGCONT)
        frozen.clear()
        resumed_at = time.time()
        record = _until(
            lambda: (r := _record(env)) is not None and (previous is None or r.fenced_at != previous.fenced_at) and r,
            "the self-fence recorded after SIGCONT",
            controller,
        )
        assert isinstance(record, FenceRecord)
        lifted = _until(lambda: (r := _record(env)) is not None and r.lifted_at is not None and r, "the fence lifted")
        assert isinstance(lifted, FenceRecord)
        _until(lambda: any(t > lifted.lifted_at for t in ledger.acked.values()), "writes acknowledged after the lift")  # type: ignore[operator]
        ledger.stop.set()
        writer.join(timeout=60)
        assert lifted.lifted_at is not None
        # the producer's own ledger: acknowledgements between the lease's earliest expiry and the lift
        window = {i: t for i, t in ledger.acked.items() if record.lease_expires_at <= t < lifted.lifted_at}
        queued = sorted(t for i, t in window.items() if ledger.sent[i] >= frozen_at)
        # a record the broker accepted in the instant before SIGSTOP is answered after SIGCONT: it was written
        # while the lease was valid (counted and shown, never excused for a record sent after the freeze)
        in_flight = sorted(t for i, t in window.items() if ledger.sent[i] < frozen_at)
        refusals = {e for i, (_t, e) in ledger.refused.items() if ledger.sent[i] >= frozen_at}
        # refused by the broker after SIGCONT and before the ACL fence: only the lease fence refuses then
        by_permit = [
            i
            for i, (t, e) in ledger.refused.items()
            if resumed_at <= t < record.fenced_at and "AUTHORIZATION" in e.upper()
        ]
        figures = (
            f"frozen→lease's earliest expiry {record.lease_expires_at - frozen_at:.1f} s, expiry seen "
            f"{expired_seen_at - record.lease_expires_at:.2f} s later; SIGCONT→fence {record.fenced_at - resumed_at:.1f} s "
            f"({record.reason}), fence→lift {lifted.lifted_at - record.fenced_at:.1f} s; acked {len(ledger.acked)}, "
            f"refused {len(ledger.refused)}; acked between the expiry and the lift: {len(queued)} sent after the "
            f"freeze, {len(in_flight)} in flight at the freeze; refused by the lease fence before the ACL fence: "
            f"{len(by_permit)}"
        )  # fmt: skip
        print(figures)
        assert record.token == held.token and record.reason in ("lease-lost", "renew-deadline"), record
        assert resumed_at < record.fenced_at
        assert lifted.lifted_token is not None and lifted.lifted_token > held.token  # nobody else held it meanwhile
        assert not queued, f"writes sent during the freeze acknowledged on A after the lease expired: {figures}"
        assert any("AUTHORIZATION" in r.upper() for r in refusals), refusals
        controller.send_signal(signal.SIGTERM)
        assert controller.wait(timeout=60) == 0
        events = _events(log)
        taken = [i for i, e in enumerate(events) if e == "lease-taken"]
        assert len(taken) == 2 and events.index("self-fenced") < taken[1], events  # fenced before taking it again
        assert "broker-fence" in events
        assert "Traceback" not in log.read_text()
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        ledger.stop.set()
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    assert "Traceback" not in log.read_text()
