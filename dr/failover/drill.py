"""``drctl drill``: a game day on the local estate — traffic, a failover A→B→C, proof, a grade.

1. Copy the stack file into ``<out>/stack/`` (the stack's own file is never touched) and provision
   A and B with their link (``pulumi up`` of the stack, :class:`dr.estate.stack.EstateStack`), state under ``<out>/state/``.
2. Traffic: ``orders-app`` (the first producing application) writes keyed records with
   ``acks=all`` and keeps a delivery ledger; the ``billing`` group (the first consuming group)
   consumes and commits; A's end offsets are snapshotted five times a second (the RPO estimate's input).
3. Fail A: planned (the pipeline fences and drains it) or ``--unplanned`` (SIGKILL mid-traffic).
4. Run the failover A→B→C. When the client configurations are published, the producer and the
   consumer move to B with them — as applications would.
5. Unplanned: bring A back (restart its brokers); the resumed failover fences it and verifies
   A vs B, which lists the records that never reached B; recover them; verify again; decommission.
6. Grade: RTO, A→B→C, RPO (estimate and actual), acknowledged records lost before and after
   recovery, records the consumer read twice, records it skipped (must be 0), time per step,
   the HTML report. Everything is torn down at the end unless ``keep``.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import dr.failover.integrity as integrity
from dr.base.errors import AuthError, ClusterError, ConfigError, FailoverError
from dr.base.stackref import StackRef, stack_file
from dr.estate.estate import Estate, Progress
from dr.estate.stack import EstateStack
from dr.failover.clients import client_files, publish_clients
from dr.failover.health import listening
from dr.failover.journal import Journal, atomic_write_json
from dr.failover.metrics import seconds_between
from dr.failover.pipeline import OnStep, run_failover
from dr.failover.probe import PROBE_KEY
from dr.failover.roles import Roles
from dr.failover.snapshots import record_offsets
from dr.failover.steps import FailoverOptions, StepResult
from dr.failover.summary import FailoverSummary, summarize
from dr.kafka.client import SILENT, Endpoint
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.runtime.cluster import LocalCluster
from dr.runtime.process import port_free, wait_until
from dr.topology import Application, Kind, Topology, load_stack_file

__all__ = ["ConfigSource", "DrillOptions", "application_rto", "read_keys", "restart", "run_drill"]

MARKER = ".kdr-drill"


@dataclass(kw_only=True)
class DrillOptions:
    """How the drill runs (the ``drctl drill`` flags)."""

    stack: str = "local"
    out: Path
    unplanned: bool = False
    rate: int = 500
    """Records per second the producer writes."""
    warmup_s: float = 6.0
    """Seconds of traffic before A fails."""
    base_port: int | None = None
    """Move the clusters to ``base_port``, ``+100``, ``+200``... (default: the stack's ports)."""
    keep: bool = False
    """Leave the drill's clusters running at the end."""
    cycles: int = 1
    """Failovers in a row: A→B→C, then B→C→A (A rebuilt as the standby), then C→A→B..."""
    aims: dict[str, float] = field(default_factory=lambda: {"rto_s": 10.0, "a_b_c_s": 120.0})


# ------------------------------------------------------------------------------------------ traffic
class ConfigSource:
    """An application's published client configuration (``<state>/clients/<app>.json``), watched.

    Real applications reload their connection settings from a config source when it changes; the
    drill's applications do the same: they move as soon as the failover publishes the new
    cluster's configuration, not when the drill tells them to.
    """

    def __init__(self, state: Path, app: str, clusters: dict[str, str]) -> None:
        self.path = client_files(state, app)[1]
        self.clusters = clusters  # bootstrap servers → cluster name
        self._seen: float | None = None

    def changed(self, current_bootstrap: str) -> tuple[dict[str, Any], str] | None:
        """The new configuration and its cluster, when the file now names another cluster than ``current``."""
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        if mtime == self._seen:
            return None
        self._seen = mtime
        try:
            conf = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):  # replaced atomically, so only a foreign writer gets here
            self._seen = None
            return None
        bootstrap = conf.get("bootstrap.servers")
        if bootstrap == current_bootstrap or bootstrap not in self.clusters:
            return None
        return conf, self.clusters[bootstrap]


def _close_later(client: Any, method: str, *args: Any) -> None:
    """Flush/close an abandoned client in the background: a dead cluster must not delay the move."""
    threading.Thread(target=getattr(client, method), args=args, daemon=True).start()


