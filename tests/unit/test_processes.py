"""Nothing a test starts outlives it (tests/processes.py): a command whose timeout passes, or whose test
pytest-timeout stops, is killed with its whole tree — also what it started in a session of its own, as the
product starts its JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import REPO_ROOT, processes

# A command like drctl: starts a long-lived child in a session of its own (as the product starts a JVM),
# writes that child's pid to argv[1], then waits far longer than any test.
SPAWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(sys.argv[1], "w").write(str(child.pid))
    time.sleep(300)
    """
)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by this subreaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _ended(pid: int) -> bool:
    """The process ended (SIGKILL is delivered asynchronously: wait for it, up to a minute)."""
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + 60
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def test_a_command_past_its_timeout_is_killed_with_what_it_started_in_other_sessions(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run([sys.executable, "-c", SPAWNER, str(pid_file)], timeout=5)
    child = _wait_for(pid_file)
    assert _ended(child), f"the command's own-session child {child} outlived its timeout"


def test_a_command_that_ends_by_itself_keeps_what_it_started(tmp_path: Path) -> None:
    """Only a command that did not end is killed: an `estate up` that returns leaves its brokers running."""
    pid_file = tmp_path / "child.pid"
    starter = SPAWNER.replace("time.sleep(300)", "")
    done = processes.run([sys.executable, "-c", starter, str(pid_file)], timeout=60, capture_output=True)
    child = _wait_for(pid_file)
    try:
        assert done.returncode == 0 and _alive(child)
    finally:
        processes.kill_tree(child)


def test_a_test_stopped_by_pytest_timeout_leaves_no_process(tmp_path: Path) -> None:
    """The whole chain as the suite runs it: a test whose command outlasts pytest-timeout fails, and the
    command's tree — its own-session child included — is gone when that pytest run ends."""
    pid_file = tmp_path / "child.pid"
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            import pytest
            from tests import processes

            @pytest.mark.timeout(5)
            def test_hangs():
                processes.run([sys.executable, "-c", {SPAWNER!r}, {str(pid_file)!r}], timeout=600)
            """
        )
    )
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inner.returncode == 1 and "Timeout" in inner.stdout, inner.stdout[-2000:]
    child = _wait_for(pid_file)
    assert _ended(child), f"{child} outlived the test pytest-timeout stopped"
