"""The controller's pure parts and its refusals: the detector, the log lines, and bad input (exit 2,
nothing started)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from dr.cli.drctl import main
from dr.controller.loop import Log
from dr.controller.observe import Detector
from tests.conftest import copy_stack


def test_the_detector_says_suspect_then_down_after_detect_after_s_and_up_at_once() -> None:
    d = Detector(detect_after_s=30)
    assert d.update("A", True, 100.0) == "up"
    assert d.update("A", False, 101.0) == "suspect"
    assert d.update("A", False, 130.9) == "suspect"
    assert d.down_for("A", 130.9) == pytest.approx(29.9)
    assert d.update("A", False, 131.0) == "down"
    assert d.update("B", False, 131.0) == "suspect"  # each cluster on its own
    assert d.update("A", True, 132.0) == "up"
    assert d.down_for("A", 133.0) == 0.0
    assert d.update("A", False, 140.0) == "suspect"  # a new outage counts from its own start


def test_log_lines_are_text_or_one_json_object_each() -> None:
    out = io.StringIO()
    Log("json", out)("error", "cluster-down", "A is down", cluster="A")
    Log("text", out)("info", "started", "controller of A", mode="manual")
    first, second = out.getvalue().splitlines()
    doc = json.loads(first)
    assert (doc["level"], doc["event"], doc["message"], doc["cluster"]) == ("error", "cluster-down", "A is down", "A")
    assert second.endswith("INFO  started: controller of A mode=manual")


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Write the local example as stack ``ctl`` with ``policy`` as its failover policy; returns the writer."""

    def write(policy: dict[str, Any]) -> Path:
        def edit(doc: dict[str, Any]) -> None:
            doc["config"]["kafka-dr:failoverPolicy"] = policy

        return copy_stack("local", tmp_path / "stacks" / "Pulumi.ctl.yaml", edit=edit)

    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path / "stacks"))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return write


