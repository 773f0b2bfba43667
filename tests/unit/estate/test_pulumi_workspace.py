"""The Pulumi CLI's workspace files in the shared cache keep no backend password (dr.estate.pulumi_workspace):
a real stack opened through the Automation API in a real PostgreSQL backend, then the files read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.base.pulumi_env import pulumi_env
from dr.base.stackref import StackRef
from dr.estate.pulumi_workspace import forget_backend_passwords
from dr.estate.stack import EstateStack
from tests import REPO_ROOT
from tests.pg_server import pg_server


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_server() as url:
        yield url


def test_selections_with_a_password_are_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    workspaces = tmp_path / "workspaces"
    workspaces.mkdir()
    doc = {
        "stacks": {
            "postgres://kdr:pw-1234@db/kdr": "organization/kafka-dr/prod",
            "file:///x": "organization/kafka-dr/local",
        }
    }
    (workspaces / "kafka-dr-abc-workspace.json").write_text(json.dumps(doc))
    (workspaces / "other-def-workspace.json").write_text("not json")
    assert forget_backend_passwords(tmp_path) == [workspaces / "kafka-dr-abc-workspace.json"]
    assert json.loads((workspaces / "kafka-dr-abc-workspace.json").read_text()) == {
        "stacks": {"file:///x": "organization/kafka-dr/local"}
    }
    assert forget_backend_passwords(tmp_path) == [], "nothing left to drop"


def test_opening_a_stack_in_postgres_leaves_no_password_in_the_workspace_files(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", pg_url)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "a test passphrase")
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
    (project / "Pulumi.wsp.yaml").write_text((REPO_ROOT / "Pulumi.local.yaml").read_text())
    stack = EstateStack(StackRef("wsp", project, tmp_path / "state" / "wsp"))
    opened = stack._stack()
    try:
        assert stack.exists()
        password = pg_url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
        home = Path(pulumi_env(pg_url)["PULUMI_HOME"])
        for path in (home / "workspaces").glob("*-workspace.json"):
            assert password not in path.read_text(), path
    finally:
        opened.workspace.remove_stack("wsp")