class ProducerLoop(threading.Thread):
    """An application producer with an ``acks=all`` delivery ledger that follows its published configuration."""

    def __init__(
        self,
        config: dict[str, Any],
        cluster: str,
        topic: str,
        rate: int,
        source: ConfigSource,
        key_prefix: str = "drill",
    ) -> None:
        super().__init__(name="drill-producer", daemon=True)
        self.topic, self.rate, self.source, self.key_prefix = topic, rate, source, key_prefix
        self.acked: dict[str, tuple[str, int, int, float]] = {}
        """key → (cluster, partition, offset, acknowledged at)"""
        self.failed: dict[str, str] = {}
        self.moves: list[tuple[float, str]] = []
        self._config, self._cluster = config, cluster
        self._stop_event = threading.Event()
        self._ledger = threading.Lock()
        self.seq = 0

    def acked_on(self, cluster: str) -> set[str]:
        """Keys acknowledged by ``cluster`` (a copy: the ledger keeps growing while traffic runs)."""
        with self._ledger:
            return {k for k, v in self.acked.items() if v[0] == cluster}

    def ack_times(self, cluster: str) -> list[float]:
        """When ``cluster`` acknowledged each of this application's writes."""
        with self._ledger:
            return [v[3] for v in self.acked.values() if v[0] == cluster]

    def stop(self) -> None:
        """Stop producing and flush."""
        self._stop_event.set()
        self.join(60)

    def _producer(self) -> Producer:
        return Producer(
            {
                **self._config,
                "acks": "all",
                "enable.idempotence": False,
                "linger.ms": 5,
                "message.timeout.ms": 5000,
                **SILENT,
            }
        )

    def run(self) -> None:
        """Produce at ``rate`` records per second until stopped; move when the configuration changes."""
        producer = self._producer()
        interval = 1.0 / max(1, self.rate)
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            moved = self.source.changed(self._config["bootstrap.servers"])
            if moved is not None:
                _close_later(producer, "flush", 6)
                self._config, self._cluster = moved
                self.moves.append((time.time(), self._cluster))
                producer = self._producer()
            key = f"{self.key_prefix}-{self.seq:08d}"
            self.seq += 1

            def report(err: KafkaError | None, msg: Any, key: str = key, cluster: str = self._cluster) -> None:
                with self._ledger:
                    if err is None:
                        self.acked[key] = (cluster, msg.partition(), msg.offset(), time.time())
                    else:
                        self.failed[key] = err.name()

            try:
                producer.produce(self.topic, key=key, value=f"{key}@{time.time():.3f}", on_delivery=report)
            except BufferError:
                self.failed[key] = "local queue full"
            except KafkaException as exc:  # refused at once, e.g. TOPIC_AUTHORIZATION_FAILED once fenced: counted
                err = exc.args[0] if exc.args else None
                self.failed[key] = err.name() if isinstance(err, KafkaError) else str(exc)
            producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()
        producer.flush(10)


class ConsumerLoop(threading.Thread):
    """A consumer group member committing every 0.5 s that follows its published configuration."""

    def __init__(self, config: dict[str, Any], cluster: str, topic: str, source: ConfigSource) -> None:
        super().__init__(name="drill-consumer", daemon=True)
        self.topic, self.source = topic, source
        self.reads: list[tuple[str, str, float]] = []  # (cluster, key, read at), in order
        self.commits: list[tuple[str, float]] = []  # (cluster, committed at)
        self._config, self._cluster = config, cluster
        self._stop_event = threading.Event()

    def commit_recorder(self, cluster: str) -> Callable[[Any, list[TopicPartition]], None]:
        """The ``on_commit`` callback of a client attached to ``cluster``: it records a commit only while
        the application is still attached there — the old client's closing commit may land on a lost
        source that comes back much later, after the application moved, and is not the application's."""

        def committed(err: Any, partitions: list[TopicPartition]) -> None:
            if (
                err is None
                and self._cluster == cluster
                and any(tp.error is None and tp.offset >= 0 for tp in partitions)
            ):
                self.commits.append((cluster, time.time()))

        return committed

    def _consumer(self) -> Consumer:
        committed = self.commit_recorder(self._cluster)
        consumer = Consumer(
            {
                **self._config,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "session.timeout.ms": 6000,
                "socket.timeout.ms": 5000,
                "on_commit": committed,
                **SILENT,
            }
        )
        consumer.subscribe([self.topic])
        return consumer

    def read_on(self, cluster: str) -> list[str]:
        """Keys read while attached to ``cluster``."""
        return [k for c, k, _t in self.reads if c == cluster]

    def stop(self) -> None:
        """Stop consuming and leave the group."""
        self._stop_event.set()
        self.join(60)

    def run(self) -> None:
        """Consume until stopped; rejoin on another cluster when the configuration changes."""
        consumer = self._consumer()
        while not self._stop_event.is_set():
            moved = self.source.changed(self._config["bootstrap.servers"])
            if moved is not None:
                _close_later(consumer, "close")
                self._config, self._cluster = moved
                consumer = self._consumer()
            for msg in consumer.consume(500, timeout=0.2):
                key = msg.key()
                if msg.error() is None and key is not None and key != PROBE_KEY:
                    self.reads.append((self._cluster, key.decode(), time.time()))
        consumer.close()


