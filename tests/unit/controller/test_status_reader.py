"""The controller's status report read in a thread of its own: a pass waits at most ``wait_s`` for it."""

from __future__ import annotations

import threading
import time
from typing import Any

from dr.base.errors import DRError
from dr.controller.status_reader import StatusReader


class _Reads:
    """A read that blocks until released (the cluster that stopped answering mid-read), counting its calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        self.release = threading.Event()
        self.release.set()

    def __call__(self, down: dict[str, str], _topology: Any) -> Any:
        self.calls.append(down)
        self.release.wait(10)
        return f"report {len(self.calls)}"


def test_a_report_that_comes_back_within_the_wait_is_returned() -> None:
    reads = _Reads()
    reader = StatusReader(reads)
    assert reader.report({"A": "stopped"}, None, wait_s=5) == "report 1"
    assert reads.calls == [{"A": "stopped"}]


def test_a_late_report_leaves_the_pass_free_starts_no_second_read_and_is_taken_by_the_next_pass() -> None:
    reads = _Reads()
    reads.release.clear()
    reader = StatusReader(reads)
    t0 = time.monotonic()
    assert reader.report({}, None, wait_s=0.2) is None, "the pass goes on without it"
    assert time.monotonic() - t0 < 5
    assert reader.busy
    assert reader.report({"A": "gone"}, None, wait_s=0.2) is None
    assert len(reads.calls) == 1, "no second read while one is under way"
    reads.release.set()
    assert reader.report({"A": "gone"}, None, wait_s=5) == "report 1", "the late report, not a new read"
    assert reader.report({"A": "gone"}, None, wait_s=5) == "report 2"
    assert reads.calls[1] == {"A": "gone"}


def test_a_failing_read_comes_back_as_the_products_error() -> None:
    def broken(_down: dict[str, str], _topology: Any) -> Any:
        raise KeyError("links")

    found = StatusReader(broken).report({}, None, wait_s=5)
    assert isinstance(found, DRError) and "KeyError" in found.problem


def test_the_products_error_is_handed_over_as_it_is() -> None:
    def refused(_down: dict[str, str], _topology: Any) -> Any:
        raise DRError("stack file unreadable", "fix it")

    found = StatusReader(refused).report({}, None, wait_s=5)
    assert isinstance(found, DRError) and found.problem == "stack file unreadable"
