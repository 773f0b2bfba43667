"""Where a moved consumer group starts on the survivor, from what it had consumed on the lost region (pure).

In an active-active estate a group homed on A reads A's ``orders`` and ``B.orders`` (B's ``orders`` copied
to A by the link B→A). When A fails over to B the group reads B's ``orders`` and ``A.orders``:

* ``A.orders`` on B — MirrorMaker 2's checkpoints (link A→B) translate its commits on A's ``orders``;
* B's own ``orders`` — nothing translates it: the group's position there is what it had consumed of the
  copy ``B.orders`` on A, mapped back through the offset syncs of the link B→A (upstream offset on B,
  downstream offset on A): :func:`origin_offset`.

Every partition of those topics on B gets a committed offset before the group's consumers move
(:func:`survivor_positions`), so none of them falls back to ``auto.offset.reset`` (``latest`` would skip
what the group had not read yet). A partition whose position cannot be derived starts at its first
record: it never skips, and the records it may read a second time are counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dr.kafka.offsets import Offsets

__all__ = ["Position", "commits_of", "origin_offset", "positions_text", "survivor_positions"]


@dataclass(frozen=True)
class Position:
    """A moved group's position on one partition of the survivor."""

    topic: str
    partition: int
    offset: int
    source: str
    """``kept`` (already committed on the survivor), ``translated`` (derived from the lost region), ``start``."""
    rereads_at_most: int
    """Records of this partition the group may read a second time from ``offset`` (0: none known)."""
    why: str

    def to_json(self) -> dict[str, Any]:
        """The position as the journal keeps it."""
        return asdict(self)


def origin_offset(syncs: list[tuple[int, int]], committed: int) -> int | None:
    """The offset on a link's source that a group's ``committed`` offset on the link's copy stands for,
    from the link's offset ``syncs`` ``(upstream, downstream)``; None when no sync is at or below it.

    The sync with the highest downstream offset ≤ ``committed`` is used: equal, the group had not read
    that record yet (its upstream offset); lower, it had (the next upstream offset). Never beyond the
    true position — with a sync for every record (``offset.lag.max=0``) exactly it.
    """
    best: tuple[int, int] | None = None
    for upstream, downstream in syncs:
        if downstream > committed:
            continue
        if best is None or downstream > best[1] or (downstream == best[1] and upstream < best[0]):
            best = (upstream, downstream)
    if best is None:
        return None
    upstream, downstream = best
    return upstream if downstream == committed else upstream + 1


def survivor_positions(
    *,
    region: str,
    survivor: str,
    local_topics: list[str],
    committed_on_region: Offsets | None,
    syncs: dict[tuple[str, int], list[tuple[int, int]]],
    committed_on_survivor: Offsets,
    start: Offsets,
    end: Offsets,
) -> list[Position]:
    """A moved group's position on every partition of ``end`` (the survivor's partitions of the group's
    topics: its ``local_topics`` and the remote copies it holds).

    ``committed_on_region``: the group's commits on the lost region (None: unreadable); ``syncs``: the
    offset syncs of the link survivor → region by survivor partition; ``start``/``end``: the survivor's
    log start and end offsets."""
    found: list[Position] = []
    for (topic, partition), last in sorted(end.items()):
        first = min(start.get((topic, partition), 0), last)
        every = last - first
        here = f"{topic}:{partition}"

        def at_start(rereads: int, why: str, t: str = topic, p: int = partition, f: int = first) -> Position:
            return Position(t, p, f, "start", rereads, why)

        kept = committed_on_survivor.get((topic, partition))
        if kept is not None and topic in local_topics:
            derived = _derived(region, survivor, topic, partition, committed_on_region, syncs, first, last)
            if derived is not None and derived.offset > kept:  # an older stay's commit: the group read on since
                found.append(derived)
            else:
                found.append(Position(topic, partition, kept, "kept", 0, f"{here}: committed on {survivor} ({kept})"))
        elif kept is not None:
            found.append(Position(topic, partition, kept, "kept", 0, f"{here}: committed on {survivor} ({kept})"))
        elif topic in local_topics:
            copy = f"{survivor}.{topic}"
            if committed_on_region is None:
                found.append(
                    at_start(every, f"{here}: {region} unreadable, what the group read of {copy} there is unknown")
                )
            elif (copy, partition) not in committed_on_region:
                found.append(at_start(0, f"{here}: the group never committed {copy}:{partition} on {region}"))
            else:
                read = committed_on_region[(copy, partition)]
                derived = _derived(region, survivor, topic, partition, committed_on_region, syncs, first, last)
                found.append(
                    derived
                    or at_start(min(read, every), f"{here}: no offset sync of {copy}:{partition} at or below {read}")
                )
        else:
            origin_topic = topic.partition(".")[2]
            read_there = None if committed_on_region is None else committed_on_region.get((origin_topic, partition))
            rereads = every if committed_on_region is None else min(read_there or 0, every)
            found.append(at_start(rereads, f"{here}: no translated offset from the link's checkpoints"))
    return found


def _derived(
    region: str,
    survivor: str,
    topic: str,
    partition: int,
    committed_on_region: Offsets | None,
    syncs: dict[tuple[str, int], list[tuple[int, int]]],
    first: int,
    last: int,
) -> Position | None:
    """The position on the survivor's ``topic`` derived from the group's commit on its copy on the region."""
    copy = f"{survivor}.{topic}"
    read = (committed_on_region or {}).get((copy, partition))
    if read is None:
        return None
    origin = origin_offset(syncs.get((topic, partition), []), read)
    if origin is None:
        return None
    offset = max(first, min(origin, last))
    why = f"{topic}:{partition}: {copy}:{partition} read to {read} on {region} = {offset} on {survivor}"
    return Position(topic, partition, offset, "translated", 0, why)


def commits_of(positions: list[Position]) -> Offsets:
    """The offsets to commit: every position not already committed on the survivor."""
    return {(p.topic, p.partition): p.offset for p in positions if p.source != "kept"}


def positions_text(group: str, positions: list[Position]) -> str:
    """One line for a person: how many partitions of each kind, the ones started from their first record."""
    by: dict[str, int] = {}
    for p in positions:
        by[p.source] = by.get(p.source, 0) + 1
    started = [f"{p.topic}:{p.partition}" for p in positions if p.source == "start"]
    rereads = sum(p.rereads_at_most for p in positions)
    text = f"{group}: " + ", ".join(f"{n} {k}" for k, n in sorted(by.items()))
    if started:
        text += f"; from their first record (never skipping): {', '.join(started[:6])}" + (
            f" and {len(started) - 6} more" if len(started) > 6 else ""
        )
    return text + f"; re-reads at most {rereads}"
