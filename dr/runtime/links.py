"""What runs a replication link on this machine, as one protocol: :class:`LinkRunner`.

Two runners implement it: a dedicated MirrorMaker 2 process (:class:`dr.runtime.mirrormaker.MirrorMaker`)
and a link's connectors on a Kafka Connect cluster (:class:`dr.runtime.connect_link.ConnectLink`). Code
above this layer reaches a runner only through the estate (``Estate.link_runner``), whose placement table
(``stacks.links.LINK_RUNNERS``) builds it with :func:`dedicated_runner` or :func:`connect_runner`; it never
names, nor tests the type of, either class.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dr.kafka.client import Endpoint
from dr.kafka.connect_rest import ConnectRest
from dr.kafka.offsets import Offsets
from dr.runtime.cluster import LocalCluster
from dr.runtime.connect_link import ConnectLink, ConnectorState
from dr.runtime.link_watchdog import Restart
from dr.runtime.mirrormaker import DEFAULT_POLICY, IDENTITY_POLICY, MirrorMaker

__all__ = ["ConnectorState", "LinkRunner", "Restart", "connect_runner", "dedicated_runner"]


class LinkRunner(Protocol):
    """What the failover, ``drctl status``, ``drctl link`` and the stack do with a link's runner."""

    @property
    def name(self) -> str:
        """The link's runner name (a dedicated process: ``<source>-to-<target>``; on Connect: the link)."""
        ...

    def alive(self) -> bool:
        """True while the link copies (its process runs, or its connectors and their tasks all run)."""
        ...

    def stop(self, timeout: float = ...) -> None:
        """Stop gracefully, positions kept on the target; wait until stopped."""
        ...

    def kill(self) -> None:
        """Stop at once, without waiting (the source is gone: nothing is left to copy)."""
        ...

    def resume(self) -> None:
        """Run again from the positions reached (its user and ACLs are the stack's); wait until it runs."""
        ...

    def resuming(self) -> str:
        """What :meth:`resume` does, for a progress line."""
        ...

    def lag(self, topics: list[str]) -> Offsets:
        """Per source ``(topic, partition)`` of ``topics``: how many records are not yet copied."""
        ...

    def wait_caught_up(self, topics: list[str], timeout: float = ...) -> float:
        """Wait until every partition of ``topics`` has lag 0; return seconds waited."""
        ...

    def copied(self) -> Offsets:
        """Per source ``(topic, partition)``, the next offset the link will copy (its stored positions)."""
        ...

    def states(self) -> dict[str, ConnectorState]:
        """Per connector its state and tasks (``{}`` for a dedicated process, which has no connectors to show)."""
        ...

    def log_hint(self) -> str | None:
        """Where to read why it misbehaves (its log), or None when its state is read elsewhere."""
        ...

    def failure(self) -> str | None:
        """Why the link does not copy although it was started (a dead task, a failed connector), or None."""
        ...

    def restarts(self) -> list[Restart]:
        """The restarts the product made on its own after a task died (a dedicated process's watchdog)."""
        ...


def dedicated_runner(
    source: LocalCluster,
    target: LocalCluster,
    state_dir: Path,
    *,
    topics: str,
    groups: str,
    intervals: dict[str, int] | None,
    prefixed: bool,
    exactly_once: bool,
    grant: bool = True,
) -> LinkRunner:
    """A dedicated MirrorMaker 2 process between two local clusters; ``prefixed`` names the copies
    ``<source>.<topic>`` (else identity naming); ``grant=False`` when the stack declares its user and ACLs."""
    return MirrorMaker(
        source,
        target,
        state_dir,
        topics=topics,
        groups=groups,
        intervals=intervals,
        grant=grant,
        replication_policy=DEFAULT_POLICY if prefixed else IDENTITY_POLICY,
        exactly_once=exactly_once,
    )


def connect_runner(
    rest: ConnectRest, link_name: str, connect_name: str, ends: Callable[[], tuple[Endpoint, Endpoint]]
) -> LinkRunner:
    """The connectors of link ``link_name`` on Connect cluster ``connect_name``; ``ends`` gives the link's
    source and target endpoints when its lag is read (not before: an external one may need a secret)."""
    return ConnectLink(rest, link_name, connect_name, ends)