def application_rto(
    producer: ProducerLoop,
    consumer: ConsumerLoop | None,
    source: str,
    target: str,
    producer_app: str,
    group: str | None,
) -> list[dict[str, Any]]:
    """RTO as each application lived it.

    Producer: its last write acknowledged by ``source`` → its first write acknowledged by
    ``target``. Consumer group: its last offset commit on ``source`` → its first record read on
    ``target``. None where a side never happened.
    """
    out = [
        _gap(
            producer_app,
            "writes",
            "last write acknowledged",
            producer.ack_times(source),
            "first write acknowledged",
            producer.ack_times(target),
            source,
            target,
        )
    ]
    if consumer is not None and group:
        first_reads = [t for c, _k, t in consumer.reads if c == target]
        reads = _gap(
            group,
            "reads",
            "last offset commit",
            [t for c, t in consumer.commits if c == source],
            "first record read",
            first_reads,
            source,
            target,
        )
        # The group keeps committing on a fenced source while nothing new arrives there; the gap in
        # the data it sees is the other half of its outage.
        reads["data_gap_s"] = seconds_between(
            max((t for c, _k, t in consumer.reads if c == source), default=None), min(first_reads, default=None)
        )
        out.append(reads)
    return out


def _gap(
    who: str,
    kind: str,
    last_what: str,
    on_source: list[float],
    first_what: str,
    on_target: list[float],
    source: str,
    target: str,
) -> dict[str, Any]:
    last = max(on_source, default=None)
    first = min(on_target, default=None)
    return {
        "application": who,
        "kind": kind,
        "source": source,
        "target": target,
        "last_on_source": last,
        "first_on_target": first,
        "measured": f"{last_what} on {source} → {first_what} on {target}",
        "rto_s": seconds_between(last, first),
    }


class SnapshotLoop(threading.Thread):
    """Records the active cluster's end offsets five times a second (what ``drctl status`` does when run periodically)."""

    def __init__(self, endpoint: Endpoint, state: Path, cluster: str, topics: list[str]) -> None:
        super().__init__(name="drill-snapshots", daemon=True)
        self.endpoint, self.state, self.cluster, self.topics = endpoint, state, cluster, topics
        self._stop_event = threading.Event()

    def stop(self) -> None:
        """Stop taking snapshots (without waiting for a call stuck on a dead cluster)."""
        self._stop_event.set()

    def run(self) -> None:
        """Snapshot the end offsets until stopped; a dead cluster leaves the last snapshot in place."""
        while not self._stop_event.wait(0.2):
            if not listening(self.endpoint.bootstrap):
                continue  # the cluster is gone: the last snapshot stands
            try:
                offsets = end_offsets(self.endpoint, self.topics, timeout=2.0)
            except (ClusterError, AuthError):
                continue
            if not self._stop_event.is_set():
                record_offsets(self.state, self.cluster, offsets)


def restart(cluster: LocalCluster, timeout: float = 90.0) -> None:
    """Start a killed cluster again once its ports are free.

    Right after a SIGKILL the kernel may still hold one of its ports for a while (seen on the
    controller port), and ``LocalCluster.start`` refuses a taken port.
    """
    wait_until(lambda: all(port_free(p) for p in cluster.spec.ports()), timeout, interval=0.5)
    cluster.start()


