"""What the JVMs' class-data-sharing archives have in common (the Spark driver's,
:mod:`verification.class_archive`; the Kafka JVMs', :mod:`dr.runtime.class_archive`).

Each archive lives in the cache (``$KDR_HOME/<kind>/``), never in the clone, named by a digest of
what the JVM checks it against (the Java binary, the jars); a stamp beside it holds its exact size,
written last, because a cut-short archive is not refused by the JVM: mapping it kills the JVM.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dr.base.toolchain import kdr_home

__all__ = [
    "QUIET",
    "archive_file",
    "build_archive",
    "java_identity",
    "mapping",
    "report_build",
    "stamp",
    "usable",
    "written",
]

#: JVM warnings to stderr (stdout may be read), CDS's own notes nowhere.
QUIET = ["-Xlog:all=warning:stderr", "-Xlog:cds*=off:stderr"]


def java_identity() -> list[str]:
    """The ``java`` on PATH as an archive's name depends on it: its real path, size and mtime."""
    java = Path(os.path.realpath(shutil.which("java") or "java"))
    stat = java.stat() if java.exists() else None
    return [str(java), str(stat.st_size if stat else 0), str(int(stat.st_mtime) if stat else 0)]


def archive_file(kind: str, name: str, identity: list[str]) -> Path:
    """``$KDR_HOME/<kind>/<name>-<digest of identity>.jsa``."""
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    return kdr_home() / kind / f"{name}-{digest}.jsa"


def stamp(path: Path) -> Path:
    """The completion stamp of the archive ``path`` (its exact size, written last)."""
    return path.with_name(path.name + ".complete")


def usable(path: Path) -> bool:
    """True when ``path`` is an archive built to the end: its stamp records its exact size."""
    try:
        return int(stamp(path).read_text().strip()) == path.stat().st_size
    except (OSError, ValueError):
        return False


def written(partial: Path) -> bool:
    """True when the JVM wrote a dump to ``partial`` (it writes one only as it exits normally)."""
    return partial.is_file() and partial.stat().st_size > 0


def build_archive(path: Path, make: Callable[[Path], str | None], *, force: bool = False) -> Path | None:
    """Build the archive ``path`` unless a complete one is there; return it (None on failure).

    ``make(partial)`` runs a JVM that dumps its classes to ``partial`` and returns why no archive came
    of it, or None; the dump is then moved to ``path`` and stamped last. A failure is printed (the
    archive is optional: its JVMs start the ordinary way) and leaves nothing behind.
    """
    if usable(path) and not force:
        return path
    stamp(path).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".partial-{os.getpid()}")
    why = make(partial)
    if why is not None:
        partial.unlink(missing_ok=True)
        print(why, file=sys.stderr)
        return None
    os.replace(partial, path)
    stamp(path).write_text(f"{path.stat().st_size}\n")
    return path


def mapping(path: Path, crash_log: Path | None) -> list[str]:
    """The JVM options that map the archive ``path``; a crash log (should it be damaged after all) goes
    to ``crash_log`` (``%p``: the pid; in a directory of the product's own, 0700), not the working
    directory. ``None``: the caller names the crash log itself (the Kafka JVMs keep theirs in their own
    private directory)."""
    where = [] if crash_log is None else [f"-XX:ErrorFile={crash_log}"]
    return [f"-XX:SharedArchiveFile={path}", *QUIET, *where]


def report_build(what: str, build: Callable[[], Path | None]) -> int:
    """Run ``build`` and print the archive it made, its size and the time it took (``make setup``'s line)."""
    t = time.monotonic()
    path = build()
    if path is not None:
        print(f"{what}: {path} ({path.stat().st_size // 2**20} MB, {time.monotonic() - t:.0f}s)")
    return 0
