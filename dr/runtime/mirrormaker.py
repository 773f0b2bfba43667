"""A dedicated MirrorMaker 2 process replicating one local cluster to another (active → passive).

Identity topic naming (same names on the target) unless a link asks for ``<source>.<topic>``
(hub-and-spoke edges), checkpoints and consumer-group offset sync on,
intervals of about a second so tests and drills see convergence quickly.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, ResourcePatternType, ResourceType

from dr.base.errors import ClusterError, ConfigError, DRError
from dr.base.files import write_atomic
from dr.base.pattern_safety import name_matcher
from dr.base.toolchain import toolchain
from dr.kafka.client import (
    Endpoint,
    acl,
    admin_client,
    connected_admin,
    create_acls,
    kafka_errors,
    until_leaders_settle,
    upsert_scram_users,
)
from dr.kafka.copied import dedicated_offsets_topic, stored_positions, uncopied
from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import LocalCluster, write_properties
from dr.runtime.connect_link import ConnectorState
from dr.runtime.credentials import REPLICATOR_USER
from dr.runtime.link_watchdog import (
    Restart,
    control_lock,
    dead_tasks_of,
    record_launch,
    restarts,
    spawn,
    stop_watchdog,
)
from dr.runtime.process import (
    FatalWatch,
    JvmProcess,
    fatal_cause,
    java_command,
    last_exception,
    private_dir,
    wait_until,
)

#: A task's start as the herder logs it (its "finished initialization" line follows when it runs).
_TASK_STARTING = re.compile(r"Starting task ((Mirror\w+Connector)-\d+)")
CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
"""The connectors a dedicated MirrorMaker 2 runs for one flow."""
_CONFIG_WRITTEN = re.compile(r"MirrorHerder - (Mirror\w+Connector) connector configured for ")
_CONFIG_UP_TO_DATE = re.compile(
    r"MirrorHerder - This node is a leader for \S+ and configuration for (Mirror\w+Connector) is already"
)


def config_in_effect(log_text: str, *, same_as_before: bool = False) -> dict[str, int]:
    """Per connector, the offset in ``log_text`` from which it runs the configuration this start wrote (pure).

    On becoming its group's leader MirrorMaker 2 compares each connector's stored configuration (the one an
    earlier run left on the target) with its own: an equal one is "already up to date" and what runs since
    launch is ours (offset 0); a different one is written and the connector restarts, so only what the log
    says after that record is ours. A connector missing from the result has not been decided yet.

    ``same_as_before``: this start's ``mm2.properties`` is the one the previous start ran. MirrorMaker 2
    compares the stored configuration *resolved* through the config provider with its own *unresolved*
    one (``${file:…}``), so it rewrites an unchanged configuration at every start; the rewrite yields the
    same task configurations, the tasks started at launch keep running and no task starts after it. What
    runs since launch is then ours (offset 0) whatever the log says.
    """
    marks: dict[str, int] = {}
    for match in _CONFIG_UP_TO_DATE.finditer(log_text):
        marks.setdefault(match.group(1), 0)
    for match in _CONFIG_WRITTEN.finditer(log_text):
        marks[match.group(1)] = 0 if same_as_before else match.end()
    return marks


def stale_failure(cause: str, log_text: str, marks: dict[str, int]) -> bool:
    """True when ``cause`` (:func:`dr.runtime.process.fatal_cause`'s text) is the failure of a connector, or of
    its task, under the configuration an earlier run stored: in ``log_text`` it stands only before the mark
    (:func:`config_in_effect`) from which that connector runs this start's configuration, so its restart
    under it is still to come (pure). Under load the restart followed the mark by 2.6 s, after a stale
    failure had stood for the watch's settle time."""
    kind, _, rest = cause.partition(" ")
    if kind not in ("connector", "task"):
        return False
    name = rest.partition(":")[0]
    mark = marks.get(name.rsplit("-", 1)[0] if kind == "task" else name)
    if not mark:  # undecided, or this start's configuration ran from launch
        return False
    return not (fatal_cause(log_text[mark:]) or "").startswith(f"{kind} {name}:")


def tasks_ready(log_text: str, source_has_topics: Callable[[], bool], *, same_as_before: bool = False) -> bool:
    """True once every connector runs this start's configuration and a replication task has started
    under it; with no topic to copy, the heartbeat task stands for it (pure but for the callback).
    ``same_as_before`` as in :func:`config_in_effect`."""
    marks = config_in_effect(log_text, same_as_before=same_as_before)
    if any(name not in marks for name in CONNECTORS):
        return False
    if _task_started(log_text, "MirrorSourceConnector", marks["MirrorSourceConnector"]):
        return True
    return (
        _task_started(log_text, "MirrorHeartbeatConnector", marks["MirrorHeartbeatConnector"])
        and not source_has_topics()
    )


def _task_started(log_text: str, connector: str, since: int) -> bool:
    """A task of ``connector`` whose start the log records at or after offset ``since`` has finished its
    initialization (a task of the stale configuration, started before and ready after, does not count)."""
    for start in _TASK_STARTING.finditer(log_text, since):
        ready = f"WorkerSourceTask{{id={start.group(1)}}} Source task finished initialization"
        if start.group(2) == connector and log_text.find(ready, start.end()) >= 0:
            return True
    return False


IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
"""Same topic names on the target: active-passive."""
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
"""Remote topics named ``<source>.<topic>`` on the target: active-active and hub-and-spoke edges (it never loops)."""


def target_topic(replication_policy: str, source_alias: str, topic: str) -> str:
    """The name ``topic`` of ``source_alias`` has on the target under ``replication_policy`` (pure)."""
    return f"{source_alias}.{topic}" if replication_policy == DEFAULT_POLICY else topic


#: ``(resource type, name, operation, pattern, why)`` — what MirrorMaker 2 (dedicated, or as connectors
#: on Kafka Connect) needs as the replicator on a link's source, and nothing more: read and describe, its
#: offset-syncs topic, the groups' committed offsets (Describe, not Read: it never moves them there).
REPLICATOR_SOURCE_RIGHTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("Topic", "*", "Read", "Literal", "copy the topics its pattern selects (found anew every refresh)"),
    ("Topic", "*", "DescribeConfigs", "Literal", "copy each topic's configuration (sync.topic.configs)"),
    ("Topic", "mm2-offset-syncs.", "Create", "Prefixed", "create its offset-syncs topic (dedicated mode)"),
    ("Topic", "mm2-offset-syncs.", "Write", "Prefixed", "record offset syncs"),
    ("Topic", "mm2-offset-syncs.", "Read", "Prefixed", "translate offsets for checkpoints"),
    ("Group", "*", "Describe", "Literal", "list the groups and read their committed offsets for checkpoints"),
    ("Cluster", "kafka-cluster", "Describe", "Literal", "list the consumer groups"),
)
#: The same on a link's target: write and create the mirrored and internal topics, keep their partitions
#: and configuration in step, and sync the groups' offsets there (Read on a group is what an offset commit
#: needs). No Delete, no broker configuration, no cluster-wide Create. (Kafka lets Read/Write/Alter imply
#: Describe and AlterConfigs DescribeConfigs: no row for those.)
REPLICATOR_TARGET_RIGHTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("Topic", "*", "Create", "Literal", "create mirrored topics and its own (checkpoints, heartbeats, mm2-*)"),
    ("Topic", "*", "Write", "Literal", "write mirrored records, checkpoints, heartbeats and its worker's state"),
    ("Topic", "*", "Read", "Literal", "read its internal topics; commit synced offsets of mirrored topics"),
    ("Topic", "*", "AlterConfigs", "Literal", "keep mirrored topics' configuration in step (sync.topic.configs)"),
    ("Topic", "*", "Alter", "Literal", "add the partitions a source topic gained"),
    ("Group", "*", "Read", "Literal", "sync the linked groups' offsets when empty; its own worker group (dedicated)"),
    ("Cluster", "kafka-cluster", "Describe", "Literal", "describe the cluster and its groups"),
    ("Cluster", "kafka-cluster", "IdempotentWrite", "Literal", "idempotent producer (brokers before 2.8 ask for it)"),
)

