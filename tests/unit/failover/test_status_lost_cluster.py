"""``drctl status`` while a cluster is lost: the advice is the failover that takes over from it (or to wait
for an external cluster), not a restart of the estate — per architecture and role. No cluster is needed:
the reports are built directly."""

from __future__ import annotations

import pytest

from dr.base.errors import ClusterError, DRError
from dr.failover.act.health import ClusterHealth
from dr.failover.status import (
    ClusterStatus,
    HealthStatus,
    LastFailover,
    LinkStatus,
    StatusReport,
    raise_for_problems,
    status_problems,
)
from dr.topology import Architecture, Engine, Kind, Role
from dr.topology.kinds import LinkState

RESTART = "`drctl estate up --stack life --refresh`"


def _up(name: str, role: Role) -> ClusterStatus:
    entry = ClusterStatus(name=name, role=role, kind=Kind.LOCAL, process="running", brokers_declared=1)
    entry.health = HealthStatus.of(ClusterHealth(True, brokers=[1], expected_brokers=1), isr=False)
    return entry


def _stopped(name: str, role: Role) -> ClusterStatus:
    return ClusterStatus(name=name, role=role, kind=Kind.LOCAL, process="stopped", brokers_declared=1)


def _unreachable(name: str, role: Role) -> ClusterStatus:
    entry = ClusterStatus(name=name, role=role, kind=Kind.EXTERNAL, bootstrap=f"{name.lower()}:9093")
    entry.health = HealthStatus.of(ClusterHealth(False, error=f"nothing listens on {name.lower()}:9093"), isr=False)
    return entry


def _link(source: str, target: str) -> LinkStatus:
    link = LinkStatus(
        name=f"{source}-to-{target}", source=source, target=target, state=LinkState.RUNNING, engine=Engine.MIRRORMAKER2
    )
    link.process, link.error = "stopped", "lag unknown: a side is unreachable"
    return link


def _advice(architecture: Architecture, clusters: list[ClusterStatus], links: list[LinkStatus]) -> DRError:
    report = StatusReport(
        stack="life",
        failover_done=False,
        architecture=architecture,
        clusters=clusters,
        links=links,
        consumer_groups=[],
        last_failover=None,
        problems=[],
    )
    report.problems = status_problems(report)
    with pytest.raises(DRError) as info:
        raise_for_problems(report)
    return info.value


def test_a_lost_region_is_failed_over_not_restarted() -> None:
    err = _advice(
        Architecture.ACTIVE_ACTIVE,
        [_stopped("A", Role.ACTIVE), _up("B", Role.ACTIVE)],
        [_link("A", "B"), _link("B", "A")],
    )
    assert isinstance(err, ClusterError)
    assert "`drctl failover --stack life --region A --mode unplanned --dry-run`" in str(err.fix)
    assert "start it with its data (`drctl estate start --stack life --cluster A`)" in str(err.fix)
    assert RESTART not in str(err.fix), "no restart of the whole estate for a lost region"
    assert "drctl link start" not in str(err.fix), "no link of the lost region restarted"
    assert "runbooks/active-active.md" in str(err.fix)


def test_a_lost_edge_and_a_lost_hub() -> None:
    edge = _advice(Architecture.HUB_SPOKE, [_up("H", Role.ACTIVE), _stopped("E1", Role.EDGE)], [_link("E1", "H")])
    assert "`drctl failover --stack life --edge E1 --mode unplanned --dry-run`" in str(edge.fix)
    assert RESTART not in str(edge.fix)
    hub = _advice(Architecture.HUB_SPOKE, [_unreachable("H", Role.ACTIVE), _up("P", Role.PASSIVE)], [_link("H", "P")])
    assert "wait for H if it is coming back" in str(hub.fix)
    assert "`drctl failover --stack life --mode unplanned --dry-run`" in str(hub.fix)
    assert "drctl estate" not in str(hub.fix), "an external hub is not this machine's to start"


def test_an_external_passive_is_waited_for_and_a_local_passive_restarted() -> None:
    external = _advice(Architecture.ACTIVE_PASSIVE, [_up("A", Role.ACTIVE), _unreachable("B", Role.PASSIVE)], [])
    assert "wait for B (external: drctl does not restart it)" in str(external.fix)
    assert RESTART not in str(external.fix) and "drctl failover" not in str(external.fix)
    local = _advice(Architecture.ACTIVE_PASSIVE, [_up("A", Role.ACTIVE), _stopped("B", Role.PASSIVE)], [])
    assert RESTART in str(local.fix) and "drctl failover" not in str(local.fix)


def test_a_region_whose_failover_runs_is_left_to_it() -> None:
    report = StatusReport(
        stack="life",
        failover_done=False,
        architecture=Architecture.ACTIVE_ACTIVE,
        clusters=[_stopped("A", Role.ACTIVE), _up("B", Role.ACTIVE)],
        links=[],
        consumer_groups=[],
        last_failover=LastFailover(
            failover_id="f1",
            mode="unplanned",
            status="running",
            source="A",
            target="B",
            standby=None,
            rto_s=None,
            a_b_c_s=None,
            pending=["move"],
            next=[],
            journal="j",
            steps=[],
            lock_held=True,
        ),
        problems=[],
    )
    report.problems = status_problems(report)
    with pytest.raises(ClusterError) as info:
        raise_for_problems(report)
    assert info.value.fix == "failover f1 of A is running: let it finish (`drctl status --stack life`)"
