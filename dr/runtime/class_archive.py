"""A class-data-sharing archive of the Kafka JVMs: every broker, controller and storage format starts sooner.

A fresh Kafka JVM spends much of its start loading and verifying thousands of classes (Kafka, Scala,
the clients). Java's dynamic CDS writes those classes, already parsed and verified, to an archive the
next JVM maps instead (``-XX:SharedArchiveFile``); :func:`dr.runtime.process.java_command` asks
:func:`java_options` for it whenever the classpath is exactly the Kafka jars. MirrorMaker 2 and Kafka
Connect run on other jars and start the ordinary way.

``make setup`` builds the archive once per toolchain (``python -m dr.runtime.class_archive_build``): a
one-broker cluster on free ports outside the tests' range is started with ``-XX:ArchiveClassesAtExit``,
creates a topic, takes a write and serves a read, and stops (controlled shutdown); the JVM writes the
archive as it exits. It is keyed by the Java binary and the Kafka jars, lives in the cache
(``$KDR_HOME/kafka-cds``), never in the clone, next to a stamp holding its exact size (written last).
Without a complete archive — or when the JVM finds it does not match — the JVMs start the ordinary
way, silently: the archive only saves time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dr.base.class_data import QUIET, archive_file, java_identity, mapping, stamp, usable
from dr.base.toolchain import toolchain

__all__ = ["archive_path", "java_options", "stamp", "usable"]

# Set by dr.runtime.class_archive_build alone: the broker it starts writes the archive here as it exits.
_dump_to: Path | None = None


def archive_path(lib: Path) -> Path:
    """Where the archive for this Java and the Kafka jars in ``lib`` lives."""
    jars = [f"{jar.name} {jar.stat().st_size} {int(jar.stat().st_mtime)}" for jar in sorted(lib.glob("*.jar"))]
    return archive_file("kafka-cds", f"kafka-{lib.name}", [*java_identity(), str(lib), *jars])


def java_options(lib_dirs: Sequence[Path], main: str) -> list[str]:
    """JVM options for ``main`` on ``lib_dirs``: the archive when the classpath is the Kafka jars (a broker's
    may append the lease fence's jar) and a complete archive exists; none otherwise."""
    try:
        lib = toolchain().kafka_lib
    except Exception:  # noqa: BLE001 - no toolchain: the caller reports that itself
        return []
    dirs = [Path(d) for d in lib_dirs]
    # a broker with the lease fence appends its jar: the JVM maps an archive whose classpath is a prefix of it
    if not dirs or dirs[0] != lib or (len(dirs) > 1 and (main != "kafka.Kafka" or _dump_to is not None)):
        return []
    if _dump_to is not None:
        return [f"-XX:ArchiveClassesAtExit={_dump_to}", *QUIET] if main == "kafka.Kafka" else []
    path = archive_path(lib)
    # the crash log goes to the process's own directory (java_command's crash_dir), never /tmp: it repeats the command line
    return mapping(path, None) if usable(path) else []
