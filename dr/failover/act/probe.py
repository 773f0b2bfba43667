"""The RTO probe: an application principal that keeps trying to write to the new active cluster.

It starts with the failover and stops at the first acknowledgement (``acks=all``), so
``RTO = first ack - start`` measures exactly what applications experience: the moment the new
cluster accepts their writes. Each attempt uses a fresh producer with a short timeout, so a
refused attempt (no write ACL yet) never lingers in a queue and every acknowledged probe record
carries the time it was created.

The attempts run in a child process (``python -m dr.failover.act.probe``, credentials passed on its
stdin, never on the command line): creating and destroying a librdkafka client every 200 ms in a
thread while the pipeline's own admin clients work in another crashed librdkafka now and then
(a segfault in ``rdk:main``); a separate process keeps the pipeline safe from that.

The probe record is recognisable: key ``__kdr_rto_probe__`` and header ``kdr-probe: rto``.
Consumers of that topic see it once per failover.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from typing import IO, Any

from confluent_kafka import Producer
from pydantic import BaseModel, ConfigDict

from dr.base.errors import InternalError
from dr.kafka.client import PROBE_KEY, SILENT, Endpoint
from dr.kafka.oauth import OAuthSettings
from dr.kafka.tls import TlsFiles

__all__ = [
    "PROBE_HEADER",
    "PROBE_KEY",
    "ProbeResult",
    "WriteProbe",
    "attempt_until_acked",
    "endpoint_from_message",
    "endpoint_message",
]

PROBE_HEADER = ("kdr-probe", b"rto")


class ProbeResult(BaseModel):
    """The first acknowledged probe write."""

    model_config = ConfigDict(frozen=True)

    acked_at: float
    """Wall-clock time (epoch seconds) of the acknowledgement."""
    timestamp_ms: int
    """The record's timestamp (its creation time)."""
    topic: str
    partition: int
    offset: int
    attempts: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return self.model_dump(mode="json")


def _attempt(endpoint: Endpoint, topic: str, value: bytes) -> tuple[ProbeResult | None, str | None]:
    outcome: list[tuple[Any, Any]] = []
    producer = Producer(
        endpoint.config(
            **{
                "acks": "all",
                "enable.idempotence": False,
                "message.timeout.ms": 3000,
                "socket.timeout.ms": 3000,
                "retries": 0,
                **SILENT,
            }
        )
    )
    try:
        producer.produce(
            topic,
            key=PROBE_KEY,
            value=value,
            headers=[PROBE_HEADER],
            on_delivery=lambda err, msg: outcome.append((err, msg)),
        )
    except Exception as exc:  # noqa: BLE001 - refused at once (cached authorization failure, full queue)
        return None, str(exc)
    producer.flush(4)
    if not outcome:
        return None, "no delivery report within 4 s"
    err, msg = outcome[0]
    if err is not None:
        return None, err.str()
    return ProbeResult(
        acked_at=round(time.time(), 3),
        timestamp_ms=msg.timestamp()[1],
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        attempts=0,
    ), None


def attempt_until_acked(
    endpoint: Endpoint,
    topic: str,
    failover_id: str,
    interval: float = 0.2,
    report: Any = None,
    parent: int | None = None,
) -> ProbeResult | None:
    """Try to write one probe record every ``interval`` seconds until it is acknowledged.

    Returns None as soon as the process ``parent`` is gone (a crashed pipeline leaves no probe behind).
    """
    attempts = 0
    while parent is None or os.getppid() == parent:
        attempts += 1
        value = json.dumps({"failover": failover_id, "attempt": attempts}).encode()
        result, error = _attempt(endpoint, topic, value)
        if result is not None:
            return ProbeResult(**{**result.to_dict(), "attempts": attempts})
        if report is not None:
            report(attempts, error)
        time.sleep(interval)
    return None


class WriteProbe:
    """Runs :func:`attempt_until_acked` in a child process; ``acked`` is set when a write was acknowledged."""

    def __init__(self, endpoint: Endpoint, topic: str, *, failover_id: str, interval: float = 0.2) -> None:
        self.endpoint = endpoint
        self.topic = topic
        self.failover_id = failover_id
        self.interval = interval
        self.result: ProbeResult | None = None
        self.last_error: str | None = None
        self.attempts = 0
        self.acked = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start the child process and the thread reading its reports."""
        self._proc = proc = subprocess.Popen(
            [sys.executable, "-m", "dr.failover.act.probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        if proc.stdin is None or proc.stdout is None:
            raise InternalError("the RTO probe process was started without its pipes.", "report this as a bug")
        proc.stdin.write(
            json.dumps(
                {
                    "endpoint": endpoint_message(self.endpoint),
                    "topic": self.topic,
                    "failover_id": self.failover_id,
                    "interval": self.interval,
                    "parent": os.getpid(),
                }
            )
            + "\n"
        )
        proc.stdin.close()
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), name="kdr-rto-probe", daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "acked_at" in msg:
                self.result = ProbeResult(**msg)
                self.attempts = self.result.attempts
                self.acked.set()
            else:
                self.attempts, self.last_error = msg.get("attempts", 0), msg.get("error")

    def stop(self) -> None:
        """Stop trying (the child process is terminated if it still runs)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)


def endpoint_message(endpoint: Endpoint) -> dict[str, Any]:
    """``endpoint`` whole — its TLS files and, on an OAUTHBEARER cluster, its identity provider — as the JSON the
    probe process reads on its stdin (it holds the secret: never printed, never on a command line)."""
    return asdict(endpoint)


def endpoint_from_message(message: dict[str, Any]) -> Endpoint:
    """The :class:`Endpoint` of :func:`endpoint_message`."""
    tls, oauth = message.get("tls"), message.get("oauth")
    return Endpoint(
        **{
            **message,
            "tls": TlsFiles(**tls) if tls else None,
            "oauth": OAuthSettings(**oauth) if oauth else None,
        }
    )


def _main() -> None:
    conf = json.loads(sys.stdin.readline())
    endpoint = endpoint_from_message(conf["endpoint"])

    def report(attempts: int, error: str | None) -> None:
        print(json.dumps({"attempts": attempts, "error": error}), flush=True)

    result = attempt_until_acked(
        endpoint, conf["topic"], conf["failover_id"], conf["interval"], report, parent=conf["parent"]
    )
    if result is not None:
        print(json.dumps(result.to_dict()), flush=True)


if __name__ == "__main__":
    _main()