#: What an exactly-once link adds on its target, run as connectors on Kafka Connect: the transactional
#: producers of its three connectors' tasks, ``<worker group>-<connector>-<task>`` (Connect's naming), under
#: a prefix of that link alone; Connect fences an earlier generation's tasks with the same right
#: (the connectors' admin client acts as the replicator). Write implies Describe: no row for that.
REPLICATOR_CONNECT_TRANSACTION_RIGHTS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "TransactionalID",
        "connect-<connect cluster>-<link>-",
        "Write",
        "Prefixed",
        "commit the link's copies and source offsets in transactions; fence its earlier tasks",
    ),
)
#: The same for a dedicated MirrorMaker 2, whose worker (group ``<source>-mm2``) runs as the replicator:
#: its tasks' producers and the config-topic producer of its leader.
REPLICATOR_DEDICATED_TRANSACTION_RIGHTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("TransactionalID", "<source>-mm2-", "Write", "Prefixed", "commit the link's copies in transactions"),
    ("TransactionalID", "connect-cluster-<source>-mm2", "Write", "Literal", "its worker's config-topic producer"),
)


def transaction_rights(source_alias: str, link_name: str, connect: str | None) -> list[tuple[str, str, str, str]]:
    """``(resource type, name, operation, pattern)`` of an exactly-once link's transactional ids on its
    target: the Connect rows for a link on Connect cluster ``connect``, else the dedicated ones (pure)."""
    rows = REPLICATOR_CONNECT_TRANSACTION_RIGHTS if connect else REPLICATOR_DEDICATED_TRANSACTION_RIGHTS
    names = {"<connect cluster>": connect or "", "<link>": link_name, "<source>": source_alias}
    out = []
    for kind, template, op, pattern, _why in rows:
        name = template
        for placeholder, value in names.items():
            name = name.replace(placeholder, value)
        out.append((kind, name, op, pattern))
    return out