def _exit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(args)
    captured = capsys.readouterr()
    return int(ended.value.code or 0), captured.err + captured.out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_metrics_port_in_use_is_refused_with_exit_2_and_nothing_started(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack({"metrics_ports": {"A": port}})
        code, said = _exit(["controller", "--stack", "ctl", "--site", "A"], capsys)
    assert code == 2
    assert f"127.0.0.1:{port} (failover_policy.metrics_ports.A) cannot be bound" in said
    assert "nothing was started" in said
    assert "started:" not in said  # no pass ran, no lease was taken


def test_a_site_without_a_metrics_port_is_refused(stack: Any, capsys: pytest.CaptureFixture[str]) -> None:
    stack({"metrics_ports": {"B": _free_port()}})
    code, said = _exit(["controller", "--stack", "ctl", "--site", "A"], capsys)
    assert code == 2 and "failover_policy.metrics_ports.A" in said


def test_an_unknown_site_is_refused_naming_the_clusters(stack: Any, capsys: pytest.CaptureFixture[str]) -> None:
    stack({"metrics_ports": {"A": _free_port()}})
    code, said = _exit(["controller", "--stack", "ctl", "--site", "Z"], capsys)
    assert code == 2 and "no cluster named 'Z'" in said and "A, B" in said


def test_automatic_without_a_witness_is_refused_before_anything_starts(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stack({"mode": "automatic", "max_rpo_records": 0, "metrics_ports": {"A": _free_port()}})
    code, said = _exit(["controller", "--stack", "ctl", "--site", "A"], capsys)
    assert code == 2 and "needs a witness" in said


def test_a_postgres_witness_needs_a_team_database(
    stack: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///tmp/nowhere")
    stack({"witness": {"kind": "postgres"}, "metrics_ports": {"A": _free_port()}})
    code, said = _exit(["controller", "--stack", "ctl", "--site", "A"], capsys)
    assert code == 2 and "witness kind postgres" in said and "postgres://" in said


def test_the_metrics_carry_drctl_status_problems_as_readiness_reasons() -> None:
    from prometheus_client import generate_latest

    from dr.controller.metrics import ControllerMetrics
    from dr.failover.status import LinkStatus, StatusReport, link_problem
    from dr.topology.kinds import Engine, LinkState

    stopped = LinkStatus(
        name="A-to-B", source="A", target="B", state=LinkState.RUNNING, engine=Engine.MIRRORMAKER2, process="stopped"
    )
    report = StatusReport(
        stack="s", failover_done=False, clusters=[], links=[stopped], consumer_groups=[], last_failover=None,
        problems=["link A-to-B (A → B) is stopped; the topology says it runs"],
    )  # fmt: skip
    metrics = ControllerMetrics("s", "A", "manual")
    metrics.status(report, {"A-to-B": link_problem(stopped) is not None})
    text = generate_latest(metrics.registry).decode()
    assert "kdr_ready 0.0" in text
    assert 'kdr_problem{reason="link A-to-B (A → B) is stopped; the topology says it runs"} 1.0' in text
    assert 'kdr_link_running{link="A-to-B"} 0.0' in text
    assert 'kdr_link_state{link="A-to-B",state="running"} 1.0' in text
    metrics.status(report.model_copy(update={"problems": []}), {"A-to-B": False})
    text = generate_latest(metrics.registry).decode()
    assert "kdr_ready 1.0" in text and "kdr_problem{" not in text  # a problem gone is no longer served
    # the last parity check's differences are readiness problems too, beside drctl status's own
    drift = "parity: cluster B: topic 'orders' retention.ms: 1 on B, (broker default) on A — repair: `drctl …`"
    metrics.status(report.model_copy(update={"problems": []}), {"A-to-B": False}, [drift])
    text = generate_latest(metrics.registry).decode()
    assert "kdr_ready 0.0" in text and f'kdr_problem{{reason="{drift}"}} 1.0' in text
    metrics.status(report.model_copy(update={"problems": []}), {"A-to-B": False}, [])
    assert "kdr_ready 1.0" in generate_latest(metrics.registry).decode()


class _FakeWitness:
    """A witness whose answers the test sets: it grants a new token per acquire, renews while ``alive``."""

    ttl_s = 3.0

    def __init__(self) -> None:
        self.token, self.alive, self.down, self.holding = 0, True, False, None

    def describe(self) -> str:
        return "fake"

    def _answer(self) -> None:
        from dr.base.errors import ClusterError

        if self.down:
            raise ClusterError("the witness (fake) does not answer")

    def acquire(self, holder: str) -> Any:
        from dr.controller.witness import Holding

        self._answer()
        self.token += 1
        self.alive = True
        self.holding = Holding(holder, self.token, 0.0)
        return self.holding

    def renew(self, holding: Any) -> bool:
        self._answer()
        return self.alive and holding.token == self.token

    def current(self) -> Any:
        self._answer()
        return self.holding if self.alive else None

    def release(self, holding: Any) -> None:
        self.holding = None

    def close(self) -> None:
        pass


def test_the_lease_keeper_takes_renews_alerts_on_loss_and_on_the_witness_down_once() -> None:
    from prometheus_client import generate_latest

    from dr.controller.loop import LeaseKeeper
    from dr.controller.metrics import ControllerMetrics

    witness, out = _FakeWitness(), io.StringIO()
    metrics = ControllerMetrics("s", "A", "manual")
    keeper = LeaseKeeper(witness, "me/A", holds=True, log=Log("json", out), metrics=metrics)
    keeper.tick()
    keeper.tick()
    assert keeper.mine is not None and keeper.mine.token == 1  # taken once, then renewed
    witness.alive = False  # expired before it was renewed
    keeper.tick()
    assert keeper.mine is not None and keeper.mine.token == 2  # lost, then taken again
    witness.down = True
    keeper.tick()
    keeper.tick()
    text = generate_latest(metrics.registry).decode()
    assert "kdr_witness_up 0.0" in text
    assert 'kdr_alerts_total{kind="lease_lost"} 1.0' in text
    assert 'kdr_alerts_total{kind="witness_down"} 1.0' in text  # once per outage, not per turn
    witness.down = False
    keeper.tick()
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert events == ["lease-taken", "lease-lost", "lease-taken", "witness-down", "witness-up"]
    assert "kdr_witness_up 1.0" in generate_latest(metrics.registry).decode()
    keeper.stop()
    assert witness.holding is None and keeper.mine is None  # given back


def test_a_watching_keeper_never_takes_the_lease() -> None:
    from dr.controller.loop import LeaseKeeper
    from dr.controller.metrics import ControllerMetrics

    witness = _FakeWitness()
    keeper = LeaseKeeper(
        witness, "me/B", holds=False, log=Log("json", io.StringIO()), metrics=ControllerMetrics("s", "B", "manual")
    )
    keeper.tick()
    assert witness.token == 0 and keeper.mine is None
