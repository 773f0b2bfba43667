"""``drctl status``'s report for the controller, read in a thread of its own.

A pass must not wait on the report: a cluster that dies while the report reads it keeps the admin calls
waiting for their timeouts (about 20 s), and during that wait the pass's probes — what detects the loss —
do not run (seen in the unattended drill: a 21.8 s pass, the loss seen 26 s late). The pass asks for a
report, waits at most one interval, and goes on with the last report when the new one is late; the reader
never runs two reads at once, and a report that came back late is what the next pass takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dr.base.errors import DRError
from dr.failover.status import StatusReport
from dr.kafka.client import reused_admin_clients
from dr.topology import Topology

__all__ = ["StatusReader"]

Read = Callable[[dict[str, str], Topology | None], StatusReport]
"""``(unreachable, topology) → report``: :func:`dr.failover.status.status_report` for one stack."""


class StatusReader:
    """One read of the report at a time, in a daemon thread that keeps one admin client per cluster
    (:func:`~dr.kafka.client.reused_admin_clients`)."""

    def __init__(self, read: Read) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._asked: tuple[dict[str, str], Topology | None] | None = None
        self._result: StatusReport | DRError | None = None
        self._busy = False
        self._wake = threading.Event()
        self._done = threading.Event()
        threading.Thread(target=self._run, name="kdr-controller-status", daemon=True).start()

    def report(
        self, unreachable: dict[str, str], topology: Topology | None, wait_s: float
    ) -> StatusReport | DRError | None:
        """The report (or the product's error reading it) — a new read of ``unreachable`` and ``topology``
        started unless one is under way or came back unread — when it comes back within ``wait_s``; None when
        it is still being read (the caller goes on with its last report)."""
        with self._lock:
            if not self._busy and self._result is None:
                self._busy, self._asked = True, (dict(unreachable), topology)
                self._wake.set()
        self._done.wait(wait_s)
        with self._lock:
            found, self._result = self._result, None
            if found is not None:
                self._done.clear()
            return found

    @property
    def busy(self) -> bool:
        """A read is under way."""
        with self._lock:
            return self._busy

    def _run(self) -> None:
        with reused_admin_clients():  # the same clusters every read: one client each, not one per read
            while True:
                self._wake.wait()
                self._wake.clear()
                with self._lock:
                    asked = self._asked
                if asked is None:
                    continue
                try:
                    found: StatusReport | DRError = self._read(*asked)
                except DRError as exc:
                    found = exc
                except Exception as exc:  # noqa: BLE001 - a thread of its own: hand the failure to the pass
                    found = DRError(f"drctl status failed: {type(exc).__name__}: {exc}", "see the controller's log")
                with self._lock:
                    self._result, self._busy = found, False
                    self._done.set()
