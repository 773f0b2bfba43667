"""The typed ``drctl status`` report: which keys ``--json`` prints for each kind of entry, and the problems
:func:`~dr.failover.status.status_problems` finds in them.

An entry sets only what applies to it (a stopped local cluster has no health, an external one no process),
and :meth:`~dr.failover.status.StatusReport.to_json` leaves out what is unset, so the keys below are the
ones ``drctl status --json`` has always printed. No cluster is needed: the models are built directly.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dr.base.errors import ClusterError
from dr.failover.act.health import ClusterHealth
from dr.failover.status import (
    ClusterStatus,
    ConnectorStatus,
    GroupPosition,
    GroupStatus,
    HealthStatus,
    LinkStatus,
    StatusReport,
    raise_for_problems,
    status_problems,
)
from dr.topology import Engine, Kind, Role
from dr.topology.kinds import LinkState

LOCAL = {"name", "role", "kind", "process", "bootstrap", "brokers_declared", "running_nodes"}
HEALTH = {
    "reachable",
    "brokers",
    "expected_brokers",
    "offline",
    "under_replicated",
    "missing_topics",
    "error",
    "healthy",
    "brokers_down",
}
LINK = {"name", "source", "target", "state", "engine"}


def _local(name: str, role: Role, process: str, nodes: list[int]) -> ClusterStatus:
    return ClusterStatus(
        name=name,
        role=role,
        kind=Kind.LOCAL,
        process=process,
        bootstrap="127.0.0.1:19092",
        brokers_declared=1,
        running_nodes=nodes,
    )


def _running(name: str, role: Role, *, isr: bool = False) -> ClusterStatus:
    health = ClusterHealth(True, brokers=[1], expected_brokers=1)
    if isr:
        health.partitions["orders:0"] = {"leader": 1, "replicas": [1], "isr": [1]}
    entry = _local(name, role, "running", [1])
    entry.health = HealthStatus.of(health, isr=isr)
    entry.end_offsets = {"orders:0": 10, "orders:1": 4}
    return entry


def _lagging() -> LinkStatus:
    link = LinkStatus(name="A-to-B", source="A", target="B", state=LinkState.RUNNING, engine=Engine.MIRRORMAKER2)
    link.process = "running"
    link.lag, link.total_lag = {"orders:0": 3, "orders:1": 0}, 3
    return link


def _erring(process: str | None) -> LinkStatus:
    link = LinkStatus(name="A-to-B", source="A", target="B", state=LinkState.RUNNING, engine=Engine.MIRRORMAKER2)
    if process is not None:
        link.process = process
    link.error = "lag unknown: a side is unreachable"
    return link


def _report(clusters: list[ClusterStatus], links: list[LinkStatus]) -> StatusReport:
    report = StatusReport(
        stack="life",
        failover_done=False,
        clusters=clusters,
        links=links,
        consumer_groups=[],
        last_failover=None,
        problems=[],
    )
    report.problems = status_problems(report)
    return report


def test_a_stopped_local_cluster_has_no_health_key() -> None:
    stopped = _local("B", Role.PASSIVE, "stopped", []).model_dump(mode="json", exclude_unset=True)
    assert set(stopped) == LOCAL
    assert stopped["role"] == "passive" and stopped["kind"] == "local" and stopped["process"] == "stopped"


def test_a_running_cluster_has_health_and_end_offsets_and_partitions_only_with_isr() -> None:
    entry = _running("A", Role.ACTIVE).model_dump(mode="json", exclude_unset=True)
    assert set(entry) == LOCAL | {"health", "end_offsets"}
    assert set(entry["health"]) == HEALTH, "no partitions without --isr"
    assert entry["health"]["error"] is None and entry["health"]["healthy"] is True
    assert entry["end_offsets"] == {"orders:0": 10, "orders:1": 4}
    with_isr = _running("A", Role.ACTIVE, isr=True).model_dump(mode="json", exclude_unset=True)
    assert set(with_isr["health"]) == HEALTH | {"partitions"}
    assert with_isr["health"]["partitions"] == {"orders:0": {"leader": 1, "replicas": [1], "isr": [1]}}


def test_an_external_cluster_without_an_endpoint_has_bootstrap_and_error_only() -> None:
    entry = ClusterStatus(name="dc1", role=Role.ACTIVE, kind=Kind.EXTERNAL, bootstrap="b1:9093")
    entry.error = "cluster 'dc1': no usable admin credentials"
    assert set(entry.model_dump(mode="json", exclude_unset=True)) == {"name", "role", "kind", "bootstrap", "error"}


def test_a_link_with_lag_and_a_link_with_an_error() -> None:
    lagging = _lagging().model_dump(mode="json", exclude_unset=True)
    assert set(lagging) == LINK | {"process", "lag", "total_lag"}
    assert lagging["engine"] == "mirrormaker2" and lagging["total_lag"] == 3
    assert set(_erring("running").model_dump(mode="json", exclude_unset=True)) == LINK | {"process", "error"}
    assert set(_erring(None).model_dump(mode="json", exclude_unset=True)) == LINK | {"error"}, "an external link"


def test_a_connect_link_keeps_the_connectors_as_connect_reports_them() -> None:
    states = {
        "A-to-B-source": {
            "state": "RUNNING",
            "worker": "w1:8083",
            "tasks": [{"id": 0, "state": "RUNNING", "worker": "w1:8083"}],
        },
        "A-to-B-checkpoint": {"state": "ABSENT", "tasks": []},
    }
    link = _lagging()
    link.connect = "mm2"
    link.connectors = {name: ConnectorStatus.model_validate(s) for name, s in states.items()}
    dumped = link.model_dump(mode="json", exclude_unset=True)
    assert set(dumped) == LINK | {"connect", "connectors", "process", "lag", "total_lag"}
    assert dumped["connectors"] == states, "an absent connector has no worker key"
    unreachable = _erring(None)
    unreachable.connect, unreachable.process, unreachable.connect_error = "mm2", "unreachable", "Connect mm2: no answer"
    assert set(unreachable.model_dump(mode="json", exclude_unset=True)) == LINK | {
        "connect",
        "process",
        "connect_error",
        "error",
    }


def test_group_positions_hold_offsets_or_an_error() -> None:
    group = GroupStatus(group="billing", application="billing", topics=["orders"], positions={})
    group.positions["A"] = GroupPosition(committed={"orders:0": 4}, committed_total=4, lag_total=6)
    group.positions["B"] = GroupPosition(error="group coordinator not available")
    assert group.model_dump(mode="json", exclude_unset=True)["positions"] == {
        "A": {"committed": {"orders:0": 4}, "committed_total": 4, "lag_total": 6},
        "B": {"error": "group coordinator not available"},
    }


def test_the_report_keys_and_its_problems() -> None:
    report = _report(
        [_running("A", Role.ACTIVE), _local("B", Role.PASSIVE, "stopped", []), _local("C", Role.STANDBY, "absent", [])],
        [_erring("running")],
    )
    dumped = report.to_json()
    assert set(dumped) == {
        "stack",
        "failover_done",
        "clusters",
        "links",
        "consumer_groups",
        "last_failover",
        "problems",
    }
    assert dumped["last_failover"] is None, "null, not left out"
    assert [set(c) for c in dumped["clusters"]] == [LOCAL | {"health", "end_offsets"}, LOCAL, LOCAL]
    assert (
        report.problems
        == dumped["problems"]
        == [
            "cluster B (passive) is stopped",
            "link A-to-B (A → B): lag unknown: a side is unreachable",
        ]
    )
    with pytest.raises(ClusterError) as info:
        raise_for_problems(report)
    assert info.value.exit_code == 4


def test_problems_of_running_links_and_clusters() -> None:
    healthy = _report([_running("A", Role.ACTIVE), _running("B", Role.PASSIVE)], [_lagging()])
    assert healthy.problems == [], "lag alone is not a problem"
    raise_for_problems(healthy)
    stopped = _lagging()
    stopped.process = "stopped"
    assert _report([_running("A", Role.ACTIVE)], [stopped]).problems == [
        "link A-to-B (A → B) is stopped; the topology says it runs"
    ]
    down = _running("B", Role.PASSIVE)
    down.health = HealthStatus.of(
        ClusterHealth(False, expected_brokers=1, error="nothing listens on b:9093"), isr=False
    )
    degraded = _local("A", Role.ACTIVE, "degraded", [1])
    degraded.brokers_declared = 3
    assert _report([degraded, down], []).problems == [
        "cluster A (active) is degraded: nodes [1] of 3 brokers run",
        "cluster B (passive) is unreachable: nothing listens on b:9093",
    ]


def test_an_entry_rejects_what_is_not_a_role() -> None:
    with pytest.raises(ValidationError):
        ClusterStatus.model_validate({"name": "A", "role": "primary", "kind": "local"})


def test_a_pulumi_lock_of_a_dead_engine_is_a_problem_with_the_command_that_clears_it() -> None:
    from dr.base.errors import ClusterError
    from dr.failover.status import PulumiLockStatus

    report = _report([], [])
    report.pulumi_locks = [
        PulumiLockStatus(holder="pid 4242 on host vm (user root) since 2026-11-24T10:07:55Z", alive=False, path="l"),
        PulumiLockStatus(holder="pid 7 on host vm (user root) since 2026-11-24T10:08:00Z", alive=True, path="m"),
    ]
    report.problems = status_problems(report)
    assert report.problems == [
        "Pulumi lock left by an engine that is gone: pid 4242 on host vm (user root) since 2026-11-24T10:07:55Z"
    ]
    with pytest.raises(ClusterError) as err:
        raise_for_problems(report)
    assert "`drctl estate up --stack life` removes that lock" in str(err.value)


def test_a_failed_task_is_quoted_and_a_connector_without_tasks_is_explained() -> None:
    from dr.failover.status import _connector_errors
    from dr.runtime.connect_link import _cause

    trace = (
        "org.apache.kafka.connect.errors.ConnectException: task failed\n\tat org.apache.kafka.Foo.bar(Foo.java:1)\n"
        "Caused by: javax.net.ssl.SSLHandshakeException: PKIX path building failed\n\tat x.y(Z.java:2)"
    )
    assert _cause(trace) == "javax.net.ssl.SSLHandshakeException: PKIX path building failed"
    assert _cause(None) is None and _cause("  ") is None
    connectors = {
        "A-to-B-source": ConnectorStatus.model_validate(
            {"state": "RUNNING", "tasks": [{"id": 0, "state": "FAILED", "worker": "w1", "error": _cause(trace)}]}
        )
    }
    failed = _lagging()
    failed.process, failed.connect = "failed", "mm2"
    failed.connect_error = _connector_errors(connectors)[0]
    assert _report([_running("A", Role.ACTIVE)], [failed]).problems == [
        "link A-to-B (A → B) is failed; the topology says it runs (A-to-B-source task 0: "
        "javax.net.ssl.SSLHandshakeException: PKIX path building failed)"
    ]
    idle = _lagging()
    idle.process = "no tasks"
    (problem,) = _report([_running("A", Role.ACTIVE)], [idle]).problems
    assert "running with no tasks: it replicates nothing" in problem and "TLS and SASL" in problem


def test_an_endpoint_pointing_away_from_the_active_cluster_is_a_problem_with_the_next_step() -> None:
    report = _report([], [])
    report.endpoint = {"bootstrap": "127.0.0.1:19900", "proxy": "running", "points_at": ["B"], "active": "B"}
    assert status_problems(report) == []
    report.endpoint = {**report.endpoint, "points_at": ["A"]}
    (problem,) = status_problems(report)
    assert "client endpoint 127.0.0.1:19900 points at A, not at the active cluster B" in problem
    assert "`drctl estate up --stack life --refresh` points it back at B" in problem
    report.endpoint = {"bootstrap": "proxy:9092", "points_at": [], "active": "B"}  # external proxy: by hand
    (problem,) = status_problems(report)
    assert "points at nothing" in problem and "set B's servers of backends kdr_bootstrap" in problem
    report.endpoint = {"bootstrap": "proxy:9092", "error": "the runtime API does not answer", "active": "B"}
    assert status_problems(report) == []  # unknown, not drifted: the endpoint line carries the error


def test_an_endpoint_moved_by_an_unfinished_failover_says_to_resume_it() -> None:
    from dr.topology.client_endpoint import endpoint_drift

    ep = {"bootstrap": "127.0.0.1:19900", "proxy": "running", "points_at": ["B"], "active": "A"}
    drift = endpoint_drift(ep, "life", failover_unfinished=True)
    assert drift is not None and "`drctl failover --stack life` resumes it" in drift
    assert "estate up" not in drift  # that would point it back at A while B is the writable one


def test_a_dedicated_link_with_a_dead_task_names_it_its_restarts_and_the_command_that_restarts_it() -> None:
    from dr.failover.status import render_status

    dead = _lagging()
    dead.process = "task dead"
    dead.failure = "task MirrorSourceConnector-1 died: org.apache.kafka.common.errors.InvalidTxnStateException: x"
    dead.restarts, dead.last_restart = 2, "2026-11-29T10:00:05+00:00: task MirrorSourceConnector-1: y"
    report = _report([_running("A", Role.ACTIVE)], [dead])
    (problem,) = report.problems
    assert problem.startswith("link A-to-B (A → B) does not copy: task MirrorSourceConnector-1 died: ")
    assert "restarted 2 time(s) so far" in problem
    with pytest.raises(ClusterError) as raised:
        raise_for_problems(report)
    assert "`drctl link start --stack life --link A-to-B`" in str(raised.value)
    assert {"failure", "restarts", "last_restart"} <= set(report.to_json()["links"][0])
    text = render_status(report)
    assert "task dead" in text and "restarted 2× by its watchdog" in text
