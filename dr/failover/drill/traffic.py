"""The drill's applications: a producer with a delivery ledger, a consumer group member, an offsets
snapshotter — each following its published client configuration — and the RTO each one lived.

Real applications reload their connection settings when their config source changes; these do the
same, so the drill measures the outage on application traffic, not on a probe.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.estate.estate import Estate
from dr.failover.act.clients import client_files
from dr.failover.act.health import listening
from dr.failover.act.probe import PROBE_KEY
from dr.failover.act.snapshots import record_offsets
from dr.failover.drill.result import ApplicationRto, ConsumerReport
from dr.failover.record.metrics import seconds_between
from dr.kafka.client import SILENT, Endpoint
from dr.kafka.offsets import OffsetReader
from dr.kafka.records import read_to_end
from dr.runtime.process import wait_until
from dr.topology import Application, Kind, Role
from dr.topology.oauth_login import uses_oauth

__all__ = [
    "ConfigSource",
    "ConsumerLoop",
    "ProducerLoop",
    "SnapshotLoop",
    "Traffic",
    "application_rto",
    "consumer_report",
    "own_login",
    "read_keys",
    "snapshot_pause",
    "start_config",
    "start_traffic",
]


class ConfigSource:
    """An application's published client configuration (``<state>/clients/<app>.json``), watched.

    Real applications reload their connection settings from a config source when it changes; the
    drill's applications do the same: they move as soon as the failover publishes the new
    cluster's configuration, not when the drill tells them to.
    """

    def __init__(self, state: Path, app: str, clusters: dict[str, str], estate: Estate | None = None) -> None:
        self.path = client_files(state, app)[1]
        self.app = app
        self.clusters = clusters  # bootstrap servers → cluster name
        self.estate = estate
        """With it, a configuration that lacks the application's OAUTHBEARER client secret gets it (:func:`own_login`)."""
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
        cluster = self.clusters[bootstrap]
        return (conf if self.estate is None else own_login(self.estate, self.app, cluster, conf)), cluster


_CLIENT_SECRET = "sasl.oauthbearer.client.secret"


def own_login(estate: Estate, app: str, cluster: str, conf: dict[str, Any]) -> dict[str, Any]:
    """``conf``, ``app``'s published configuration for ``cluster``, as the drill's application logs in with it.

    On an OAUTHBEARER cluster the published file carries everything but the application's client secret (its
    team adds it): the drill adds the secret the stack holds for that application
    (``oauth.applications.<app>.clientSecret``) — its own client, never the admin's. A :class:`ConfigError`
    names the secret when the stack does not hold it. Other clusters' configurations are returned as they are."""
    if not uses_oauth(estate.topology.cluster(cluster)) or conf.get(_CLIENT_SECRET):
        return conf
    try:
        secret = estate.endpoint(cluster, app).password
    except ConfigError as exc:
        raise ConfigError(
            f"the drill's application {app!r} logs in to OAUTHBEARER cluster {cluster!r} as its own client, "
            f"whose secret the stack does not hold: {exc.problem}",
            f"set it as a stack secret (`pulumi config set --path --secret "
            f"'kafka-dr:clusters[<i>].oauth.applications.{app}.clientSecret' <secret>`), or rehearse with "
            "`drctl failover` and the application itself. Nothing was changed",
        ) from None
    return {**conf, _CLIENT_SECRET: secret}


UNANSWERED = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN"})
"""The errors that mean a write got no answer in time (a slow or lost cluster), not that a broker refused it."""


QUEUE_FULL = "local queue full"


def ledger_reason(error: str, cluster: str) -> str:
    """Why a write is in a producer's ``failed`` ledger, and where: ``"<error> on <cluster>"``."""
    return f"{error} on {cluster}"


