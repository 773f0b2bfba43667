"""When the planned promote may kill the drained link instead of stopping it gracefully (issue 46)."""

from __future__ import annotations

import pytest

from dr.failover.kinds.active_passive.steps import nothing_left_to_flush

DRAINED = {"drained": True, "groups_synced": True, "residual_lag": {}}


def test_a_drained_link_with_every_group_synced_has_nothing_left_to_flush() -> None:
    assert nothing_left_to_flush(DRAINED)


@pytest.mark.parametrize(
    "change",
    [
        {"drained": False},  # --force: records left to copy
        {"residual_lag": {"orders:0": 3}},
        {"groups_synced": False},  # a group's last commits not yet on B: the graceful stop's checkpoints matter
    ],
)
def test_anything_left_keeps_the_graceful_stop(change: dict[str, object]) -> None:
    assert not nothing_left_to_flush({**DRAINED, **change})


def test_no_drain_recorded_keeps_the_graceful_stop() -> None:
    assert not nothing_left_to_flush({})
