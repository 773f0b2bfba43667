"""The integration tests' port allocator (tests/integration/ports.py): windows never overlap within a run,
are skipped while another process holds their lock or while one of their ports is bound."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration import ports
from tests.integration.ports import BLOCK, free_window, release_window, windows

REPO = Path(__file__).resolve().parents[2]


def _span(start: int, size: int) -> range:
    return range(start, start + size)


def test_two_allocations_in_one_process_never_overlap(tmp_path: Path) -> None:
    first = free_window(100, lock_dir=tmp_path)
    second = free_window(250, lock_dir=tmp_path)
    third = free_window(1, lock_dir=tmp_path)
    try:
        spans = [set(_span(first, BLOCK)), set(_span(second, 3 * BLOCK)), set(_span(third, BLOCK))]
        assert not spans[0] & spans[1] and not spans[0] & spans[2] and not spans[1] & spans[2]
        assert all(s >= ports.LOW and s % BLOCK == 0 for s in (first, second, third))
        assert second + 250 <= ports.HIGH
    finally:
        for start in (first, second, third):
            release_window(start)
    lowest = min(first, second, third)
    again = free_window(100, lock_dir=tmp_path)  # released: handed out again
    release_window(again)
    # unless a process outside this test bound one of its ports meanwhile (other test runs on the machine)
    assert again == lowest or not all(ports.port_free(p) for p in range(lowest, lowest + 100)), (again, lowest)


def test_windows_stay_below_the_ephemeral_range_and_outside_the_reserved_ranges() -> None:
    with windows(3) as starts:
        assert len(set(starts)) == 3
        for start in starts:
            assert start >= 20000 and start + BLOCK <= 32000 < 32768
            assert not any(set(_span(start, BLOCK)) & set(r) for r in ports.reserved_ranges())


def test_a_window_held_by_another_process_is_skipped(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from tests.integration.ports import free_window
            print(free_window(100, lock_dir=Path({str(tmp_path)!r})), flush=True)
            sys.stdin.read()  # hold the lock until the test closes stdin
        """),
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        held = int(holder.stdout.readline())
        mine = free_window(100, low=held, lock_dir=tmp_path)
        release_window(mine)
        assert mine > held
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    after = free_window(100, low=held, lock_dir=tmp_path)  # the holder is gone: its lock with it
    release_window(after)
    assert after == held


def test_a_window_with_a_port_in_use_is_skipped(tmp_path: Path) -> None:
    probe = free_window(100, lock_dir=tmp_path)
    release_window(probe)
    with socket.create_server(("127.0.0.1", probe + 42)):  # something listens inside that window
        start = free_window(100, low=probe, lock_dir=tmp_path)
        release_window(start)
    assert start > probe and probe + 42 not in _span(start, BLOCK)


def test_the_reserved_ranges_come_from_the_environment_when_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KDR_TEST_PORTS_RESERVED", "20000-20199, 20250")
    assert ports.reserved_ranges() == (range(20000, 20200), range(20250, 20251))
    start = free_window(100, lock_dir=tmp_path)
    release_window(start)
    assert start >= 20300
    monkeypatch.setenv("KDR_TEST_PORTS_RESERVED", "")
    assert ports.reserved_ranges() == ()


def test_no_window_left_is_an_error_naming_the_range(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"no free window of 100 ports in \[20000, 20200\)"):
        free_window(100, low=20000, high=20200, reserved=[range(20000, 20200)], lock_dir=tmp_path)
    with pytest.raises(ValueError, match="does not fit"):
        free_window(300, low=20000, high=20200, lock_dir=tmp_path)
