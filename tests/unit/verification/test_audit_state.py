"""The incremental audit's pure parts: matching an increment, planning ranges, the state file."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError
from verification.audit import plan_ranges
from verification.audit_state import AuditState, Fingerprint, StateIdentity, load_state, match_increment, save_state
from verification.link_ref import LinkRef


def fp(offset: int, key: int, value: int, *, partition: int = 0, topic: str = "orders", ts: int = 1000) -> Fingerprint:
    return Fingerprint(topic, partition, offset, ts + offset, key, value)


def copy(f: Fingerprint, offset: int, partition: int | None = None) -> Fingerprint:
    return f._replace(offset=offset, partition=f.partition if partition is None else partition)


IDS = dict(stack="s", link="A-to-B", source_cluster="A", target_cluster="B", source_id="ida", target_id="idb")


def ident(stack: str, link: str, source_cluster: str, target_cluster: str, **ids: str) -> dict[str, Any]:
    """The constructor arguments of a StateIdentity (or an AuditState) from the flat names of ``IDS``."""
    return dict(ref=LinkRef(stack=stack, link=link, source=source_cluster, target=target_cluster), **ids)


def test_all_copied_all_matched() -> None:
    src = [fp(i, i, i * 10) for i in range(5)]
    inc = match_increment(src, [copy(f, f.offset) for f in src], {})
    assert (inc.matched, inc.in_flight, inc.missing, inc.target_unmatched) == (5, [], [], [])
    assert inc.frontier == {"orders": {0: 4}}


def test_tail_not_yet_copied_is_in_flight_not_missing() -> None:
    src = [fp(i, i, i) for i in range(6)]
    inc = match_increment(src, [copy(f, f.offset) for f in src[:3]], {})
    assert inc.matched == 3 and inc.missing == []
    assert [f.offset for f in inc.in_flight] == [3, 4, 5]


def test_hole_below_a_copied_record_is_missing() -> None:
    src = [fp(i, i, i) for i in range(6)]
    copies = [copy(f, n) for n, f in enumerate(f for f in src if f.offset != 2)]
    inc = match_increment(src, copies, {})
    assert [f.offset for f in inc.missing] == [2] and inc.in_flight == []


def test_frontier_is_per_partition() -> None:
    p0 = [fp(i, i, i) for i in range(3)]
    p1 = [fp(i, 100 + i, i, partition=1) for i in range(3)]
    # partition 0 fully copied; partition 1 nothing copied yet: p1 is in flight, not missing
    inc = match_increment([*p0, *p1], [copy(f, f.offset) for f in p0], {})
    assert inc.missing == [] and len(inc.in_flight) == 3


def test_residue_matched_in_a_later_run_and_frontier_carried() -> None:
    src = [fp(i, i, i) for i in range(4)]
    run1 = match_increment(src, [copy(src[0], 0)], {})
    assert len(run1.in_flight) == 3
    # next run: the copies of 1..3 arrive; no new source records
    run2 = match_increment(run1.in_flight, [copy(f, f.offset) for f in src[1:]], run1.frontier)
    assert (run2.matched, run2.in_flight, run2.missing) == (3, [], [])
    assert run2.frontier == {"orders": {0: 3}}


def test_copy_arriving_before_its_source_is_read_waits_in_target_residue() -> None:
    a = fp(0, 1, 1)
    run1 = match_increment([], [copy(a, 0)], {})
    assert run1.target_unmatched == [copy(a, 0)] and run1.matched == 0
    run2 = match_increment([a], run1.target_unmatched, run1.frontier)
    assert run2.matched == 1 and run2.target_unmatched == []


def test_duplicates_pair_in_offset_order() -> None:
    # the same key and value twice on the source; only one copy so far: the later one is in flight
    a, b = fp(0, 7, 7), fp(5, 7, 7)
    inc = match_increment([b, a], [copy(a, 0)], {})
    assert inc.matched == 1 and [f.offset for f in inc.in_flight] == [5]
    # a duplicate on the target stays unmatched
    inc = match_increment([a], [copy(a, 0), copy(a, 1)], {})
    assert inc.matched == 1 and len(inc.target_unmatched) == 1


def test_different_content_is_not_matched() -> None:
    inc = match_increment([fp(0, 1, 1), fp(1, 2, 2)], [fp(0, 1, 999), fp(1, 2, 2)], {})
    assert inc.matched == 1 and [f.offset for f in inc.missing] == [0] and len(inc.target_unmatched) == 1


def test_topics_are_not_mixed() -> None:
    inc = match_increment([fp(0, 1, 1, topic="a")], [fp(0, 1, 1, topic="b")], {})
    assert inc.matched == 0


def test_frontier_input_not_modified() -> None:
    frontier = {"orders": {0: 1}}
    match_increment([fp(5, 5, 5)], [fp(0, 5, 5)], frontier)
    assert frontier == {"orders": {0: 1}}


# --------------------------------------------------------------------------- plan_ranges
def test_plan_first_run_reads_everything() -> None:
    ranges, bounds, lost = plan_ranges(
        {}, {("t", 0): (0, 10), ("t", 1): (3, 5)}, side="source", state_file=Path("x"), stack="s", link="l"
    )
    assert ranges == {"t": {0: (0, 10), 1: (3, 5)}} and bounds == {"t": {0: 10, 1: 5}} and lost == 0


def test_plan_reads_only_since_previous_bound() -> None:
    ranges, bounds, lost = plan_ranges(
        {"t": {0: 10}}, {("t", 0): (0, 12)}, side="source", state_file=Path("x"), stack="s", link="l"
    )
    assert ranges == {"t": {0: (10, 12)}} and bounds == {"t": {0: 12}} and lost == 0


def test_plan_counts_offsets_lost_to_retention() -> None:
    ranges, _b, lost = plan_ranges(
        {"t": {0: 10}}, {("t", 0): (15, 20)}, side="source", state_file=Path("x"), stack="s", link="l"
    )
    assert ranges == {"t": {0: (15, 20)}} and lost == 5


def test_plan_refuses_offsets_going_backwards() -> None:
    with pytest.raises(ConfigError, match=r"re-created.*\n.*--reset"):
        plan_ranges(
            {"t": {0: 10}}, {("t", 0): (0, 4)}, side="target", state_file=Path("/st/l.json"), stack="s", link="l"
        )


# --------------------------------------------------------------------------- state file
def _state() -> AuditState:
    return AuditState(
        **ident(**IDS),
        source_bounds={"orders": {0: 5, 1: 7}},
        target_bounds={"orders": {0: 4}},
        frontier={"orders": {0: 3}},
        source_residue=[fp(4, 4, -4)],
        target_residue=[fp(9, -1, 2**63 - 1)],
        runs=2,
        verified_total=11,
        created_ms=1,
        updated_ms=2,
    )


def test_state_round_trip_atomic_0600(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "A-to-B.json"
    save_state(path, _state())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_state(path, StateIdentity(**ident(**IDS))) == _state()
    assert [p.name for p in path.parent.iterdir()] == ["A-to-B.json"]  # no temporary file left


def test_no_state_file_means_first_run(tmp_path: Path) -> None:
    assert load_state(tmp_path / "none.json", StateIdentity(**ident(**IDS))) is None


@pytest.mark.parametrize(
    "text", ["{not json", "[]", '{"version": 1}', "", json.dumps({**_state().to_dict(), "version": 99})]
)
def test_damaged_state_is_a_config_error_naming_file_and_reset(tmp_path: Path, text: str) -> None:
    path = tmp_path / "A-to-B.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_state(path, StateIdentity(**ident(**IDS)))
    assert str(path) in str(err.value) and "--reset" in str(err.value)


def test_damaged_residue_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "A-to-B.json"
    data = _state().to_dict()
    data["residue"]["source"][0][2] = "x"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="damaged"):
        load_state(path, StateIdentity(**ident(**IDS)))


@pytest.mark.parametrize(
    "change",
    [
        dict(stack="other"),
        dict(link="B-to-C"),
        dict(source_cluster="C"),
        dict(source_id="new-a"),
        dict(target_id="new-b"),
    ],
)
def test_foreign_state_is_refused(tmp_path: Path, change: dict[str, str]) -> None:
    path = tmp_path / "A-to-B.json"
    save_state(path, _state())
    with pytest.raises(ConfigError) as err:
        load_state(path, StateIdentity(**ident(**{**IDS, **change})))
    assert str(path) in str(err.value) and "--reset" in str(err.value)


def test_max_ts_round_trip_and_absent_in_older_files(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    state = _state()
    state.max_ts = {"source": 1_700_000_000_000, "target": -1}
    save_state(path, state)
    assert load_state(path, StateIdentity(**ident(**IDS))).max_ts == state.max_ts
    data = json.loads(path.read_text())
    del data["max_ts"]
    path.write_text(json.dumps(data))
    assert load_state(path, StateIdentity(**ident(**IDS))).max_ts is None  # unknown, not an error
    data["max_ts"] = {"source": "x", "target": 1}
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="max_ts"):
        load_state(path, StateIdentity(**ident(**IDS)))


def test_a_state_file_of_the_flat_shape_loads_and_is_written_back_the_same(tmp_path: Path) -> None:
    """A state file as every drctl so far wrote it (stack, link and each side's cluster flat in the
    document) loads with its LinkRef, and the state writes the same document back."""
    old = {
        "version": 1,
        "stack": "s",
        "link": "A-to-B",
        "source": {"cluster": "A", "cluster_id": "ida"},
        "target": {"cluster": "B", "cluster_id": "idb"},
        "runs": 2,
        "verified_total": 11,
        "created_ms": 1,
        "updated_ms": 2,
        "bounds": {"source": {"orders": {"0": 5}}, "target": {"orders": {"0": 4}}},
        "frontier": {"orders": {"0": 3}},
        "residue": {"source": [["orders", 0, 4, 4, -4, 7]], "target": []},
    }
    path = tmp_path / "A-to-B.json"
    path.write_text(json.dumps(old))
    state = load_state(
        path,
        StateIdentity(ref=LinkRef(stack="s", link="A-to-B", source="A", target="B"), source_id="ida", target_id="idb"),
    )
    assert state is not None
    assert state.ref == LinkRef(stack="s", link="A-to-B", source="A", target="B")
    assert (state.stack, state.link, state.source_cluster, state.target_cluster) == ("s", "A-to-B", "A", "B")
    assert state.to_dict() == old


def test_the_state_document_type_names_every_key_written() -> None:
    from verification.audit_state import StateDocument

    state = _state()
    state.max_ts = {"source": 1, "target": 2}
    assert set(state.to_dict()) == set(StateDocument.__annotations__)
