"""drctl installed, not only run from a clone: the project is found like the pulumi CLI finds it.

The project directory is the nearest one holding ``Pulumi.yaml`` from the current directory up
(``KDR_STACK_DIR`` overrides it); state defaults to ``<project>/.state`` (``KDR_STATE_DIR``
overrides it); the pinned versions are package data. These tests run from temporary directories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dr.base.errors import ConfigError
from dr.base.project import find_project_dir
from dr.base.pulumi_env import project_dir, state_base
from dr.base.stackref import StackRef, stack_dir, stack_file, state_dir
from dr.base.toolchain import versions
from dr.estate.estate import load_stack
from tests import REPO_ROOT


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's Pulumi.yaml and local stack in a temporary directory, no KDR_* set."""
    root = tmp_path / "project"
    root.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.local.yaml"):
        shutil.copy(REPO_ROOT / name, root / name)
    monkeypatch.delenv("KDR_STACK_DIR", raising=False)
    monkeypatch.delenv("KDR_STATE_DIR", raising=False)
    return root.resolve()


def test_the_project_is_found_from_a_subdirectory(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deeper = project / "runbooks" / "notes"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert find_project_dir() == project == project_dir() == stack_dir()
    assert stack_file("local") == project / "Pulumi.local.yaml"
    assert state_base() == project / ".state"
    assert state_dir("local") == project / ".state" / "local" and (project / ".state" / "local").is_dir()
    assert load_stack(StackRef.resolve("local")).name == "local"


def test_no_project_is_bad_input_naming_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KDR_STACK_DIR", raising=False)
    monkeypatch.delenv("KDR_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert find_project_dir() is None
    with pytest.raises(ConfigError) as info:
        stack_file("local")
    assert info.value.exit_code == 2
    assert "Pulumi.yaml" in info.value.problem and "KDR_STACK_DIR" in (info.value.fix or "")


def test_the_environment_overrides_both(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no Pulumi.yaml here or above
    monkeypatch.setenv("KDR_STACK_DIR", str(project))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "elsewhere"))
    assert stack_file("local") == project / "Pulumi.local.yaml"
    assert state_dir("local") == tmp_path / "elsewhere" / "local"


def test_versions_are_package_data() -> None:
    v = versions()
    assert {"KAFKA_VERSION", "SPARK_VERSION", "PULUMI_VERSION"} <= set(v)
    link = REPO_ROOT / "toolchain" / "versions.env"  # what scripts/setup.sh sources
    assert link.resolve() == (REPO_ROOT / "dr" / "versions.env").resolve()


def _drctl(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KDR_STACK_DIR", "KDR_STATE_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "dr.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_drctl_runs_from_a_copy_of_the_project(project: Path) -> None:
    res = _drctl(project, "connect-config", "--stack", "local")
    assert res.returncode == 0, res.stderr
    assert isinstance(json.loads(res.stdout), dict)
    pins = subprocess.run(
        [sys.executable, "-c", "from dr.base.toolchain import versions; print(versions()['KAFKA_VERSION'])"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert pins.stdout.strip() == versions()["KAFKA_VERSION"]


def test_drctl_outside_a_project_exits_2(tmp_path: Path) -> None:
    res = _drctl(tmp_path, "estate", "status", "--stack", "local")
    assert res.returncode == 2, res.stderr
    assert "no Pulumi project here" in res.stderr and "KDR_STACK_DIR" in res.stderr
