"""The drill's unmodified clients (issue 31): a producer and a consumer that know only the client
endpoint's address, started once before the first cycle and never restarted or reconfigured.

The drill's other applications move when the failover publishes their new client configuration
(:mod:`dr.failover.drill.traffic`); these never read it. They move because the failover switches the
endpoint under them, and what they lived is graded beside the published-configuration RTO as the
"unmodified client RTO": the last acknowledgement (or record read) through the endpoint before its
switch → the first after it, the acknowledged records lost, the records skipped and read twice.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from dr.estate.estate import Estate
from dr.failover.drill.result import EndpointClientsReport
from dr.failover.record.metrics import seconds_between
from dr.kafka.client import SILENT, Endpoint
from dr.runtime.process import wait_until
from dr.topology import Application
from dr.topology.oauth_login import uses_oauth

__all__ = ["KEY_PREFIX", "EndpointClients", "endpoint_login", "endpoint_report", "start_endpoint_clients"]

KEY_PREFIX = "endpoint-"
"""The keys the endpoint producer writes (the drill's own producer writes ``drill-c<n>-...``)."""


class _Producer(threading.Thread):
    """confluent-kafka with ``acks=all`` and idempotence, 100 records a second, keeping each ack's time."""

    def __init__(self, endpoint: Endpoint, topic: str) -> None:
        super().__init__(name="drill-endpoint-producer", daemon=True)
        self.endpoint, self.topic = endpoint, topic
        self.acked: dict[str, float] = {}  # key → acknowledged at
        self.fatal: str | None = None
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def acks(self) -> dict[str, float]:
        """A copy of the ledger (it keeps growing while the producer runs)."""
        with self._lock:
            return dict(self.acked)

    def stop(self) -> None:
        """Stop producing and flush."""
        self._stop_event.set()
        self.join(40)

    def run(self) -> None:
        """Produce until stopped (or a fatal error, kept in :attr:`fatal`)."""
        # message.timeout.ms: a record the old cluster no longer takes (fenced, killed) fails after it
        # and is not acknowledged; docs/production/endpoint.md advises a short delivery timeout on the endpoint.
        conf = self.endpoint.config(**{"acks": "all", "enable.idempotence": True, "message.timeout.ms": 20000})
        producer = Producer({**conf, **SILENT})

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                with self._lock:
                    self.acked[msg.key().decode()] = time.time()
            elif err.fatal():
                self.fatal = err.str()

        seq = 0
        while not self._stop_event.is_set() and self.fatal is None:
            key = f"{KEY_PREFIX}{seq:08d}"
            try:
                producer.produce(self.topic, key=key, value=key, on_delivery=report)
                seq += 1
            except (BufferError, KafkaException):  # queue full, or refused at once (A fenced): not acknowledged
                pass
            producer.poll(0.01)
        producer.flush(25)


class _Consumer(threading.Thread):
    """confluent-kafka in its own group, subscribed, auto-committing (librdkafka's defaults)."""

    def __init__(self, endpoint: Endpoint, topic: str, group: str) -> None:
        super().__init__(name="drill-endpoint-consumer", daemon=True)
        self.endpoint, self.topic, self.group = endpoint, topic, group
        self.reads: list[tuple[str, float]] = []  # (key, read at), in order
        self._stop_event = threading.Event()

    def stop(self) -> None:
        """Stop consuming and leave the group."""
        self._stop_event.set()
        self.join(40)

    def run(self) -> None:
        """Consume until stopped."""
        conf = self.endpoint.config(**{"group.id": self.group, "auto.offset.reset": "earliest"})
        consumer = Consumer({**conf, **SILENT})
        consumer.subscribe([self.topic])
        try:
            while not self._stop_event.is_set():
                for msg in consumer.consume(500, timeout=0.2):
                    key = msg.key()
                    if msg.error() is None and key is not None:
                        self.reads.append((key.decode(), time.time()))
        finally:
            consumer.close()


@dataclasses.dataclass
class EndpointClients:
    """The producer and the consumer on the endpoint, for the whole drill."""

    bootstrap: str
    producer_app: str
    producer: _Producer
    group: str | None
    consumer: _Consumer | None

    def stop(self) -> None:
        """Stop both (idempotent)."""
        for t in (self.producer, self.consumer):
            if t is not None and t.is_alive():
                t.stop()


def _reader(estate: Estate, topic: str, taken: set[str]) -> Application | None:
    """An application with a consumer group that reads ``topic`` and that the drill's published-config
    consumer does not use (``taken``): the endpoint consumer's principal and group."""
    t = estate.topology
    return next(
        (
            a
            for a in t.principals.applications
            if a.consumer_group and topic in t.consumed_by(a) and a.name not in taken
        ),
        None,
    )


def start_endpoint_clients(
    estate: Estate, source: str, topic: str, producer_app: str, taken: set[str]
) -> EndpointClients | None:
    """Start the endpoint's producer (as ``producer_app``, into ``topic``) and consumer (as the first other
    application that reads ``topic`` with a group); None when the stack declares no endpoint."""
    declared = estate.topology.endpoint
    if declared is None:
        return None
    producer = _Producer(endpoint_login(estate, source, producer_app, declared.bootstrap), topic)
    reader = _reader(estate, topic, taken)
    consumer = None
    if reader is not None and reader.consumer_group:
        consumer = _Consumer(
            endpoint_login(estate, source, reader.name, declared.bootstrap), topic, reader.consumer_group
        )
    clients = EndpointClients(
        declared.bootstrap, producer_app, producer, reader.consumer_group if reader else None, consumer
    )
    for t in (producer, consumer):
        if t is not None:
            t.start()
    return clients


def endpoint_login(estate: Estate, source: str, app: str, bootstrap: str) -> Endpoint:
    """``app``'s login through the endpoint's address ``bootstrap``: the security settings (SASL, TLS) of
    cluster ``source`` with ``app``'s password — over OAUTHBEARER its own client id and the secret the stack
    holds for it (never the admin's client)."""
    if uses_oauth(estate.topology.cluster(source)):
        return dataclasses.replace(estate.endpoint(source, app), bootstrap=bootstrap)
    on = dataclasses.replace(estate.endpoint(source), bootstrap=bootstrap)
    return on.with_user(app, estate.app_password(app))


def endpoint_report(
    clients: EndpointClients,
    switched_at: float | None,
    target: str,
    on_target: Counter[str],
    since: float,
    until: float,
) -> EndpointClientsReport:
    """What the endpoint's clients lived through this cycle's switch at ``switched_at`` (epoch seconds):
    the records acknowledged from ``since`` (when the cycle began: earlier ones belong to earlier cycles)
    to ``until`` (when ``on_target``, what ``target`` holds, began to be read) must all be there; waits
    (up to 60 s) until the consumer has read each of them, then counts."""
    acks = {k: t for k, t in clients.producer.acks().items() if since <= t <= until}
    on = {k for k in on_target if k.startswith(KEY_PREFIX)}
    lost = sorted(k for k in acks if k not in on)
    before = [t for t in acks.values() if switched_at is not None and t <= switched_at]
    after = [t for t in acks.values() if switched_at is not None and t > switched_at]
    report = EndpointClientsReport(
        bootstrap=clients.bootstrap,
        target=target,
        switched_at=switched_at,
        producer=clients.producer_app,
        acked_before_switch=len(before),
        acked_after_switch=len(after),
        acknowledged_lost=len(lost),
        lost_sample=lost[:5],
        producer_fatal=clients.producer.fatal,
        writes_rto_s=seconds_between(max(before, default=None), min(after, default=None)),
        first_write_after_switch_at=min(after, default=None),
    )
    consumer = clients.consumer
    if consumer is None:
        return report
    expected = {k for k in acks if k in on}  # what it must read: acknowledged this cycle and on the target
    wait_until(lambda: expected <= {k for k, _t in consumer.reads}, 60, interval=0.5)
    reads = [(k, t) for k, t in list(consumer.reads) if k.startswith(KEY_PREFIX)]
    seen = Counter(k for k, _t in reads)
    cycle_reads = [(k, t) for k, t in reads if t >= since]
    last = max((t for _k, t in cycle_reads if switched_at is not None and t <= switched_at), default=None)
    first = min((t for _k, t in cycle_reads if switched_at is not None and t > switched_at), default=None)
    report.group = clients.group
    report.read = len(cycle_reads)
    report.read_twice = sum(n - 1 for k, n in seen.items() if k in expected)
    report.skipped = len(expected - set(seen))
    report.reads_rto_s = seconds_between(last, first)
    return report
