"""A link's connector converges in one ``up`` whatever an earlier run left (issue 45).

The REST client is the product's own (:class:`dr.kafka.connect_rest.ConnectRest`, its waits included); only
its transport is replaced by a small model of Connect's REST API that keeps, as Connect does, a task's old
state until the task is started again (a restart or a new config is applied asynchronously).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

import stacks.connect as connect_stack
from dr.base.errors import ClusterError
from dr.kafka.connect_rest import ConnectRest

CONFIG = {"connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector", "tasks.max": "1"}


class ConnectModel(ConnectRest):
    """One connector's state as Connect's REST API shows it; ``outcome`` is what a started task becomes."""

    def __init__(self, outcome: str = "RUNNING", reset_fails: bool = False) -> None:
        super().__init__("http://127.0.0.1:1", timeout=1)
        self.outcome = outcome
        self.reset_fails = reset_fails
        self.connectors: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        self.calls.append(f"{method} {path.split('?')[0]}")
        parts = [urllib.parse.unquote(p) for p in path.split("?")[0].strip("/").split("/")]
        if parts[0] == "connector-plugins":
            return {"configs": []}
        if method == "POST" and parts == ["connectors"]:
            self.connectors[body["name"]] = {"config": body["config"], "state": "STOPPED", "tasks": []}
            return {}
        c = self.connectors.get(parts[1])
        if c is None:
            if missing_ok:
                return None
            raise ClusterError(f"{method} {path}: not found (HTTP 404)")
        tail = parts[2:]
        if method == "GET" and tail == ["status"]:
            return {"connector": {"state": c["state"], "worker_id": "w"}, "tasks": [dict(t) for t in c["tasks"]]}
        if method == "GET" and tail == ["config"]:
            return dict(c["config"])
        if method == "DELETE" and tail == ["offsets"]:
            if self.reset_fails:
                raise ClusterError(f"{method} {path} failed with HTTP 500: Failed to construct kafka producer")
            return {}
        if method == "DELETE" and not tail:
            del self.connectors[parts[1]]
            return {}
        if method == "PUT" and tail == ["stop"]:
            c["state"], c["tasks"] = "STOPPED", []
        elif method == "PUT" and tail == ["resume"]:
            c["state"] = "RUNNING"
            c["tasks"] = [{"id": 0, "state": self.outcome, "worker_id": "w", "trace": "x.Boom: failed"}]
        elif method == "PUT" and tail == ["config"]:
            c["config"] = dict(body)  # applied later: the tasks keep their state for now
        elif method == "POST" and tail == ["restart"]:
            pass  # asynchronous: the status still shows the old states
        else:
            raise AssertionError(f"unexpected {method} {path}")
        return {}


def _props(**more: Any) -> dict[str, Any]:
    return {"local": False, "url": "http://127.0.0.1:1", "connector": "A-to-B-heartbeat", "config": CONFIG, **more}


@pytest.fixture
def connect(monkeypatch: pytest.MonkeyPatch) -> ConnectModel:
    model = ConnectModel()
    monkeypatch.setattr(connect_stack, "connect_rest", lambda _props: model)
    return model


def test_a_connector_whose_start_fails_midway_is_removed_for_the_next_run(connect: ConnectModel) -> None:
    connect.reset_fails = True
    with pytest.raises(RuntimeError, match=r"removed again: .*Failed to construct kafka producer"):
        connect_stack._create_connector(_props())
    assert connect.connectors == {}, "a connector left STOPPED would be waited on by the next run"


def test_a_connector_left_stopped_by_an_earlier_run_is_resumed_with_its_config(connect: ConnectModel) -> None:
    connect.connectors["A-to-B-heartbeat"] = {"config": {**CONFIG, "old": "1"}, "state": "STOPPED", "tasks": []}
    out = connect_stack._create_connector(_props(timeout_s=5))
    assert out["state"] == "RUNNING" and connect.connectors["A-to-B-heartbeat"]["config"] == CONFIG
    assert "PUT /connectors/A-to-B-heartbeat/resume" in connect.calls


def test_a_new_config_over_a_failed_task_is_judged_on_the_new_tasks(connect: ConnectModel) -> None:
    """Undoing a bad setting: the task that failed under the old config is not read as the new one's."""
    old = {**CONFIG, "target.cluster.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"}
    failed = [{"id": 0, "state": "FAILED", "worker_id": "w", "trace": "x.InvalidConfigurationException: old"}]
    connect.connectors["A-to-B-heartbeat"] = {"config": old, "state": "RUNNING", "tasks": failed}
    provider = connect_stack._ConnectorProvider()
    result = provider.update("A-to-B-heartbeat", _props(config=old, state="TASK_FAILED"), _props(timeout_s=5))
    assert result.outs is not None and result.outs["state"] == "RUNNING"
    assert connect.connectors["A-to-B-heartbeat"]["config"] == CONFIG


def test_a_task_that_fails_under_the_new_config_is_named_at_once(connect: ConnectModel) -> None:
    connect.outcome = "FAILED"
    with pytest.raises(RuntimeError, match=r"task 0 of 'A-to-B-heartbeat' FAILED on w: x.Boom: failed"):
        connect_stack._create_connector(_props(timeout_s=60))
    assert connect.connectors == {}
