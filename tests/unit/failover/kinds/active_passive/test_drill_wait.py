"""The drill's wait for a group's first offset sync on B (issue 36: a drill against a just-rebuilt passive
stopped with exit 4 on COORDINATOR_LOAD_IN_PROGRESS before any failover step)."""

from __future__ import annotations

import pytest

from dr.base.errors import ClusterError
from dr.failover.kinds.active_passive import drill
from dr.kafka.client import Endpoint

EP = Endpoint("127.0.0.1:1", "admin", "unused")


def test_a_loading_group_coordinator_is_not_yet_synced_and_other_errors_still_stop_the_drill(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[object] = [
        ClusterError("reading offsets of group 'g': KafkaError{code=COORDINATOR_LOAD_IN_PROGRESS}"),
        {},
        {("orders", 0): 5},
        ClusterError("reading offsets of group 'g': KafkaError{code=GROUP_AUTHORIZATION_FAILED}"),
    ]

    def committed(_ep: Endpoint, _group: str) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(drill, "committed_offsets", committed)
    assert drill.group_synced(EP, "g") is False  # coordinator loading: wait on
    assert drill.group_synced(EP, "g") is False  # no offsets yet
    assert drill.group_synced(EP, "g") is True
    with pytest.raises(ClusterError, match="GROUP_AUTHORIZATION_FAILED"):
        drill.group_synced(EP, "g")