def read_keys(endpoint: Endpoint, topic: str, timeout: float = 120.0) -> Counter[str]:
    """Every record key of ``topic`` (counted), read from the beginning up to the current end offsets."""
    ends = end_offsets(endpoint, [topic])
    todo = {tp: n for tp, n in ends.items() if n > 0}
    keys: Counter[str] = Counter()
    if not todo:
        return keys
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"kdr-drill-read-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **SILENT,
            }
        )
    )
    consumer.assign([TopicPartition(t, p, 0) for (t, p) in todo])
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                tp, offset, key = (msg.topic(), msg.partition()), msg.offset(), msg.key()
                if tp in todo and offset is not None and offset < todo[tp]:
                    keys[key.decode() if key is not None else ""] += 1
                    if offset + 1 >= todo[tp]:
                        del todo[tp]
    finally:
        consumer.close()
    if todo:
        raise ClusterError(
            f"could not read {topic} to its end within {timeout:.0f}s (left: {todo}).", "check the cluster answers"
        )
    return keys


# ------------------------------------------------------------------------------------------ the drill
def _prepare(options: DrillOptions) -> tuple[Path, Path]:
    out = options.out.resolve()
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ConfigError(
            f"{out} is not empty and was not written by a drill.", "pass --out with a new or empty directory"
        )
    for sub in ("stack", "state", "pulumi"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "stack").mkdir(parents=True)
    (out / MARKER).write_text("written by drctl drill\n")
    doc = yaml.safe_load(stack_file(options.stack).read_text())
    if options.base_port is not None:
        for i, c in enumerate(doc["config"]["kafka-dr:clusters"]):
            c["base_port"] = options.base_port + 100 * i
    stack_path = out / "stack" / f"Pulumi.{options.stack}.yaml"
    stack_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return stack_path, out / "state"


def _grade(checks: list[tuple[str, bool | None]]) -> tuple[str, list[dict[str, Any]]]:
    rows = [{"check": name, "result": "n/a" if ok is None else ("PASS" if ok else "FAIL")} for name, ok in checks]
    failed = [r for r in rows if r["result"] == "FAIL"]
    return ("PASS" if not failed else f"FAIL ({len(failed)} of {len(rows)} checks)"), rows


@dataclass
class _Traffic:
    """The drill's applications: a producer, a consumer group member, and the offsets snapshotter."""

    producer: ProducerLoop
    consumer: ConsumerLoop | None
    snapshots: SnapshotLoop
    producer_app: Application
    consumer_app: Application | None

    @property
    def topic(self) -> str:
        """The topic the applications use."""
        return self.producer.topic

    @property
    def group(self) -> str | None:
        """The consumer group, if a consuming application reads the topic."""
        return self.consumer_app.consumer_group if self.consumer_app else None

    def threads(self) -> list[Any]:
        """The running parts."""
        return [t for t in (self.producer, self.consumer, self.snapshots) if t is not None]

    def stop(self) -> None:
        """Stop whatever still runs."""
        for t in self.threads():
            if t.is_alive():
                t.stop()


def _start_traffic(estate: Estate, state: Path, rate: int, key_prefix: str) -> _Traffic:
    topology = estate.topology
    A = topology.active().name
    producer_app = next(a for a in topology.principals.applications if a.produces)
    topic = producer_app.produces[0]
    consumer_app = next((a for a in topology.principals.applications if a.consumer_group and topic in a.consumes), None)
    clusters = {estate.local_cluster(c.name).bootstrap: c.name for c in topology.clusters if c.kind is Kind.LOCAL}
    producer_ep = estate.endpoint(A).with_user(producer_app.name, estate.app_password(producer_app.name))
    producer = ProducerLoop(
        producer_ep.config(), A, topic, rate, ConfigSource(state, producer_app.name, clusters), key_prefix
    )
    consumer = None
    if consumer_app is not None:
        ep = estate.endpoint(A).with_user(consumer_app.name, estate.app_password(consumer_app.name))
        consumer = ConsumerLoop(
            ep.config(**{"group.id": consumer_app.consumer_group}),
            A,
            topic,
            ConfigSource(state, consumer_app.name, clusters),
        )
    traffic = _Traffic(
        producer,
        consumer,
        SnapshotLoop(estate.endpoint(A), state, A, [t.name for t in topology.topics]),
        producer_app,
        consumer_app,
    )
    for t in traffic.threads():
        t.start()
    return traffic


