"""The drill's applications follow their published configuration; their RTO is their own traffic's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dr.failover.drill.traffic import ConfigSource, rto_gap
from dr.failover.record.metrics import utc_text


def _publish(state: Path, app: str, bootstrap: str) -> None:
    d = state / "clients"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{app}.json"
    path.write_text(json.dumps({"bootstrap.servers": bootstrap, "sasl.username": app}))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a distinct mtime for each write


def test_config_source_reports_a_move_only_to_another_known_cluster(tmp_path: Path) -> None:
    source = ConfigSource(tmp_path, "orders-app", {"127.0.0.1:1": "A", "127.0.0.1:2": "B"})
    assert source.changed("127.0.0.1:1") is None, "nothing published yet"
    _publish(tmp_path, "orders-app", "127.0.0.1:1")
    assert source.changed("127.0.0.1:1") is None, "the same cluster is no move"
    _publish(tmp_path, "orders-app", "127.0.0.1:9")
    assert source.changed("127.0.0.1:1") is None, "an unknown cluster is ignored"
    _publish(tmp_path, "orders-app", "127.0.0.1:2")
    moved = source.changed("127.0.0.1:1")
    assert moved is not None and moved[1] == "B" and moved[0]["bootstrap.servers"] == "127.0.0.1:2"
    assert source.changed("127.0.0.1:2") is None, "read once"


def test_application_rto_is_last_on_source_to_first_on_target() -> None:
    gap = rto_gap("orders-app", "writes", [10.0, 12.5, 11.0], [19.0, 18.25], "A", "B")
    assert gap.rto_s == pytest.approx(5.75)
    assert gap.measured == "last write acknowledged on A → first write acknowledged on B"
    assert rto_gap("g", "reads", [1.0], [], "A", "B").rto_s is None, "never resumed: no RTO"


def test_utc_text_is_readable_and_exact_to_the_millisecond() -> None:
    assert utc_text(0) == "1970-01-01 00:00:00.000 UTC"
    assert utc_text(1795357202970) == "2026-11-22 14:20:02.970 UTC"
    assert utc_text(None) is None


def test_a_commit_of_the_old_client_after_the_move_is_not_the_applications(tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition

    from dr.failover.drill.traffic import ConsumerLoop

    loop = ConsumerLoop({"bootstrap.servers": "127.0.0.1:1"}, "A", "orders", ConfigSource(tmp_path, "billing", {}))
    on_a = loop.commit_recorder("A")
    on_a(None, [TopicPartition("orders", 0, 5)])
    loop._cluster = "B"  # the application moved; the old client closes in the background
    on_a(None, [TopicPartition("orders", 0, 7)])  # its closing commit, when A answers again
    loop.commit_recorder("B")(None, [TopicPartition("orders", 0, 7)])
    assert [c for c, _t in loop.commits] == ["A", "B"]


def test_the_snapshotter_never_takes_more_than_a_fifth_of_the_time() -> None:
    """Five snapshots a second of a small estate; at 1,000 topics, where one takes longer, less often."""
    from dr.failover.drill.traffic import snapshot_pause

    assert snapshot_pause(0.01) == 0.2 and snapshot_pause(0.05) == 0.2
    assert snapshot_pause(0.3) == 1.2
    for took in (0.01, 0.05, 0.1, 0.3, 2.0):
        assert took / (took + snapshot_pause(took)) <= 0.2
