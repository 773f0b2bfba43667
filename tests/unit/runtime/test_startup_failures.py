"""A MirrorMaker 2 / Connect start-up failure is recognised in the log and named by its root cause."""

from __future__ import annotations

import time

from dr.kafka.connect_rest import root_cause
from dr.runtime.mirrormaker import CONNECTORS, config_in_effect, stale_failure, tasks_ready
from dr.runtime.process import FatalWatch, fatal_cause, last_exception

# Lines as MirrorMaker 2 (Kafka 4.3.1, slf4j-simple) wrote them for topics "(?#x)orders".
_MM2_LOG = """9058 [MirrorHerder-A->B-1] INFO org.apache.kafka.connect.runtime.distributed.DistributedHerder - Herder started
8842 [MirrorHerder-A->B-1] INFO org.apache.kafka.connect.runtime.distributed.WorkerCoordinator - rebalance failed due to 'The coordinator is loading and hence can't process requests.' (CoordinatorLoadInProgressException)
9342 [connector-thread-MirrorSourceConnector] ERROR org.apache.kafka.connect.runtime.WorkerConnector - WorkerConnector{id=MirrorSourceConnector} Error while starting connector
java.util.regex.PatternSyntaxException: Unknown inline modifier near index 2
(?#x)orders
  ^
\tat java.base/java.util.regex.Pattern.error(Pattern.java:2028)
\tat java.base/java.util.regex.Pattern.group0(Pattern.java:3039)
9364 [connector-thread-MirrorSourceConnector] ERROR org.apache.kafka.connect.runtime.distributed.DistributedHerder - [Worker clientId=A->B, groupId=A-mm2] Failed to start connector 'MirrorSourceConnector'
org.apache.kafka.connect.errors.ConnectException: Failed to start connector: MirrorSourceConnector
\tat org.apache.kafka.connect.runtime.distributed.DistributedHerder.lambda$startConnector$0(DistributedHerder.java:2084)
Caused by: org.apache.kafka.connect.errors.ConnectException: Failed to transition connector MirrorSourceConnector to state STARTED
\t... 9 more
Caused by: java.util.regex.PatternSyntaxException: Unknown inline modifier near index 2
(?#x)orders
  ^
9648 [task-thread-MirrorHeartbeatConnector-0] INFO org.apache.kafka.connect.runtime.AbstractWorkerSourceTask - WorkerSourceTask{id=MirrorHeartbeatConnector-0} Source task finished initialization and start
"""


def test_the_first_fatal_record_is_named_with_its_root_cause() -> None:
    assert fatal_cause(_MM2_LOG) == (
        "connector MirrorSourceConnector: java.util.regex.PatternSyntaxException: Unknown inline modifier near index 2"
    )


def test_transient_errors_and_connector_failures_of_a_worker_are_not_fatal_to_the_worker() -> None:
    assert fatal_cause(_MM2_LOG.split("9342 ", 1)[0]) is None  # INFO lines, a retried rebalance
    assert fatal_cause(_MM2_LOG, connectors=False) is None  # a Connect worker runs on with a failed connector


def test_a_worker_that_stops_on_an_error_names_it_and_masks_secrets() -> None:
    log = (
        "2100 [main] ERROR org.apache.kafka.connect.cli.AbstractConnectCli - Stopping due to error\n"
        "org.apache.kafka.common.config.ConfigException: Invalid value password=hunter22 for configuration x\n"
        "\tat org.apache.kafka.common.config.ConfigDef.parseType(ConfigDef.java:1)\n"
    )
    cause = fatal_cause(log, connectors=False)
    assert cause is not None and cause.startswith("the worker: org.apache.kafka.common.config.ConfigException")
    assert "hunter22" not in cause
    assert last_exception(log) is not None and "hunter22" not in (last_exception(log) or "")


def test_root_cause_of_a_connect_status_trace() -> None:
    trace = _MM2_LOG.split("9364 ", 1)[1].split("9648 ", 1)[0].split("\n", 1)[1]
    assert root_cause(trace) == "java.util.regex.PatternSyntaxException: Unknown inline modifier near index 2"
    assert root_cause("no exception here") is None


def test_a_failure_of_the_stale_config_superseded_by_a_restart_is_not_fatal() -> None:
    restarted = _MM2_LOG + (
        "9800 [StartAndStopExecutor-A->B-1] INFO org.apache.kafka.connect.runtime.distributed.DistributedHerder - "
        "[Worker clientId=A->B, groupId=A-mm2] Starting connector MirrorSourceConnector\n"
    )
    assert fatal_cause(restarted) is None


def test_a_fatal_record_is_final_only_once_it_has_stood_for_the_settle_time() -> None:
    watch = FatalWatch(settle=0.2)
    assert watch.check(_MM2_LOG) == (fatal_cause(_MM2_LOG), False)
    time.sleep(0.25)
    assert watch.check(_MM2_LOG)[1] is True
    assert watch.check("") == (None, False)


