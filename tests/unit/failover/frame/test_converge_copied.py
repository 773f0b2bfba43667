"""The converge wait of a link writing in transactions (issue 35): B's end offsets count commit markers,
so they reach A's before the records do; the wait reads the source positions the link committed."""

from __future__ import annotations

from typing import Any

import pytest

from dr.base.errors import ClusterError
from dr.failover.frame import converge
from dr.failover.frame.converge import wait_copied

TP = ("orders", 0)


@pytest.fixture
def offsets(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A holds 100 records; B 90 of them and 12 commit markers (its end offset 102, past A's)."""
    state: dict[str, Any] = {"ends": {"A": {TP: 100}, "B": {TP: 102}}, "copied": {TP: 90}}
    monkeypatch.setattr(converge, "end_offsets", lambda ep, _topics, *_a, **_k: dict(state["ends"][ep]))
    # no marker or aborted record on A: every gap holds records
    monkeypatch.setattr(
        converge, "uncopied", lambda _src, ends, copied: {tp: max(0, n - copied.get(tp, 0)) for tp, n in ends.items()}
    )
    return state


def test_equal_or_greater_end_offsets_are_not_a_transactional_copy_complete(offsets: dict[str, Any]) -> None:
    wait_copied("A", "B", ["orders"], timeout=0.3, what="link A-to-B")  # type: ignore[arg-type]  # the old judgement: done
    with pytest.raises(ClusterError) as info:
        wait_copied(
            "A",  # type: ignore[arg-type]
            "B",  # type: ignore[arg-type]
            ["orders"],
            timeout=0.6,
            what="link A-to-B",
            copied=lambda: offsets["copied"],
        )
    assert "did not copy 10 records" in str(info.value)
    offsets["copied"] = {TP: 100}
    wait_copied("A", "B", ["orders"], timeout=0.6, what="link A-to-B", copied=lambda: offsets["copied"])  # type: ignore[arg-type]


def test_a_connect_cluster_that_does_not_answer_yet_is_waited_for_and_named_at_the_deadline(
    offsets: dict[str, Any],
) -> None:
    def silent() -> dict[tuple[str, int], int]:
        raise ClusterError("Kafka Connect at http://127.0.0.1:1 is unreachable: no answer within 10s", "start it")

    with pytest.raises(ClusterError) as info:
        wait_copied("A", "B", ["orders"], timeout=0.6, what="link A-to-B", copied=silent)  # type: ignore[arg-type]
    assert "did not copy 100 records" in str(info.value) and "committed offsets unread" in str(info.value)
