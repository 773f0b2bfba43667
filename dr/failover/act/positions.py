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

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from dr.base.errors import ClusterError
from dr.kafka.client import Endpoint
from dr.kafka.offsets import Offsets, commit_group_offsets

__all__ = [
    "Position",
    "PositionedGroup",
    "commits_of",
    "moved_groups_summary",
    "origin_offset",
    "positioned",
    "positions_text",
    "survivor_positions",
    "target_offset",
]


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


def target_offset(syncs: list[tuple[int, int]], committed: int) -> int | None:
    """The offset on a link's copy that a group's ``committed`` offset on the link's source stands for
    (MirrorMaker 2's own forward translation), from the link's offset ``syncs`` ``(upstream, downstream)``;
    None when no sync is at or below it. Never beyond the true position."""
    best: tuple[int, int] | None = None
    for upstream, downstream in syncs:
        if upstream > committed:
            continue
        if best is None or upstream > best[0] or (upstream == best[0] and downstream < best[1]):
            best = (upstream, downstream)
    if best is None:
        return None
    upstream, downstream = best
    return downstream if upstream == committed else downstream + 1


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
    forward_syncs: dict[tuple[str, int], list[tuple[int, int]]] | None = None,
    unseen: tuple[str, ...] = (),
) -> list[Position]:
    """A moved group's position on every partition of ``end`` (the survivor's partitions of the group's
    topics: its ``local_topics`` and the remote copies it holds).

    ``committed_on_region``: the group's commits on the lost region (None: unreadable); ``syncs``: the
    offset syncs of the link survivor → region by survivor partition (B's ``orders`` ↔ ``B.orders`` on A);
    ``forward_syncs``: those of the link region → survivor by region partition (A's ``orders`` ↔
    ``A.orders`` on B); ``start``/``end``: the survivor's log start and end offsets. A commit already on the
    survivor is kept unless the group's commits on the region say it read further since.

    The roles are the move's, whichever way it goes: the rejoin of a region moves its groups back from
    the peer (``region`` the peer, ``survivor`` the rejoining region), the loss of an edge moves them to
    the hub. ``unseen``: topics of the survivor no copy of which is on the region (the hub's own topic
    for a group moved from an edge): the group cannot have read them, so they start at their first record
    with no re-read — unless the group already committed there."""
    found: list[Position] = []
    for (topic, partition), last in sorted(end.items()):
        first = min(start.get((topic, partition), 0), last)
        here = f"{topic}:{partition}"
        if topic in unseen:
            kept = committed_on_survivor.get((topic, partition))
            if kept is not None:
                found.append(Position(topic, partition, kept, "kept", 0, f"{here}: committed on {survivor} ({kept})"))
            else:
                why = f"{here}: no copy of it on {region}, the group never read it: from its first record"
                found.append(Position(topic, partition, first, "start", 0, why))
            continue
        if topic in local_topics:  # B's own topic: the group read it on A as B.<topic>
            source, table, to_here = f"{survivor}.{topic}", syncs.get((topic, partition), []), origin_offset
        elif topic.partition(".")[0] == region:  # A.<topic>: the group read it on A as <topic>
            origin = topic.partition(".")[2]
            source, table, to_here = origin, (forward_syncs or {}).get((origin, partition), []), target_offset
        else:
            source, table, to_here = "", [], origin_offset
        read = None if committed_on_region is None or not source else committed_on_region.get((source, partition))
        derived = None if read is None else to_here(table, read)
        kept = committed_on_survivor.get((topic, partition))
        if derived is not None and (kept is None or max(first, min(derived, last)) > kept):
            offset = max(first, min(derived, last))
            slack = _slack(table, read or 0, forward=to_here is target_offset)
            why = f"{here}: {source}:{partition} read to {read} on {region} = {offset} on {survivor}" + (
                f" (the nearest offset sync is {slack + 1} records short of that commit: up to {slack} re-read)"
                if slack
                else ""
            )
            found.append(Position(topic, partition, offset, "translated", slack, why))
        elif kept is not None and committed_on_region is None and source:
            # unknown how far the group read on the region since: everything after its commit may be a re-read
            why = f"{here}: committed on {survivor} ({kept}); {region} unreadable, it may have read further there"
            found.append(Position(topic, partition, kept, "kept", max(0, last - kept), why))
        elif kept is not None and derived is not None:
            # its commit here is at or past the translation; with offset syncs short of the region's commit
            # the group may have read further there, and reads that again from here
            slack = _slack(table, read or 0, forward=to_here is target_offset)
            again = max(0, min(derived + slack, last) - kept)
            why = (
                f"{here}: committed on {survivor} ({kept}), at or past {source}:{partition} read to {read} on {region}"
            )
            why += (
                f" (= {derived}; the nearest offset sync is {slack + 1} records short: up to {again} re-read)"
                if again
                else ""
            )
            found.append(Position(topic, partition, kept, "kept", again, why))
        elif kept is not None:
            found.append(Position(topic, partition, kept, "kept", 0, f"{here}: committed on {survivor} ({kept})"))
        elif committed_on_region is None:
            why = f"{here}: {region} unreadable, what the group read there is unknown"
            found.append(Position(topic, partition, first, "start", last - first, why))
        elif read is None:
            why = f"{here}: the group never committed {source or topic}:{partition} on {region}"
            found.append(Position(topic, partition, first, "start", 0 if source else last - first, why))
        else:
            why = f"{here}: no offset sync of {source}:{partition} for its commit {read} on {region}"
            found.append(Position(topic, partition, first, "start", min(read, last - first), why))
    return found