# How MirrorMaker 2 (Kafka 4.3.1) says which configuration its connectors run, from real logs.
_UP_TO_DATE = "".join(
    f"5194 [MirrorHerder-A->B-1] INFO org.apache.kafka.connect.mirror.MirrorHerder - This node is a leader for A->B "
    f"and configuration for {name} is already up to date.\n"
    for name in ("MirrorSourceConnector", "MirrorHeartbeatConnector", "MirrorCheckpointConnector")
)
_SOURCE_STARTING = (
    "5715 [StartAndStopExecutor-A->B-4] INFO org.apache.kafka.connect.runtime.distributed.DistributedHerder - "
    "[Worker clientId=A->B, groupId=A-mm2] Starting task MirrorSourceConnector-0\n"
)
_SOURCE_INITIALIZED = (
    "6114 [task-thread-MirrorSourceConnector-0] INFO org.apache.kafka.connect.runtime.AbstractWorkerSourceTask - "
    "WorkerSourceTask{id=MirrorSourceConnector-0} Source task finished initialization and start\n"
)
_SOURCE_READY = _SOURCE_STARTING + _SOURCE_INITIALIZED
_HEARTBEAT_READY = _SOURCE_READY.replace("MirrorSourceConnector", "MirrorHeartbeatConnector")


def _configured(name: str) -> str:
    return f"4927 [MirrorHerder-A->B-1] INFO org.apache.kafka.connect.mirror.MirrorHerder - {name} connector configured for A->B.\n"


def test_an_unchanged_config_runs_from_launch_so_its_first_tasks_are_this_starts() -> None:
    log = _SOURCE_READY + _UP_TO_DATE
    assert config_in_effect(log) == dict.fromkeys(
        ("MirrorSourceConnector", "MirrorHeartbeatConnector", "MirrorCheckpointConnector"), 0
    )
    assert tasks_ready(log, lambda: True)


def test_tasks_of_a_stale_config_started_before_the_new_one_was_written_do_not_count() -> None:
    written = _configured("MirrorCheckpointConnector") + _configured("MirrorHeartbeatConnector")
    stale_then_written = _SOURCE_READY + written + _configured("MirrorSourceConnector")
    assert not tasks_ready(stale_then_written, lambda: True)
    assert not tasks_ready(_SOURCE_READY + written, lambda: True)  # the source connector is not decided yet
    assert tasks_ready(stale_then_written + _SOURCE_READY, lambda: True)


def test_a_stale_task_started_before_the_new_config_and_ready_after_it_does_not_count() -> None:
    """The order of a real log (CI, full run): the stale configuration's task is starting when the new
    configuration is written, and says it finished its initialization only after that."""
    written = "".join(_configured(name) for name in ("MirrorHeartbeatConnector", "MirrorCheckpointConnector"))
    log = _SOURCE_STARTING + written + _configured("MirrorSourceConnector") + _SOURCE_INITIALIZED
    assert not tasks_ready(log, lambda: True)
    assert tasks_ready(log + _SOURCE_READY, lambda: True), "a task started under the new configuration counts"


def test_with_nothing_to_copy_the_heartbeat_task_of_this_config_stands_for_readiness() -> None:
    log = _UP_TO_DATE + _HEARTBEAT_READY
    assert tasks_ready(log, lambda: False)
    assert not tasks_ready(log, lambda: True)  # topics to copy: wait for a replication task


def test_a_restart_with_the_same_properties_counts_the_tasks_started_at_launch() -> None:
    """With the password behind a config provider, MirrorMaker 2 compares the stored configuration resolved
    with its own unresolved one and rewrites it at every start; the task configurations come out the same,
    so the tasks started at launch run on and none starts after the rewrite (seen: a stop and start of a
    link timed out after 120 s). The configuration the last successful start ran is the one in effect."""
    written = "".join(_configured(name) for name in CONNECTORS)
    log = _SOURCE_READY + written
    assert not tasks_ready(log, lambda: True), "a changed configuration still waits for a task after it"
    assert tasks_ready(log, lambda: True, same_as_before=True)
    assert config_in_effect(log, same_as_before=True) == dict.fromkeys(CONNECTORS, 0)
    assert not tasks_ready(written, lambda: True, same_as_before=True), "still needs a started task"


def test_a_stale_failure_that_stood_while_the_new_config_was_written_waits_for_the_restart() -> None:
    """The order of a real log (the full suite on two workers): the configuration a failing run stored starts
    first and its checkpoint connector fails at 27.8 s; this start's configuration reaches that connector at
    30.9 s and its restart only at 33.6 s — after the failure had stood for the watch's 3 s. It is stale until
    the connector fails again under the new configuration."""
    failed = _MM2_LOG.split("9342 ", 1)[1].replace("MirrorSourceConnector", "MirrorCheckpointConnector")
    failed = "9342 " + failed.split("9648 ", 1)[0]
    others = _configured("MirrorSourceConnector") + _configured("MirrorHeartbeatConnector")
    log = others + failed + _configured("MirrorCheckpointConnector")
    cause = fatal_cause(log)
    assert cause is not None and cause.startswith("connector MirrorCheckpointConnector: ")
    marks = config_in_effect(log)
    assert len(marks) == len(CONNECTORS)
    assert stale_failure(cause, log, marks), "failed before its configuration was written: stale"
    again = log + failed  # the restart under this start's configuration fails the same way: this start's
    assert not stale_failure(cause, again, config_in_effect(again))
    up_to_date = _UP_TO_DATE + failed  # a configuration in effect from launch: its failure is this start's
    assert not stale_failure(cause, up_to_date, config_in_effect(up_to_date))
    assert not stale_failure("the worker: java.lang.OutOfMemoryError", log, marks)
