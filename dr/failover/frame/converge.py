"""Writing the desired state back to the stack file, and converging reality to it.

The failover changes *desired state* only: :func:`write_stack_config` (from
:mod:`dr.topology.stackfile`) edits the ``kafka-dr:`` values of ``Pulumi.<stack>.yaml`` that differ
from the new topology in place, keeping the user's comments, key order and formatting. A
:class:`Converger` then makes the estate match it.

The converger is :class:`PulumiConverger`: ``pulumi up`` of the stack through the Automation API
(:class:`dr.estate.stack.EstateStack`, the same program ``pulumi up`` runs from the repository root), then
a wait until every local link has copied what its source held. The :class:`Converger` protocol lets
a test or another backend stand in without touching the pipeline.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dr.base.errors import ClusterError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.record.metrics import Offsets, encode_offsets, lag
from dr.kafka.client import Endpoint, until_leaders_settle
from dr.kafka.copied import uncopied
from dr.kafka.offsets import end_offsets
from dr.runtime.process import wait_until
from dr.topology import Topology, dump_stack_config, load_stack_file
from dr.topology.stackconfig import StackConfig
from dr.topology.stackfile import write_stack_config
from dr.topology.topics import target_topic, topics_on

__all__ = ["Converger", "PulumiConverger", "read_stack_config", "wait_copied", "write_stack_config"]


class Converger(Protocol):
    """Makes the estate match a topology; returns timings (seconds) per sub-step."""

    name: str

    def converge(self, topology: Topology, progress: Progress) -> dict[str, float]:
        """Create or update whatever ``topology`` declares; idempotent."""
        ...


class PulumiConverger:
    """Converges with ``pulumi up`` of the stack (:class:`dr.estate.stack.EstateStack`, the program of
    ``stacks/`` through the Automation API), then waits until each local link has copied what its
    source held when the ``up`` ended (``wait_for_links`` False: it does not — an active-active region's
    surviving links ran before and go on unchanged, with nothing new to copy)."""

    name = "pulumi"

    def __init__(self, stack: StackRef, *, catch_up_timeout: float = 120.0, wait_for_links: bool = True) -> None:
        self.stack = stack
        self.catch_up_timeout = catch_up_timeout
        self.wait_for_links = wait_for_links
        self.recovered: list[str] = []
        """What the last ``up`` repaired first (a killed engine's lock, plugins, interrupted operations)."""

    def converge(self, topology: Topology, progress: Progress) -> dict[str, float]:
        """``pulumi up`` of the stack file (already holding ``topology``); wait until links catch up."""

        estate_stack = EstateStack(self.stack)
        self.recovered = estate_stack.recovered  # filled as it goes: kept even when the up fails
        timings = dict(estate_stack.up(topology, progress=progress))
        estate = Estate(topology, self.stack.state_dir)
        topics = [t.name for t in topology.topics]
        for link in topology.links:
            if not self.wait_for_links or not topology.both_local(link):
                continue
            t0 = time.monotonic()
            on_source = topics_on(topology, topology.cluster(link.source))
            wanted = [t.name for t in on_source if link.selects_topic(t.name)] or topics
            progress(f"link {link.name}: waiting until {link.target} holds what {link.source} holds now")
            wait_copied(
                estate.endpoint(link.source),
                estate.endpoint(link.target),
                wanted,
                timeout=self.catch_up_timeout,
                what=f"link {link.name}",
                rename=functools.partial(target_topic, topology, link),
                copied=estate.copied_positions(link.name),
            )
            timings[f"link {link.name} caught up"] = round(time.monotonic() - t0, 3)
        return timings


def wait_copied(
    source: Endpoint,
    target: Endpoint,
    topics: list[str],
    *,
    timeout: float,
    what: str,
    rename: Callable[[str], str] = lambda topic: topic,
    copied: Callable[[], Offsets] | None = None,
) -> None:
    """Wait until the target's end offsets reach the source's end offsets *as of now*.

    A fixed watermark (not "lag is 0") so the wait ends even while applications keep writing
    to the source. ``rename`` gives a source topic's name on the target (``<edge>.<topic>`` for a
    hub-and-spoke edge's link). A link that runs here passes ``copied`` (the source positions it
    committed with its copies, :meth:`dr.estate.estate.Estate.copied_positions`): the target's end offsets
    count an exactly-once link's commit markers and would reach the watermark before the records, and a
    source holding markers (B, behind an exactly-once A→B) has ends its copy never reaches.
    """
    watermark = end_offsets(source, topics)
    copies = [rename(t) for t in topics]
    unanswered: list[str] = []  # the link's last unanswered question about its committed offsets

    def on_target() -> dict[tuple[str, int], int]:
        if copied is not None:  # a gap of only markers or aborted records on the source is copied
            try:
                behind = uncopied(source, watermark, copied()) if watermark else {}
            except ClusterError as exc:  # Connect busy rebalancing the connectors just created: not yet
                unanswered[:] = [exc.problem]
                return dict.fromkeys(watermark, 0)
            unanswered.clear()
            return {tp: n - behind.get(tp, 0) for tp, n in watermark.items()}
        ends = end_offsets(target, copies)
        return {(t, p): ends.get((rename(t), p), 0) for t, p in watermark}

    def caught_up() -> bool:
        held = on_target()  # once per poll: one offsets request for every partition, not one per partition
        return all(held[tp] >= n for tp, n in watermark.items())

    if not wait_until(until_leaders_settle(caught_up), timeout, interval=0.25):
        behind = lag(watermark, on_target())
        raise ClusterError(
            f"{what} did not copy {sum(behind.values())} records within {timeout:.0f}s "
            f"(per partition: {encode_offsets({k: v for k, v in behind.items() if v})})"
            + (f"; its committed offsets unread: {unanswered[0]}" if unanswered else "")
            + ".",
            "check the MirrorMaker 2 log under <state>/links/, then rerun the failover (it resumes)",
        )


def read_stack_config(path: Path) -> StackConfig:
    """The ``kafka-dr:`` entries of a stack file, normalised through the topology model."""

    return dump_stack_config(load_stack_file(path))
