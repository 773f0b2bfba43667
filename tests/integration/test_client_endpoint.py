"""Clients that know only the endpoint's address, started once, through a planned and an unplanned failover (issue 31).

The local stack (A, B and C of one broker) with ``kafka-dr:endpoint``: ``pulumi up`` starts HAProxy in
front of A. One fleet of unmodified clients is started on the endpoint and never restarted: Kafka's
VerifiableProducer (acks=all, idempotent) and a confluent-kafka producer, two VerifiableConsumers
(eager range and cooperative-sticky, committing) and a confluent-kafka consumer, each in its own group.
The same fleet lives through: a planned failover A→B (A fenced, the endpoint switched to B, the sessions
to A closed); the proxy switched away by hand (flagged by both status commands, switched back by
``estate up --refresh``) and killed (it comes back pointing at B); A rebuilt as the standby; B killed
and an unplanned failover B→C, whose offsets are below B's (transaction markers on B the link does not
copy). Asserted at each failover, per client: no acknowledged record lost (unplanned: none acknowledged
before B died), none skipped by a consumer, each producer acknowledged again after the switch.
Printed: the gap around each switch and the records read twice.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from dr.base.files import write_atomic
from dr.base.stackref import StackRef
from dr.base.toolchain import toolchain
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.frame.journal import Journal
from dr.kafka.offsets import committed_offsets_of
from dr.kafka.records import read_to_end
from dr.runtime.endpoint import switch
from dr.runtime.process import wait_until
from dr.topology import load_stack_file
from dr.topology.client_endpoint import endpoint_pointing, local_endpoint
from tests.integration.helpers import StackEnv, drctl, teardown_stack, write_local_stack
from tests.integration.journal_home import journal_home
from tests.integration.ports import windows

STACK = "endpoint"
APP = "orders-app"
TOPIC = "orders"
COOP = "billing-coop"  # a VerifiableConsumer with the cooperative-sticky assignor
RDK_GROUP = "billing-rdk"  # a confluent-kafka consumer
MARKERS = 60  # committed transactions written on A first: their markers shift B's offsets below A's


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackEnv]:
    """A and B (one broker each), link A→B and the client endpoint, provisioned once for the module."""
    d = tmp_path_factory.mktemp("client-endpoint")
    with windows(4) as ports:
        path = write_local_stack(d, STACK, ports[:3], one_broker=("A",))
        doc = yaml.safe_load(path.read_text())
        cfg = doc["config"]
        # one consumer group per client measured on the endpoint (billing: the eager Java consumer)
        cfg["kafka-dr:principals"]["applications"] += [
            {"name": name, "consumes": [TOPIC], "consumer_group": name} for name in (COOP, RDK_GROUP)
        ]
        cfg["kafka-dr:endpoint"] = {"address": "127.0.0.1", "bootstrapPort": ports[3], "brokerPorts": [ports[3] + 1]}
        # at-least-once, so that the copies' offsets fall below their source's by the markers the test writes
        # (_shift_offsets), the case where a consumer kept at its old position would skip records; an
        # exactly-once link's own markers would lift them instead (make demo drills the endpoint that way)
        for link in cfg["kafka-dr:links"]:
            link["delivery"] = "at-least-once"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        env = StackEnv(d, STACK)
        original = load_stack_file(path)
        state = env.state
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


class LibrdkafkaProducer(threading.Thread):
    """confluent-kafka, acks=all and idempotent, one record every 10 ms; keeps (value, ack time) of each ack."""

    def __init__(self, bootstrap: str, password: str, prefix: int) -> None:
        super().__init__(daemon=True)
        self.prefix = prefix
        self.conf = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": APP,
            "sasl.password": password,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 10000,
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
                producer.produce(TOPIC, value=f"c{self.prefix}-{i}".encode(), on_delivery=done)
                i += 1
            except BufferError:
                pass
            except KafkaException as exc:  # e.g. A fenced: the topic's metadata says not authorized
                self.errors.append(str(exc))
            producer.poll(0.01)
        producer.flush(30)


def _verifiable_producer(
    bootstrap: str, password: str, workdir: Path, prefix: int
) -> tuple[subprocess.Popen[bytes], Path]:
    """Kafka's own VerifiableProducer, unmodified, on the endpoint: acks=all, idempotent, 100 records/s."""
    config = workdir / "verifiable-producer.properties"
    write_atomic(
        config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{APP}" password="{password}";\nenable.idempotence=true\n'
        # The tool sets retries=0 itself, which an idempotent producer refuses; its config file overrides it.
        # A partition whose in-flight batch B refuses (OUT_OF_ORDER_SEQUENCE_NUMBER: B has no state of this
        # producer id) retries until delivery.timeout.ms, then the producer resets its sequences: 10 s here.
        "retries=2147483647\nrequest.timeout.ms=5000\ndelivery.timeout.ms=10000\n",
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
        "--value-prefix",
        str(prefix),
        "--command-config",
        str(config),
    ]
    with open(out, "wb") as sink, open(workdir / "verifiable-producer.err", "wb") as err:
        return subprocess.Popen(cmd, stdout=sink, stderr=err, stdin=subprocess.DEVNULL), out