_RESOURCES = {
    "Topic": ResourceType.TOPIC,
    "Group": ResourceType.GROUP,
    "Cluster": ResourceType.BROKER,
    "TransactionalID": ResourceType.TRANSACTIONAL_ID,
}
_OPERATIONS = {
    "Read": AclOperation.READ,
    "Write": AclOperation.WRITE,
    "Create": AclOperation.CREATE,
    "Alter": AclOperation.ALTER,
    "AlterConfigs": AclOperation.ALTER_CONFIGS,
    "Describe": AclOperation.DESCRIBE,
    "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
    "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE,
}


def replicator_acls(source: bool) -> list[AclBinding]:
    """ACLs the replicator needs on the source (:data:`REPLICATOR_SOURCE_RIGHTS`) or on the target
    (:data:`REPLICATOR_TARGET_RIGHTS`) — the rights the Pulumi program grants too."""
    rights = REPLICATOR_SOURCE_RIGHTS if source else REPLICATOR_TARGET_RIGHTS
    return [
        acl(REPLICATOR_USER, _RESOURCES[kind], name, _OPERATIONS[op], ResourcePatternType[pattern.upper()])
        for kind, name, op, pattern, _why in rights
    ]


def transaction_acls(source_alias: str, link_name: str, connect: str | None) -> list[AclBinding]:
    """The ACLs of :func:`transaction_rights` for the replicator, on an exactly-once link's target."""
    return [
        acl(REPLICATOR_USER, _RESOURCES[kind], name, _OPERATIONS[op], ResourcePatternType[pattern.upper()])
        for kind, name, op, pattern in transaction_rights(source_alias, link_name, connect)
    ]


