"""Group-offset reads wait for a group coordinator that is not ready, and never send librdkafka's admin
OffsetFetch to it: on NOT_COORDINATOR that request dereferences the AdminClient's missing consumer-group
handle and the process dies with SIGSEGV (issue 36: the drill under PostgreSQL died so, waiting for the
group's first offset sync on a just-rebuilt passive)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from dr.base.errors import ClusterError
from dr.kafka import offsets
from dr.kafka.client import Endpoint

EP = Endpoint("127.0.0.1:1", "admin", "unused", cluster="A")


def failed(code: int) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def done(value: object) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class FakeAdmin:
    """DescribeConsumerGroups answers ``describe`` in turn; OffsetFetch answers one committed offset."""

    def __init__(self, describe: list[int | None]) -> None:
        self.describe = describe
        self.calls: list[str] = []

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        self.calls.append("describe")
        code = self.describe.pop(0) if self.describe else None
        return {g: failed(code) if code is not None else done(SimpleNamespace(group_id=g)) for g in groups}

    def list_consumer_group_offsets(self, requests: list[Any]) -> dict[str, Future[Any]]:
        self.calls.append("offset-fetch")
        (request,) = requests
        tp = SimpleNamespace(topic="orders", partition=0, offset=7)
        return {request.group_id: done(SimpleNamespace(topic_partitions=[tp]))}


def test_no_offset_fetch_reaches_a_coordinator_that_is_not_ready() -> None:
    admin = FakeAdmin([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, None])
    found = offsets._group_offsets(admin, EP, ["billing", "billing"])  # type: ignore[arg-type]
    assert found == {"billing": {("orders", 0): 7}}
    assert admin.calls == ["describe", "describe", "describe", "offset-fetch"]


def test_an_unknown_group_or_a_refusal_is_left_to_the_offset_fetch() -> None:
    admin = FakeAdmin([KafkaError.GROUP_ID_NOT_FOUND])
    assert offsets._group_offsets(admin, EP, ["new"]) == {"new": {("orders", 0): 7}}  # type: ignore[arg-type]
    assert admin.calls == ["describe", "offset-fetch"]


def test_the_wait_is_bounded_and_other_errors_are_not_waited_for() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    def loading() -> None:
        raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))

    with pytest.raises(KafkaException) as exc:
        offsets.while_coordinator_not_ready(loading, 3.0, interval=1.0, clock=lambda: now[0], sleep=sleep)
    assert offsets.coordinator_not_ready(exc.value) and slept == [1.0, 1.0, 1.0]

    def refused() -> None:
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    slept.clear()
    with pytest.raises(KafkaException):
        offsets.while_coordinator_not_ready(refused, 3.0, clock=lambda: now[0], sleep=sleep)
    assert slept == []


def test_a_coordinator_that_never_comes_is_a_cluster_error_naming_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offsets, "COORDINATOR_WAIT_S", 0.0)
    admin = FakeAdmin([KafkaError.COORDINATOR_NOT_AVAILABLE])
    with pytest.raises(ClusterError, match="COORDINATOR_NOT_AVAILABLE") as exc:
        offsets._group_offsets(admin, EP, ["billing"])  # type: ignore[arg-type]
    assert "127.0.0.1:1" in str(exc.value) and admin.calls == ["describe"]