def _consumer_report(
    consumer: ConsumerLoop, group: str, source: str, target: str, on_target: Counter[str], key_prefix: str
) -> dict[str, Any]:
    """Wait until the group has seen every record of this cycle on the target; count re-reads and skips."""
    everything = {k for k in on_target if k.startswith(key_prefix)}
    wait_until(lambda: everything <= set(consumer.read_on(source)) | set(consumer.read_on(target)), 60, interval=0.5)
    consumer.stop()
    on_a, on_b = consumer.read_on(source), consumer.read_on(target)
    seen_on_a = set(on_a)
    return {
        "group": group,
        "read_on_source": len(on_a),
        "read_on_target": len(on_b),
        "read_twice": sum(1 for k in on_b if k in seen_on_a),
        "skipped": len(everything - seen_on_a - set(on_b)),
        "records_on_target": len(everything),
    }


def _checks(options: DrillOptions, result: dict[str, Any]) -> list[tuple[str, bool | None]]:
    s, aims, consumer = result["failover"], options.aims, result.get("consumer")
    A, B = result["source"], result["target"]
    checks: list[tuple[str, bool | None]] = [
        (
            f"application RTO ≤ {aims['rto_s']:.0f}s ({r['application']} {r['kind']}: {r['rto_s']}s)",
            r["rto_s"] is not None and r["rto_s"] <= aims["rto_s"],
        )
        for r in result["application_rto"]
    ]
    checks += [
        (
            f"{A}→{B}→{s['standby'] or '—'} ≤ {aims['a_b_c_s']:.0f}s",
            s["a_b_c_s"] is not None and s["a_b_c_s"] <= aims["a_b_c_s"],
        ),
        (f"failover completed ({A} decommissioned)", s["status"] == "completed"),
        (f"verification listed exactly the records that never reached {B}", result["verification_exact"]),
        ("no acknowledged record lost after recovery", result["lost_after_recovery"] == 0),
        (f"the application writes on {B} after the move", result["producer"]["acked_on_target"] > 0),
        (f"the consumer group resumed on {B}", None if consumer is None else consumer["read_on_target"] > 0),
        ("consumers skipped no record", None if consumer is None else consumer["skipped"] == 0),
        ("`pulumi preview` proposes no change after the failover", not result.get("preview_after_failover")),
    ]
    if not options.unplanned:
        checks.append(("planned: no acknowledged record lost", result["lost_before_recovery"] == 0))
    return checks


def run_drill(options: DrillOptions, progress: Progress = lambda _m: None) -> dict[str, Any]:
    """Run the game day (see the module doc); return the graded result (also in ``<out>/drill.json``).

    With ``cycles`` > 1 the old active cluster is declared, wiped, as the next standby after each
    cycle (:func:`dr.failover.lifecycle.make_standby`) and the next cycle fails the new active over:
    A→B→C, B→C→A, C→A→B... Each cycle is graded on its own; the drill passes when all do.
    """
    stack_path, state = _prepare(options)
    stack = options.stack
    seen = [load_stack_file(stack_path)]
    result: dict[str, Any] = {
        "stack": stack,
        "mode": "unplanned" if options.unplanned else "planned",
        "out": str(options.out.resolve()),
        "cycles": [],
    }
    t_start = time.monotonic()
    try:
        roles = Roles.of(seen[0])
        A, B = roles.source.name, roles.target.name
        progress(f"drill: provisioning {A} and {B} from {stack_path}")
        result["provision_s"] = EstateStack(StackRef(stack, stack_path.parent, state)).up(seen[0], progress=progress)
        publish_clients(Estate(seen[0], state), A)  # as `drctl estate up` does
        for number in range(1, options.cycles + 1):
            if number > 1:
                from dr.failover.lifecycle import make_standby

                old = result["cycles"][-1]["source"]
                progress(f"drill: declaring {old}, wiped, as the next standby (`drctl estate standby`)")
                result["cycles"][-1]["standby_rebuild"] = make_standby(
                    StackRef(stack, stack_path.parent, state), old, progress
                )
            topology = load_stack_file(stack_path)
            seen.append(topology)
            cycle = _cycle(options, stack_path, state, topology, number, progress)
            result["cycles"].append(cycle)
            if not cycle["grade"].startswith("PASS"):
                break
    finally:
        result["seconds"] = round(time.monotonic() - t_start, 3)
        if not options.keep:
            progress("drill: tearing the drill's estate down (`pulumi destroy`: processes stopped, data removed)")
            _teardown(stack, stack_path, state, (*seen, *_current(stack_path)), progress)
        _conclude(result, options.cycles)
        atomic_write_json(options.out.resolve() / "drill.json", result)
    return result


