"""Builds the Kafka JVMs' class-data archive (:mod:`dr.runtime.class_archive`):
``python -m dr.runtime.class_archive_build [--force]``, run by ``make setup``."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dr.base.class_data import build_archive, report_build, written
from dr.base.toolchain import toolchain
from dr.runtime import class_archive
from dr.runtime.class_archive import archive_path
from dr.runtime.process import port_free

__all__ = ["build", "main"]


def _free_base_port(low: int = 32000, high: int = 32700, window: int = 100) -> int:
    """A base port whose window is free, above the tests' port range (20000-32000) and below the ephemeral one."""
    for base in range(low, high - window + 1, window):
        if all(port_free(p) for p in range(base, base + window)):
            return base
    raise RuntimeError(f"no free window of {window} ports in [{low}, {high})")


def _serve(conf: dict[str, Any]) -> None:
    """A topic created, 100 records written and read back; the clients are gone when this returns
    (before the broker stops, so that none of them logs its reconnection attempts)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)  # kept referenced: a collected client fails its futures
    admin.create_topics([NewTopic("warm", 1, 1)])["warm"].result(timeout=60)
    producer = Producer({**conf, "acks": "all"})
    for i in range(100):
        producer.produce("warm", key=str(i), value=b"x")
    producer.flush(60)
    consumer = Consumer({**conf, "group.id": "warm", "auto.offset.reset": "earliest"})
    consumer.subscribe(["warm"])
    read, deadline = 0, time.monotonic() + 60
    while read < 100 and time.monotonic() < deadline:
        read += sum(1 for m in consumer.consume(100, timeout=1) if m.error() is None)
    consumer.close()


def _workload(partial: Path) -> None:
    """A one-broker cluster that starts, serves a topic, a write and a read, and stops: its JVM dumps
    the classes it loaded to ``partial``."""
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    with tempfile.TemporaryDirectory(prefix="kdr-kafka-cds-") as tmp:
        cluster = LocalCluster(ClusterSpec("cds", brokers=1, base_port=_free_base_port()), Path(tmp))
        class_archive._dump_to = partial
        try:
            cluster.start(timeout=180)
            _serve(cluster.endpoint().config())
        finally:
            class_archive._dump_to = None
            cluster.destroy()  # controlled shutdown: the JVM writes the archive as it exits


def build(force: bool = False) -> Path | None:
    """Build the archive for the current toolchain unless it exists; return its path (None on failure)."""
    return build_archive(archive_path(toolchain().kafka_lib), _make, force=force)


def _make(partial: Path) -> str | None:
    """The broker's dump in ``partial``, or why there is none."""
    try:
        _workload(partial)
    except Exception as exc:  # noqa: BLE001 - optional: reported, setup goes on
        return f"Kafka class-data archive not built ({exc}); Kafka starts without it"
    return None if written(partial) else "Kafka class-data archive not written by the broker; Kafka starts without it"


def main(argv: list[str]) -> int:
    """``python -m dr.runtime.class_archive_build [--force]`` builds the archive."""
    return report_build("Kafka class-data archive", lambda: build(force="--force" in argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
