"""The active site's self-fence (:mod:`dr.controller.fence`): its decisions, its record, and the act driven by
the lease keeper — the Kafka side (the planned failover's ``fence``/``unfence``) replaced by a recorder here;
``tests/integration/test_controller_fence.py`` runs it on real brokers and a real etcd."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from dr.base.errors import FailoverError
from dr.controller import fence as fence_mod
from dr.controller.fence import (
    FenceRecord,
    FenceStore,
    SelfFence,
    fence_reason,
    may_lift,
    renew_deadline,
    renew_interval,
)
from dr.controller.loop import LeaseKeeper, Log
from dr.controller.metrics import ControllerMetrics
from dr.controller.witness import Holding
from tests.unit.controller.test_controller import _FakeWitness

BINDING = {"resource_type": "TOPIC", "name": "orders", "pattern": "LITERAL", "principal": "User:orders-app",
           "host": "*", "operation": "WRITE", "permission": "ALLOW"}  # fmt: skip


def _record(**extra: Any) -> FenceRecord:
    base: dict[str, Any] = dict(
        cluster="A", holder="me/A", token=7, reason="renew-deadline", fenced_at=1000.0, last_renewed_at=995.0,
        lease_expires_at=1005.0, removed=[BINDING],
    )  # fmt: skip
    return FenceRecord(**{**base, **extra})


def test_the_deadline_is_the_ttl_minus_the_margin_after_the_last_renewal_sent() -> None:
    assert renew_deadline(100.0, 10, 4) == 106.0
    assert renew_interval(10, 4) == 2.0  # three tries before the deadline
    assert renew_interval(9, 0) == 3.0  # never less often than a third of the TTL


@pytest.mark.parametrize(
    ("now", "renewed", "lost", "taken", "expected"),
    [
        (105.9, 100.0, False, False, None),  # renewed in time
        (106.0, 100.0, False, False, "renew-deadline"),  # not renewed by TTL - margin: fail closed
        (101.0, 100.0, True, False, "lease-lost"),  # the witness says it expired
        (101.0, 100.0, False, True, "lease-taken"),  # another holder has it
        (500.0, None, True, True, None),  # never held: it was never allowed to act, nothing to fence
    ],
)
def test_when_to_fence(now: float, renewed: float | None, lost: bool, taken: bool, expected: str | None) -> None:
    assert fence_reason(now, renewed, 10, 4, lost=lost, taken=taken) == expected


def test_the_fence_is_lifted_only_when_held_again_nothing_failed_over_and_the_site_still_active() -> None:
    record, mine = _record(), Holding("me/A", 9, 0.0)
    assert may_lift(record, mine, mine, None, True)[0]
    assert may_lift(record, mine, mine, (900.0, "completed"), True)[0]  # an earlier, finished failover
    assert not may_lift(record, None, mine, None, True)[0]
    assert not may_lift(record, mine, Holding("other/B", 10, 0.0), None, True)[0]  # another holds it now
    refused, why = may_lift(record, mine, mine, (996.0, "running"), True)
    assert not refused and "failover was started" in why
    assert not may_lift(record, mine, mine, (800.0, "interrupted"), True)[0]  # unfinished, whenever begun
    assert not may_lift(record, mine, mine, None, False)[0]  # the stack file names another site active
    assert not may_lift(_record(lifted_at=1010.0), mine, mine, None, True)[0]


def test_the_file_store_keeps_the_current_record_and_the_history(tmp_path: Path) -> None:
    store = FenceStore(tmp_path, "s", None)
    assert store.latest() is None
    first = _record()
    store.save(first, "me/A")
    store.save(first.model_copy(update={"lifted_at": 1010.0, "lifted_token": 9}), "me/A")
    second = _record(fenced_at=2000.0, token=9)
    store.save(second, "me/A")
    assert store.latest() == second
    doc = json.loads((tmp_path / "failover" / "self-fence.json").read_text())
    assert [h["fenced_at"] for h in doc["history"]] == [1000.0] and doc["history"][0]["lifted_token"] == 9
    assert (tmp_path / "failover" / "self-fence.json").stat().st_mode & 0o077 == 0


class _Kafka:
    """Records the planned fence's calls; ``fail`` makes the next fence raise as a cluster that does not answer."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fenced, self.unfenced, self.fail = 0, 0, False
        monkeypatch.setattr(fence_mod, "fence", self.fence)
        monkeypatch.setattr(fence_mod, "unfence", self.unfence)

    def fence(self, endpoint: Any, principals: list[str]) -> list[dict[str, str]]:
        assert principals == ["orders-app"]
        if self.fail:
            self.fail = False
            raise FailoverError("A does not answer")
        self.fenced += 1
        return [BINDING] if self.fenced == 1 else []

    def unfence(self, endpoint: Any, removed: list[dict[str, Any]]) -> int:
        self.unfenced += 1
        return len(removed)


