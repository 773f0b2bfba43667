"""Where a moved consumer group starts on the survivor of a region failover (issue 34): MirrorMaker 2's
offset syncs decoded, a commit on the copy ``B.orders`` mapped back to B's ``orders``, and every partition
given a position that never skips."""

from __future__ import annotations

import struct

from dr.failover.act.positions import (
    Position,
    commits_of,
    moved_groups_summary,
    origin_offset,
    positioned,
    positions_text,
    survivor_positions,
    target_offset,
)
from dr.kafka.offset_syncs import decode_offset_sync, offset_syncs_topic


def _sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    name = topic.encode()
    return struct.pack(">h", len(name)) + name + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)


def test_offset_sync_records_decode_as_mirrormaker_writes_them() -> None:
    assert decode_offset_sync(*_sync("orders", 2, 1234, 567)) == ("orders", 2, 1234, 567)
    assert offset_syncs_topic("A") == "mm2-offset-syncs.A.internal"
    key, value = _sync("orders", 0, 1, 1)
    assert decode_offset_sync(key, None) is None  # a tombstone
    assert decode_offset_sync(key, value[:9]) is None  # truncated
    assert decode_offset_sync(b"\x00\x09ord", value) is None  # the key's topic runs past its end


def test_a_commit_on_the_copy_maps_back_to_the_origin_offset() -> None:
    # B's orders had 3 aborted-transaction slots: the copy on A is denser than its origin
    syncs = [(0, 0), (1, 1), (5, 2), (6, 3), (7, 4)]
    assert origin_offset(syncs, 3) == 6  # the record at 3 (origin 6) not read yet
    assert origin_offset(syncs, 5) == 8  # everything read: the one after the last synced record
    assert origin_offset(syncs, 0) == 0
    assert origin_offset([], 10) is None
    assert origin_offset([(40, 20)], 10) is None  # only later syncs (the older ones compacted away)
    # sparse syncs: never beyond the true position, whichever record in between the group stopped at
    sparse = [(100, 10), (300, 20)]
    for read in range(10, 20):
        assert 100 <= origin_offset(sparse, read) <= 100 + (read - 10)  # type: ignore[operator]


def _positions(**over: object) -> list[Position]:
    args: dict[str, object] = {
        "region": "A",
        "survivor": "B",
        "local_topics": ["orders"],
        "committed_on_region": {("B.orders", 0): 40, ("orders", 0): 7},
        "syncs": {("orders", 0): [(i + 100, i) for i in range(60)]},
        "committed_on_survivor": {("A.orders", 0): 5},
        "start": {("orders", 0): 100, ("A.orders", 0): 0, ("orders", 1): 0},
        "end": {("orders", 0): 160, ("A.orders", 0): 9, ("orders", 1): 30},
    }
    args.update(over)
    return survivor_positions(**args)  # type: ignore[arg-type]


def test_the_survivors_own_topic_is_positioned_from_the_copy_read_on_the_region() -> None:
    found = {(p.topic, p.partition): p for p in _positions()}
    # B.orders:0 read to 40 on A = orders:0 at 140 on B: nothing read twice, nothing skipped
    assert found[("orders", 0)].offset == 140 and found[("orders", 0)].source == "translated"
    assert found[("orders", 0)].rereads_at_most == 0
    # the link's translation of A.orders is kept as it is
    assert found[("A.orders", 0)] == Position("A.orders", 0, 5, "kept", 0, found[("A.orders", 0)].why)
    # never read on A: from its first record, and that is no re-read
    assert (found[("orders", 1)].offset, found[("orders", 1)].source, found[("orders", 1)].rereads_at_most) == (
        0,
        "start",
        0,
    )
    assert commits_of(list(found.values())) == {("orders", 0): 140, ("orders", 1): 0}


def test_what_cannot_be_derived_starts_at_the_first_record_and_counts_its_rereads() -> None:
    unreadable = {(p.topic, p.partition): p for p in _positions(committed_on_region=None, committed_on_survivor={})}
    assert {tp: (p.offset, p.source) for tp, p in unreadable.items()} == {
        ("orders", 0): (100, "start"),
        ("orders", 1): (0, "start"),
        ("A.orders", 0): (0, "start"),
    }
    assert unreadable[("orders", 0)].rereads_at_most == 60 and "A unreadable" in unreadable[("orders", 0)].why
    assert unreadable[("A.orders", 0)].rereads_at_most == 9
    no_sync = {(p.topic, p.partition): p for p in _positions(syncs={})}
    assert no_sync[("orders", 0)].offset == 100 and no_sync[("orders", 0)].rereads_at_most == 40
    assert "no offset sync of B.orders:0 for its commit 40 on A" in no_sync[("orders", 0)].why
    # a translation beyond the survivor's end (records the link copied then lost with B's tail) is clamped
    beyond = {(p.topic, p.partition): p for p in _positions(end={("orders", 0): 120})}
    assert beyond[("orders", 0)].offset == 120
    text = positions_text("shop-a", list(unreadable.values()))
    assert text.startswith("shop-a: 3 start") and "orders:0" in text and "re-reads at most 99" in text


