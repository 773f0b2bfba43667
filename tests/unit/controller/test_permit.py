"""The lease permit (:mod:`dr.controller.permit`): the file the brokers' lease fence reads — its content, its
mode, its atomic replacement — and when the lease keeper grants, withholds and revokes it. The broker side
(``kafkadr.fence.LeaseFenceAuthorizer``) has its own Maven unit tests (``toolchain/lease-authorizer``) and runs
on real brokers in ``tests/integration/test_controller_fence.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from dr.controller.permit import LeasePermit, permit_text
from dr.controller.witness import Holding
from dr.runtime.cluster import LEASE_FENCE_AUTHORIZER, STANDARD_AUTHORIZER, ClusterSpec, server_properties
from tests.unit.controller.test_fence import _events, _Kafka, _keeper


def _props(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_the_permit_says_until_when_in_epoch_milliseconds_and_who_granted_it() -> None:
    assert permit_text(1_700_000_000.1234, 7, "ops@a/A") == "until.ms=1700000000123\ntoken=7\nholder=ops@a/A\n"
    assert permit_text(0, 0, "bad\nline=x").splitlines() == ["until.ms=0", "token=0", "holder=badline=x"]


def test_a_grant_is_the_renewal_sent_plus_ttl_minus_margin_written_0600_by_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "cluster" / "lease-permit"
    permit = LeasePermit(path, ttl_s=12, margin_s=8)
    until = permit.grant(Holding("me/A", 5, 0.0), sent_wall=1000.0)
    assert until == 1004.0 == permit.until_s
    assert _props(path) == {"until.ms": "1004000", "token": "5", "holder": "me/A"}
    assert path.stat().st_mode & 0o777 == 0o600
    # a reader holding the old file sees it whole: the new one replaces it, it is never rewritten in place
    old = tmp_path / "old-link"
    os.link(path, old)
    permit.grant(Holding("me/A", 5, 0.0), sent_wall=1001.5)
    assert _props(old)["until.ms"] == "1004000" and _props(path)["until.ms"] == "1005500"
    assert path.stat().st_ino != old.stat().st_ino
    assert [p.name for p in path.parent.iterdir()] == ["lease-permit"]  # no temporary file left behind
    permit.revoke(5, "me/A")
    assert _props(path)["until.ms"] == "0" and permit.until_s == 0


def test_the_keeper_grants_after_each_renewal_and_revokes_when_the_lease_is_lost_or_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = _Kafka(monkeypatch)
    keeper, _, witness, out = _keeper(tmp_path)
    path = tmp_path / "lease-permit"
    keeper.permit = LeasePermit(path, ttl_s=3.0, margin_s=1.0)
    keeper.tick()
    first = int(_props(path)["until.ms"])
    assert first > 0 and _props(path)["token"] == "1"
    keeper.tick()  # renewed: the permit moves on
    assert int(_props(path)["until.ms"]) >= first
    witness.alive = False  # the lease expired: revoked before the fence, granted again once fenced and held
    keeper.tick()
    assert kafka.fenced == 1
    events = _events(out)
    assert events.index("lease-permit-revoked") < events.index("self-fenced") < events.index("lease-taken", 1)
    assert _props(path)["token"] == "2" and int(_props(path)["until.ms"]) > 0
    keeper.stop()
    assert _props(path)["until.ms"] == "0"
    assert "kdr_lease_permit_until_seconds 0.0" in generate_latest(keeper.metrics.registry).decode()


def test_no_permit_while_a_due_fence_is_not_confirmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = _Kafka(monkeypatch)
    keeper, fence, witness, out = _keeper(tmp_path)
    path = tmp_path / "lease-permit"
    keeper.permit = LeasePermit(path, ttl_s=3.0, margin_s=1.0)
    keeper.tick()
    witness.alive = False
    kafka.fail = True  # the cluster does not answer the fence: the lease is taken again, the permit withheld
    keeper.tick()
    assert fence.owed and not fence.fenced and _props(path)["until.ms"] == "0"
    assert "lease-permit-withheld" in _events(out)
    fence.check()  # the due fence is retried although the lease is held again
    assert fence.fenced and not fence.owed
    keeper.tick()
    assert int(_props(path)["until.ms"]) > 0


def test_a_local_cluster_with_the_lease_fence_runs_the_authorizer_on_its_permit(tmp_path: Path) -> None:
    plain = server_properties(ClusterSpec("A", base_port=20000), 1, tmp_path / "data", "pw")
    assert plain["authorizer.class.name"] == STANDARD_AUTHORIZER and "kdr.lease.permit.file" not in plain
    spec = ClusterSpec("A", base_port=20000, lease_fence=True)
    fenced = server_properties(spec, 1, tmp_path / "data", "pw", permit_file=tmp_path / "lease-permit")
    assert fenced["authorizer.class.name"] == LEASE_FENCE_AUTHORIZER
    assert fenced["kdr.lease.permit.file"] == str(tmp_path / "lease-permit")
    assert fenced["kdr.lease.exempt.principals"] == "User:replicator"
    assert fenced["super.users"] == "User:broker;User:admin"


def test_the_broker_fence_follows_the_policy_mode() -> None:
    from dr.topology.failover_policy import FailoverPolicy

    assert not FailoverPolicy().broker_fence
    witness = {"kind": "etcd", "endpoints": ["http://127.0.0.1:2379"]}
    assert FailoverPolicy(mode="automatic", max_rpo_records=10, witness=witness).broker_fence  # type: ignore[arg-type]
