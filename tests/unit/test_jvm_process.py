"""A detached process is found and stopped even when its pid file went with its directory, and a start
waits briefly for a port that a dying process still holds."""

from __future__ import annotations

import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from dr.base.errors import PortInUse
from dr.runtime.process import JvmProcess, ensure_ports_free, pid_alive, wait_until


def _sleeper(home: Path) -> list[str]:
    # JvmProcess inserts its marker before "-cp"; Python takes both as plain arguments of its script.
    return [sys.executable, "-c", "import time; time.sleep(60)", "-cp", str(home / "server.properties")]


def test_a_process_whose_directory_was_removed_and_recreated_is_still_found_and_killed(tmp_path: Path) -> None:
    home = tmp_path / "node-0"
    proc = JvmProcess("kdr-unit-sleeper", home / "pid", home / "server.log")
    pid = proc.start(_sleeper(home))
    try:
        shutil.rmtree(home)
        home.mkdir()  # the process recreated its directory (a broker writing a new segment)
        later = JvmProcess("kdr-unit-sleeper", home / "pid", home / "server.log")  # another drctl run
        # (until the child has exec'd, its command line is still its parent's)
        assert wait_until(lambda: later.pid == pid, 10), later.pid
        later.kill()
        assert not pid_alive(pid)
    finally:
        if pid_alive(pid):
            proc.kill()


def test_a_process_of_another_directory_is_not_taken_for_ours(tmp_path: Path) -> None:
    other = tmp_path / "other"
    proc = JvmProcess("kdr-unit-sleeper", other / "pid", other / "server.log")
    pid = proc.start(_sleeper(other))
    try:
        mine = tmp_path / "mine"
        mine.mkdir()
        assert wait_until(lambda: JvmProcess("kdr-unit-sleeper", other / "pid", other / "server.log").pid == pid, 10)
        assert JvmProcess("kdr-unit-sleeper", mine / "pid", mine / "server.log").pid is None
    finally:
        proc.kill()
    assert not pid_alive(pid)


def _listener() -> tuple[socket.socket, int]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def test_a_port_released_within_the_grace_is_accepted() -> None:
    s, port = _listener()
    threading.Timer(0.5, s.close).start()
    ensure_ports_free([port], "this test", grace=60)  # returns once the port is free: raising is the failure


def test_a_port_still_taken_after_the_grace_is_named() -> None:
    s, port = _listener()
    try:
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port}"):
            ensure_ports_free([port], "this test", grace=0.5)
    finally:
        s.close()
