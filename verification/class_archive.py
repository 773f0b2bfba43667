"""A class-data-sharing archive of the Spark driver: verification starts about 2 s sooner.

A fresh driver JVM spends most of its start-up loading and verifying some ten thousand classes
(Spark, Scala, Hadoop, Kafka clients). Java's dynamic CDS writes those classes, already parsed
and verified, to an archive the next JVM maps instead (``-XX:SharedArchiveFile``). Measured here:
session start 4.5 → 2.9 s, first query answered 6.7 → 4.2 s.

``make setup`` builds the archive once per toolchain (``python -m verification.class_archive``): a
small verification of two Parquet archives (:mod:`verification.class_archive_workload`, a child
process) runs in a driver started with ``-XX:ArchiveClassesAtExit``; the JVM writes the archive as
it exits. This module imports neither the session nor the job: the session asks it for its options. The archive is keyed by the
Java binary, pyspark's version and the Kafka connector jars, and lives in the cache
(``$KDR_HOME/spark-cds``), never in the clone, next to a stamp holding its exact size (written last).
Without a complete archive — or when the JVM finds it does not match — the driver starts the
ordinary way, silently. Should a damaged archive still stop the JVM (a cut-short file is not
refused, mapping it kills the JVM), :func:`verification.session.spark_session` discards the archive,
says so with the next step, and starts Spark without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dr.base.class_data import archive_file, build_archive, java_identity, mapping, report_build, stamp, usable, written
from dr.base.files import private_dir
from dr.base.toolchain import toolchain

__all__ = ["archive_path", "build", "discard", "java_options", "usable"]


def archive_path(jars: list[str]) -> Path:
    """Where the archive for this Java, this pyspark and these connector ``jars`` lives."""
    import pyspark

    # pyspark's own location too: the archive records its jars' paths, and a dependency change that
    # builds a new virtualenv moves them (the JVM then refuses the archive with a warning on stdout).
    where = os.path.realpath(os.path.dirname(pyspark.__file__))
    identity = [*java_identity(), pyspark.__version__, where, *sorted(jars)]
    return archive_file("spark-cds", f"driver-{pyspark.__version__}", identity)


def java_options(jars: list[str]) -> list[str]:
    """Driver JVM options that use the archive when a complete one exists (none otherwise)."""
    path = archive_path(jars)
    return mapping(path, crash_dir(path) / "hs_err_pid%p.log") if usable(path) else []


def crash_dir(archive: Path) -> Path:
    """Where driver JVMs that map ``archive`` write their crash logs: beside it in the product's cache,
    0700 (a crash log holds the JVM's whole command line; never a shared temp directory)."""
    return private_dir(archive.parent / "crash")


def crashed_on_archive(jars: list[str], since: float) -> bool:
    """True when a driver JVM started after ``since`` left a crash log naming this archive (a
    damaged archive kills the JVM with SIGBUS while it maps it)."""
    archive = archive_path(jars)
    path = str(archive)
    for log in crash_dir(archive).glob("hs_err_pid*.log"):
        try:
            if log.stat().st_mtime >= since - 1 and path in log.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def discard(jars: list[str]) -> None:
    """Forget the archive for ``jars`` (the driver could not start with it); setup builds it again."""
    path = archive_path(jars)
    stamp(path).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


def build(force: bool = False) -> Path | None:
    """Build the archive for the current toolchain unless it exists; return its path (None on failure)."""
    path = archive_path([str(p) for p in toolchain().spark_kafka_jars])  # the jars the driver loads
    return build_archive(path, _make, force=force)


def _make(partial: Path) -> str | None:
    """The workload's driver dump in ``partial``, or why there is none."""
    res = subprocess.run(
        [sys.executable, "-m", "verification.class_archive_workload", str(partial)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if res.returncode == 0 and written(partial):
        return None
    tail = "\n".join(res.stderr.strip().splitlines()[-5:])
    return f"class-data archive not built (exit {res.returncode}); Spark starts without it:\n{tail}"


def main(argv: list[str]) -> int:
    """``python -m verification.class_archive [--force]`` builds the archive."""
    return report_build("Spark driver class-data archive", lambda: build(force="--force" in argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