def _slack(syncs: list[tuple[int, int]], committed: int, *, forward: bool) -> int:
    """Records a translation of ``committed`` through ``syncs`` may re-read: how far the nearest sync at or
    below the commit (on the side the commit is on) stands from it; 0 when a sync matches it."""
    near = max((u if forward else d for u, d in syncs if (u if forward else d) <= committed), default=committed)
    return max(0, committed - near - 1)


def commits_of(positions: list[Position]) -> Offsets:
    """The offsets to commit: every position not already committed on the survivor."""
    return {(p.topic, p.partition): p.offset for p in positions if p.source != "kept"}


def commit_positions(ep: Endpoint, group: str, positions: list[Position], refused: list[str]) -> bool:
    """Commit ``group``'s derived positions on ``ep`` (:func:`commits_of`); False, with the refusal appended
    to ``refused``, when the group already has members there: its consumers moved on their own."""
    try:
        commit_group_offsets(ep, group, commits_of(positions))
    except ClusterError as exc:
        refused.append(f"{group} ({str(exc).splitlines()[0]})")
        return False
    return True


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


class PositionedGroup(TypedDict):
    """What a step that positions moved groups journals of each group, beside what is its own."""

    positions: list[dict[str, Any]]
    positions_committed: bool
    rereads_at_most: int
    text: str


def positioned(group: str, positions: list[Position], committed: bool) -> PositionedGroup:
    """``group``'s positions as a step journals them (``committed``: :func:`commit_positions`)."""
    return PositionedGroup(
        positions=[p.to_json() for p in positions],
        positions_committed=committed,
        rereads_at_most=sum(p.rereads_at_most for p in positions),
        text=positions_text(group, positions),
    )


def moved_groups_summary(
    found: Mapping[str, PositionedGroup],
    gaps: list[str],
    refused: list[str],
    *,
    on: str,
    unknown: str,
    resume_from: str,
    there: str,
    derived_from: str = "the group's commits",
    short_of: str = "them",
) -> str:
    """The summary line of a step that positioned the moved groups ``found`` before they move (a region's,
    an edge's, a rejoin's): where (``on``, e.g. `` on B``), what was unknown, the partitions without a
    derived position (``gaps``, resuming from ``resume_from`` or their first record) — else that every one
    was derived (from ``derived_from``) —, the records they may read again and the groups not set because
    they already have members ``there``."""
    rereads = sum(v["rereads_at_most"] for v in found.values())
    summary = f"{len(found)} groups positioned{on} before the move{unknown}; " + (
        f"{len(gaps)} partitions without a derived position, resuming from {resume_from} or their first record "
        f"({', '.join(gaps[:5])}{' …' if len(gaps) > 5 else ''}), re-reading at most {rereads} records"
        if gaps
        else f"every partition's position derived from {derived_from} (nothing skipped; re-reading at most "
        f"{rereads} records where the offset syncs stop short of {short_of})"
    )
    if refused:
        summary += f"; not set (the group already has members {there}): {', '.join(refused)}"
    return summary
