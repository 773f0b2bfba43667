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
