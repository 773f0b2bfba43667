"""Dynamic providers end with the engine that started them.

The engine runs ``pulumi-resource-pulumi-python`` in a process group of its own and never closes
the pipe it gave the plugin as stdin; when the engine dies (``drctl`` SIGKILLed in the middle of
``pulumi up``), that pipe reaches end-of-file. :func:`die_with_engine` watches for it in a daemon
thread of the provider process and exits then — otherwise the provider, and the zombies of the
JVMs it started and saw stop, would outlive the run. What the provider started (brokers,
MirrorMaker 2, Connect workers) runs in sessions of its own and is not affected.
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["die_with_engine", "in_provider_process"]

_started = threading.Event()


def in_provider_process() -> bool:
    """True inside ``python -m pulumi.dynamic`` (the dynamic provider), not in a program or a test."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", "") in ("pulumi.dynamic.__main__", "pulumi.dynamic")


def _watch() -> None:
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(0)  # the engine is gone: nobody will ever call this provider again


def die_with_engine() -> None:
    """In the dynamic provider process, start (once) the thread that exits when the engine's pipe closes."""
    if _started.is_set() or not in_provider_process():
        return
    _started.set()
    threading.Thread(target=_watch, name="kdr-engine-watch", daemon=True).start()