def _current(stack_path: Path) -> list[Topology]:
    """The stack file's topology now (a failover may have rewritten it), if it still loads."""
    try:
        return [load_stack_file(stack_path)]
    except Exception:  # noqa: BLE001 - teardown goes on with the topologies already seen
        return []


def _conclude(result: dict[str, Any], cycles: int) -> None:
    """The drill's grade: every cycle ran and passed. A single cycle's fields also sit at the top
    level (``failover``, ``checks``...), as in a one-cycle drill's result."""
    done = result["cycles"]
    failed = [c["number"] for c in done if not str(c.get("grade", "")).startswith("PASS")]
    if len(done) == 1:
        result.update({k: v for k, v in done[0].items() if k not in ("number", "mode", "stack")})
    if not done:
        result["grade"] = "INCOMPLETE"
    elif failed or len(done) < cycles:
        result["grade"] = (
            (
                f"FAIL (cycle {', '.join(map(str, failed))} of {cycles})"
                if failed
                else f"INCOMPLETE ({len(done)} of {cycles} cycles)"
            )
            if cycles > 1
            else done[0].get("grade", "INCOMPLETE")
        )
    else:
        result["grade"] = "PASS" if cycles == 1 else f"PASS ({cycles} cycles)"


def _cycle(
    options: DrillOptions, stack_path: Path, state: Path, original: Topology, number: int, progress: Progress
) -> dict[str, Any]:
    """One failover of the drill: traffic on the active cluster, fail it, fail over, prove, grade."""
    stack = options.stack
    roles = Roles.of(original)
    A, B, C = roles.source.name, roles.target.name, roles.standby_name
    estate = Estate(original, state)
    chain = f"{A}→{B}" + (f"→{C}" if C else "")
    result: dict[str, Any] = {"number": number, "chain": chain, "source": A, "target": B, "standby": C}
    prefix = f"drill-c{number}"
    traffic = _start_traffic(estate, state, options.rate, prefix)
    topic = result["topic"] = traffic.topic
    try:
        progress(
            f"drill cycle {number} ({chain}): traffic on {A}: {traffic.producer_app.name} → {topic} at "
            f"{options.rate}/s" + (f", group {traffic.group} consuming" if traffic.group else "")
        )
        _fail_source(options, estate, traffic, A, B, progress)
        holdings, summary = _fail_over(options, stack_path, state, estate, traffic, progress)
        result["failover_first_run"] = summary.model_dump(
            mode="json", include={"status", "rto_s", "a_b_c_s", "rpo_estimate"}
        )
        summary = _prove_and_recover(options, stack_path, state, estate, traffic, holdings, summary, result, progress)
        preview = EstateStack(StackRef(stack, stack_path.parent, state)).preview()
        result["preview_after_failover"] = preview.changes
        time.sleep(2)  # traffic on B for a moment, then the ledger and the consumer against what B holds
        traffic.producer.stop()
        result.update(_applications(estate, traffic, A, B, prefix))
        rpo = summary.rpo_estimate or {}
        verdicts = result["verdicts"]
        result.update(
            failover=summary.model_dump(mode="json"),
            report_html=verdicts[-1]["html"] if verdicts else None,
            rpo={
                "estimate": rpo.get("records"),
                "estimate_upper_bound": rpo.get("upper_bound"),
                "estimate_basis": rpo.get("basis"),
                "actual_never_replicated": result["never_reached_target"],
                "acknowledged_lost_before_recovery": result["lost_before_recovery"],
            },
        )
        result["grade"], result["checks"] = _grade(_checks(options, result))
    finally:
        traffic.stop()
    return result


def _fail_source(options: DrillOptions, estate: Estate, traffic: _Traffic, A: str, B: str, progress: Progress) -> None:
    """Traffic for the warm-up, the group's offsets synced to B once; unplanned: SIGKILL A."""
    time.sleep(options.warmup_s)
    if traffic.group:
        progress(f"drill: waiting until link {A}→{B} has synced group {traffic.group}'s offsets at least once")
        if not wait_until(lambda: bool(committed_offsets(estate.endpoint(B), traffic.group or "")), 60, interval=0.5):
            raise ClusterError(
                f"the link never synced group {traffic.group} to {B} within 60s.",
                "read the MirrorMaker 2 log under <out>/state/links/",
            )
    if options.unplanned:
        progress(
            f"drill: SIGKILL every node of {A} mid-traffic ({len(traffic.producer.acked)} records acknowledged so far)"
        )
        estate.local_cluster(A).kill()
        wait_until(lambda: not listening(estate.local_cluster(A).bootstrap), 5, interval=0.05)
    traffic.snapshots.stop()


