"""A link that runs as MirrorMaker 2 connectors on a Kafka Connect cluster, seen from the failover.

It offers what the failover and ``drctl status`` use of a dedicated MirrorMaker 2 process
(:class:`dr.runtime.mirrormaker.MirrorMaker`): ``alive``, a graceful ``stop`` and an immediate
``kill`` — here through the Connect REST API, on the link's three connectors
(``<link>-source``, ``<link>-checkpoint``, ``<link>-heartbeat``, the names
:func:`stacks.links.connect_config.connector_configs` gives them). Stopping keeps the connectors' configs
(``PUT /connectors/<name>/stop``); removing them is the stack's (``pulumi up`` of the topology
without the link).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Required, TypedDict

from dr.base.errors import ClusterError, ConfigError
from dr.kafka.client import Endpoint, until_leaders_settle
from dr.kafka.connect_rest import ConnectRest, root_cause
from dr.kafka.copied import next_to_copy
from dr.kafka.offsets import Offsets, partition_lag
from dr.runtime.link_watchdog import Restart
from dr.runtime.process import wait_until

__all__ = [
    "CONNECTOR_KINDS",
    "ConnectLink",
    "ConnectorState",
    "TaskState",
    "connector_names",
    "needs_tasks",
    "runs",
    "wait_running",
]


class TaskState(TypedDict):
    """One task of a connector, as :meth:`ConnectLink.states` reports it."""

    id: int
    state: str
    worker: str | None
    error: str | None


class ConnectorState(TypedDict, total=False):
    """One connector, as :meth:`ConnectLink.states` reports it (``ABSENT``: only ``state`` and ``tasks``)."""

    state: Required[str]
    worker: str | None
    error: str | None
    tasks: Required[list[TaskState]]


CONNECTOR_KINDS = ("source", "checkpoint", "heartbeat")
"""Stopped in this order: the source first, so the checkpoints still emitted cover its last records."""


def connector_names(link_name: str) -> list[str]:
    """The connectors of a link, in stop order."""
    return [f"{link_name}-{kind}" for kind in CONNECTOR_KINDS]


def needs_tasks(connector: str) -> bool:
    """False for a checkpoint connector, which has no task while the source has no consumer group to
    checkpoint; the source (topics exist before it) and heartbeat connectors always have tasks."""
    return not connector.endswith("-checkpoint")


def wait_running(rest: ConnectRest, connector: str, timeout: float) -> dict[str, Any]:
    """Wait until ``connector`` runs — with at least one task unless :func:`needs_tasks` says it may
    have none; return its status."""
    if needs_tasks(connector):
        return rest.wait_running(connector, timeout=timeout)
    return rest.wait_state(connector, "RUNNING", timeout=timeout)


def runs(connector: str, state: ConnectorState) -> bool:
    """True when a connector's state (as :meth:`ConnectLink.states` gives it) and all its tasks run."""
    tasks = state.get("tasks") or []
    return (
        state.get("state") == "RUNNING"
        and all(t.get("state") == "RUNNING" for t in tasks)
        and (bool(tasks) or not needs_tasks(connector))
    )


def _cause(trace: object) -> str | None:
    """One line for a Connect trace: its root cause, else its first line (traces carry no secret: the
    connectors' passwords are config-provider references)."""
    if not isinstance(trace, str) or not trace.strip():
        return None
    return root_cause(trace) or trace.strip().splitlines()[0]