def _verifiable_consumer(
    bootstrap: str, group: str, password: str, workdir: Path, strategy: str | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Kafka's own VerifiableConsumer (its own group, principal = group, committing after each poll) on the
    endpoint; ``strategy`` its assignor (the default list: eager range)."""
    config = workdir / f"{group}.properties"
    write_atomic(
        config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{group}" password="{password}";\n',
    )
    out = workdir / f"{group}.jsonl"
    logs = workdir / "consumer-log4j2.properties"  # the group coordinator's INFO lines on stderr: what it did
    logs.write_text(
        "appender.e.type=Console\nappender.e.name=E\nappender.e.target=SYSTEM_ERR\n"
        "appender.e.layout.type=PatternLayout\nappender.e.layout.pattern=%d{HH:mm:ss.SSS} %c{1} %m%n\n"
        "rootLogger.level=WARN\nrootLogger.appenderRef.e.ref=E\n"
        "logger.c.name=org.apache.kafka.clients.consumer.internals\nlogger.c.level=INFO\n"
    )
    tc = toolchain()
    cmd = [tc.java, "-Xmx256m", f"-Dlog4j2.configurationFile={logs}", "-cp", f"{tc.kafka_lib}/*"]
    cmd += ["org.apache.kafka.tools.VerifiableConsumer"]
    cmd += ["--bootstrap-server", bootstrap, "--topic", TOPIC, "--group-id", group, "--reset-policy", "earliest"]
    cmd += ["--command-config", str(config), "--verbose"]
    if strategy:
        cmd += ["--assignment-strategy", strategy]
    with open(out, "wb") as sink, open(workdir / f"{group}.err", "wb") as err:
        return subprocess.Popen(cmd, stdout=sink, stderr=err, stdin=subprocess.DEVNULL), out


class LibrdkafkaConsumer(threading.Thread):
    """confluent-kafka consumer in its own group, subscribed, auto-committing (the defaults); keeps
    (partition, offset, value, time) of every record read."""

    def __init__(self, bootstrap: str, password: str) -> None:
        super().__init__(daemon=True)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": RDK_GROUP,
            "sasl.password": password,
            "group.id": RDK_GROUP,
            "auto.offset.reset": "earliest",
        }
        self.read: list[tuple[int, int, str, float]] = []
        self.errors: list[str] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        consumer = Consumer(self.conf)
        consumer.subscribe([TOPIC])
        try:
            while not self.stop_flag.is_set():
                for m in consumer.consume(500, timeout=0.2):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                    elif m.value() is not None:
                        self.read.append((m.partition(), m.offset(), m.value().decode(), time.time()))
        finally:
            consumer.close()


def _shift_offsets(estate: Estate, cluster: str) -> int:
    """Commit :data:`MARKERS` one-record transactions on ``cluster`` (as admin): each leaves a marker that
    takes an offset there and is not copied, so the copy's offsets of every later record are lower.
    Returns how many producer ids ``cluster`` handed out that were fenced on first use: ids in use there
    already by producers the endpoint moved from the previous cluster, which had allocated them."""
    fenced, i = 0, 0
    while i < MARKERS:
        producer = Producer(estate.endpoint(cluster).config(**{"transactional.id": f"shift-{time.time()}"}))
        producer.init_transactions(30)
        try:
            while i < MARKERS:
                producer.begin_transaction()
                producer.produce(TOPIC, value=f"t-{i}".encode(), partition=i % 6)
                producer.commit_transaction(30)
                i += 1
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._FENCED or fenced >= 10:
                raise
            fenced += 1
    return fenced


def _log(estate: Estate, cluster: str) -> dict[tuple[int, int], str]:
    """(partition, offset) → value of every record of the topic on ``cluster`` below its end offsets now
    (admin, from the start; the producers may still be writing)."""
    return {
        (m.partition(), m.offset()): m.value().decode()
        for m in read_to_end(estate.endpoint(cluster), TOPIC, timeout=60)
        if m.value() is not None
    }


def _java_reads(out: Path) -> list[str]:
    """The value of every record a VerifiableConsumer read, in order (``--verbose``: one ``record_data``
    event per record)."""
    return [str(e["value"]) for e in _events(out) if e.get("name") == "record_data"]


def _consumer_figures(values: list[str], on_b: set[str]) -> tuple[int, list[str], int]:
    """(records read, values skipped, records read twice): skipped = records on B — which holds every
    record of A the link copied and every record written after the switch — the consumer never read."""
    seen: set[str] = set()
    twice = 0
    for v in values:
        twice += v in seen
        seen.add(v)
    return len(values), sorted(on_b - seen), twice


def _events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def _gap(acks: list[float], switched: float) -> tuple[float | None, float | None]:
    """(last ack before the switch, first ack after it) as seconds relative to the switch."""
    before = [t for t in acks if t <= switched]
    after = [t for t in acks if t > switched]
    return (max(before) - switched if before else None, min(after) - switched if after else None)


def _offsets_translated_again(estate: Estate, passive: str) -> None:
    """Wait until the link has written every measured group's offsets onto ``passive`` once more after now:
    the event the unplanned failover's consumers will resume from (a checkpoint after their latest commits)."""
    groups = ["billing", COOP, RDK_GROUP]
    before = committed_offsets_of(estate.endpoint(passive), groups)

    def moved() -> bool:
        now = committed_offsets_of(estate.endpoint(passive), groups)
        return all(now[g] and now[g] != before[g] for g in groups)

    assert wait_until(moved, 120), f"the link did not translate {groups}' offsets onto {passive} again"


def test_a_silent_proxy_refuses_the_failover_before_the_fence_and_the_plan_shows_the_switch(
    env: StackEnv,
) -> None:
    estate = env.estate()
    stack_file = env.stack_file
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


_SAID = ("lost", "nknown member", "UNKNOWN_MEMBER", "ILLEGAL_GENERATION", "Found no committed offset", "Setting offset")


class Fleet:
    """The clients started once on the endpoint and never restarted: Kafka's VerifiableProducer and a
    librdkafka producer (both into :data:`TOPIC`), two VerifiableConsumers (eager range and
    cooperative-sticky, committing after each poll) and a librdkafka consumer (auto-commit), each
    consumer in its own group."""

    def __init__(self, estate: Estate, workdir: Path, prefix: int) -> None:
        self.prefix = prefix  # in every value this fleet produces: its records, told from earlier ones
        assert estate.topology.endpoint is not None
        bootstrap = estate.topology.endpoint.bootstrap
        password = estate.app_password(APP)
        self.java, self.java_out = _verifiable_producer(bootstrap, password, workdir, prefix)
        self.readers = {
            group: _verifiable_consumer(bootstrap, group, estate.app_password(group), workdir, strategy)
            for group, strategy in (
                ("billing", None),
                (COOP, "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
            )
        }
        self.rdk = LibrdkafkaProducer(bootstrap, password, prefix)
        self.rdk.start()
        self.rdk_reader = LibrdkafkaConsumer(bootstrap, estate.app_password(RDK_GROUP))
        self.rdk_reader.start()

    def running(self) -> bool:
        """Every producer acknowledged and every consumer read something."""
        return (
            len(self.rdk.acked) > 200
            and '"producer_send_success"' in self.java_out.read_text()
            and len(self.rdk_reader.read) > 100
            and all(len(_java_reads(out)) > 100 for _, out in self.readers.values())
        )

    def describe(self) -> str:
        return (
            f"librdkafka: {len(self.rdk.acked)} acks, errors {self.rdk.errors[-3:]}; "
            f"java: {self.java_out.read_text()[-300:]}; rdk consumer {len(self.rdk_reader.read)} "
            f"{self.rdk_reader.errors[-3:]}; java consumers {[o.read_text()[-300:] for _, o in self.readers.values()]}"
        )

    def java_acked(self) -> list[tuple[str, float, int]]:
        return [
            (str(e["value"]), e["timestamp"] / 1000, int(e["partition"]))
            for e in _events(self.java_out)
            if e.get("name") == "producer_send_success"
        ]

    def on_every_partition_after(self, switched: float) -> bool:
        """The Java producer was acknowledged on every partition after ``switched``."""
        return len({p for _, t, p in self.java_acked() if t > switched}) == 6

    def stop_producers(self) -> None:
        self.rdk.stop_flag.set()
        self.rdk.join(60)
        if self.java.poll() is None:
            self.java.terminate()
            self.java.wait(30)

    def consumed(self) -> dict[str, list[str]]:
        """Per consumer, the values it read in order."""
        out = {
            f"VerifiableConsumer {group} ({'cooperative-sticky' if group == COOP else 'eager range'})": _java_reads(o)
            for group, (_, o) in self.readers.items()
        }
        out["librdkafka consumer (range, auto-commit)"] = [v for _, _, v, _ in self.rdk_reader.read]
        return out

    def stop(self) -> None:
        self.stop_producers()
        self.rdk_reader.stop_flag.set()
        self.rdk_reader.join(30)
        for proc, _ in self.readers.values():
            proc.terminate()
            proc.wait(30)

    def measure(self, switched: float, target: str, on_target: set[str], cutoff: float, lost_ok: float = 0.0) -> None:
        """Print and assert the figures: per producer the records acknowledged by ``cutoff`` (when
        ``on_target`` was read) not on ``target`` (none acknowledged more than ``lost_ok`` seconds before
        the switch) and the gap around the switch; per consumer the records on ``target`` it never read
        (none; this fleet's and the ``t-`` ones) and the records it read twice (since it started)."""
        ours = {v for v in on_target if v.startswith((f"{self.prefix}.", f"c{self.prefix}-", "t-"))}
        java_errors = [e.get("exception") for e in _events(self.java_out) if e.get("name") == "producer_send_error"]
        java = self.java_acked()
        runs = (
            ("VerifiableProducer", [(v, t) for v, t, _ in java], [p for _, _, p in java], java_errors),
            ("librdkafka producer", self.rdk.acked, self.rdk.partitions, self.rdk.errors),
        )
        failures = []
        for name, acked, parts, errors in runs:
            lost = {v: t for v, t in acked if t <= cutoff and v not in on_target}
            last_a, first_b = _gap(sorted(t for _, t in acked), switched)
            first_per_partition: dict[int, float] = {}
            for (_, t), p in zip(acked, parts, strict=True):
                if t > switched:
                    first_per_partition[p] = min(first_per_partition.get(p, t), t)
            worst = {p: round(t - switched, 2) for p, t in sorted(first_per_partition.items())}
            gap = None if last_a is None or first_b is None else round(first_b - last_a, 2)
            print(
                f"\n{name} at {target}: acked {len(acked)}, lost {len(lost)} (acked {sorted(round(t - switched, 2) for t in lost.values())[:5]}"
                f" s from the switch), errors {len(errors)} ({sorted({str(e)[:80] for e in errors})[:2]}), last ack "
                f"before the switch {last_a}, first on {target} {first_b}: gap {gap} s; first ack per partition {worst}"
            )
            if [v for v, t in lost.items() if t < switched - lost_ok] or (lost and not lost_ok):
                failures.append(f"{name}: {len(lost)} acknowledged records are not on {target}: {sorted(lost)[:5]}")
            if first_b is None:
                failures.append(f"{name} was not acknowledged on {target}")
        for group, (_, out) in self.readers.items():  # what the Java coordinator said about the move
            said = out.with_suffix(".err").read_text(errors="replace").splitlines()
            seen = [line for line in said if any(k in line for k in _SAID)]
            print(f"{group} coordinator: " + " | ".join(line[:160] for line in seen[-8:]))
        for name, values in self.consumed().items():
            n, skipped, twice = _consumer_figures(values, ours)
            print(f"{name}: read {n}, skipped {len(skipped)} {skipped[:5]}, read twice {twice}")
            if skipped:
                failures.append(f"{name} skipped {len(skipped)} records on {target}, e.g. {skipped[:5]}")
        assert not failures, failures

    def wait_all_read(self, on_target: set[str], within: float = 60) -> None:
        """Until every consumer has read every value of ``on_target`` this fleet should read (measured
        after, not asserted here)."""
        ours = {v for v in on_target if v.startswith((f"{self.prefix}.", f"c{self.prefix}-", "t-"))}
        wait_until(lambda: all(ours <= set(v) for v in self.consumed().values()), within, interval=1)


def _failover(env: StackEnv, fleet: Fleet, target: str, *mode: str) -> tuple[float, set[str], float, Any]:
    """Run the failover (``--force-decommission``: it completes, so the next one starts afresh) under the
    running fleet; return when the endpoint switched, what ``target`` holds then and when that was read,
    and the failover's summary."""
    res = drctl(env, "failover", "--stack", STACK, *mode, "--yes", "--json", "--skip-verify", "--force-decommission")
    assert res.returncode == 0, res.stderr[-3000:]
    after = env.estate()
    assert after.topology.active().name == target and endpoint_pointing(after.topology, after.state) == [target]
    promote = Journal.load(journal_home(env, STACK)).outcome("promote")  # type: ignore[union-attr]
    assert promote["endpoint"]["target"] == target, promote
    switched = promote["endpoint"]["switched_at_ms"] / 1000
    wait_until(lambda: fleet.on_every_partition_after(switched), 12, interval=1)  # measured, not asserted
    cutoff = time.time()
    on_target = set(_log(after, target).values())
    fleet.wait_all_read(on_target)
    return switched, on_target, cutoff, json.loads(res.stdout)


def _proxy_drift_and_crash(env: StackEnv) -> None:
    """Between the failovers, the clients still running on B: the proxy switched away by hand is flagged
    by both status commands and ``estate up --refresh`` points it back; a killed one comes back."""
    estate = env.estate()
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, (preview.stdout + preview.stderr)[-2000:]  # the endpoint's target is B already
    proxy = local_endpoint(estate.topology, estate.state)
    assert proxy is not None
    switch(proxy.api, proxy.spec, "A")  # by hand, behind the product's back
    drift = "points at A, not at the active cluster B"
    fix = f"`drctl estate up --stack {STACK} --refresh` points it back at B"
    for args in (("status", "--stack", STACK), ("estate", "status", "--stack", STACK)):
        res = drctl(env, *args)
        assert drift in res.stdout and fix in res.stdout, res.stdout[-2000:]
    EstateStack(StackRef.resolve(STACK)).up(estate.topology, refresh=True)  # `drctl estate up --refresh`
    assert endpoint_pointing(estate.topology, estate.state) == ["B"]
    assert drift not in drctl(env, "estate", "status", "--stack", STACK).stdout
    proxy.kill()
    assert not proxy.alive()
    EstateStack(StackRef.resolve(STACK)).up(estate.topology, refresh=True)
    assert proxy.alive() and endpoint_pointing(estate.topology, estate.state) == ["B"]


def test_the_same_clients_live_through_a_planned_and_an_unplanned_failover_nothing_lost_or_skipped(
    env: StackEnv, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    estate = env.estate()
    assert endpoint_pointing(estate.topology, estate.state) == ["A"]
    fleet = Fleet(estate, tmp_path, 7)
    try:
        assert wait_until(fleet.running, 60), fleet.describe()
        switched, on_b, cutoff, planned = _failover(env, fleet, "B")
        fleet.measure(switched, "B", on_b, cutoff)
        status = drctl(env, "status", "--stack", STACK)
        assert "endpoint 127.0.0.1:" in status.stdout and "points at B (proxy running)" in status.stdout, status.stdout
        t1 = time.monotonic()
        _proxy_drift_and_crash(env)
        rebuilt = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--yes")  # the lost site
        assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]  # a changed stack file: the next failover is a new one
        estate = env.estate()
        fenced = _shift_offsets(estate, "B")  # C's offsets below B's from here on
        print(f"\nB allocated {fenced} producer ids already used by producers moved from A (fenced on first use)")
        _offsets_translated_again(estate, "C")  # the consumers commit on B, the link translates it onto C
        on_b_t = {v: o for (p, o), v in _log(estate, "B").items() if v.startswith("t-") and p == 0}
        print(f"between the failovers: {time.monotonic() - t1:.0f}s")
        estate.local_cluster("B").kill()
        killed = time.time()
        switched, on_c, cutoff, unplanned = _failover(env, fleet, "C", "--mode", "unplanned")
    finally:
        fleet.stop()
    # unplanned: what B acknowledged after the link's last copy is lost (RPO), nothing acknowledged before
    fleet.measure(switched, "C", on_c, cutoff, lost_ok=switched - killed + 2.0)
    on_c_t = {v: o for (p, o), v in _log(env.estate(), "C").items() if v.startswith("t-") and p == 0}
    last = max(on_b_t, key=on_b_t.__getitem__)
    print(
        f"B's transactional records on partition 0: offset on B → on C {[(on_b_t[v], on_c_t.get(v)) for v in on_b_t]}"
    )
    # each of the 10 is followed by a marker on B, not copied: C's offsets were below B's for the consumers
    assert len(on_c_t) == MARKERS // 6 and on_b_t[last] - on_c_t[last] >= MARKERS // 6 - 1
    print(
        f"RTO planned {planned.get('rto_s')}s, unplanned {unplanned.get('rto_s')}s; B killed {switched - killed:.1f}s "
        f"before the switch; test {time.monotonic() - t0:.0f}s"
    )