def unanswered(why: str) -> bool:
    """Whether a :func:`ledger_reason` is a write left unanswered, not refused."""
    error = why.split(" on ", 1)[0]
    return error in UNANSWERED or error == QUEUE_FULL


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
        """key → why it was not written, and where: ``"<error> on <cluster>"``"""
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
                        self.failed[key] = ledger_reason(err.name(), cluster)

            try:
                producer.produce(self.topic, key=key, value=f"{key}@{time.time():.3f}", on_delivery=report)
            except BufferError:
                self.failed[key] = ledger_reason(QUEUE_FULL, self._cluster)
            except KafkaException as exc:  # refused at once, e.g. TOPIC_AUTHORIZATION_FAILED once fenced: counted
                err = exc.args[0] if exc.args else None
                why = err.name() if isinstance(err, KafkaError) else str(exc)
                self.failed[key] = ledger_reason(why, self._cluster)
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
) -> list[ApplicationRto]:
    """RTO as each application lived it.

    Producer: its last write acknowledged by ``source`` → its first write acknowledged by
    ``target``. Consumer group: its last offset commit on ``source`` → its first record read on
    ``target``. None where a side never happened.
    """
    out = [rto_gap(producer_app, "writes", producer.ack_times(source), producer.ack_times(target), source, target)]
    if consumer is not None and group:
        first_reads = [t for c, _k, t in consumer.reads if c == target]
        reads = rto_gap(group, "reads", [t for c, t in consumer.commits if c == source], first_reads, source, target)
        # The group keeps committing on a fenced source while nothing new arrives there; the gap in
        # the data it sees is the other half of its outage.
        reads.data_gap_s = seconds_between(
            max((t for c, _k, t in consumer.reads if c == source), default=None), min(first_reads, default=None)
        )
        out.append(reads)
    return out


#: What the RTO of each kind is measured between.
_RTO_WORDS = {
    "writes": ("last write acknowledged", "first write acknowledged"),
    "reads": ("last offset commit", "first record read"),
}


def rto_gap(
    who: str,
    kind: Literal["writes", "reads"],
    on_source: list[float],
    on_target: list[float],
    source: str,
    target: str,
) -> ApplicationRto:
    """``who``'s RTO of ``kind``: its last event on ``source`` (an acknowledged write, an offset commit)
    → its first on ``target`` (an acknowledged write, a record read)."""
    last, first = max(on_source, default=None), min(on_target, default=None)
    last_what, first_what = _RTO_WORDS[kind]
    return ApplicationRto(
        application=who,
        kind=kind,
        source=source,
        target=target,
        last_on_source=last,
        first_on_target=first,
        measured=f"{last_what} on {source} → {first_what} on {target}",
        rto_s=seconds_between(last, first),
    )


class SnapshotLoop(threading.Thread):
    """Records the active cluster's end offsets (what ``drctl status`` does when run periodically): five
    times a second, or less often when a snapshot takes longer than 50 ms (thousands of partitions), so
    that it never takes more than a fifth of the time — it shares this process, and its interpreter
    lock, with the applications and the failover it watches."""

    def __init__(self, endpoint: Endpoint, state: Path, cluster: str, topics: list[str]) -> None:
        super().__init__(name="drill-snapshots", daemon=True)
        self.endpoint, self.state, self.cluster, self.topics = endpoint, state, cluster, topics
        self._stop_event = threading.Event()

    def stop(self) -> None:
        """Stop taking snapshots (without waiting for a call stuck on a dead cluster)."""
        self._stop_event.set()

    def run(self) -> None:
        """Snapshot the end offsets until stopped; a dead cluster leaves the last snapshot in place."""
        reader: OffsetReader | None = None  # one client for the loop: a new one per read costs a
        # handshake and the whole cluster's metadata, five times a second (much at 1,000 topics)
        pause = 0.2
        while not self._stop_event.wait(pause):
            if not listening(self.endpoint.bootstrap):
                reader = None
                continue  # the cluster is gone: the last snapshot stands
            t0 = time.monotonic()
            try:
                reader = reader or OffsetReader(self.endpoint, self.topics, timeout=2.0)
                offsets = reader.end_offsets()
            except (ClusterError, AuthError):
                reader = None
                continue
            if not self._stop_event.is_set():
                record_offsets(self.state, self.cluster, offsets)
                pause = snapshot_pause(time.monotonic() - t0)


def snapshot_pause(took_s: float) -> float:
    """Seconds between two snapshots after one that took ``took_s``: 0.2, or four times as long as it took."""
    return max(0.2, 4 * took_s)


def read_keys(endpoint: Endpoint, topic: str, timeout: float = 120.0) -> Counter[str]:
    """Every record key of ``topic`` (counted), read from the beginning up to the current end offsets."""
    keys: Counter[str] = Counter()
    for msg in read_to_end(endpoint, topic, timeout=timeout, group="kdr-drill-read"):
        key = msg.key()
        keys[key.decode() if isinstance(key, bytes) else (key or "")] += 1
    return keys


@dataclass
class Traffic:
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


