"""Free port windows for the integration tests, reserved against every other test run on this machine.

A window is ``size`` consecutive ports in ``[20000, 32000)``: below Linux's ephemeral range (32768+), so no
client socket can be holding one. Ports are taken in blocks of :data:`BLOCK` (one local cluster's
``PORT_WINDOW``) aligned on 20000; a window takes as many blocks as it needs. A block is taken when

* an exclusive ``fcntl.flock`` on ``<tmp>/kdr-test-ports/<block start>.lock`` succeeds — a port free now
  can be taken by a concurrent suite a second later; the lock makes that suite skip it. The lock is held
  until :func:`release_window` (the :func:`windows` context manager calls it) or until the process ends:
  the kernel drops it even after SIGKILL, so a crashed run leaves nothing to clean up. The file holds
  the pid of its holder, for whoever wonders; and
* every port of the window can be bound on 127.0.0.1 right now (:func:`dr.runtime.process.port_free`,
  the product's own check).

Ranges other code uses at fixed ports are never handed out (:data:`RESERVED`); the environment variable
``KDR_TEST_PORTS_RESERVED`` replaces that list: inclusive ranges, comma-separated (``"30400-31499,22500-22999"``;
empty for none).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from dr.runtime.process import port_free
from dr.topology import PORT_WINDOW

__all__ = ["BLOCK", "HIGH", "LOW", "RESERVED", "free_window", "release_window", "reserved_ranges", "windows"]

LOW, HIGH = 20000, 32000
"""The ports handed out: ``[LOW, HIGH)``, below the ephemeral range."""

BLOCK = PORT_WINDOW
"""The unit of reservation: one lock file per block of this many ports."""

RESERVED: tuple[range, ...] = (
    range(22500, 23000),  # benchmarks/verify_bench.py (--base-port 22500, A + 3 targets)
    range(23100, 23400),  # benchmarks/foundation_bench.py
    range(24500, 25000),  # benchmarks/connect_bench.py (A + 4 targets, Connect at +50)
    range(25000, 25300),  # benchmarks/scale_bench.py (A, B, C at +0/+100/+200)
    range(29100, 29400),  # benchmarks/pulumi_bench.py: the stack
    range(29600, 29800),  # benchmarks/pulumi_bench.py: the runtime baseline
    range(30100, 30400),  # benchmarks/pulumi_bench.py: the drill
    range(30400, 30600),  # benchmarks/verify_bench.py --base-port 30400 --port-step 50 (A + 3 targets)
)
"""Ranges used at fixed ports (benchmarks, tests not converted yet): never handed out."""

LOCK_DIR = Path(tempfile.gettempdir()) / "kdr-test-ports"

_held: dict[int, list[int]] = {}  # window start -> file descriptors holding its blocks' locks
_mutex = threading.Lock()


def reserved_ranges() -> tuple[range, ...]:
    """:data:`RESERVED`, or the ranges ``KDR_TEST_PORTS_RESERVED`` names instead."""
    text = os.environ.get("KDR_TEST_PORTS_RESERVED")
    if text is None:
        return RESERVED
    ranges = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        ranges.append(range(int(first), int(last or first) + 1))
    return tuple(ranges)


def free_window(
    size: int = PORT_WINDOW,
    *,
    low: int = LOW,
    high: int = HIGH,
    reserved: Sequence[range] | None = None,
    lock_dir: Path | None = None,
) -> int:
    """The first port of ``size`` consecutive ports free now and reserved for this process until
    :func:`release_window` or its end. Raises ``RuntimeError`` when no window is left."""
    if not 1 <= size <= high - low:
        raise ValueError(f"a window of {size} ports does not fit in [{low}, {high})")
    reserved = reserved_ranges() if reserved is None else tuple(reserved)
    lock_dir = LOCK_DIR if lock_dir is None else lock_dir
    lock_dir.mkdir(parents=True, exist_ok=True)
    span = -(-size // BLOCK) * BLOCK
    with _mutex:
        for start in range(low, high - span + 1, BLOCK):
            if any(start < r.stop and r.start < start + span for r in reserved):
                continue
            fds = _lock_blocks(lock_dir, range(start, start + span, BLOCK))
            if fds is None:
                continue
            if all(port_free(port) for port in range(start, start + size)):
                _held[start] = fds
                return start
            _close(fds)
    raise RuntimeError(
        f"no free window of {size} ports in [{low}, {high}) outside {list(reserved)}: "
        f"other test runs hold the locks in {lock_dir}, or the ports are in use"
    )


def release_window(start: int) -> None:
    """Give back the window :func:`free_window` returned (its ports are no longer reserved)."""
    with _mutex:
        _close(_held.pop(start, []))


@contextmanager
def windows(count: int, size: int = PORT_WINDOW) -> Iterator[tuple[int, ...]]:
    """``count`` windows of ``size`` ports (e.g. A, B and C of a stack), released at the end."""
    starts: list[int] = []
    try:
        for _ in range(count):
            starts.append(free_window(size))
        yield tuple(starts)
    finally:
        for start in starts:
            release_window(start)


def _lock_blocks(lock_dir: Path, blocks: range) -> list[int] | None:
    """Lock every block's file (non-blocking); None, with nothing locked, when one is held elsewhere."""
    fds: list[int] = []
    for block in blocks:
        fd = os.open(lock_dir / f"{block}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process, or by another descriptor of this one
            os.close(fd)
            _close(fds)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        fds.append(fd)
    return fds


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)  # closing the last descriptor of the open file drops its flock
