"""The recovery's range planning: per partition, the few offset ranges read once to replay a site's
missing records (dr.kafka.replay.plan_ranges)."""

from __future__ import annotations

import random

import pytest

from dr.kafka.replay import MAX_GAP, plan_ranges


def test_a_missing_tail_is_one_range_per_partition() -> None:
    wanted = [("orders", p, o) for p in range(3) for o in range(500 + p, 10_000)]
    random.Random(7).shuffle(wanted)
    assert plan_ranges(wanted) == {("orders", p): [(500 + p, 10_000)] for p in range(3)}


def test_offsets_near_each_other_share_a_range_far_apart_do_not() -> None:
    wanted = [("t", 0, 10), ("t", 0, 10 + MAX_GAP), ("t", 0, 11 + 2 * MAX_GAP + 1), ("u", 2, 5)]
    assert plan_ranges(wanted) == {
        ("t", 0): [(10, 11 + MAX_GAP), (12 + 2 * MAX_GAP, 13 + 2 * MAX_GAP)],
        ("u", 2): [(5, 6)],
    }


def test_duplicates_and_order_do_not_matter_and_every_offset_is_covered_once() -> None:
    rng = random.Random(3)
    wanted = [("a", rng.randrange(4), rng.randrange(50_000)) for _ in range(5_000)]
    ranges = plan_ranges(wanted + wanted[:100], max_gap=50)
    assert ranges == plan_ranges(list(reversed(wanted)), max_gap=50)
    for (topic, partition), spans in ranges.items():
        assert all(a < b for a, b in spans) and all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
        wanted_here = {o for t, p, o in wanted if (t, p) == (topic, partition)}
        assert all(any(a <= o < b for a, b in spans) for o in wanted_here)
        assert all(a in wanted_here and b - 1 in wanted_here for a, b in spans), (
            "ranges start and end on a wanted record"
        )
        assert all(spans[i + 1][0] - (spans[i][1] - 1) > 50 for i in range(len(spans) - 1)), "gaps wider than max_gap"


def test_nothing_wanted_plans_nothing_and_a_bad_gap_is_refused() -> None:
    assert plan_ranges([]) == {}
    with pytest.raises(ValueError, match="max_gap"):
        plan_ranges([("t", 0, 1)], max_gap=0)