def test_an_older_commit_on_the_survivor_gives_way_to_what_the_group_read_since() -> None:
    # the group stayed on B once before (a commit at 120 on orders:0); since, it read B.orders to 40 on A
    older = {(p.topic, p.partition): p for p in _positions(committed_on_survivor={("orders", 0): 120})}
    assert (older[("orders", 0)].offset, older[("orders", 0)].source) == (140, "translated")
    assert commits_of(list(older.values()))[("orders", 0)] == 140
    # a commit on B beyond the derivation (a resumed step, or the group's own consumers) is kept
    ahead = {(p.topic, p.partition): p for p in _positions(committed_on_survivor={("orders", 0): 150})}
    assert (ahead[("orders", 0)].offset, ahead[("orders", 0)].source) == (150, "kept")
    assert ("orders", 0) not in commits_of(list(ahead.values()))
    # the region unreadable: the commit on B is the only position known
    blind = {
        (p.topic, p.partition): p
        for p in _positions(committed_on_region=None, committed_on_survivor={("orders", 0): 120})
    }
    assert (blind[("orders", 0)].offset, blind[("orders", 0)].source) == (120, "kept")
    assert blind[("orders", 0)].rereads_at_most == 40 and "A unreadable" in blind[("orders", 0)].why


def test_the_regions_own_topic_is_translated_forwards_when_the_links_checkpoint_lags() -> None:
    syncs = [(0, 0), (1, 1), (5, 2), (6, 3)]
    assert target_offset(syncs, 5) == 2 and target_offset(syncs, 7) == 4 and target_offset(syncs, 3) == 2
    assert target_offset([(10, 4)], 3) is None
    # the link's last checkpoint put shop-a at 5 on A.orders; it read on to 7 on A's orders since
    moved = _positions(
        committed_on_region={("B.orders", 0): 40, ("orders", 0): 7},
        forward_syncs={("orders", 0): [(i, i) for i in range(9)]},
    )
    found = {(p.topic, p.partition): p for p in moved}
    assert (found[("A.orders", 0)].offset, found[("A.orders", 0)].source) == (7, "translated")
    assert "orders:0 read to 7 on A = 7 on B" in found[("A.orders", 0)].why
    # another peer's copy on B (C.orders) has no translation from A: from its first record
    other = {
        (p.topic, p.partition): p for p in _positions(end={("C.orders", 0): 12}, start={}, committed_on_survivor={})
    }
    assert (other[("C.orders", 0)].offset, other[("C.orders", 0)].rereads_at_most) == (0, 12)


def test_a_rejoin_positions_the_returning_group_on_its_home_from_what_it_read_on_the_peer() -> None:
    # the mirror image of the region failover: the group leaves B for the rebuilt A. On B it read A.orders
    # (A's orders copied by the link A→B) and B's orders; on A it reads orders and B.orders.
    found = {
        (p.topic, p.partition): p
        for p in survivor_positions(
            region="B",
            survivor="A",
            local_topics=["orders"],
            committed_on_region={("A.orders", 0): 25, ("orders", 0): 70},
            syncs={("orders", 0): [(i, i + 20) for i in range(10)]},  # A's orders:i = A.orders:i+20 on B
            committed_on_survivor={},
            start={("orders", 0): 0, ("B.orders", 0): 0, ("orders", 1): 0},
            end={("orders", 0): 10, ("B.orders", 0): 80, ("orders", 1): 4},
            forward_syncs={("orders", 0): [(i, i) for i in range(80)]},  # B's orders:i = B.orders:i on A
        )
    }
    # A.orders:0 read to 25 on B = orders:0 at 5 on A; orders:0 read to 70 on B = B.orders:0 at 70 on A
    assert (found[("orders", 0)].offset, found[("orders", 0)].source) == (5, "translated")
    assert (found[("B.orders", 0)].offset, found[("B.orders", 0)].source) == (70, "translated")
    # a partition of A's orders the group never committed on B: its first record, nothing to re-read
    assert (found[("orders", 1)].offset, found[("orders", 1)].source, found[("orders", 1)].rereads_at_most) == (
        0,
        "start",
        0,
    )
    assert all(p.rereads_at_most == 0 for p in found.values())


