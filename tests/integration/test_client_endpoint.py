"""Clients that know only the endpoint's address, through a planned failover (issue 31).

The local stack (A and B of one broker, no standby) with ``kafka-dr:endpoint``: ``pulumi up`` starts
HAProxy in front of A. An unmodified Kafka VerifiableProducer (acks=all, idempotent) and a
confluent-kafka (librdkafka) producer are started once on the endpoint and never restarted; the
failover fences A, switches the endpoint to B and closes the sessions to A. Asserted: every record
either producer saw acknowledged is on B, and both go on being acknowledged after the switch. Printed:
the gap between the last acknowledgement before the switch and the first after it, per producer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer

from dr.base.files import write_atomic
from dr.base.stackref import StackRef
from dr.base.toolchain import toolchain
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.frame.journal import Journal
from dr.runtime.process import wait_until
from dr.topology import load_stack_file
from dr.topology.client_endpoint import endpoint_pointing, local_endpoint
from tests import REPO_ROOT
from tests.integration.helpers import teardown_stack, write_local_stack
from tests.integration.journal_home import journal_home
from tests.integration.ports import windows

STACK = "endpoint"
APP = "orders-app"
TOPIC = "orders"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A and B (one broker each), link A→B and the client endpoint, provisioned once for the module."""
    d = tmp_path_factory.mktemp("client-endpoint")
    with windows(4) as ports:
        path = write_local_stack(d, STACK, ports[:3], one_broker=("A",))
        doc = yaml.safe_load(path.read_text())
        cfg = doc["config"]
        cfg["kafka-dr:clusters"] = [c for c in cfg["kafka-dr:clusters"] if c["name"] != "C"]
        cfg["kafka-dr:endpoint"] = {"address": "127.0.0.1", "bootstrapPort": ports[3], "brokerPorts": [ports[3] + 1]}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        env = {"KDR_STACK_DIR": str(d), "KDR_STATE_DIR": str(d / "state")}
        original = load_stack_file(path)
        state = d / "state" / STACK
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            try:
                EstateStack(StackRef.resolve(STACK)).up(load_stack_file(path))
                yield env
            finally:
                try:
                    teardown_stack(STACK, original, state)
                finally:
                    proxy = local_endpoint(original, state)
                    if proxy is not None:
                        proxy.stop()


def _estate(env: dict[str, str]) -> Estate:
    return Estate(
        load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"), Path(env["KDR_STATE_DIR"]) / STACK
    )


class LibrdkafkaProducer(threading.Thread):
    """confluent-kafka, acks=all and idempotent, one record every 10 ms; keeps (value, ack time) of each ack."""

    def __init__(self, bootstrap: str, password: str) -> None:
        super().__init__(daemon=True)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": APP,
            "sasl.password": password,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 20000,
        }
        self.acked: list[tuple[str, float]] = []
        self.partitions: list[int] = []
        self.errors: list[str] = []
        self.fatal: str | None = None
        self.stop_flag = threading.Event()

    def run(self) -> None:
        producer = Producer(self.conf)

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append((msg.value().decode(), time.time()))
                self.partitions.append(msg.partition())
            else:
                self.errors.append(str(err))
                if err.fatal():
                    self.fatal = str(err)

        i = 0
        while not self.stop_flag.is_set() and self.fatal is None:
            try:
                producer.produce(TOPIC, value=f"c-{i}".encode(), on_delivery=done)
                i += 1
            except BufferError:
                pass
            except KafkaException as exc:  # e.g. A fenced: the topic's metadata says not authorized
                self.errors.append(str(exc))
            producer.poll(0.01)
        producer.flush(30)


