"""The automatic failover's parts that need no estate (:mod:`dr.controller.act`, :mod:`dr.controller.observer`):
a controller that finds the lease taken is told who holds it and starts nothing; the active site gives its
lease back while its cluster is down and wants it again when it answers; an observer is refused (exit 2,
nothing started) without a witness or under a cluster's name."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.cli.drctl import main
from dr.controller.act import Automatic
from dr.controller.loop import LeaseKeeper, Log
from dr.controller.metrics import ControllerMetrics
from dr.controller.witness import Holding
from dr.topology import load_stack_file
from tests.conftest import copy_stack


class _Witness:
    """A witness held by ``holder`` (None: free); records what it was asked."""

    ttl_s = 3.0

    def __init__(self, holder: str | None) -> None:
        self.held = None if holder is None else Holding(holder, 7, 0.0)
        self.released: list[int] = []

    def describe(self) -> str:
        return "fake"

    def acquire(self, holder: str) -> Holding | None:
        if self.held is not None:
            return None
        self.held = Holding(holder, 8, 0.0)
        return self.held

    def renew(self, holding: Holding) -> bool:
        return self.held == holding

    def current(self) -> Holding | None:
        return self.held

    def release(self, holding: Holding) -> None:
        self.released.append(holding.token)
        self.held = None

    def close(self) -> None:
        pass

    def publish(self, observer: str, states: dict[str, str], ttl_s: float) -> None:
        pass

    def verdicts(self) -> dict[str, dict[str, str]]:
        return {}

    def mark_automatic(self, holder: str, token: int) -> None:
        raise AssertionError("nothing may be marked: no failover starts")

    def last_automatic(self) -> float | None:
        return None


@pytest.fixture
def ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackRef:
    copy_stack("local", tmp_path / "stacks" / "Pulumi.ctl.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path / "stacks"))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return StackRef.resolve("ctl")


def _automatic(ref: StackRef, witness: _Witness, holds: bool) -> tuple[Automatic, LeaseKeeper, io.StringIO]:
    out = io.StringIO()
    log = Log("json", out)
    metrics = ControllerMetrics("ctl", "B", "automatic")
    keeper = LeaseKeeper(witness, "ops@b2/B", holds=holds, log=log, metrics=metrics)
    return Automatic(ref, "B", witness, keeper, log, metrics), keeper, out


def _events(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_controller_that_finds_the_lease_taken_is_told_who_holds_it_and_starts_nothing(ref: StackRef) -> None:
    witness = _Witness("ops@b1/B")
    automatic, keeper, out = _automatic(ref, witness, holds=False)
    automatic._start(load_stack_file(ref.existing_stack_file()))
    assert automatic.child is None and not keeper.holds
    told = [e for e in _events(out) if e["event"] == "lease-held-elsewhere"]
    assert len(told) == 1 and told[0]["holder"] == "ops@b1/B" and told[0]["token"] == 7
    assert "ops@b1/B (token 7)" in told[0]["message"]
    assert automatic.failovers.labels("lease-held-elsewhere")._value.get() == 1
    assert automatic.failovers.labels("started")._value.get() == 0


def test_the_active_site_gives_its_lease_back_while_its_cluster_is_down_and_wants_it_when_up(ref: StackRef) -> None:
    witness = _Witness(None)
    automatic, keeper, out = _automatic(ref, witness, holds=True)
    keeper.tick()  # takes the lease
    assert keeper.mine is not None and witness.held is not None
    automatic._active_site("suspect")
    assert keeper.holds and witness.held is not None  # suspect is not down: nothing changes
    automatic._active_site("down")
    assert not keeper.holds and keeper.mine is None and witness.released == [8] and witness.held is None
    keeper.tick()
    assert witness.held is None  # a keeper that gave up does not take it again by itself
    automatic._active_site("up")
    keeper.tick()
    assert keeper.holds and witness.held is not None and witness.held.holder == "ops@b2/B"
    assert [e["event"] for e in _events(out) if e["event"].startswith("lease")] == [
        "lease-taken", "lease-given-up", "lease-wanted", "lease-taken",
    ]  # fmt: skip


def _exit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(args)
    captured = capsys.readouterr()
    return int(ended.value.code or 0), captured.err + captured.out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_observer_needs_a_witness_and_a_name_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def write(policy: dict[str, Any]) -> None:
        def edit(doc: dict[str, Any]) -> None:
            doc["config"]["kafka-dr:failoverPolicy"] = policy

        copy_stack("local", tmp_path / "stacks" / "Pulumi.ctl.yaml", edit=edit)

    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path / "stacks"))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    write({"metrics_ports": {"A": _free_port()}})
    code, said = _exit(["controller", "--stack", "ctl", "--observer", "C-site"], capsys)
    assert code == 2 and "declares no witness" in said and "started:" not in said
    write({"witness": {"kind": "etcd", "endpoints": ["http://127.0.0.1:1"]}})
    code, said = _exit(["controller", "--stack", "ctl", "--observer", "B"], capsys)
    assert code == 2 and "observer name 'B' is a cluster" in said and "started:" not in said
    code, said = _exit(["controller", "--stack", "ctl"], capsys)
    assert code == 2 and "--site" in said and "--observer" in said
    code, said = _exit(["controller", "--stack", "ctl", "--site", "A", "--observer", "C-site"], capsys)
    assert code == 2 and "--site" in said and "--observer" in said


@pytest.mark.parametrize(
    ("started_by", "target", "status", "found"),
    [
        ("controller ops@b1/B", "B", "running", True),  # its controller SIGKILLed with it
        ("controller ops@b1/B", "B", "interrupted", True),  # its controller stopped (SIGTERM) with it
        (None, "B", "interrupted", False),  # a person's run: a person resumes it
        ("controller ops@b1/B", "B", "failed", False),  # a step failed: never retried unattended
        ("controller ops@b1/B", "B", "completed", False),
        ("controller ops@c1/C", "C", "running", False),  # not to this site
    ],
)
def test_only_an_automatic_failover_to_this_site_stopped_unfinished_is_resumable(
    ref: StackRef, started_by: str | None, target: str, status: str, found: bool
) -> None:
    from dr.failover.frame.converge import read_stack_config
    from dr.failover.frame.journal import Journal

    config = read_stack_config(ref.existing_stack_file())
    journal = Journal.create(
        ref.failover_home, stack="ctl", mode="unplanned", source="A", target=target, standby=None,
        original_config=config, desired_config=config, steps=["preflight", "promote", "desired-state"],
    )  # fmt: skip
    journal.begin_run(mode="unplanned", options={"started_by": started_by, "fencing_token": 8})
    journal.finish_step("preflight", "done", {}, 0.1)
    journal.set_status(status)
    automatic, _keeper, _out = _automatic(ref, _Witness(None), holds=False)
    described = automatic._unfinished()
    if not found:
        assert described is None
        return
    assert described == (f"the automatic failover {journal.failover_id} (controller ops@b1/B; 1 of 3 steps done)"), (
        described
    )


def test_without_a_live_lag_ever_seen_the_budget_is_checked_against_the_estimates_upper_bound(ref: StackRef) -> None:
    from dr.controller.readings import RpoReading

    topology = load_stack_file(ref.existing_stack_file())
    link = next(lk for lk in topology.links if lk.target == "B")
    automatic, _keeper, _out = _automatic(ref, _Witness(None), holds=False)
    assert automatic._estimated_lag(topology, link.source) is None  # nothing read yet: lag-unknown
    automatic._rpo = {link.name: RpoReading(12, 40, "snapshot 80 s old")}
    assert automatic._estimated_lag(topology, link.source) == 40  # the worst case, not the estimate
    automatic._rpo = {link.name: RpoReading(12, None, "snapshot")}
    assert automatic._estimated_lag(topology, link.source) == 12
    automatic._rpo = {"another-link": RpoReading(1, 1, "live link lag")}
    assert automatic._estimated_lag(topology, link.source) is None


def test_after_a_failover_by_hand_the_lease_follows_the_stack_file_without_a_restart(ref: StackRef) -> None:
    from dr.failover.status import StatusReport
    from dr.topology.stackfile import write_stack_config

    witness = _Witness(None)
    log = Log("json", out := io.StringIO())
    metrics = ControllerMetrics("ctl", "A", "automatic")
    keeper_a = LeaseKeeper(witness, "ops@a/A", holds=True, log=log, metrics=metrics)
    at_a = Automatic(ref, "A", witness, keeper_a, log, metrics)
    at_b, keeper_b, out_b = _automatic(ref, witness, holds=False)
    keeper_a.tick()
    assert witness.held is not None and witness.held.holder == "ops@a/A"
    doc = yaml.safe_load(ref.existing_stack_file().read_text())
    doc["config"]["kafka-dr:failoverPolicy"] = {
        "mode": "automatic", "maxRpoRecords": 100, "witness": {"kind": "etcd", "endpoints": ["http://127.0.0.1:2379"]},
    }  # fmt: skip
    ref.existing_stack_file().write_text(yaml.safe_dump(doc, sort_keys=False))
    topology = load_stack_file(ref.existing_stack_file())
    report = StatusReport.model_construct(stack="ctl", failover_done=False, clusters=[], links=[])
    at_a._step(report, {"A": "up", "B": "up"})
    assert keeper_a.holds and witness.held.holder == "ops@a/A"  # not failed over: A keeps it
    write_stack_config(ref.existing_stack_file(), topology.after_failover())  # `drctl failover` by hand
    at_a._step(report, {"A": "up", "B": "up"})
    assert not keeper_a.holds and witness.held is None and witness.released == [7 + 1]
    at_b._step(report, {"A": "up", "B": "up"})
    keeper_b.tick()
    assert keeper_b.holds and witness.held is not None and witness.held.holder == "ops@b2/B"
    given = [e for e in _events(out) if e["event"] == "lease-given-up"]
    assert len(given) == 1 and "names B the active cluster now, not A" in given[0]["message"]
    assert [e["event"] for e in _events(out_b) if e["event"].startswith("lease")] == ["lease-wanted", "lease-taken"]
    # and B, the active site now, gets the self-fence A's controller built at its start, without a restart
    from types import SimpleNamespace

    from dr.controller.loop import Controller

    started: list[str] = []
    fence = SimpleNamespace(start=lambda: started.append("B"))
    at_site_b = SimpleNamespace(
        ref=ref, cluster=topology.cluster("B"), log=Log("json", out_b), _self_fence=lambda e: fence
    )
    Controller._fence_if_active(at_site_b, keeper_a, None)  # A holds nothing: no fence
    assert started == [] and keeper_a.fence is None
    Controller._fence_if_active(at_site_b, keeper_b, None)  # type: ignore[arg-type]
    Controller._fence_if_active(at_site_b, keeper_b, None)  # type: ignore[arg-type]  # once
    assert started == ["B"] and keeper_b.fence is fence
    assert [e["event"] for e in _events(out_b)].count("self-fence-armed") == 1


def test_a_controller_that_wants_the_lease_held_by_another_says_who_once_per_holder(ref: StackRef) -> None:
    witness = _Witness("ops@b1/B")
    _automatic_b, keeper, out = _automatic(ref, witness, holds=True)
    keeper.tick()
    keeper.tick()
    witness.held = Holding("ops@a/A", 9, 0.0)
    keeper.tick()
    told = [(e["holder"], e["token"]) for e in _events(out) if e["event"] == "lease-held-elsewhere"]
    assert told == [("ops@b1/B", 7), ("ops@a/A", 9)] and keeper.mine is None
