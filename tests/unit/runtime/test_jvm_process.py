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


def test_the_local_jvms_take_the_footprint_profile_unless_throughput_is_chosen(tmp_path: Path) -> None:
    from dr.runtime.process import JVM_PROFILES, java_command, jvm_profile

    assert jvm_profile({}) == JVM_PROFILES["footprint"]
    assert jvm_profile({"KDR_JVM_PROFILE": "throughput"}) == JVM_PROFILES["throughput"]
    cmd = java_command("java", [tmp_path], "kafka.Kafka", [], crash_dir=tmp_path)
    assert "-XX:+UseSerialGC" in cmd and "-XX:TieredStopAtLevel=1" in cmd
    assert not any("G1" in o for o in cmd)  # two collectors on one command line stop the JVM at start


def test_an_unknown_jvm_profile_is_a_config_error_naming_the_choices() -> None:
    from dr.base.errors import ConfigError
    from dr.runtime.process import jvm_profile

    with pytest.raises(ConfigError) as info:
        jvm_profile({"KDR_JVM_PROFILE": "fast"})
    assert "footprint" in str(info.value.fix) and "throughput" in str(info.value.fix)
