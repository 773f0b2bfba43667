"""A committed offset on a passive cluster that the link's translation does not explain (issue 32).

MirrorMaker 2 writes a synced group's offsets on the passive cluster only from its checkpoints, so a
commit there beyond the partition's end or ahead of the checkpoint was written by someone else (an
application's forged offset sync moved billing from 109 to 1,000,109 on C, and status said nothing).
The comparison is pure; ``drctl status`` lists what it finds as problems (exit 4).
"""

from __future__ import annotations

import struct

import pytest

from dr.base.errors import ClusterError
from dr.failover.act.groups import offsets_ahead
from dr.failover.status import GroupPosition, GroupStatus, StatusReport, raise_for_problems, status_problems
from dr.kafka.checkpoints import checkpoints_topic, decode_checkpoint


def test_a_commit_at_or_behind_its_translation_is_no_problem() -> None:
    committed = {("orders", 0): 109, ("orders", 1): 40}
    translated = {("orders", 0): 109, ("orders", 1): 55}
    end = {("orders", 0): 120, ("orders", 1): 60}
    assert offsets_ahead("billing", "C", committed, translated, end) == []


def test_a_commit_ahead_of_the_translation_names_group_partition_and_both_offsets() -> None:
    found = offsets_ahead("billing", "C", {("orders", 2): 115}, {("orders", 2): 109}, {("orders", 2): 120})
    assert found == [
        "consumer group 'billing' on passive cluster C, orders:2: committed offset 115 is ahead of the "
        "translation of its source commit (109)"
    ]


def test_a_commit_beyond_the_end_offset_is_flagged_even_without_a_translation() -> None:
    found = offsets_ahead("billing", "C", {("orders", 0): 1_000_109, ("orders", 1): 3}, {}, {("orders", 0): 109})
    assert found == [
        "consumer group 'billing' on passive cluster C, orders:0: committed offset 1000109 is beyond the "
        "partition's end offset 109"
    ], "orders:1 has neither end nor translation known: nothing to judge it by"


def test_the_end_offset_itself_is_a_valid_commit() -> None:
    assert offsets_ahead("g", "B", {("t", 0): 10}, {("t", 0): 10}, {("t", 0): 10}) == []
    assert offsets_ahead("g", "B", {("t", 0): 11}, {("t", 0): 11}, {("t", 0): 10}) != [], "beyond the end"


def _checkpoint(group: str, topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    def s(x: str) -> bytes:
        return struct.pack(">h", len(x.encode())) + x.encode()

    return s(group) + s(topic) + struct.pack(">i", partition), struct.pack(">hqq", 0, upstream, downstream) + s("")


def test_checkpoints_decode_as_mirrormaker_2_writes_them() -> None:
    key, value = _checkpoint("billing", "orders", 4, 130, 109)
    assert decode_checkpoint(key, value) == ("billing", "orders", 4, 130, 109)
    assert decode_checkpoint(key, None) is None, "a tombstone"
    assert decode_checkpoint(b"\x00", value) is None, "a record that does not parse"
    assert checkpoints_topic("A") == "A.checkpoints.internal"


def test_status_lists_them_as_problems_and_exits_4_with_the_fix() -> None:
    group = GroupStatus(group="billing", application="billing", topics=["orders"], positions={})
    ahead = offsets_ahead("billing", "B", {("orders", 0): 1_000_109}, {("orders", 0): 109}, {("orders", 0): 109})
    group.positions["B"] = GroupPosition(committed={"orders:0": 1_000_109}, ahead=ahead)
    report = StatusReport(
        stack="s", failover_done=False, clusters=[], links=[], consumer_groups=[group], last_failover=None, problems=[]
    )
    report.problems = status_problems(report)
    assert report.problems == ahead and len(ahead) == 1
    with pytest.raises(ClusterError) as err:
        raise_for_problems(report)
    assert err.value.exit_code == 4
    assert "1000109" in str(err.value) and "billing" in str(err.value) and "delete the group" in str(err.value)
