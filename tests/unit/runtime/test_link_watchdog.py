"""A dedicated MirrorMaker 2's dead tasks are read from its log, and its watchdog's back-off and lock."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from dr.runtime.link_watchdog import backoff, control_lock, launch_offset, record_launch, restarts
from dr.runtime.process import dead_tasks, fatal_cause

# The records of the task death seen in a hub failover's E1→P link (Kafka 4.3.1, slf4j-simple).
_DEATH = """2026-11-29 09:58:01:101 [task-thread-MirrorSourceConnector-1] ERROR org.apache.kafka.connect.runtime.AbstractWorkerSourceTask - ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-1} failed to send record to E1.readings:
org.apache.kafka.common.errors.InvalidTxnStateException: The producer attempted a transactional operation in an invalid state.
2026-11-29 09:58:01:240 [task-thread-MirrorSourceConnector-1] ERROR org.apache.kafka.connect.runtime.WorkerTask - ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-1} Task threw an uncaught and unrecoverable exception. Task is being killed and will not recover until manually restarted
org.apache.kafka.connect.errors.ConnectException: Failed to commit producer transaction
\tat org.apache.kafka.connect.runtime.ExactlyOnceWorkerSourceTask$TransactionBoundaryManager.commit(ExactlyOnceWorkerSourceTask.java:1)
Caused by: org.apache.kafka.common.errors.InvalidTxnStateException: The producer attempted a transactional operation in an invalid state.
2026-11-29 09:58:02:001 [task-thread-MirrorSourceConnector-0] INFO org.apache.kafka.connect.runtime.AbstractWorkerSourceTask - ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-0} Committing offsets for 12 acknowledged messages
"""
_RESTARTED = (
    "2026-11-29 09:58:20:000 [DistributedHerder-connect-1] INFO org.apache.kafka.connect.runtime.distributed."
    "DistributedHerder - [Worker clientId=E1->P] Starting task MirrorSourceConnector-1\n"
)


def test_a_task_killed_by_an_unrecoverable_exception_is_dead_with_its_root_cause() -> None:
    assert dead_tasks(_DEATH) == {
        "MirrorSourceConnector-1": "org.apache.kafka.common.errors.InvalidTxnStateException: The producer "
        "attempted a transactional operation in an invalid state."
    }
    assert (fatal_cause(_DEATH) or "").startswith("task MirrorSourceConnector-1: ")


def test_a_task_started_again_is_not_dead_and_a_healthy_log_has_none() -> None:
    assert dead_tasks(_DEATH + _RESTARTED) == {}
    assert dead_tasks(_DEATH.split("2026-11-29 09:58:01:240", 1)[0]) == {}  # a failed send alone: not dead yet
    assert dead_tasks("") == {}


def test_a_connector_failure_is_not_a_dead_task() -> None:
    log = (
        "9342 [connector-thread-MirrorSourceConnector] ERROR org.apache.kafka.connect.runtime.WorkerConnector - "
        "WorkerConnector{id=MirrorSourceConnector} Error while starting connector\n"
        "java.lang.IllegalStateException: boom\n"
    )
    assert dead_tasks(log) == {}


def test_the_back_off_doubles_from_five_seconds_to_five_minutes() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4, 7, 20)] == [5.0, 10.0, 20.0, 40.0, 300.0, 300.0]


def test_the_control_lock_is_reentrant_in_a_process_and_exclusive_across_holders(tmp_path: Path) -> None:
    order: list[str] = []
    with control_lock(tmp_path), control_lock(tmp_path):  # re-entered: no deadlock
        # another holder (its own open file description, as another process has) waits for the lock
        def other() -> None:
            import fcntl
            import os

            fd = os.open(tmp_path / "control.lock", os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            order.append("other")
            os.close(fd)

        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.3)
        order.append("held")
    t.join(5)
    assert order == ["held", "other"]


def test_a_launch_is_recorded_and_restarts_read_back(tmp_path: Path) -> None:
    assert launch_offset(tmp_path) == 0 and restarts(tmp_path) == []
    record_launch(tmp_path, ["java", "-cp", "x", "Main"], 4096)
    assert launch_offset(tmp_path) == 4096
    assert (tmp_path / "mm2.command.json").stat().st_mode & 0o777 == 0o600
    (tmp_path / "restarts.jsonl").write_text('{"at": "t", "tasks": {"T-1": "X"}, "restart": 1}\n')
    assert restarts(tmp_path) == [{"at": "t", "tasks": {"T-1": "X"}, "restart": 1}]


def test_the_watchdog_reads_only_what_the_log_gained_and_only_the_running_launch(tmp_path: Path) -> None:
    from dr.runtime.link_watchdog import _Marks

    log = tmp_path / "mm2.log"
    log.write_bytes(b"x" * 1000 + b" Task threw an uncaught and unrecoverable exception\n")
    marks = _Marks(log)
    assert marks.seen_since(0)
    launch = log.stat().st_size  # a restart: the old launch's failure is not this one's
    with open(log, "ab") as f:
        f.write(b"healthy lines\n" * 100)
    assert not marks.seen_since(launch)
    with open(log, "ab") as f:
        f.write(b"... unrecover")
    assert not marks.seen_since(launch)
    with open(log, "ab") as f:
        f.write(b"able exception\n")  # the mark split across two looks is still found
    assert marks.seen_since(launch)
    marks.clear()
    assert not marks.seen_since(launch)


def test_a_drill_reports_the_restarts_its_links_watchdogs_made_during_it(tmp_path: Path) -> None:
    from dr.failover.drill.frame import link_restarts
    from dr.failover.drill.render import render_drill
    from dr.failover.drill.result import DrillResult

    for link, lines in {
        "E1-to-P": [
            '{"at": "2026-11-29T09:00:00+00:00", "tasks": {"MirrorSourceConnector-0": "old"}, "restart": 1}',
            '{"at": "2026-11-29T10:00:05+00:00", "tasks": {"MirrorSourceConnector-1": '
            '"org.apache.kafka.common.errors.InvalidTxnStateException: invalid state"}, "restart": 2}',
        ],
        "H-to-P": [],
    }.items():
        (tmp_path / "links" / link).mkdir(parents=True)
        (tmp_path / "links" / link / "restarts.jsonl").write_text("".join(f"{x}\n" for x in lines))
    found = link_restarts(tmp_path, "2026-11-29T10:00:00+00:00")
    assert [(r.link, r.at) for r in found] == [
        ("E1-to-P", "2026-11-29T10:00:05+00:00")
    ]  # the earlier one: not this drill's
    result = DrillResult(stack="s", mode="planned", out=str(tmp_path), link_restarts=found)
    text = render_drill(result)
    assert (
        "link E1-to-P restarted by its watchdog at 2026-11-29T10:00:05+00:00: task MirrorSourceConnector-1 died: "
        "org.apache.kafka.common.errors.InvalidTxnStateException: invalid state"
    ) in text
    assert DrillResult.from_json(result.to_json()).link_restarts == found
    assert link_restarts(tmp_path / "nowhere", "") == []