def _applications(estate: Estate, traffic: _Traffic, A: str, B: str, prefix: str) -> dict[str, Any]:
    """What the applications saw, against what B finally holds: consumer, producer, their RTO, the loss."""
    final_b = read_keys(estate.endpoint(B), traffic.topic)
    found: dict[str, Any] = {}
    if traffic.consumer is not None and traffic.group:
        found["consumer"] = _consumer_report(traffic.consumer, traffic.group, A, B, final_b, prefix)
    acked_a = traffic.producer.acked_on(A)
    found["producer"] = {
        "acked_on_source": len(acked_a),
        "acked_on_target": len(traffic.producer.acked_on(B)),
        "not_acknowledged": len(traffic.producer.failed),
        "moved_at": [t for t, _c in traffic.producer.moves],
    }
    found["application_rto"] = application_rto(
        traffic.producer, traffic.consumer, A, B, traffic.producer_app.name, traffic.group
    )
    found["lost_after_recovery"] = len(acked_a - set(final_b))
    return found


def _fail_over(
    options: DrillOptions, stack_path: Path, state: Path, estate: Estate, traffic: _Traffic, progress: Progress
) -> tuple[dict[str, Counter[str]], FailoverSummary]:
    """Run the failover; unplanned: it completes without A, then A comes back and is verified.

    What A and B hold is read right after the verification, before A may be decommissioned.
    """
    roles = Roles.of(estate.topology)
    A, B = roles.source.name, roles.target.name
    holdings: dict[str, Counter[str]] = {}

    def on_step(name: str, step_result: StepResult) -> None:
        if name == "integrity" and step_result.status in ("done", "differences"):
            holdings.update(
                a=read_keys(estate.endpoint(A), traffic.topic), b=read_keys(estate.endpoint(B), traffic.topic)
            )

    mode = "unplanned" if options.unplanned else "planned"
    summary = _failover(options.stack, stack_path, state, FailoverOptions(mode=mode), progress, on_step)
    if options.unplanned:
        progress(f"drill: bringing {A} back (restarting its brokers)")
        restart(estate.local_cluster(A))
        summary = _failover(options.stack, stack_path, state, FailoverOptions(), progress, on_step)
    return holdings, summary


def _prove_and_recover(
    options: DrillOptions,
    stack_path: Path,
    state: Path,
    estate: Estate,
    traffic: _Traffic,
    holdings: dict[str, Counter[str]],
    summary: FailoverSummary,
    result: dict[str, Any],
    progress: Progress,
) -> FailoverSummary:
    """What the verification lists against what really never reached B; recover it; verify again."""
    A, B = result["source"], result["target"]
    verdict = _verdict(state)
    verdicts = [verdict.to_dict()] if verdict else []
    a_keys, b_keys = holdings.get("a", Counter()), holdings.get("b", Counter())
    never = set(a_keys) - set(b_keys)
    listed = (
        {r["key"].decode() for r in integrity.missing_records(verdict.report_dir) if r["topic"] == traffic.topic}
        if verdict and not verdict.clean
        else set()
    )
    result.update(
        verification_exact=bool(verdict) and bool(holdings) and listed == never,
        never_reached_target=len(never),
        lost_before_recovery=len(traffic.producer.acked_on(A) - set(b_keys)),
        verdicts=verdicts,
    )
    if verdict and not verdict.clean:
        progress(f"drill: the verification lists {verdict.counts['missing']} missing records; recovering them")
        result["recovery"] = integrity.recover(
            verdict.report_dir, source=estate.endpoint(A), target=estate.endpoint(B), progress=progress
        )
        summary = _failover(options.stack, stack_path, state, FailoverOptions(), progress, None)
        verdict = _verdict(state)
        if verdict:
            verdicts.append(verdict.to_dict())
    return summary


