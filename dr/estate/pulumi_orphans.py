"""Plugin processes a killed Pulumi engine left behind, found and ended.

The engine starts every plugin — the Kafka provider, the Python dynamic provider
``pulumi-resource-pulumi-python`` (a ``sh`` running ``python -m pulumi.dynamic``) — in a process
group of its own (``cmdutil.RegisterProcessGroup``: ``Setpgid``), so that it can kill a plugin
with its children. The same choice means a SIGKILL of ``drctl``'s process group reaches ``drctl``
and the engine but no plugin: they are reparented to init and keep running, nobody calling them.

Two defences: the dynamic providers of :mod:`stacks` end themselves when the engine's pipe on
their stdin closes (:func:`stacks.engine_watch.die_with_engine`), and before each operation
:func:`reap_orphans` ends the plugins of this backend whose engine is gone. A plugin is this
backend's when its environment names the backend (``PULUMI_BACKEND_URL``), and orphaned when no
live ``pulumi`` process is among its ancestors. The clusters and MirrorMaker 2 processes the
providers started run in sessions of their own and are not touched: they are the estate.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from dr.runtime.process import wait_until

__all__ = ["Orphan", "find_orphans", "reap_orphans"]

_PLUGIN_MARKERS = (b"pulumi-resource-", b"pulumi.dynamic", b"pulumi-language-")


@dataclass(frozen=True)
class Orphan:
    """A plugin process whose engine is gone."""

    pid: int
    command: str


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
    try:
        return int(stat.rsplit(") ", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def _is_engine(pid: int) -> bool:
    """A live ``pulumi`` CLI (its argv[0] ends in ``pulumi``), not one of its plugins."""
    argv0 = _read(f"/proc/{pid}/cmdline").split(b"\0", 1)[0]
    return argv0.rsplit(b"/", 1)[-1] == b"pulumi"


def _has_engine_ancestor(pid: int) -> bool:
    seen = 0
    parent = _parent(pid)
    while parent > 1 and seen < 32:
        if _is_engine(parent):
            return True
        parent = _parent(parent)
        seen += 1
    return False


def find_orphans(backend: Path) -> list[Orphan]:
    """Plugin processes of the ``file://`` backend ``backend`` that no live engine owns."""
    marker = f"PULUMI_BACKEND_URL=file://{Path(backend)}".encode()
    me = os.getpid()
    found: list[Orphan] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        cmdline = _read(f"/proc/{pid}/cmdline")
        if not any(m in cmdline for m in _PLUGIN_MARKERS) or _is_engine(pid):
            continue
        if marker not in _read(f"/proc/{pid}/environ").split(b"\0"):
            continue
        if _has_engine_ancestor(pid):
            continue
        found.append(Orphan(pid, cmdline.replace(b"\0", b" ").decode(errors="replace").strip()[:200]))
    return found


def reap_orphans(backend: Path) -> list[Orphan]:
    """SIGKILL every orphaned plugin of ``backend`` (with its process group when it leads one); return them."""
    orphans = find_orphans(backend)
    own_group = os.getpgid(0)
    for orphan in orphans:
        try:
            group = os.getpgid(orphan.pid)
            if group == orphan.pid and group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(orphan.pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    from dr.runtime.process import pid_alive

    wait_until(lambda: not any(pid_alive(o.pid) for o in orphans), 10)
    return orphans
