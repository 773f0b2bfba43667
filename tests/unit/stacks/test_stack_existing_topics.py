"""Per-resource provisioning adopts the topics an external cluster already holds: the program registers each
with Pulumi's ``import_`` option (ID: the topic's name) instead of creating it (:mod:`stacks.existing_topics`),
under Pulumi's mocks with the cluster's answer stubbed — the only part of the program that reads a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.kafka.live import TopicConfigs
from dr.topology import load_topology
from stacks.existing_topics import declared_config
from tests.unit.stacks.test_stack_program import (
    RecordingMocks,
    _no_config_leak,  # noqa: F401 - autouse fixture
    _restore_the_mocks_found,  # noqa: F401 - autouse fixture
    production_config,
    run_program,
)

TOPIC = "kafka:index/topic:Topic"


def test_min_insync_inherited_with_the_stacks_value_is_not_declared_on_an_imported_topic() -> None:
    config = {"min.insync.replicas": "2", "retention.ms": "1000"}
    assert declared_config(config, TopicConfigs(2, False, {"retention.ms": "1000"})) == {"retention.ms": "1000"}
    assert declared_config(config, TopicConfigs(2, True, {"retention.ms": "1000"})) == config, "pinned: kept"
    assert declared_config(config, TopicConfigs(1, False, {})) == config, "another value: declared, the import says so"


def test_topics_already_on_an_external_cluster_are_imported_the_others_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: dict[str, list[str]] = {}

    def existing(cluster: str, endpoint: Any, names: list[str]) -> dict[str, TopicConfigs]:
        asked[cluster] = sorted(names)
        assert endpoint.bootstrap.startswith("broker-1.") and endpoint.password, "the admin endpoint of the cluster"
        if cluster != "dc1":
            return {}
        return {
            "orders": TopicConfigs(2, False, {"retention.ms": "604800000", "unclean.leader.election.enable": "false"})
        }

    monkeypatch.setattr("stacks.existing_topics.existing_topics", existing)
    imports: dict[str, str] = {}
    original = RecordingMocks.new_resource

    def recording(self: RecordingMocks, args: Any) -> Any:
        if args.typ == TOPIC:
            imports[args.name] = args.resource_id or ""
        return original(self, args)

    monkeypatch.setattr(RecordingMocks, "new_resource", recording)
    run = run_program(load_topology("production-example", production_config()), tmp_path)
    assert asked == {"dc1": ["orders", "payments"], "dc2": ["orders", "payments"]}, "the standby dc3 is not read"
    assert imports == {
        "dc1-topic-orders": "orders",
        "dc1-topic-payments": "",
        "dc2-topic-orders": "",
        "dc2-topic-payments": "",
    }
    orders = run.named(TOPIC, "dc1-topic-orders").inputs
    assert orders["config"] == {"retention.ms": "604800000", "unclean.leader.election.enable": "false"}
    assert run.named(TOPIC, "dc2-topic-orders").inputs["config"]["min.insync.replicas"] == "2"
    assert run.named(TOPIC, "dc1-topic-orders").retain_on_delete, "an imported topic is never deleted either"


def test_batched_provisioning_reads_nothing_its_topic_set_adopts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*_a: Any) -> dict[str, TopicConfigs]:
        raise AssertionError("the batched TopicSet adopts existing topics itself; nothing to import")

    monkeypatch.setattr("stacks.existing_topics.existing_topics", never)
    config = {**production_config(), "kafka-dr:provisioning": "batched"}
    run = run_program(load_topology("production-example", config), tmp_path)
    assert not run.of_type(TOPIC)