def grant_replicator(
    source: LocalCluster, target: LocalCluster, *, exactly_once: bool = False, connect: str | None = None
) -> None:
    """Create the replicator's SCRAM user and ACLs on both clusters (idempotent); ``exactly_once`` adds the
    transactional ids of link ``<source>-to-<target>`` (dedicated, or on Connect cluster ``connect``)."""
    password = source.credentials.password(REPLICATOR_USER)
    for cluster, is_source in ((source, True), (target, False)):
        admin = cluster.endpoint()
        upsert_scram_users(admin, {REPLICATOR_USER: password})
        bindings = replicator_acls(is_source)
        if exactly_once and not is_source:
            bindings += transaction_acls(source.name, f"{source.name}-to-{target.name}", connect)
        create_acls(admin, bindings)


DEFAULT_INTERVALS: dict[str, int] = {
    "emit_checkpoints_s": 1,
    "sync_group_offsets_s": 1,
    "refresh_topics_s": 5,
    "refresh_groups_s": 5,
    "emit_heartbeats_s": 1,
}
"""The link's intervals (seconds) where the topology sets none: short, so drills and tests converge fast."""

OFFSET_FLUSH_S = 1
"""Seconds between the worker's task commits, each of which promotes the source task's delayed offset syncs."""

TASK_RESTART_S = 10
"""Allowance for the checkpoint connector to restart its tasks when the link discovers a new group."""


def group_offsets_translated_within(intervals: dict[str, int] | None = None) -> float:
    """Seconds after a group's last commit on the source by which the link has translated it onto the
    target, derived from the intervals it runs with (pure).

    One round: the link discovers the group (``refresh_groups_s``), the source task promotes the offset
    sync of its last record at its next commit (:data:`OFFSET_FLUSH_S`), the checkpoint task emits a
    checkpoint (``emit_checkpoints_s``) and writes it to the idle group on the target
    (``sync_group_offsets_s``). Each may start just after its tick, and a newly discovered group makes
    the connector restart its checkpoint tasks, which start over: two rounds plus that restart.
    """
    iv = {**DEFAULT_INTERVALS, **(intervals or {})}
    one_round = iv["refresh_groups_s"] + OFFSET_FLUSH_S + iv["emit_checkpoints_s"] + iv["sync_group_offsets_s"]
    return float(2 * one_round + TASK_RESTART_S)


TRANSACTION_TIMEOUT_S = 15
"""How long the target keeps an exactly-once link's open transaction before aborting it (a killed process's)."""