def test_a_group_moved_from_an_edge_starts_the_hubs_own_topic_at_its_first_record_without_rereads() -> None:
    # E1 lost: panel-e1 read E1's readings; on the hub it reads E1.readings and the hub's own readings,
    # no copy of which was ever on E1
    common = {
        "region": "E1",
        "survivor": "H",
        "local_topics": [],
        "syncs": {},
        "start": {("readings", 0): 3, ("E1.readings", 0): 0},
        "end": {("readings", 0): 9, ("E1.readings", 0): 50},
        "forward_syncs": {("readings", 0): [(i, i) for i in range(50)]},
        "unseen": ("readings",),
    }
    up = {
        (p.topic, p.partition): p
        for p in survivor_positions(
            committed_on_region={("readings", 0): 30}, committed_on_survivor={("E1.readings", 0): 20}, **common
        )  # type: ignore[arg-type]
    }
    assert (up[("E1.readings", 0)].offset, up[("E1.readings", 0)].source) == (30, "translated")
    hub = up[("readings", 0)]
    assert (hub.offset, hub.source, hub.rereads_at_most) == (3, "start", 0) and "never read it" in hub.why
    # the edge unreadable: the link's translation is kept, what it may have read since counted
    down = {
        (p.topic, p.partition): p
        for p in survivor_positions(committed_on_region=None, committed_on_survivor={("E1.readings", 0): 20}, **common)  # type: ignore[arg-type]
    }
    assert (down[("E1.readings", 0)].source, down[("E1.readings", 0)].rereads_at_most) == ("kept", 30)
    assert (down[("readings", 0)].offset, down[("readings", 0)].rereads_at_most) == (3, 0)
    assert commits_of(list(down.values())) == {("readings", 0): 3}


def _behind_a_short_sync(committed_on_survivor: dict[tuple[str, int], int]) -> Position:
    """B.orders:0 on A for a group that read B's orders:0 to 100, the nearest forward sync 20 records short."""
    (p,) = survivor_positions(
        region="B",
        survivor="A",
        local_topics=["orders"],
        committed_on_region={("orders", 0): 100},
        syncs={},
        committed_on_survivor=committed_on_survivor,
        start={("B.orders", 0): 0},
        end={("B.orders", 0): 130},
        forward_syncs={("orders", 0): [(10, 10), (80, 80), (120, 120)]},
    )
    return p


def test_a_translation_through_a_sync_short_of_the_commit_counts_its_possible_rereads() -> None:
    # the link's last syncs lag (MirrorMaker 2 throttles them while it copies in bulk): the nearest sync of
    # B's orders:0 is 20 records below the group's commit on B — positioned there, never beyond, 19 re-reads
    p = _behind_a_short_sync({})
    assert (p.offset, p.source, p.rereads_at_most) == (81, "translated", 19) and "up to 19 re-read" in p.why


def test_a_commit_on_the_survivor_past_a_short_translation_is_kept_and_counts_its_possible_rereads() -> None:
    # the group's old commit on A's B.orders:0 (90) is past the translation of its commit on B (81, the
    # nearest sync 20 records short): kept, and the 10 records it may have read beyond that on B are counted
    p = _behind_a_short_sync({("B.orders", 0): 90})
    assert (p.offset, p.source, p.rereads_at_most) == (90, "kept", 10) and "up to 10 re-read" in p.why


def test_the_moved_groups_summary_of_a_region_an_edge_and_a_rejoin() -> None:
    """One sentence for the three steps that position moved groups, each naming its own place."""
    found = {"g": positioned("g", [Position("t", 0, 5, "start", 3, "no sync")], True)}
    assert moved_groups_summary(
        found,
        ["g:t-0"],
        ["h (has members)"],
        on=" on B",
        unknown="",
        resume_from="the group's commit on B",
        there="on B",
    ) == (
        "1 groups positioned on B before the move; 1 partitions without a derived position, resuming from the "
        "group's commit on B or their first record (g:t-0), re-reading at most 3 records; not set (the group "
        "already has members on B): h (has members)"
    )
    assert moved_groups_summary(
        {}, [], [], on="", unknown="; E unreadable", resume_from="the group's translated commit", there="where it moves"
    ) == (
        "0 groups positioned before the move; E unreadable; every partition's position derived from the group's "
        "commits (nothing skipped; re-reading at most 0 records where the offset syncs stop short of them)"
    )
