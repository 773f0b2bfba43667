"""Transactions left open on a cluster, and aborting them (issue 35).

An exactly-once link writes its copies in transactions. Stopped gracefully, its tasks' producers abort
what they had open; killed (an unplanned failover, a crashed process), a transaction stays open until
the coordinator's timeout (a minute by default). Until then the partition's *last stable offset* (LSO)
stays at the transaction's first record: consumers reading committed — every published client
configuration on a passive or promoted cluster — stop there, and the records applications write after
the promotion stay invisible behind it.

:func:`open_transactions` finds them (a partition whose LSO is below its high watermark holds an open
transaction starting at the LSO); :func:`abort_open` aborts each with Kafka's own tool
(``kafka-transactions.sh abort --start-offset``, KIP-664: the partition's producer at that offset is
found and an abort marker written), as the admin.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from confluent_kafka.admin import OffsetSpec

from dr.base.errors import ClusterError
from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint, connected_admin
from dr.kafka.oauth import jvm_allowed_urls
from dr.kafka.offsets import Offsets, list_offsets, partitions_of
from dr.runtime.cluster import write_properties
from dr.runtime.process import java_command

__all__ = ["abort_open", "open_transactions"]

_TOOL = "org.apache.kafka.tools.TransactionsCommand"


def open_transactions(endpoint: Endpoint, topics: list[str], timeout: float = 15.0) -> Offsets:
    """Per partition of ``topics`` holding an open transaction, its last stable offset: the first offset
    of the oldest transaction still open there (partitions without one are left out)."""
    admin, metadata = connected_admin(endpoint, timeout, attempt=2.0)
    specs = {tp: OffsetSpec.latest() for tp in partitions_of(metadata, topics)}
    high = list_offsets(admin, endpoint, specs, timeout)
    stable = list_offsets(admin, endpoint, specs, timeout, committed=True)
    return {tp: stable[tp].offset for tp, info in high.items() if stable[tp].offset < info.offset}


def abort_open(endpoint: Endpoint, opened: Offsets, timeout: float = 60.0) -> None:
    """Abort the transaction starting at ``opened[(topic, partition)]`` on each partition, with Kafka's
    ``TransactionsCommand abort`` (the admin's client configuration in a 0600 file, never on the command
    line). ClusterError naming the partition when the tool fails."""
    tc = toolchain()
    with tempfile.TemporaryDirectory(prefix="kdr-txn-") as tmp:
        config = Path(tmp) / "admin.properties"
        write_properties(config, endpoint.java_config())
        for (topic, partition), start in sorted(opened.items()):
            args = ["--bootstrap-server", endpoint.bootstrap, "--command-config", str(config), "abort"]
            args += ["--topic", topic, "--partition", str(partition), "--start-offset", str(start)]
            jvm = jvm_allowed_urls(endpoint.oauth if endpoint.uses_oauth else None)
            cmd = java_command(tc.java, [tc.kafka_lib], _TOOL, args, heap_mb=256, extra_jvm=jvm, crash_dir=Path(tmp))
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
            if res.returncode != 0:
                out = res.stdout + res.stderr
                if endpoint.password:
                    out = out.replace(endpoint.password, "***")
                raise ClusterError(
                    f"aborting the transaction open on {topic}-{partition} at offset {start} failed:\n{out[-1200:]}",
                    "abort it with kafka-transactions.sh abort --topic/--partition/--start-offset, or wait for "
                    "the transaction timeout, then rerun",
                )
