"""``wait_copied``: the failover's wait until a link's target holds what its source held."""

from __future__ import annotations

from typing import Any

import pytest

from dr.failover.frame import converge
from dr.kafka.client import Endpoint

SOURCE = Endpoint("127.0.0.1:1", "admin", "pw", "SASL_PLAINTEXT", "SCRAM-SHA-512")
TARGET = Endpoint("127.0.0.1:2", "admin", "pw", "SASL_PLAINTEXT", "SCRAM-SHA-512")


def test_each_poll_reads_the_targets_offsets_once_whatever_the_partition_count(monkeypatch: pytest.MonkeyPatch) -> None:
    partitions = {(f"t{i}", p): 5 for i in range(100) for p in range(3)}
    calls = {"source": 0, "target": 0}
    polls_until_copied = 3

    def end_offsets(endpoint: Endpoint, topics: list[str], timeout: float = 15.0) -> dict[Any, int]:
        if endpoint is SOURCE:
            calls["source"] += 1
            return dict(partitions)
        calls["target"] += 1
        copied = calls["target"] >= polls_until_copied
        return {tp: (n if copied else n - 1) for tp, n in partitions.items()}

    monkeypatch.setattr(converge, "end_offsets", end_offsets)
    monkeypatch.setattr(converge, "wait_until", _polls)
    converge.wait_copied(SOURCE, TARGET, sorted({t for t, _ in partitions}), timeout=10, what="link A-to-B")
    # 300 partitions: one source snapshot, one target read per poll (it read the target once per partition)
    assert calls == {"source": 1, "target": polls_until_copied}


def _polls(predicate: Any, timeout: float, interval: float = 0.1) -> bool:
    return any(predicate() for _ in range(10))


def test_a_target_that_never_catches_up_names_the_link_and_the_records_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        converge, "end_offsets", lambda ep, topics, timeout=15.0: {("orders", 0): 7 if ep is SOURCE else 4}
    )
    monkeypatch.setattr(converge, "wait_until", _polls)
    with pytest.raises(converge.ClusterError, match="link A-to-B did not copy 3 records"):
        converge.wait_copied(SOURCE, TARGET, ["orders"], timeout=1, what="link A-to-B")