def _teardown(stack: str, stack_path: Path, state: Path, topologies: tuple[Any, ...], progress: Progress) -> None:
    """``pulumi destroy`` of the drill's stack; should it fail, stop every process the drill's
    topologies name anyway, so that no JVM outlives the drill."""
    try:
        EstateStack(StackRef(stack, stack_path.parent, state)).destroy(progress)
        return
    except Exception as exc:  # noqa: BLE001 - teardown must go on
        progress(f"drill: `pulumi destroy` failed ({str(exc).splitlines()[0]}); stopping the processes directly")
    for topology in topologies:
        Estate(topology, state).stop()


def _verdict(state: Path) -> integrity.Verdict | None:
    """The integrity step's verdict in the drill's journal."""
    journal = Journal.load(state)
    return journal.verdict() if journal is not None else None


def _failover(
    stack: str, stack_path: Path, state: Path, options: FailoverOptions, progress: Progress, on_step: OnStep | None
) -> FailoverSummary:
    """Run/resume the failover; a refusal at decommission (differences found) returns the summary."""
    try:
        return run_failover(
            StackRef(stack, stack_path.parent, state), options=options, progress=progress, on_step=on_step
        )
    except FailoverError as exc:
        journal = Journal.load(state)
        if journal is None or journal.step("integrity").status != "differences":
            raise
        progress(f"drill: failover stopped as designed: {exc.problem}")
        return summarize(journal)


def render_drill(r: dict[str, Any]) -> str:
    """The graded drill summary as text (every cycle, then the overall grade)."""
    cycles = r.get("cycles") or []
    lines = [
        f"DRILL ({r['mode']}) on stack {r['stack']}: {r.get('grade', 'INCOMPLETE')}"
        + (f" — {' then '.join(c['chain'] for c in cycles)}" if len(cycles) > 1 else "")
    ]
    for c in cycles:
        if len(cycles) > 1:
            lines += ["", f"cycle {c['number']}: {c['chain']} — {c.get('grade', 'INCOMPLETE')}"]
        lines += _render_cycle(c)
        rebuild = c.get("standby_rebuild")
        if rebuild:
            lines.append(
                f"then {rebuild.get('cluster')} declared, wiped, as the next standby ({rebuild.get('seconds', '?')}s)"
            )
    lines.append(f"drill result: {Path(r['out']) / 'drill.json'} ({r['seconds']:.0f}s)")
    return "\n".join(lines)


def _render_cycle(r: dict[str, Any]) -> list[str]:
    from dr.failover.render import render_summary

    A, B = r["source"], r["target"]
    lines = [f"  [{c['result']:>4}] {c['check']}" for c in r.get("checks", [])]
    for app in r.get("application_rto") or []:
        lines.append(
            f"application RTO {app['application']} ({app['kind']}): {app['rto_s']}s "
            f"— {app['measured']}"
            + (
                f"; last record read on {A} → first on {B}: {app['data_gap_s']}s"
                if app.get("data_gap_s") is not None
                else ""
            )
        )
    s = r.get("failover")
    if s:
        lines.append(
            f"RTO probe {s['rto_s']}s (supplement) · {r['chain']} {s['a_b_c_s']}s · failover total {s['total_s']}s"
        )
    rpo = r.get("rpo") or {}
    hi = rpo.get("estimate_upper_bound")
    lines.append(
        f"RPO: estimate {rpo.get('estimate')}{'' if hi is None else f'–{hi}'} records; never reached {B} "
        f"{rpo.get('actual_never_replicated')}; acknowledged and lost before recovery "
        f"{rpo.get('acknowledged_lost_before_recovery')}; after recovery {r.get('lost_after_recovery')}"
    )
    p = r.get("producer") or {}
    lines.append(
        f"producer: {p.get('acked_on_source')} acknowledged on {A}, {p.get('acked_on_target')} on {B}, "
        f"{p.get('not_acknowledged')} not acknowledged (refused/timed out: the application retries those)"
    )
    c = r.get("consumer")
    if c:
        lines.append(
            f"consumer group {c['group']}: {c['read_on_source']} read on {A}, {c['read_on_target']} on {B}, "
            f"{c['read_twice']} read twice, {c['skipped']} skipped"
        )
    if r.get("recovery"):
        rec = r["recovery"]
        lines.append(
            f"recovery: {rec['missing']} missing, {rec['written']} written, {rec['already_present']} already present"
        )
    if s:
        lines += ["", render_summary(s)]
    lines.append(f"HTML report: {r.get('report_html')}")
    return lines


def dump(result: dict[str, Any]) -> str:
    """JSON text of a drill result."""
    return json.dumps(result, indent=2, default=str)
