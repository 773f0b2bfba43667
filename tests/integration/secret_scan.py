"""Where a secret could be read by someone it was not meant for: every process's command line (sampled
while something runs), every file under a directory, every record of every topic of a cluster (issue 32).

The scans return findings (where, never the secret itself), so a failing assertion prints no password.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from confluent_kafka import Consumer, TopicPartition

from dr.kafka.client import Endpoint
from dr.kafka.offsets import end_offsets


class CommandLines:
    """Samples the command line of every process on the machine every ``interval`` seconds in a background
    thread (``with CommandLines() as seen: ...``); :meth:`holding` tells which sampled ones hold a secret.

    Reading ``/proc/<pid>/cmdline`` is what ``ps -eo args`` does, without a process per sample."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.seen: set[bytes] = set()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kdr-cmdline-sampler", daemon=True)

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                            self.seen.add(f.read())
                    except OSError:
                        continue
            self.samples += 1
            self._stop.wait(self.interval)

    def holding(self, secrets: dict[str, str]) -> list[str]:
        """``<secret's name> in: <the command's first words>`` for every sampled command line holding a secret."""
        found = []
        for cmdline in self.seen:
            for name, value in secrets.items():
                if value.encode() in cmdline:
                    words = cmdline.replace(value.encode(), b"***").split(b"\0")
                    found.append(f"{name} in: {b' '.join(w for w in words if not w.startswith(b'-'))[:300]!r}")
        return found


def files_holding(root: Path, secrets: dict[str, str]) -> dict[Path, list[str]]:
    """Every file under ``root`` holding one of ``secrets`` → the names of the secrets it holds."""
    found: dict[Path, list[str]] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                data = path.read_bytes()
            except OSError:  # a socket, a file gone meanwhile
                continue
            held = [n for n, value in secrets.items() if value.encode() in data]
            if held:
                found[path] = held
    return found


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return path.stat().st_mode & 0o777


def open_to_others(root: Path, paths: Iterable[Path]) -> list[str]:
    """Each of ``paths`` (under ``root``) that is not 0600, or that no directory between it and ``root``
    (both included) closes to other users: what is wrong with it."""
    bad = []
    for path in paths:
        if mode(path) != 0o600:
            bad.append(f"{path} mode {oct(mode(path))}")
        dirs = [d for d in path.parents if d == root or root in d.parents]
        if not any(mode(d) & 0o077 == 0 for d in dirs):
            bad.append(f"{path}: no directory between it and {root} is closed to other users")
    return bad


def topics_holding(endpoint: Endpoint, secrets: dict[str, str], timeout: float = 60) -> dict[str, list[str]]:
    """Every topic of the cluster (read as its admin) whose records hold one of ``secrets`` → the names
    of the secrets it holds."""
    from confluent_kafka.admin import AdminClient

    topics = sorted(AdminClient(endpoint.config()).list_topics(timeout=15).topics)
    found: dict[str, set[str]] = {}
    for topic, blob in records(endpoint, topics, timeout):
        for name, value in secrets.items():
            if value.encode() in blob:
                found.setdefault(topic, set()).add(name)
    return {t: sorted(names) for t, names in found.items()}


def records(endpoint: Endpoint, topics: list[str], timeout: float = 60) -> list[tuple[str, bytes]]:
    """Every record of ``topics`` from offset 0 to the end (uncommitted ones included) as (topic, key,
    value and headers joined by NULs), read as ``endpoint``'s principal with a real consumer."""
    ends = {tp: n for tp, n in end_offsets(endpoint, topics).items() if n > 0}
    if not ends:
        return []
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"kdr-secret-scan-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
                "auto.offset.reset": "earliest",
            }
        )
    )
    out: list[tuple[str, bytes]] = []
    try:
        consumer.assign([TopicPartition(t, p, 0) for (t, p) in ends])
        left = dict(ends)
        deadline = _deadline(timeout)
        while left and not deadline():
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                blob = (msg.key() or b"") + b"\0" + (msg.value() or b"")
                blob += b"".join(k.encode() + b"\0" + (v or b"") for k, v in msg.headers() or [])
                out.append((msg.topic(), blob))
            # positions, not record offsets: a transaction's commit marker may be a partition's last offset
            for tp in consumer.position([TopicPartition(t, p) for (t, p) in left]):
                if tp.offset >= left[(tp.topic, tp.partition)]:
                    del left[(tp.topic, tp.partition)]
        if left:
            raise AssertionError(f"could not read these partitions to their end in {timeout:.0f}s: {sorted(left)}")
    finally:
        consumer.close()
    return out


def _deadline(seconds: float) -> Callable[[], bool]:
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end
