"""Shared pytest configuration: integration tests are marked by their directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

# Property tests assert what holds, not how fast: hypothesis's default 200 ms per example fails them
# at random on a machine busy with the suite's JVMs (speed is benchmarks/' business).
settings.register_profile("kdr", deadline=None)
settings.load_profile("kdr")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def pytest_configure(config: pytest.Config) -> None:
    """Tests choose their own Pulumi backend and passphrase: a developer's `source .env` (which sets
    them for the clone's own stacks) must not send test stacks into that backend."""
    import os

    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        os.environ.pop(name, None)


HUB_UNIT_PORTS = (32100, 32200, 32300, 32400, 32500)
"""The base ports of :func:`hub_stack`'s clusters: nothing listens there, so every cluster is "down"."""


def copy_stack(example: str, to: Path, *, edit: Any = None) -> Path:
    """``Pulumi.<example>.yaml`` of the repository written as ``to`` (parents made), after ``edit(doc)``
    changed its parsed YAML in place when given; returns ``to``."""
    from tests import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / f"Pulumi.{example}.yaml").read_text())
    if edit is not None:
        edit(doc)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(yaml.safe_dump(doc, sort_keys=False))
    return to


@pytest.fixture
def hub_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hub-and-spoke example as stack ``hubunit`` (clusters on :data:`HUB_UNIT_PORTS`), its stack and
    state directories set for ``drctl``."""

    def ports(doc: dict[str, Any]) -> None:
        for c, port in zip(doc["config"]["kafka-dr:clusters"], HUB_UNIT_PORTS, strict=True):
            c["base_port"] = port

    path = copy_stack("hub-spoke", tmp_path / "stacks" / "Pulumi.hubunit.yaml", edit=ports)
    monkeypatch.setenv("KDR_STACK_DIR", str(path.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return path


@pytest.fixture(scope="module")
def spark() -> Any:
    """A local Spark session for a module's tests (one JVM, reused)."""
    from verification.session import spark_session

    return spark_session()
