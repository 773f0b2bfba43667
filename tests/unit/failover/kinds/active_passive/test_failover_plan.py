"""``drctl failover``/``status`` without clusters: dry-run plan, refusals, exit codes, finished runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dr.cli import main
from dr.failover.frame.converge import read_stack_config, write_stack_config
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import STEPS
from dr.topology import load_stack_file
from tests.unit.failover_helpers import journal_home, local_stack_copy, lock_held_elsewhere, new_journal

# Ports nothing listens on during the unit tests: every cluster is "down".
PORTS = (32100, 32200, 32300)  # below the ephemeral range, above the integration tests' windows: nothing listens


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the local stack on idle ports, with its own stack and state directories."""
    path = local_stack_copy(tmp_path, PORTS, header="# header comment kept\n")
    monkeypatch.setenv("KDR_STACK_DIR", str(path.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    yield path


def run(*args: str) -> int:
    """Run the CLI in-process; return its exit code."""
    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_dry_run_prints_the_plan_and_the_desired_state_diff_and_changes_nothing(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stack.read_bytes()
    assert run("failover", "--stack", "unit", "--dry-run") == 0
    out = capsys.readouterr().out
    for i, step in enumerate(STEPS, 1):
        assert f"{i}. {step.name}" in out
    assert "-    role: active" in out and "+    role: decommissioned" in out
    assert "+  - name: B-to-C" in out and "-  - name: A-to-B" in out
    assert "+  kafka-dr:failoverDone: true" in out
    assert "converger: pulumi" in out
    assert "pulumi preview: not available — stack 'unit' was never provisioned here" in out
    assert stack.read_bytes() == before
    state = Path(os.environ["KDR_STATE_DIR"]) / "unit"
    assert not Journal.path_for(journal_home()).exists() and not (state / "failover" / "journal.json").exists()
    assert not (state / "credentials.json").exists(), "a dry run creates no credentials either"


def test_dry_run_json_names_every_step_and_the_mode(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert run("failover", "--stack", "unit", "--dry-run", "--mode", "unplanned", "--json") == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in plan["steps"]] == [s.name for s in STEPS]
    assert plan["mode"] == "unplanned" and plan["resuming"] is False
    assert "no drain" in plan["steps"][1]["action"]
    assert (plan["source"], plan["target"], plan["standby"]) == ("A", "B", "C")


def test_an_unknown_stack_exits_2_naming_the_stacks_that_exist(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("failover", "--stack", "nope", "--yes") == 2
    err = capsys.readouterr().err
    assert "unknown stack 'nope'" in err and "unit" in err


def test_without_yes_and_without_a_terminal_the_failover_is_refused(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("failover", "--stack", "unit") == 6
    assert "--yes" in capsys.readouterr().err
    assert not Journal.path_for(journal_home()).exists()


def test_an_unreachable_passive_cluster_is_refused_and_nothing_changes(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stack.read_bytes()
    assert run("failover", "--stack", "unit", "--yes") == 6
    err = capsys.readouterr().err
    assert "cluster B (the passive cluster to promote) is unreachable" in err
    assert "nothing was changed" in err and "next step:" in err
    assert stack.read_bytes() == before
    journal = Journal.load(journal_home())
    assert journal is not None and journal.status == "failed"
    assert journal.step("preflight").status == "failed"
    assert all(journal.step(s.name).status == "pending" for s in STEPS[1:])


def test_a_concurrent_failover_of_the_same_stack_exits_7_naming_the_holder(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = journal_home()
    home.mkdir(parents=True)
    with lock_held_elsewhere(home) as holder:
        assert run("failover", "--stack", "unit", "--yes") == 7
    err = capsys.readouterr().err
    assert f"pid {holder.pid}" in err and "already running" in err
    assert Journal.load(home) is None, "the refused run wrote no journal"


def _finished(stack: Path) -> Journal:
    original = load_stack_file(stack)
    desired = original.after_failover()
    from dr.topology import dump_stack_config

    j = new_journal(journal_home(), dump_stack_config(original), dump_stack_config(desired))
    j.begin_run(mode="planned", options={})
    for s in STEPS:
        j.start_step(s.name, {})
        j.finish_step(s.name, "done", {"summary": f"{s.name} ok"}, 0.1)
    j.end_run("completed")
    j.set_status("completed")
    write_stack_config(stack, desired)
    return j


def test_a_finished_failover_run_again_says_so_exits_0_and_changes_nothing(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    j = _finished(stack)
    stack_before, journal_before = stack.read_bytes(), j.path.read_bytes()
    assert run("failover", "--stack", "unit") == 0  # no --yes needed: nothing will change
    out = capsys.readouterr().out
    assert "already finished; nothing changed" in out
    assert stack.read_bytes() == stack_before
    assert j.path.read_bytes() == journal_before
    assert run("failover", "--stack", "unit", "--dry-run") == 0
    assert "nothing would change" in capsys.readouterr().out


def test_a_stack_file_changed_during_a_failover_is_refused(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = _finished(stack)
    j.set_status("running")
    j.step("decommission").status = "pending"
    j.save()
    doc = yaml.safe_load(stack.read_text())
    doc["config"]["kafka-dr:topics"][0]["partitions"] = 12
    stack.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run("failover", "--stack", "unit", "--yes") == 6
    assert "changed while failover" in capsys.readouterr().err


def test_write_stack_config_keeps_other_keys_and_the_header_and_is_idempotent(stack: Path) -> None:
    doc = yaml.safe_load(stack.read_text())
    doc["config"]["aws:region"] = "eu-west-1"
    doc["encryptionsalt"] = "v1:abc"
    stack.write_text("# header comment kept\n" + yaml.safe_dump(doc, sort_keys=False))
    os.chmod(stack, 0o640)
    desired = load_stack_file(stack).after_failover()
    assert write_stack_config(stack, desired) is True
    assert write_stack_config(stack, desired) is False
    text = stack.read_text()
    assert text.startswith("# header comment kept\n")
    after = yaml.safe_load(text)
    assert after["config"]["aws:region"] == "eu-west-1" and after["encryptionsalt"] == "v1:abc"
    roles = {c.name: c.role.value for c in load_stack_file(stack).clusters}
    assert roles == {"A": "decommissioned", "B": "active", "C": "passive"}
    assert read_stack_config(stack)["kafka-dr:links"][0]["name"] == "B-to-C"
    assert oct(stack.stat().st_mode & 0o777) == "0o640"


def test_client_configurations_are_private_and_never_returned_with_the_password(stack: Path) -> None:
    import json

    from dr.estate.estate import Estate
    from dr.failover.act.clients import publish_clients

    state = Path(os.environ["KDR_STATE_DIR"]) / "unit"
    estate = Estate(load_stack_file(stack).after_failover(), state)
    written = publish_clients(estate, "B")
    assert [w["application"] for w in written] == ["orders-app", "billing"]
    password = estate.app_password("billing")
    assert password not in json.dumps(written)
    conf = json.loads((state / "clients" / "billing.json").read_text())
    assert conf["bootstrap.servers"] == f"127.0.0.1:{PORTS[1]}" and conf["sasl.username"] == "billing"
    assert conf["sasl.password"] == password and conf["group.id"] == "billing"
    props = (state / "clients" / "billing.properties").read_text()
    assert "sasl.jaas.config=" in props and f"bootstrap.servers=127.0.0.1:{PORTS[1]}" in props
    for f in (state / "clients").iterdir():
        assert oct(f.stat().st_mode & 0o777) == "0o600", f
    assert oct((state / "clients").stat().st_mode & 0o777) == "0o700"


def test_status_of_a_stack_whose_clusters_are_down(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert run("status", "--stack", "unit", "--json") == 4, "clusters down: monitoring sees a non-zero exit"
    st = json.loads(capsys.readouterr().out)  # the full status is printed first
    assert {c["name"]: (c["role"], c.get("process")) for c in st["clusters"]} == {
        "A": ("active", "absent"),
        "B": ("passive", "absent"),
        "C": ("standby", "absent"),
    }
    assert st["links"][0]["error"].startswith("lag unknown")
    assert st["last_failover"] is None
    assert "link A-to-B (A → B) is stopped; the topology says it runs" in st["problems"]
