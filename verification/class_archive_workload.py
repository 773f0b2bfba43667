"""The workload a class-data archive is recorded from (a setup tool: ``make setup`` runs it in a child
process through :func:`verification.class_archive.build`).

``python -m verification.class_archive_workload DEST`` starts a driver with
``-XX:ArchiveClassesAtExit=DEST``, runs a small verification of two differing Parquet archives —
the job's whole code path except the Kafka reader (pass 1, pass 2, classification, report) — and
stops the JVM, which writes the archive as it exits.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verification.archive import write_records
from verification.job import run_verification
from verification.session import spark_session
from verification.sides import ArchiveSide

__all__ = ["dump"]


def _workload(work: Path) -> None:
    """Run a small verification with two differing Parquet archives: the job's whole code path
    except the Kafka reader (pass 1, pass 2, classification, report)."""
    t0 = int(time.time() * 1000) - 60_000
    records: list[dict[str, Any]] = [
        {
            "topic": "warm-up",
            "partition": i % 3,
            "offset": i // 3,
            "timestamp": t0 + i,
            "key": b"k%d" % (i % 50),
            "value": b"v%d" % i,
            "headers": [("h", b"x")] if i % 7 == 0 else None,
        }
        for i in range(600)
    ]
    target = [r for r in records if r["offset"] % 40 != 5]  # missing
    target += [dict(records[10], offset=1000)]  # duplicated
    target += [dict(records[20], value=b"changed", offset=1001)]  # corrupted
    src = write_records(records, work / "source.parquet")
    tgt = write_records(target, work / "target.parquet")
    result = run_verification(
        source=ArchiveSide(path=src), target=ArchiveSide(path=tgt), out_dir=work / "report", windows=16
    )
    if result.clean:
        raise RuntimeError("the warm-up verification found no differences")


def dump(dest: Path) -> None:
    """Run the workload in a driver that writes its classes to ``dest`` on exit."""
    with tempfile.TemporaryDirectory(prefix="kdr-cds-") as tmp:
        spark = spark_session(
            use_archive=False, driver_options=(f"-XX:ArchiveClassesAtExit={dest}", "-Xlog:all=error:stderr")
        )
        _workload(Path(tmp))
        gateway = spark.sparkContext._gateway
        spark.stop()
        proc = getattr(gateway, "proc", None)
        if proc is not None:  # the JVM exits (and dumps) when its stdin closes
            proc.stdin.close()
            proc.wait(timeout=300)


if __name__ == "__main__":
    dump(Path(sys.argv[1]))
