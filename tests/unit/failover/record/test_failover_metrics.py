"""Pure computations of the failover: lag, RPO estimate, group positions, cut-off, group states."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dr.failover.act.groups import describe_group
from dr.failover.act.snapshots import last_offsets, record_offsets, write_rate
from dr.failover.record.metrics import (
    cutoff_ms,
    decode_offsets,
    encode_offsets,
    group_positions,
    lag,
    rpo_estimate,
    seconds_between,
)

offsets = st.dictionaries(
    st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 50)),
    st.integers(0, 10**12),
    max_size=20,
)


@given(offsets)
def test_offsets_survive_the_json_encoding(value: dict[tuple[str, int], int]) -> None:
    assert decode_offsets(encode_offsets(value)) == value


def test_lag_is_per_source_partition_and_never_negative() -> None:
    src = {("orders", 0): 10, ("orders", 1): 5, ("payments", 0): 3}
    dst = {("orders", 0): 7, ("orders", 1): 9}
    assert lag(src, dst) == {("orders", 0): 3, ("orders", 1): 0, ("payments", 0): 3}


def test_rpo_estimate_is_last_known_source_minus_target() -> None:
    est = rpo_estimate(
        {("orders", 0): 100, ("orders", 1): 50},
        {("orders", 0): 90, ("orders", 1): 50},
        snapshot_at=1000.0,
        failed_at=1002.5,
    )
    assert est["records"] == 10
    assert est["per_partition"] == {"orders:0": 10}
    assert est["snapshot_age_s"] == 2.5
    assert "lower bound" in est["basis"]
    assert est["upper_bound"] is None, "no write rate known: no upper bound"


def test_rpo_estimate_counts_records_from_the_links_committed_positions_not_the_targets_ends() -> None:
    # 50 records lost of orders-0; B's ends also hold 6 commit markers of an exactly-once link
    last, b_end, copied = {("orders", 0): 150}, {("orders", 0): 106}, {("orders", 0): 100}
    assert rpo_estimate(last, b_end)["records"] == 44, "offsets, markers included: the old figure"
    est = rpo_estimate(last, b_end, copied=copied)
    assert est["records"] == 50 and est["per_partition"] == {"orders:0": 50}
    assert "committed source positions" in est["basis"]


def test_rpo_upper_bound_adds_the_last_write_rate_over_the_snapshot_age() -> None:
    est = rpo_estimate(
        {("orders", 0): 100}, {("orders", 0): 100}, snapshot_at=1000.0, failed_at=1000.3, write_rate=500.0
    )
    assert (est["records"], est["upper_bound"]) == (0, 150)


def test_snapshots_keep_the_previous_one_to_measure_the_write_rate(tmp_path: Path) -> None:
    assert last_offsets(tmp_path, "A") == (None, None) and write_rate(tmp_path, "A") is None
    record_offsets(tmp_path, "A", {("orders", 0): 100, ("orders", 1): 40}, at=1000.0)
    assert write_rate(tmp_path, "A") is None
    record_offsets(tmp_path, "A", {("orders", 0): 160, ("orders", 1): 60}, at=1000.5)
    assert write_rate(tmp_path, "A") == 160.0
    assert last_offsets(tmp_path, "A") == (1000.5, {("orders", 0): 160, ("orders", 1): 60})


def test_rpo_estimate_without_any_snapshot_is_unknown_not_zero() -> None:
    est = rpo_estimate(None, {("orders", 0): 90})
    assert est["records"] is None
    assert "no snapshot" in est["basis"]


def test_group_positions_count_rereads_flag_skips_and_ignore_unaligned_partitions() -> None:
    ends = {("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("t", 3): 80}
    target_ends = {("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("t", 3): 70}
    source = {("t", 0): 60, ("t", 1): 100, ("t", 2): 40, ("t", 3): 80, ("t", 4): 5}
    target = {("t", 0): 55, ("t", 1): 100, ("t", 2): 41, ("t", 3): 70}
    pos = group_positions(source, target, ends, target_ends)
    assert pos["rereads"] == 5
    assert pos["rereads_per_partition"] == {"t:0": 5}
    assert pos["would_skip"] == {"t:2": 1}
    assert pos["not_comparable"] == ["t:3"]
    assert pos["missing_on_target"] == ["t:4"]


def test_group_positions_without_a_readable_source_cannot_count_rereads() -> None:
    pos = group_positions(None, {("t", 0): 5}, None, {("t", 0): 10})
    assert pos["rereads"] is None and pos["would_skip"] == {}


def test_cutoff_is_the_millisecond_before_the_first_possible_write_on_the_target() -> None:
    assert cutoff_ms(1_000_000, 1_000_250) == 999_999
    assert cutoff_ms(1_000_000, 999_990) == 999_989  # a probe created a hair before the grant was saved
    assert cutoff_ms(None, 5_000) == 4_999
    assert cutoff_ms(None, None) is None


def test_seconds_between_is_unknown_when_a_mark_is_missing() -> None:
    assert seconds_between(10.0, 12.3456) == 2.346
    assert seconds_between(None, 1.0) is None


def _group(**kw):  # type: ignore[no-untyped-def]
    base = dict(
        group="billing",
        application="billing",
        topics=["orders"],
        synced_by_link=True,
        source_committed={("orders", 0): 10, ("orders", 1): 4},
        target_committed={("orders", 0): 10, ("orders", 1): 4},
        source_end={("orders", 0): 10, ("orders", 1): 8},
        target_end={("orders", 0): 10, ("orders", 1): 8},
    )
    base.update(kw)
    return describe_group(**base)


def test_group_states() -> None:
    assert _group()["status"] == "translated"
    assert _group()["rereads"] == 0
    behind = _group(target_committed={("orders", 0): 7, ("orders", 1): 4})
    assert behind["status"] == "translated" and behind["rereads"] == 3
    assert "3 records a second time" in behind["consumers_will"]
    partial = _group(target_committed={("orders", 0): 10})
    assert partial["status"] == "partial" and partial["missing_on_target"] == ["orders:1"]
    assert "orders:1" in partial["consumers_will"] and "auto.offset.reset" in partial["consumers_will"]
    none = _group(target_committed={})
    assert none["status"] == "none"
    assert "re-reads all 18 records" in none["consumers_will"]
    assert _group(synced_by_link=False)["status"] == "not-synced"
    idle = _group(source_committed={}, target_committed={})
    assert idle["status"] == "no-commits"


def test_group_offsets_of_topics_the_application_does_not_consume_are_ignored() -> None:
    g = _group(source_committed={("orders", 0): 10, ("other", 0): 3}, target_committed={("orders", 0): 10})
    assert g["status"] == "translated" and g["source_partitions"] == 1


def test_a_transactional_link_never_compares_group_offsets_even_when_the_ends_match() -> None:
    """B's ends of a link writing in transactions count commit markers: 98 records and 2 markers end at
    100 like A's 100 records, yet the offsets are not the same records (issue 35)."""
    ends = {("orders", 0): 100}
    aligned = group_positions({("orders", 0): 90}, {("orders", 0): 80}, ends, ends)
    assert aligned["rereads"] == 10 and aligned["not_comparable"] == []
    txn = group_positions({("orders", 0): 90}, {("orders", 0): 80}, ends, ends, aligned=False)
    assert txn["rereads"] == 0 and txn["not_comparable"] == ["orders:0"]