def mm2_properties(
    source_alias: str,
    source: Endpoint,
    target_alias: str,
    target: Endpoint,
    topics: str = ".*",
    groups: str = ".*",
    target_brokers: int = 1,
    intervals: dict[str, int] | None = None,
    extra: dict[str, str] | None = None,
    *,
    replication_policy: str = IDENTITY_POLICY,
    exactly_once: bool = False,
) -> dict[str, str]:
    """MirrorMaker 2 dedicated-mode configuration for one source → target flow (pure).

    ``exactly_once``: the worker writing to the target runs with exactly-once source support (KIP-618, in
    dedicated mode since Kafka 3.5): each task's records and source offsets commit in one transaction,
    and the source is read committed, so a killed process copies nothing twice.

    ``replication_policy`` names the topics on the target: :data:`IDENTITY_POLICY` (same names: active →
    passive) or :data:`DEFAULT_POLICY` (``<source>.<topic>``: one direction of an active-active pair, or an edge into its hub). ``extra`` is laid over
    the result (e.g. producer tuning or a Connect transform); keys that would change the flow itself
    (``clusters`` or the replication policy) are refused.
    """
    iv = {**DEFAULT_INTERVALS, **(intervals or {})}
    rf = str(min(3, target_brokers))
    props = {
        "clusters": f"{source_alias},{target_alias}",
        f"{source_alias}->{target_alias}.enabled": "true",
        f"{source_alias}->{target_alias}.topics": topics,
        f"{source_alias}->{target_alias}.groups": groups,
        f"{target_alias}->{source_alias}.enabled": "false",
        "replication.policy.class": replication_policy,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": str(iv["sync_group_offsets_s"]),
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": str(iv["emit_checkpoints_s"]),
        "emit.heartbeats.interval.seconds": str(iv["emit_heartbeats_s"]),
        "refresh.topics.interval.seconds": str(iv["refresh_topics_s"]),
        "refresh.groups.interval.seconds": str(iv["refresh_groups_s"]),
        # an offset sync for every record: exact translation of committed group offsets
        "offset.lag.max": "0",
        # delayed offset syncs are promoted at each task commit: commit every second. The dedicated-mode
        # worker reads its own settings from the target cluster's prefix; a top-level value never reaches
        # it (the worker then commits every 60 s and exact translation of group offsets waits that long)
        f"{target_alias}.offset.flush.interval.ms": str(OFFSET_FLUSH_S * 1000),
        # A process started again after a crash joins its Connect group on the target while the dead
        # member still stands in it: the join waits for that member up to the rebalance timeout (Connect's
        # default 60 s: a SIGKILLed process copied again after 67-70 s when it came back within the old
        # session, 8-11 s when later), then its tasks wait the rebalance delay (default 5 min). A lone
        # worker rejoins at once, so 10 s bounds the wait; session and delay as the local Connect
        # workers' (dr.runtime.connect). Measured by benchmarks/mm2_restart_bench.py.
        f"{target_alias}.rebalance.timeout.ms": "10000",
        f"{target_alias}.session.timeout.ms": "6000",
        f"{target_alias}.heartbeat.interval.ms": "1500",
        f"{target_alias}.scheduled.rebalance.max.delay.ms": "5000",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "true",
        # Its plugins come from the classpath and all carry ServiceLoader manifests: the default discovery
        # (hybrid_warn) scans every class of the classpath by reflection as well, once for the process (the
        # top-level key) and once for the flow's worker (which reads the target's prefix, as above) — 4 s
        # each alone, 14 s beside the test suite, CPU-bound, for nothing more found
        "plugin.discovery": "service_load",
        f"{target_alias}.plugin.discovery": "service_load",
        "tasks.max": "2",
        "replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": rf,
        "config.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
    }
    for alias, ep in ((source_alias, source), (target_alias, target)):
        for key, value in ep.java_config().items():
            props[f"{alias}.{key}"] = value
    if exactly_once:
        # the worker's setting, read (like its offset flush) from the target cluster's prefix
        props[f"{target_alias}.exactly.once.source.support"] = "enabled"
        # A process killed mid-transaction leaves it open on the target, and the next start reads its
        # offsets topic read-committed: it waits until the broker aborts that transaction at its timeout
        # (the producer's default 60 s). A poll's transaction commits in well under a second.
        props[f"{target_alias}.producer.transaction.timeout.ms"] = str(TRANSACTION_TIMEOUT_S * 1000)
        # only committed source records are copied (MirrorSourceConnector's condition for exactly-once)
        props[f"{source_alias}.consumer.isolation.level"] = "read_committed"
    fixed = {"clusters", "replication.policy.class"} & set(extra or {})
    if fixed:
        raise ConfigError(
            f"MirrorMaker 2 extra properties may not set {sorted(fixed)}.",
            "the flow and its topic naming come from the topology",
        )
    props.update(extra or {})
    return props


FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"


def file_provider(allowed: Path) -> dict[str, str]:
    """The settings that let MirrorMaker 2 (its worker and its connectors) resolve ``${file:<path>:<key>}``
    references to files under ``allowed`` (pure)."""
    return {
        "config.providers": "file",
        "config.providers.file.class": FILE_PROVIDER,
        "config.providers.file.param.allowed.paths": str(allowed),
    }


def provider_reference(path: Path, key: str) -> str:
    """The reference a config provider set up by :func:`file_provider` resolves to ``key`` of ``path`` (pure)."""
    return f"${{file:{path}:{key}}}"


def restarts_under(state_dir: Path) -> dict[str, list[Restart]]:
    """Per dedicated link kept under ``state_dir`` (``<source>-to-<target>``), the restarts its watchdog
    made after a task died, oldest first; links it never restarted are left out."""
    links = Path(state_dir) / "links"
    found = {d.name: restarts(d) for d in sorted(links.iterdir()) if d.is_dir()} if links.is_dir() else {}
    return {name: done for name, done in found.items() if done}