class ConnectLink:
    """The connectors of one link on one Connect cluster (``rest``)."""

    def __init__(
        self,
        rest: ConnectRest,
        link_name: str,
        connect_name: str,
        ends: Callable[[], tuple[Endpoint, Endpoint]] | None = None,
    ) -> None:
        self.rest = rest
        self.name = link_name
        self.connect_name = connect_name
        self.connectors = connector_names(link_name)
        self._ends = ends

    def __repr__(self) -> str:
        return f"ConnectLink({self.name!r} on Connect cluster {self.connect_name!r})"

    def states(self) -> dict[str, ConnectorState]:
        """Per connector: ``state`` (``ABSENT`` when not on the Connect cluster), its ``error`` and its tasks
        (``id``, ``state``, ``worker``, ``error``); an error is the root cause of the trace Connect reports
        for a failed connector or task (one line, None when there is none)."""
        out: dict[str, ConnectorState] = {}
        for name in self.connectors:
            status = self.rest.status(name)
            if status is None:
                out[name] = {"state": "ABSENT", "tasks": []}
                continue
            out[name] = {
                "state": status["connector"]["state"],
                "worker": status["connector"].get("worker_id"),
                "error": _cause(status["connector"].get("trace")),
                "tasks": [
                    {
                        "id": t.get("id"),
                        "state": t.get("state"),
                        "worker": t.get("worker_id"),
                        "error": _cause(t.get("trace")),
                    }
                    for t in status.get("tasks", [])
                ],
            }
        return out

    def alive(self) -> bool:
        """True when the three connectors and all their tasks run (False when Connect is unreachable)."""
        try:
            states = self.states()
        except ClusterError:
            return False
        return all(runs(name, s) for name, s in states.items())

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the connectors (configs kept, tasks shut down, their source offsets committed) and wait
        until Connect reports them ``STOPPED``; a connector already absent counts as stopped."""
        deadline = time.monotonic() + timeout
        for name in self.connectors:
            if self.rest.status(name) is None:
                continue
            self.rest.stop(name)
            self.rest.wait_state(name, "STOPPED", timeout=max(1.0, deadline - time.monotonic()))

    def kill(self) -> None:
        """Ask Connect to stop the connectors without waiting (the source is gone: nothing is left to copy)."""
        for name in self.connectors:
            try:
                if self.rest.status(name) is not None:
                    self.rest.stop(name)
            except ClusterError:
                continue

    def copied(self) -> Offsets:
        """Per source ``(topic, partition)``, the next offset the source connector will copy: the offsets
        it stored with its last committed copies (KIP-875's offsets API; :mod:`dr.kafka.copied`)."""
        stored = self.rest.offsets(f"{self.name}-source")
        return next_to_copy((o.get("partition"), o.get("offset")) for o in stored)

    def resume(self, timeout: float = 60.0) -> None:
        """Resume stopped connectors, restart failed ones and failed tasks (Connect restarts none by
        itself), and wait until they run."""
        for name in self.connectors:
            self.rest.resume(name)
            status = self.rest.status(name) or {}
            tasks = status.get("tasks") or []
            if (status.get("connector") or {}).get("state") == "FAILED" or any(
                t.get("state") == "FAILED" for t in tasks
            ):
                self.rest.restart(name, include_tasks=True, only_failed=True)
        for name in self.connectors:
            wait_running(self.rest, name, timeout)

    def resuming(self) -> str:
        """What :meth:`resume` does, for a progress line."""
        return f"resuming its connectors on Connect cluster {self.connect_name}"

    def log_hint(self) -> None:
        """None: a link on Connect is read through its connector states (``drctl status``), not a log here."""
        return None

    def failure(self) -> str | None:
        """The first failed connector's or task's root cause, or None (Connect unreachable: its problem)."""
        try:
            states = self.states()
        except ClusterError as exc:
            return exc.problem
        for name, s in states.items():
            if s.get("error"):
                return f"{name}: {s['error']}"
            for t in s["tasks"]:
                if t.get("error"):
                    return f"{name} task {t.get('id')}: {t['error']}"
        return None

    def restarts(self) -> list[Restart]:
        """``[]``: the product restarts nothing on a Connect cluster by itself (``drctl link start`` does)."""
        return []

    def lag(self, topics: list[str]) -> Offsets:
        """Per (source topic, partition): source end offset − end offset of the topic of the same name on
        the target (the link's ``ends``)."""
        if self._ends is None:
            raise ConfigError(f"{self!r} was built without its source and target.", "build it with `ends`")
        source, target = self._ends()
        return partition_lag(source, target, topics)

    def wait_caught_up(self, topics: list[str], timeout: float = 120.0) -> float:
        """Wait until every partition's :meth:`lag` is 0; return seconds waited."""
        t0 = time.monotonic()
        caught_up = until_leaders_settle(lambda: all(v == 0 for v in self.lag(topics).values()))
        if not wait_until(caught_up, timeout, interval=0.2):
            raise ClusterError(
                f"link {self.name} did not catch up on {topics} in {timeout:.0f}s (lag {self.lag(topics)}).",
                f"read its connector states: GET /connectors/<name>/status on Connect cluster {self.connect_name}",
            )
        return time.monotonic() - t0