def _keeper(
    tmp_path: Path, lift: tuple[bool, str] = (True, "ok")
) -> tuple[LeaseKeeper, SelfFence, _FakeWitness, io.StringIO]:
    witness, out = _FakeWitness(), io.StringIO()
    metrics = ControllerMetrics("s", "A", "manual")
    log = Log("json", out)
    keeper = LeaseKeeper(witness, "me/A", holds=True, log=log, metrics=metrics)
    keeper.fence = SelfFence(
        cluster="A", holder="me/A", endpoint=lambda: None,  # type: ignore[arg-type,return-value]  # the recorder ignores it
        principals=["orders-app"], store=FenceStore(tmp_path, "s", None), ttl_s=3.0, margin_s=1.0,
        lift_allowed=lambda record, holding: lift, log=log, metrics=metrics,
    )  # fmt: skip
    return keeper, keeper.fence, witness, out


def _events(out: io.StringIO) -> list[str]:
    return [json.loads(line)["event"] for line in out.getvalue().splitlines()]


def test_a_lost_lease_fences_before_it_is_taken_again_and_the_fence_is_lifted_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = _Kafka(monkeypatch)
    keeper, fence, witness, out = _keeper(tmp_path)
    keeper.tick()
    fence.check()
    assert kafka.fenced == 0 and not fence.fenced  # renewed in time: nothing
    witness.alive = False  # expired (the controller was frozen past the TTL)
    keeper.tick()
    assert kafka.fenced == 1 and kafka.unfenced == 1 and not fence.fenced
    assert _events(out) == ["lease-taken", "lease-lost", "self-fenced", "lease-taken", "self-fence-lifted"]
    record = FenceStore(tmp_path, "s", None).latest()
    assert record is not None and record.reason == "lease-lost" and record.token == 1 and record.lifted_token == 2
    assert record.removed == [BINDING] and record.fenced_at <= record.lifted_at  # type: ignore[operator]
    text = generate_latest(keeper.metrics.registry).decode()
    assert "kdr_self_fence_total 1.0" in text
    assert 'kdr_app_writes_allowed{cluster="A"} 1.0' in text


def test_the_deadline_fences_while_the_keeper_waits_on_a_silent_witness_and_a_refused_lift_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = _Kafka(monkeypatch)
    keeper, fence, _, out = _keeper(tmp_path, lift=(False, "a failover was started"))
    keeper.tick()
    fence._renewed_mono -= 2.5  # type: ignore[operator]  # the last renewal was sent 2.5 s ago: past 3 - 1
    kafka.fail = True
    fence.check()  # the cluster does not answer: retried
    assert not fence.fenced and "self-fence-failed" in _events(out)
    fence.check()
    assert fence.fenced and kafka.fenced == 1
    record = FenceStore(tmp_path, "s", None).latest()
    assert record is not None and record.reason == "renew-deadline" and record.fenced_at < record.lease_expires_at
    keeper.tick()  # renewed, but the lift is refused: it stays fenced, said once
    keeper.tick()
    assert fence.fenced and kafka.unfenced == 0
    assert _events(out).count("self-fence-kept") == 1
    assert 'kdr_app_writes_allowed{cluster="A"} 0.0' in generate_latest(keeper.metrics.registry).decode()
    # a controller restarted meanwhile finds the fence standing
    _, again, _, out2 = _keeper(tmp_path)
    assert again.fenced
    again.start()
    again.stop()
    assert _events(out2) == ["self-fence-kept"]


def test_a_lease_taken_by_another_holder_fences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = _Kafka(monkeypatch)
    keeper, fence, witness, _ = _keeper(tmp_path)
    keeper.tick()
    witness.alive = False
    monkeypatch.setattr(witness, "acquire", lambda holder: None)  # B's controller took it
    keeper.tick()
    assert fence.fenced and kafka.fenced == 1
    record = FenceStore(tmp_path, "s", None).latest()
    assert record is not None and record.reason == "lease-lost"  # expired first, then found taken: one fence


def test_the_old_active_sites_standing_fence_is_not_the_new_active_sites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failover B's controller builds B's fence: A's unlifted record (the store keeps the stack's last)
    must neither make B 'fenced' nor have A's removed ACLs restored on B."""
    kafka = _Kafka(monkeypatch)
    FenceStore(tmp_path, "s", None).save(_record(cluster="A"), "me/A")
    metrics, out = ControllerMetrics("s", "B", "automatic"), io.StringIO()
    fence = SelfFence(
        cluster="B", holder="me/B", endpoint=lambda: None,  # type: ignore[arg-type,return-value]
        principals=["orders-app"], store=FenceStore(tmp_path, "s", None), ttl_s=3.0, margin_s=1.0,
        lift_allowed=lambda record, holding: (True, "ok"), log=Log("json", out), metrics=metrics,
    )  # fmt: skip
    assert not fence.fenced and fence.record is None
    fence.lease_regained(Holding("me/B", 12, 0.0))
    assert kafka.unfenced == 0 and _events(out) == []
