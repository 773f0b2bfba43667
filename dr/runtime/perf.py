"""kafka-tools' ProducerPerformance and ConsumerPerformance against a cluster: the machine's reference
figures for how fast it can write and read Kafka."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dr.base.errors import ClusterError
from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint
from dr.runtime.cluster import write_properties
from dr.runtime.process import java_command


@dataclass(frozen=True)
class PerfResult:
    """Records and seconds measured by one kafka-tools run."""

    records: int
    seconds: float
    mb_per_s: float

    @property
    def records_per_s(self) -> float:
        """Throughput in records per second."""
        return self.records / self.seconds if self.seconds else 0.0


def _run_tool(main: str, args: list[str], endpoint: Endpoint, timeout: float) -> str:
    tc = toolchain()
    with tempfile.TemporaryDirectory(prefix="kdr-perf-") as tmp:
        config = Path(tmp) / "client.properties"
        write_properties(config, endpoint.java_config())
        cmd = java_command(
            tc.java, [tc.kafka_lib], main, [*args, "--command-config", str(config)], heap_mb=1024, crash_dir=Path(tmp)
        )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = (res.stdout + res.stderr).replace(endpoint.password, "***")
    if res.returncode != 0:
        raise ClusterError(f"{main.rsplit('.', 1)[-1]} failed:\n{out[-1500:]}", "check the cluster and topic")
    return res.stdout


def producer_perf(
    endpoint: Endpoint, topic: str, records: int, record_size: int = 200, acks: str = "all", timeout: float = 900
) -> PerfResult:
    """Write ``records`` records of ``record_size`` bytes as fast as possible."""
    out = _run_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(record_size),
            "--throughput",
            "-1",
            "--bootstrap-server",
            endpoint.bootstrap,
            "--producer-props",
            f"acks={acks}",
            "linger.ms=10",
            "batch.size=262144",
            "compression.type=none",
        ],
        endpoint,
        timeout,
    )
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    rps, mbs = _figure(r"([\d.]+) records/sec", last), _figure(r"\(([\d.]+) MB/sec\)", last)
    return PerfResult(records, records / rps if rps else 0.0, mbs)


def _figure(pattern: str, line: str) -> float:
    match = re.search(pattern, line)
    if match is None:
        raise ClusterError(f"the perf tool printed no figure matching {pattern!r}: {line!r}")
    return float(match.group(1))


def consumer_perf(endpoint: Endpoint, topic: str, records: int, timeout: float = 900) -> PerfResult:
    """Read ``records`` records of ``topic`` from the beginning with a fresh group."""
    t0 = time.monotonic()
    out = _run_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        [
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--bootstrap-server",
            endpoint.bootstrap,
            "--group",
            f"kdr-perf-{int(time.time() * 1000)}",
            "--hide-header",
            "--timeout",
            "60000",
        ],
        endpoint,
        timeout,
    )
    wall = time.monotonic() - t0
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    # fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    row = [line for line in out.splitlines() if line.count(",") >= 9][-1].split(",")
    n = int(row[4].strip())
    fetch_ms = float(row[7].strip())
    seconds = fetch_ms / 1000 if fetch_ms > 0 else wall
    return PerfResult(n, seconds, float(row[8].strip()) if fetch_ms > 0 else float(row[3].strip()))
