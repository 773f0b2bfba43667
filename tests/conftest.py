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


ALLOWED_SKIPS: frozenset[str] = frozenset()
"""Node ids of tests that may skip. Empty: a required part (PostgreSQL, HAProxy, Java, the toolchain) never
skips, so any skip fails the run (:func:`pytest_sessionfinish`) instead of letting it go green untested."""

_SKIPPED: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect every skip (on the xdist controller the workers' reports arrive here too)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append((report.nodeid, reason))


def _unallowed_skips() -> list[tuple[str, str]]:
    return [(nodeid, reason) for nodeid, reason in _SKIPPED if nodeid not in ALLOWED_SKIPS]


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    """Where results are gathered (the xdist controller, or a run without xdist), once every other
    session-finish ran (xdist's workers are gone by then): fail the run on a skip that is not on
    :data:`ALLOWED_SKIPS`, and on any process the suite started that is still alive (killed first)."""
    yield
    if hasattr(session.config, "workerinput"):
        return
    from tests.processes import leftovers

    left = leftovers()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if left:
        if reporter is not None:
            reporter.section("processes outlived the suite (killed now)", sep="=", red=True, bold=True)
            for line in left:
                reporter.line(f"LEFT RUNNING {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _unallowed_skips():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Name each skip that failed the run, with its reason and what to do."""
    bad = _unallowed_skips()
    if not bad or hasattr(config, "workerinput"):
        return
    terminalreporter.section("skips fail this run", sep="=", red=True, bold=True)
    for nodeid, reason in bad:
        terminalreporter.line(f"SKIPPED (not allowed) {nodeid}: {reason}")
    terminalreporter.line(
        "A required part never skips: run `make setup` (it fetches PostgreSQL, HAProxy and the toolchain), "
        "or make the test run here; tests/conftest.py ALLOWED_SKIPS lists the skips a run may have (none)."
    )


MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")
"""Each test module's seconds in a full run (``scripts/module_seconds.py out/junit.xml`` refreshes it)."""


def heaviest_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """``items`` with their modules ordered by ``seconds`` (longest first, unknown ones last by path), each
    module's tests in their own order (pure). xdist hands a worker the next module when it is free, so the
    longest start first and the short ones fill the end, instead of a ten-minute module starting last."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(modules, key=lambda m: (-seconds.get(m, 0.0), m))
    return [item for m in order for item in modules[m]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import json

    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    seconds = json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {}
    items[:] = heaviest_first(items, seconds)


def pytest_configure(config: pytest.Config) -> None:
    """Tests choose their own Pulumi backend and passphrase: a developer's `source .env` (which sets
    them for the clone's own stacks) must not send test stacks into that backend. Every pytest process
    becomes the subreaper of what it starts (:mod:`tests.processes`), so nothing escapes the end-of-run check."""
    import os

    from tests.processes import become_subreaper

    become_subreaper()

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


@pytest.fixture(scope="session", autouse=True)
def _spark_stopped_at_the_end() -> Any:
    """The one Spark driver a test process shares across modules (``spark_session`` returns the active one)
    is stopped when the process's tests end, so its JVM does not outlive the run."""
    yield
    import sys

    if "pyspark.sql" not in sys.modules:
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    gateway = SparkContext._gateway
    if gateway is not None:  # the driver JVM ends when its stdin closes (PythonGatewayServer watches it)
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None