class MirrorMaker:
    """A dedicated MirrorMaker 2 process from ``source`` to ``target`` (both local clusters)."""

    def __init__(
        self,
        source: LocalCluster,
        target: LocalCluster,
        state_dir: Path | None = None,
        topics: str = ".*",
        groups: str = ".*",
        intervals: dict[str, int] | None = None,
        heap_mb: int = 384,
        extra: dict[str, str] | None = None,
        grant: bool = True,
        *,
        replication_policy: str = IDENTITY_POLICY,
        exactly_once: bool = False,
    ) -> None:
        self.source = source
        self.exactly_once = exactly_once
        self.replication_policy = replication_policy
        self.grant = grant
        self.target = target
        self.topics = topics
        self.groups = groups
        self.intervals = intervals
        self.heap_mb = heap_mb
        self.extra = dict(extra or {})
        self.replication_policy = replication_policy
        self.dir = Path(state_dir or source.state_dir) / "links" / f"{source.name}-to-{target.name}"
        self.process = JvmProcess(f"mm2-{source.name}-{target.name}", self.dir / "pid", self.dir / "mm2.log")

    @property
    def name(self) -> str:
        """``<source>-to-<target>``."""
        return f"{self.source.name}-to-{self.target.name}"

    def secrets_file(self) -> Path:
        """The replicator's password, the one file of this link that holds it (0600 in a 0700 directory)."""
        return self.dir / "secrets" / "replicator.properties"

    def write_secrets(self) -> Path:
        """Write :meth:`secrets_file` from the estate's credentials; return it."""
        path = self.secrets_file()
        private_dir(path.parent)
        write_properties(path, {"password": self.source.credentials.password(REPLICATOR_USER)})
        return path

    def properties(self) -> dict[str, str]:
        """The MM2 configuration this process runs with (pure but for the path): the replicator's password
        only as a reference to :meth:`secrets_file`, so the connector configurations MirrorMaker 2 stores
        in its config topic on the target hold the reference, never the password."""
        secrets = self.secrets_file()
        pw = provider_reference(secrets, "password")
        return mm2_properties(
            self.source.name,
            self.source.endpoint_as(REPLICATOR_USER, pw),
            self.target.name,
            self.target.endpoint_as(REPLICATOR_USER, pw),
            self.topics,
            self.groups,
            self.target.spec.brokers,
            self.intervals,
            {**file_provider(secrets.parent), **self.extra},
            replication_policy=self.replication_policy,
            exactly_once=self.exactly_once,
        )

    def start(self, timeout: float = 120.0) -> float:
        """Start MM2 and wait until its herder runs tasks; return seconds.

        With ``grant`` (the default) the replicator's user and ACLs are created first; the Pulumi
        program passes ``grant=False`` because it declares them as resources of each cluster.
        """
        with control_lock(self.dir):
            return self._start(timeout)

    def _start(self, timeout: float) -> float:
        t0 = time.monotonic()
        if self.process.alive():
            spawn(self.dir, self.process.name)  # a process started before its link had a watchdog
            return 0.0
        if self.grant:
            grant_replicator(self.source, self.target, exactly_once=self.exactly_once)
        self._await_replicator_login()
        private_dir(self.dir)
        self.write_secrets()
        config = self.dir / "mm2.properties"
        write_properties(config, self.properties())
        # What the last start that came up ran: a start cut short may have left its file without its
        # configuration ever reaching the target.
        started = self.dir / "mm2.properties.started"
        same_as_before = started.exists() and started.read_text() == config.read_text()
        tc = toolchain()
        cmd = java_command(
            tc.java,
            [tc.mm2_lib],
            "org.apache.kafka.connect.mirror.MirrorMaker",
            [str(config), "--clusters", self.target.name],
            heap_mb=self.heap_mb,
            crash_dir=self.dir,
            extra_jvm=[
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dlog4j2.level=warn",
            ],
        )
        log_start = self.process.log_size()
        record_launch(self.dir, cmd, log_start)
        self.process.start(cmd)

        watch = FatalWatch()

        def running() -> bool:
            text = self.process.log_since(log_start)
            # A connector or task that failed to start stays down while the process lives on:
            # name its cause within seconds rather than after the whole timeout.
            cause, final = watch.check(text)
            if cause is None and not self.process.alive():
                text = self.process.log_since(log_start)  # what it wrote before it exited
                cause = fatal_cause(text) or last_exception(text) or "no exception in its log"
                raise ClusterError(
                    f"MirrorMaker 2 {self.name} exited during start-up: {cause}",
                    f"fix the cause; the whole log is {self.process.log_file}",
                )
            if cause is not None:
                marks = config_in_effect(text, same_as_before=same_as_before)
                worker = cause.startswith("the worker:")  # no restart of a connector supersedes it
                if not final or (not worker and (len(marks) < len(CONNECTORS) or stale_failure(cause, text, marks))):
                    return False  # a restart with the new config may still supersede it
                elapsed = time.monotonic() - t0
                self.process.stop(timeout=30)
                raise ClusterError(
                    f"MirrorMaker 2 {self.name} failed to start ({elapsed:.1f}s after launch; stopped): {cause}",
                    f"fix the cause (the link's topics/groups or extra properties); the whole trace is in "
                    f"{self.process.log_file}",
                )
            return tasks_ready(text, self._source_has_topics, same_as_before=same_as_before)

        if not wait_until(running, timeout, interval=0.25):
            decided = config_in_effect(self.process.log_since(log_start))
            if len(decided) < len(CONNECTORS):
                raise ClusterError(
                    f"MirrorMaker 2 {self.name} did not configure its connectors in {timeout:.0f}s (it never led its "
                    f"Connect group on {self.target.name}: another MirrorMaker 2 of this link may be running).",
                    f"stop any other MirrorMaker 2 process of {self.name}, then read {self.process.log_file}",
                )
            raise ClusterError(
                f"MirrorMaker 2 {self.name} did not start its tasks in {timeout:.0f}s.", f"read {self.process.log_file}"
            )
        write_atomic(started, config.read_text())
        spawn(self.dir, self.process.name)
        return time.monotonic() - t0

    def _await_replicator_login(self, timeout: float = 30.0) -> None:
        """Wait until the replicator's user logs in on both ends. A SCRAM credential created a moment ago
        (the ``pulumi up`` that creates a cluster creates its users just before its link) is committed by the
        controller before the broker applies it; a MirrorMaker 2 launched in between stops for good on its
        first failed login. A refused login is known within a second (:func:`connected_admin` reads
        librdkafka's error callback; a bare metadata request waited out its whole timeout, 5 s a try, before
        the next), so the wait ends soon after the broker applies the credential. A wrong password stays
        wrong: its error is raised after ``timeout``."""
        deadline = time.monotonic() + timeout
        for cluster in (self.source, self.target):
            endpoint = cluster.endpoint(REPLICATOR_USER)
            while True:
                try:
                    connected_admin(endpoint, timeout=max(1.0, min(10.0, deadline - time.monotonic())))
                    break
                except DRError as exc:
                    if time.monotonic() >= deadline:
                        raise type(exc)(
                            f"logging in to {cluster.name} as the replicator: {exc.problem}", exc.fix
                        ) from None
                    time.sleep(0.25)

    def _source_has_topics(self) -> bool:
        pattern = name_matcher(self.topics)  # the link's joined patterns, matched in bounded time
        endpoint = self.source.endpoint()
        with kafka_errors(f"listing the topics of {self.source.name}", endpoint):
            md = admin_client(endpoint).list_topics(timeout=10)
        return any(pattern.fullmatch(t) and not t.startswith(("__", "mm2-")) for t in md.topics)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the MM2 process cleanly (no JVM left), and its watchdog first."""
        with self._held():
            stop_watchdog(self.dir)
            self.process.stop(timeout)

    def kill(self) -> None:
        """Kill the MM2 process at once (its source is gone: nothing is left to copy or flush); its watchdog
        is stopped first, so nothing starts it again."""
        with self._held():
            stop_watchdog(self.dir)
            self.process.kill()

    def _held(self) -> AbstractContextManager[None]:
        """The link's control lock, for a stop or a kill; none when its directory is gone (never started,
        or removed with the estate's data: no watchdog can run there, and a stop must not recreate it)."""
        return control_lock(self.dir) if self.dir.is_dir() else nullcontext()

    def alive(self) -> bool:
        """True while the MM2 process runs and none of its tasks is dead (:meth:`dead_tasks`)."""
        return self.process.alive() and not self.dead_tasks()

    def dead_tasks(self) -> dict[str, str]:
        """Per task of the running process that died and was not started again, its root cause: Connect
        leaves such a task down while the process lives on (:mod:`dr.runtime.link_watchdog` restarts it)."""
        if not self.process.alive():
            return {}
        return dead_tasks_of(self.dir, self.process)

    def failure(self) -> str | None:
        """Why the link does not copy although its process runs (its dead tasks), or None."""
        dead = self.dead_tasks()
        if not dead:
            return None
        return "; ".join(f"task {task} died: {cause}" for task, cause in sorted(dead.items()))

    def restarts(self) -> list[Restart]:
        """The restarts its watchdog made after a task died, oldest first."""
        return restarts(self.dir)

    def resume(self) -> None:
        """Start the process again from the positions it reached, its user and ACLs left to the stack; a
        process with a dead task is stopped and started (Connect would not restart the task)."""
        self.grant = False
        with control_lock(self.dir):
            if self.process.alive() and self.dead_tasks():
                stop_watchdog(self.dir)
                self.process.stop()
            self.start()

    def resuming(self) -> str:
        """What :meth:`resume` does, for a progress line."""
        return "starting MirrorMaker 2"

    def states(self) -> dict[str, ConnectorState]:
        """``{}``: a dedicated process shows no connectors (its state is :meth:`alive` and :meth:`failure`)."""
        return {}

    def log_hint(self) -> str:
        """Its log and pid file."""
        return f"read {self.process.log_file}; its pid file is {self.process.pid_file}"

    # ------------------------------------------------------------------ lag & offsets
    def copied(self) -> dict[tuple[str, int], int]:
        """Per source ``(topic, partition)``, the next offset this process will copy: the source offsets it
        stored with its last committed copies, in its offsets topic on the target (:mod:`dr.kafka.copied`)."""
        return stored_positions(self.target.endpoint(), dedicated_offsets_topic(self.source.name))

    def lag(self, topics: list[str]) -> dict[tuple[str, int], int]:
        """Per (source topic, partition): the source's committed records this process has not copied yet —
        its end offset beyond the source offsets the process committed with its copies (:meth:`copied`), a
        gap of only commit markers or aborted records counting as copied. Not the target's end offsets:
        under exactly-once they count commit markers, and a source holding markers (the target of an
        exactly-once link upstream) has end offsets its copy never reaches."""
        source = self.source.endpoint()
        return uncopied(source, end_offsets(source, topics), self.copied())

    def wait_caught_up(self, topics: list[str], timeout: float = 120.0) -> float:
        """Wait until every partition's lag is 0; return seconds waited.

        A partition without a leader yet (MM2 has just created the topic on the target) is not
        caught up: the wait goes on instead of failing on the first ``NOT_LEADER_FOR_PARTITION``.
        """
        t0 = time.monotonic()
        caught_up = until_leaders_settle(lambda: all(v == 0 for v in self.lag(topics).values()))
        if not wait_until(caught_up, timeout, interval=0.2):
            failure = self.failure()
            dead = f"; {failure}" if failure else ""
            raise ClusterError(
                f"MirrorMaker 2 {self.name} did not catch up on {topics} in {timeout:.0f}s (lag {self.lag(topics)}"
                f"{dead}).",
                f"read {self.process.log_file}",
            )
        return time.monotonic() - t0
