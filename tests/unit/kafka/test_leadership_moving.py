"""A partition without a leader yet is a moment to wait, not a broken cluster (CI once failed on a
NOT_LEADER_FOR_PARTITION right after MirrorMaker 2 created the topic on the target)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr.base.errors import ClusterError
from dr.kafka.client import Endpoint, leadership_moving, translate_kafka_error
from dr.runtime.mirrormaker import MirrorMaker

EP = Endpoint(bootstrap="127.0.0.1:20200", username="admin", password="s3cret")


def translated(code: int) -> Exception:
    exc = KafkaException(KafkaError(code))
    try:
        raise translate_kafka_error(exc, "listing partition offsets", EP) from exc
    except ClusterError as err:
        return err


def test_leaderless_partitions_are_told_apart_from_other_errors():
    for code in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    ):
        assert leadership_moving(translated(code)) and leadership_moving(KafkaException(KafkaError(code)))
    for code in (KafkaError._TRANSPORT, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._TIMED_OUT):
        assert not leadership_moving(translated(code))
    assert not leadership_moving(ClusterError("no cause", "next"))


def test_waiting_for_mirrormaker_outlasts_a_partition_without_leader_but_not_a_broken_cluster():
    answers = iter([translated(KafkaError.NOT_LEADER_FOR_PARTITION), {("t", 0): 3}, {("t", 0): 0}])

    def lag(_topics):
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    mm2 = SimpleNamespace(lag=lag, name="A->B", process=SimpleNamespace(log_file="mm2.log"))
    assert MirrorMaker.wait_caught_up(mm2, ["t"], timeout=10) < 10  # type: ignore[arg-type]

    def broken(_topics):
        raise translated(KafkaError._TRANSPORT)

    mm2 = SimpleNamespace(lag=broken, name="A->B", process=SimpleNamespace(log_file="mm2.log"))
    with pytest.raises(ClusterError, match=r"127\.0\.0\.1:20200"):
        MirrorMaker.wait_caught_up(mm2, ["t"], timeout=10)  # type: ignore[arg-type]