def _verifiable_producer(bootstrap: str, password: str, workdir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Kafka's own VerifiableProducer, unmodified, on the endpoint: acks=all, idempotent, 100 records/s."""
    config = workdir / "verifiable-producer.properties"
    write_atomic(
        config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{APP}" password="{password}";\nenable.idempotence=true\n'
        # The tool sets retries=0 itself, which an idempotent producer refuses; its config file overrides it.
        # A partition whose in-flight batch B refuses (OUT_OF_ORDER_SEQUENCE_NUMBER: B has no state of this
        # producer id) retries until delivery.timeout.ms, then the producer resets its sequences: 20 s here.
        "retries=2147483647\nrequest.timeout.ms=10000\ndelivery.timeout.ms=20000\n",
    )
    out = workdir / "verifiable-producer.jsonl"
    tc = toolchain()
    cmd = [
        tc.java,
        "-Xmx256m",
        "-cp",
        f"{tc.kafka_lib}/*",
        "org.apache.kafka.tools.VerifiableProducer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        TOPIC,
        "--acks",
        "-1",
        "--throughput",
        "100",
        "--max-messages",
        "12000",
        "--value-prefix",
        "7",
        "--command-config",
        str(config),
    ]
    with open(out, "wb") as sink, open(workdir / "verifiable-producer.err", "wb") as err:
        return subprocess.Popen(cmd, stdout=sink, stderr=err, stdin=subprocess.DEVNULL), out


def _verifiable_consumer(bootstrap: str, password: str, workdir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Kafka's own VerifiableConsumer (group billing, committing), on the endpoint: observed, not asserted."""
    config = workdir / "verifiable-consumer.properties"
    write_atomic(
        config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="billing" password="{password}";\n',
    )
    out = workdir / "verifiable-consumer.jsonl"
    tc = toolchain()
    cmd = [tc.java, "-Xmx256m", "-cp", f"{tc.kafka_lib}/*", "org.apache.kafka.tools.VerifiableConsumer"]
    cmd += ["--bootstrap-server", bootstrap, "--topic", TOPIC, "--group-id", "billing", "--reset-policy", "earliest"]
    cmd += ["--command-config", str(config)]
    with open(out, "wb") as sink, open(workdir / "verifiable-consumer.err", "wb") as err:
        return subprocess.Popen(cmd, stdout=sink, stderr=err, stdin=subprocess.DEVNULL), out


def _events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def _values_on(estate: Estate, cluster: str) -> set[str]:
    conf = estate.endpoint(cluster).config(**{"group.id": f"check-{time.time()}", "auto.offset.reset": "earliest"})
    consumer = Consumer({**conf, "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    values: set[str] = set()
    idle = time.monotonic()
    try:
        while time.monotonic() - idle < 5:
            batch = consumer.consume(1000, timeout=0.5)
            for m in batch:
                if m.error() is None and m.value() is not None:
                    values.add(m.value().decode())
            if batch:
                idle = time.monotonic()
    finally:
        consumer.close()
    return values


def _gap(acks: list[float], switched: float) -> tuple[float | None, float | None]:
    """(last ack before the switch, first ack after it) as seconds relative to the switch."""
    before = [t for t in acks if t <= switched]
    after = [t for t in acks if t > switched]
    return (max(before) - switched if before else None, min(after) - switched if after else None)


def drctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``drctl <args>`` in a subprocess, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "dr.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        cwd=REPO_ROOT,
    )


def test_a_silent_proxy_refuses_the_failover_before_the_fence_and_the_plan_shows_the_switch(
    env: dict[str, str],
) -> None:
    estate = _estate(env)
    stack_file = Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"
    before = stack_file.read_bytes()
    proxy = local_endpoint(estate.topology, estate.state)
    assert proxy is not None and proxy.alive()
    proxy.stop()
    try:
        res = drctl(env, "failover", "--stack", STACK, "--yes")
        assert res.returncode == 6, res.stderr[-2000:]
        assert "runtime API" in res.stderr and "does not answer" in res.stderr and "nothing was changed" in res.stderr
        assert "fence-drain: done" not in res.stderr
        assert stack_file.read_bytes() == before
    finally:
        proxy.start("A")
    plan = drctl(env, "failover", "--stack", STACK, "--dry-run")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert f"switch the client endpoint {estate.topology.endpoint.bootstrap} to B" in plan.stdout  # type: ignore[union-attr]
    assert "observed: client endpoint" in plan.stdout and "points at A" in plan.stdout


def test_producers_on_the_endpoint_move_to_b_with_nothing_acknowledged_lost(
    env: dict[str, str], tmp_path: Path
) -> None:
    t0 = time.monotonic()
    estate = _estate(env)
    topology = estate.topology
    assert topology.endpoint is not None
    assert endpoint_pointing(topology, estate.state) == ["A"]
    bootstrap = topology.endpoint.bootstrap
    password = estate.app_password(APP)

    java, java_out = _verifiable_producer(bootstrap, password, tmp_path)
    reader, reader_out = _verifiable_consumer(bootstrap, estate.app_password("billing"), tmp_path)
    rdk = LibrdkafkaProducer(bootstrap, password)
    rdk.start()
    try:
        started = wait_until(lambda: len(rdk.acked) > 200 and '"producer_send_success"' in java_out.read_text(), 60)
        assert started, (
            f"librdkafka: {len(rdk.acked)} acks, errors {rdk.errors[-3:]}; java: {java_out.read_text()[-500:]}"
        )
        res = drctl(env, "failover", "--stack", STACK, "--yes", "--json", "--skip-verify")
        assert res.returncode == 0, res.stderr[-3000:]
        summary = json.loads(res.stdout)
        after = _estate(env)
        assert endpoint_pointing(after.topology, after.state) == ["B"]
        acked_before_wait = len(rdk.acked)
        assert wait_until(lambda: len(rdk.acked) > acked_before_wait + 200, 60), (
            f"librdkafka producer did not continue on B: errors {rdk.errors[-5:]}, fatal {rdk.fatal}"
        )
        switched_ms = Journal.load(journal_home(env, STACK)).outcome("promote")["endpoint"]["switched_at_ms"]  # type: ignore[union-attr]

        def every_partition_on_b() -> bool:  # measured, not asserted: how long a stalled partition takes
            fresh = [e for e in _events(java_out) if e.get("name") == "producer_send_success"]
            return len({e["partition"] for e in fresh if e["timestamp"] > switched_ms}) == 6

        wait_until(every_partition_on_b, 45, interval=1)
    finally:
        rdk.stop_flag.set()
        rdk.join(60)
        java.terminate()
        java.wait(30)
        reader.terminate()
        reader.wait(30)

    journal = Journal.load(journal_home(env, STACK))
    assert journal is not None
    promote = journal.outcome("promote")
    assert promote["endpoint"]["before"] == ["A"] and promote["endpoint"]["target"] == "B"
    switched = promote["endpoint"]["switched_at_ms"] / 1000
    on_b = _values_on(after, "B")

    events = _events(java_out)
    java_acked = [(str(e["value"]), e["timestamp"] / 1000) for e in events if e.get("name") == "producer_send_success"]
    java_parts = [int(e["partition"]) for e in events if e.get("name") == "producer_send_success"]
    java_errors = [e.get("exception") for e in events if e.get("name") == "producer_send_error"]
    runs = (
        ("VerifiableProducer", java_acked, java_parts, java_errors),
        ("librdkafka", rdk.acked, rdk.partitions, rdk.errors),
    )
    for name, acked, parts, errors in runs:
        lost = {v for v, _ in acked} - on_b
        times = sorted(t for _, t in acked)
        last_a, first_b = _gap(times, switched)
        first_per_partition: dict[int, float] = {}
        for (_, t), p in zip(acked, parts, strict=True):
            if t > switched:
                first_per_partition[p] = min(first_per_partition.get(p, t), t)
        worst = {p: round(t - switched, 2) for p, t in sorted(first_per_partition.items())}
        print(
            f"\n{name}: acked {len(acked)}, lost {len(lost)}, errors {len(errors)} "
            f"({sorted({str(e)[:80] for e in errors})[:3]}), last ack before switch {last_a}, first after {first_b}, "
            f"first ack after the switch per partition {worst}"
        )
        assert not lost, f"{name}: {len(lost)} acknowledged records are not on B, e.g. {sorted(lost)[:5]}"
        assert first_b is not None, f"{name} was not acknowledged on B"
    consumed = [e for e in _events(reader_out) if e.get("name") == "records_consumed"]
    on_a = [p for e in consumed if e["timestamp"] <= switched * 1000 for p in e["partitions"]]
    on_b_read = [p for e in consumed if e["timestamp"] > switched * 1000 for p in e["partitions"]]
    others = sorted({str(e.get("name")) for e in _events(reader_out)} - {"records_consumed", "offsets_committed"})
    print(
        f"VerifiableConsumer: {sum(p['count'] for p in on_a)} records read before the switch, "
        f"{sum(p['count'] for p in on_b_read)} after; other events {others}; first reads on B "
        f"{sorted((p['partition'], p['minOffset']) for p in on_b_read)[:6]}"
    )
    status = drctl(env, "status", "--stack", STACK)
    assert "endpoint 127.0.0.1:" in status.stdout and "points at B (proxy running)" in status.stdout, status.stdout
    print(f"promote: {promote['summary']}; RTO {summary.get('rto_s')}s; test {time.monotonic() - t0:.0f}s")


def test_a_killed_proxy_comes_back_pointing_at_the_active_cluster(env: dict[str, str]) -> None:
    estate = _estate(env)  # after the failover: B active in the stack file
    assert estate.topology.active().name == "B"
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, (preview.stdout + preview.stderr)[-2000:]  # the endpoint's target is B already
    proxy = local_endpoint(estate.topology, estate.state)
    assert proxy is not None
    proxy.kill()
    assert not proxy.alive()
    EstateStack(StackRef.resolve(STACK)).up(estate.topology, refresh=True)  # `drctl estate up --refresh`
    assert proxy.alive()
    assert endpoint_pointing(estate.topology, estate.state) == ["B"]
