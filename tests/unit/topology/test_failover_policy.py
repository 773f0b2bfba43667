"""``kafka-dr:failover_policy``: defaults, every refusal naming its field, and the stack-file round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dr.base.errors import ConfigError, TopologyError
from dr.topology import Topology, dump_stack_config, load_topology

ROOT = Path(__file__).resolve().parents[3]
ETCD = {"kind": "etcd", "endpoints": ["http://127.0.0.1:2379", "http://127.0.0.2:2379", "http://127.0.0.3:2379"]}


def _load(policy: Any) -> Topology:
    config = yaml.safe_load((ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))["config"]
    return load_topology("local", {**config, "kafka-dr:failoverPolicy": policy})


def _refused(policy: Any, exc: type[Exception] = ConfigError) -> str:
    with pytest.raises(exc) as caught:
        _load(policy)
    assert caught.value.exit_code == 2  # type: ignore[attr-defined]
    return str(caught.value)


def test_a_stack_without_a_policy_is_manual_with_the_defaults() -> None:
    config = yaml.safe_load((ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))["config"]
    policy = load_topology("local", config).failover_policy
    assert (policy.mode, policy.detect_after_s, policy.witness, policy.metrics_ports) == ("manual", 30.0, None, {})
    assert policy.lease_ttl_s + policy.margin_s <= policy.detect_after_s


def test_an_automatic_policy_with_a_witness_loads_in_camel_or_snake_case() -> None:
    snake = _load({"mode": "automatic", "witness": ETCD, "max_rpo_records": 100, "metrics_ports": {"A": 29464}})
    camel = _load({"mode": "automatic", "witness": ETCD, "maxRpoRecords": 100, "metricsPorts": {"A": 29464}})
    assert snake.failover_policy == camel.failover_policy
    assert snake.failover_policy.witness is not None and snake.failover_policy.witness.endpoints == ETCD["endpoints"]


def test_automatic_without_a_witness_is_refused_naming_the_field() -> None:
    message = _refused({"mode": "automatic", "max_rpo_records": 10})
    assert "failover_policy" in message and "needs a witness" in message


def test_automatic_without_max_rpo_records_is_refused() -> None:
    assert "max_rpo_records" in _refused({"mode": "automatic", "witness": ETCD})


def test_detect_after_shorter_than_the_lease_ttl_plus_margin_is_refused() -> None:
    message = _refused({"detect_after_s": 12, "lease_ttl_s": 10, "margin_s": 5})
    assert "failover_policy" in message and "detect_after_s (12) is shorter than lease_ttl_s + margin_s" in message
    assert _load({"detect_after_s": 15, "lease_ttl_s": 10, "margin_s": 5}).failover_policy.detect_after_s == 15


def test_a_margin_as_long_as_the_ttl_is_refused() -> None:
    assert "margin_s (10) must be shorter than lease_ttl_s (10)" in _refused({"lease_ttl_s": 10, "margin_s": 10})


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"mode": "auto"}, "failover_policy.mode"),
        ({"detect_after_s": 0}, "failover_policy.detect_after_s"),
        ({"cooldown_s": -1}, "failover_policy.cooldown_s"),
        ({"max_rpo_records": -5}, "failover_policy.max_rpo_records"),
        ({"witness": {"kind": "zookeeper"}}, "failover_policy.witness.kind"),
        ({"witness": {"kind": "etcd"}}, "failover_policy.witness"),
        ({"witness": {"kind": "etcd", "endpoints": ["127.0.0.1:2379"]}}, "failover_policy.witness.endpoints"),
        ({"witness": {"kind": "postgres", "endpoints": ["http://h:1"]}}, "failover_policy.witness"),
        ({"metrics_ports": {"A": 80}}, "failover_policy.metrics_ports"),
        ({"detectAfter": 30}, "failover_policy.detectAfter"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(policy: dict[str, Any], named: str) -> None:
    assert named in _refused(policy)


def test_metrics_ports_of_unknown_clusters_or_shared_are_refused() -> None:
    message = _refused({"metrics_ports": {"Z": 29464, "A": 29465, "B": 29465}}, TopologyError)
    assert "failover_policy.metrics_ports.Z: 'Z' is not a declared cluster" in message
    assert "failover_policy.metrics_ports.B: port 29465 is also A's" in message


def test_the_policy_is_written_back_only_when_declared() -> None:
    plain = _load({})
    assert "kafka-dr:failoverPolicy" not in dump_stack_config(plain)
    declared = _load({"mode": "automatic", "witness": {"kind": "postgres"}, "max_rpo_records": 0})
    written = dump_stack_config(declared)["kafka-dr:failoverPolicy"]
    assert written == {"mode": "automatic", "witness": {"kind": "postgres"}, "maxRpoRecords": 0} or written == {
        "mode": "automatic",
        "witness": {"kind": "postgres"},
        "max_rpo_records": 0,
    }
    assert _load(written).failover_policy == declared.failover_policy


def test_the_parity_check_runs_every_five_minutes_by_default_and_is_off_at_0_never_more_often_than_5_s() -> None:
    assert _load({}).failover_policy.parity_every_s == 300.0
    assert _load({"parityEveryS": 0}).failover_policy.parity_every_s == 0
    assert _load({"parity_every_s": 30}).failover_policy.parity_every_s == 30
    assert "parity" in _refused({"parityEveryS": 2}) and "at least 5" in _refused({"parityEveryS": 2})
    assert "parity" in _refused({"parityEveryS": -1})