def _published(state: Path, app: str) -> dict[str, Any] | None:
    """The application's published client configuration (``<state>/clients/<app>.json``), if any."""
    try:
        return dict(json.loads(client_files(state, app)[1].read_text()))
    except (OSError, json.JSONDecodeError):
        return None


def start_config(estate: Estate, state: Path, app: Application, cluster: str, bootstrap: str) -> dict[str, Any]:
    """What ``app`` starts with: its published configuration when that names ``cluster`` (the
    stack's own, as real applications read it), else its endpoint on ``cluster`` — over OAUTHBEARER either
    way as its own client, with the secret the stack holds for it (:func:`own_login`)."""
    conf = _published(state, app.name)
    if conf is not None and conf.get("bootstrap.servers") == bootstrap:
        return own_login(estate, app.name, cluster, conf)
    if uses_oauth(estate.topology.cluster(cluster)):
        ep = estate.endpoint(cluster, app.name)  # its own client identity, its secret from the stack
    else:
        ep = estate.endpoint(cluster).with_user(app.name, estate.app_password(app.name))
    return ep.config(**({"group.id": app.consumer_group} if app.consumer_group else {}))


def start_traffic(estate: Estate, state: Path, rate: int, key_prefix: str) -> Traffic:
    """Start the first producing application on the active cluster's first topic it writes, the
    consumer group that reads that topic, and the offsets snapshotter.

    Each application starts from its published client configuration for the active cluster
    (``<state>/clients/<app>.json``) and follows it when a failover publishes another cluster's —
    for local and external clusters alike; over OAUTHBEARER as its own client (:func:`own_login`), whose
    secret the stack must hold for the active cluster and the passive one it moves to (checked here, before
    any traffic)."""
    topology = estate.topology
    A = topology.active().name
    producer_app = next(a for a in topology.principals.applications if topology.produced_by(a))
    topic = topology.produced_by(producer_app)[0]
    consumer_app = next(
        (a for a in topology.principals.applications if a.consumer_group and topic in topology.consumed_by(a)), None
    )
    clusters = {
        (estate.local_cluster(c.name).bootstrap if c.kind is Kind.LOCAL else c.bootstrap_servers or ""): c.name
        for c in topology.clusters
    }
    a_bootstrap = next(b for b, name in clusters.items() if name == A)
    for app in (producer_app, consumer_app):
        for c in topology.clusters:
            if app is not None and c.role is Role.PASSIVE:
                own_login(estate, app.name, c.name, {})  # a secret the stack lacks: refused before anything
    producer_conf = start_config(estate, state, producer_app, A, a_bootstrap)
    producer_conf.pop("group.id", None)  # a producer property only in name: librdkafka warns of it
    source = ConfigSource(state, producer_app.name, clusters, estate)
    producer = ProducerLoop(producer_conf, A, topic, rate, source, key_prefix)
    consumer = None
    if consumer_app is not None:
        consumer = ConsumerLoop(
            start_config(estate, state, consumer_app, A, a_bootstrap),
            A,
            topic,
            ConfigSource(state, consumer_app.name, clusters, estate),
        )
    traffic = Traffic(
        producer,
        consumer,
        SnapshotLoop(estate.endpoint(A), state, A, [t.name for t in topology.topics]),
        producer_app,
        consumer_app,
    )
    for t in traffic.threads():
        t.start()
    return traffic


def consumer_report(
    consumer: ConsumerLoop,
    group: str,
    source: str,
    target: str,
    on_target: Counter[str],
    key_prefix: str,
    *,
    stop: bool = True,
) -> ConsumerReport:
    """Wait until the group has seen every record of this cycle on the target; count re-reads and skips.
    The consumer stops then, unless ``stop`` is False (a later phase of the drill still watches it)."""
    everything = {k for k in on_target if k.startswith(key_prefix)}
    wait_until(lambda: everything <= set(consumer.read_on(source)) | set(consumer.read_on(target)), 60, interval=0.5)
    if stop:
        consumer.stop()
    on_a, on_b = consumer.read_on(source), consumer.read_on(target)
    seen_on_a = set(on_a)
    return ConsumerReport(
        group=group,
        read_on_source=len(on_a),
        read_on_target=len(on_b),
        read_twice=sum(1 for k in on_b if k in seen_on_a),
        skipped=len(everything - seen_on_a - set(on_b)),
        records_on_target=len(everything),
    )
