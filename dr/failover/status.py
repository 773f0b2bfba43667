"""``drctl status``: roles, broker health, link lag, consumer-group positions and the last failover.

Read-only towards the clusters. As a side effect it records the end offsets it sees of every
cluster that holds topics (:mod:`dr.failover.act.snapshots`), which is what an unplanned failover
later uses to estimate its RPO — so running it periodically is useful.

The report's ``problems`` (:func:`status_problems`) are what monitoring acts on: a link the
topology says runs that is stopped or cannot be measured, an active or passive cluster that is
down or unreachable, a last failover that failed or was interrupted, a failover journal that belongs
to other clusters (the estate was rebuilt) or was ended unfinished and archived, a Pulumi state file
that cannot be read, a synced group's committed offset on a passive cluster that its link's
translation does not explain (:func:`~dr.failover.act.groups.offsets_ahead`). :func:`raise_for_problems`
turns them into the command's exit code (4; 6 when a failover is among them; 2 when the state file
is, and no failover).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.errors import AuthError, ClusterError, ConfigError, DRError, FailoverError
from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.failover.act.groups import offsets_ahead
from dr.failover.act.health import ClusterHealth, cluster_health
from dr.failover.act.snapshots import record_offsets
from dr.failover.frame.journal import Journal
from dr.failover.frame.render import endpoint_text, seconds_text
from dr.failover.frame.summary import summarize
from dr.failover.record.journal_doc import Abandonment
from dr.failover.record.metrics import Offsets, encode_offsets, lag
from dr.kafka.checkpoints import translated_offsets
from dr.kafka.client import TLS_FAILED, Endpoint
from dr.kafka.copied import uncopied
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.runtime.connect_link import runs
from dr.topology import (
    Application,
    Architecture,
    Cluster,
    Engine,
    Kind,
    Link,
    Placement,
    Role,
    Topology,
    load_stack_file,
)
from dr.topology.architectures import ARCHITECTURES
from dr.topology.client_endpoint import EndpointStatus, endpoint_drift
from dr.topology.kinds import LinkState
from dr.topology.topics import remote_topics_on, target_topic, topics_on

__all__ = [
    "ClusterStatus",
    "ConnectorStatus",
    "GroupPosition",
    "GroupStatus",
    "HealthStatus",
    "LastFailover",
    "LinkStatus",
    "PartitionState",
    "StatusReport",
    "StepState",
    "TaskStatus",
    "link_problem",
    "lock_held",
    "raise_for_problems",
    "render_status",
    "status_problems",
    "status_report",
]


class StepState(BaseModel):
    """A step of the last failover and its status."""

    name: str
    status: str


class PulumiLockStatus(BaseModel):
    """A lock file of the stack in the ``file://`` backend: who wrote it, and whether that process lives."""

    holder: str
    alive: bool
    path: str


class LastFailover(BaseModel):
    """The last failover in ``drctl status``: an abridged :class:`~dr.failover.frame.summary.FailoverSummary`."""

    failover_id: str
    mode: str
    status: str
    source: str
    target: str
    standby: str | None
    rto_s: float | None
    a_b_c_s: float | None
    pending: list[str]
    next: list[str]
    journal: str
    steps: list[StepState]
    lock_held: bool
    """Whether a process holds the stack's failover lock now (a ``running`` failover without one was interrupted)."""
    holder: str | None = None
    """With a team database: who holds (or last held, when stale) the lease, since when, last heartbeat."""

    @classmethod
    def of(cls, journal: Journal, lock_held: bool) -> LastFailover:
        """The last failover of a stack from its journal."""
        s = summarize(journal)
        return cls(
            **s.model_dump(include=set(cls.model_fields) - {"steps", "lock_held"}),
            steps=[StepState(name=st.name, status=st.status) for st in s.steps],
            lock_held=lock_held,
        )


# The entries below leave unset what does not apply to them (a stopped local cluster has no health,
# an external one no process): ``StatusReport.to_json()`` dumps with ``exclude_unset``, so such keys
# are absent from ``drctl status --json`` rather than null.


class PartitionState(BaseModel):
    """Leader, replicas and in-sync replicas of one partition (``drctl status --isr``)."""

    leader: int
    replicas: list[int]
    isr: list[int]


class HealthStatus(BaseModel):
    """A cluster's health: the JSON form of :class:`~dr.failover.act.health.ClusterHealth`."""

    reachable: bool
    brokers: list[int]
    expected_brokers: int | None
    offline: list[str]
    under_replicated: list[str]
    missing_topics: list[str]
    partitions: dict[str, PartitionState] | None = None
    """Set only with ``--isr``."""
    error: str | None
    healthy: bool
    brokers_down: int

    @classmethod
    def of(cls, health: ClusterHealth, *, isr: bool) -> HealthStatus:
        """From what :func:`~dr.failover.act.health.cluster_health` found; ``partitions`` only with ``isr``."""
        h = health.to_dict()
        if not isr:
            h.pop("partitions")
        return cls.model_validate(h)


class ClusterStatus(BaseModel):
    """One cluster: role, process (local), health and end offsets."""

    name: str
    role: Role
    kind: Kind
    process: str | None = None
    """Local only: ``running``, ``degraded``, ``stopped`` or ``absent``."""
    bootstrap: str | None = None
    brokers_declared: int | None = None
    """Local only."""
    running_nodes: list[int] | None = None
    """Local only: node ids whose JVM is alive."""
    health: HealthStatus | None = None
    """Unset when the cluster is not running or has no usable endpoint."""
    end_offsets: dict[str, int] | None = None
    """``"topic:partition"`` → end offset, when the cluster answers."""
    error: str | None = None


class TaskStatus(BaseModel):
    """One task of a connector: its id, state and worker."""

    id: int | None
    state: str | None
    worker: str | None
    error: str | None = None
    """The root cause of the task's failure, as Connect reports it."""


class ConnectorStatus(BaseModel):
    """One connector of a link on a Connect cluster (:meth:`~dr.runtime.links.LinkRunner.states`)."""

    state: str
    """``ABSENT`` when the connector is not on the Connect cluster (then ``worker`` is unset)."""
    worker: str | None = None
    error: str | None = None
    """The root cause of the connector's failure, as Connect reports it."""
    tasks: list[TaskStatus]


class LinkStatus(BaseModel):
    """One link: state, engine, whether it runs (process or connectors) and its lag per partition."""

    name: str
    source: str
    target: str
    state: LinkState
    engine: Engine
    connect: str | None = None
    """The Connect cluster the link runs on, if it does."""
    connectors: dict[str, ConnectorStatus] | None = None
    process: str | None = None
    """``running``, ``stopped``, ``unreachable`` (Connect), the connectors' bad states, or ``no tasks``;
    unset when the link neither runs on Connect nor between local clusters."""
    connect_error: str | None = None
    failure: str | None = None
    """Why a dedicated MirrorMaker 2 whose process runs does not copy: its dead tasks and their causes."""
    restarts: int | None = None
    """How often the link's watchdog started its process again after a task died (a dedicated process)."""
    last_restart: str | None = None
    """When and why the watchdog last restarted it (``<time>: task <id>: <cause>``)."""
    lag: dict[str, int] | None = None
    """``"topic:partition"`` → records the target lacks, when both sides answer."""
    total_lag: int | None = None
    error: str | None = None


class GroupPosition(BaseModel):
    """A consumer group on one cluster: committed offsets and lag, or why they are unknown."""

    committed: dict[str, int] | None = None
    committed_total: int | None = None
    lag_total: int | None = None
    ahead: list[str] | None = None
    """Passive clusters only: committed offsets beyond the partition's end or ahead of the link's
    translation of the source commit (each a problem)."""
    error: str | None = None


class GroupStatus(BaseModel):
    """One application's consumer group: its position on every cluster that answers."""

    group: str
    application: str
    topics: list[str]
    positions: dict[str, GroupPosition]


class AbandonedJournal(TypedDict):
    """The stack's last failover, ended unfinished and archived (:meth:`dr.failover.frame.journal.Journal.abandon`)."""

    path: str
    failover_id: str | None
    status_before: str | None
    reason: str | None
    by: str | None
    at: float | None


class StatusReport(BaseModel):
    """What ``drctl status`` prints (see the module doc); ``--json`` is :meth:`to_json`."""

    stack: str
    failover_done: bool
    architecture: Architecture = Field(default=Topology.model_fields["architecture"].default, exclude=True)
    """The stack's architecture (a stack file's default when not given): which failover takes over from a lost
    cluster, and the runbook for it (its entry of :data:`~dr.topology.architectures.ARCHITECTURES`); not in
    the JSON."""
    clusters: list[ClusterStatus]
    links: list[LinkStatus]
    consumer_groups: list[GroupStatus]
    last_failover: LastFailover | None
    pulumi_locks: list[PulumiLockStatus] = []
    """Locks of the stack in the local backend (an engine at work, or one killed mid-operation); in the
    JSON only when there is one."""
    problems: list[str]
    """:func:`status_problems` of the rest."""
    journal_home: str | None = None
    """Where the failover journal and lock live (:attr:`dr.base.stackref.StackRef.failover_home`)."""
    journal_shared: bool | None = None
    """True when that is in the stack's (``file://``) backend, so any clone using it resumes a failover;
    False when it is this machine's state directory, which other operators must then share."""
    journal_foreign: str | None = None
    """Why the current journal belongs to other clusters (:func:`dr.failover.frame.identity.foreign_reason`);
    in the JSON only when it does."""
    abandoned_journal: AbandonedJournal | None = None
    """The last failover, ended unfinished and archived (``path``, ``failover_id``, ``reason``, ``at``);
    in the JSON only when it is newer than any current journal."""
    pulumi_state_error: str | None = None
    """Why the stack's Pulumi state file cannot be read (naming it); in the JSON only when it cannot."""
    endpoint: EndpointStatus | None = None
    """The client endpoint (bootstrap, proxy, points_at or error); in the JSON only when declared."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form: keys that do not apply to an entry are absent, not null."""
        return self.model_dump(mode="json", exclude_unset=True)


def status_report(
    ref: StackRef,
    *,
    isr: bool = False,
    snapshot: bool = True,
    unreachable: Mapping[str, str] | None = None,
    topology: Topology | None = None,
) -> StatusReport:
    """The status of the stack ``ref`` (see the module doc). ``unreachable``: clusters the caller has just
    found not answering (name → why), reported down at once instead of asked again — a controller's pass
    must not wait on a dead cluster's timeouts (:meth:`dr.controller.loop.Controller.run_pass`). ``topology``:
    the stack file as the caller has just read it (else it is read here)."""
    stack, state = ref.name, ref.made_state_dir()
    if topology is None:
        topology = load_stack_file(ref.existing_stack_file())
    estate = Estate(topology, Path(state))
    seen = _Seen()
    down = unreachable or {}
    clusters = [
        _cluster_entry(estate, c, seen, isr=isr, snapshot=snapshot, down=down.get(c.name)) for c in topology.clusters
    ]
    journal = Journal.load(ref.failover_home)
    report = StatusReport(
        stack=stack,
        failover_done=topology.failover_done,
        architecture=topology.architecture,
        clusters=clusters,
        links=[_link_entry(estate, link, seen.ends) for link in topology.links],
        consumer_groups=[
            _group_entry(topology, app, seen) for app in topology.principals.applications if app.consumer_group
        ],
        last_failover=_with_holder(LastFailover.of(journal, lock_held(ref.failover_home)), journal)
        if journal is not None
        else None,
        problems=[],
    )
    report.journal_home, report.journal_shared = str(ref.failover_home), ref.journal_shared
    if locks := _pulumi_locks(stack, Path(state)):
        report.pulumi_locks = locks  # in the JSON only when there is one
    _journal_and_state(ref, journal, report)
    if topology.endpoint is not None:
        report.endpoint = estate.endpoint_status()
    report.problems = status_problems(report)
    return report


def _journal_and_state(ref: StackRef, journal: Journal | None, report: StatusReport) -> None:
    """Whether the journal belongs to the clusters running now, an abandoned journal newer than it, and
    whether the Pulumi state reads (each set on ``report`` only when it applies)."""
    from dr.estate.stack_state import state_problem
    from dr.failover.frame.identity import foreign_reason

    if journal is not None and (reason := foreign_reason(ref, journal)) is not None:
        report.journal_foreign = reason
        if report.last_failover is not None:  # its own "next" lines would say to resume it
            report.last_failover.next = [
                f"never resumed (its clusters are gone): `drctl failover --stack {ref.name} --yes` archives it"
            ]
    if (found := Journal.last_abandoned(ref.failover_home)) is not None:
        path, data = found
        found_end = data.get("abandoned")
        ended = found_end if isinstance(found_end, dict) else Abandonment()
        report.abandoned_journal = {
            "path": str(path),
            "failover_id": data.get("failover_id"),
            "status_before": ended.get("status_before"),
            "reason": ended.get("reason"),
            "by": ended.get("by"),
            "at": ended.get("at"),
        }
    if (problem := state_problem(ref)) is not None:
        report.pulumi_state_error = problem


def _pulumi_locks(stack: str, state: Path) -> list[PulumiLockStatus]:
    from dr.estate.pulumi_locks import stack_locks
    from dr.topology import NAMESPACE

    return [
        PulumiLockStatus(holder=lock.holder, alive=lock.alive(), path=str(lock.path))
        for lock in stack_locks(state.parent / "pulumi", NAMESPACE, stack)
    ]


@dataclass
class _Seen:
    """What the cluster entries found, for the link and group entries: endpoints of the clusters
    that answer, and their end offsets."""

    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    ends: dict[str, Offsets] = field(default_factory=dict)
    translations: dict[str, dict[str, Offsets]] = field(default_factory=dict)
    """Passive cluster → group → the translation of its source commit (read once per cluster)."""


def _cluster_entry(
    estate: Estate, c: Cluster, seen: _Seen, *, isr: bool, snapshot: bool, down: str | None = None
) -> ClusterStatus:
    """One cluster: role, process (local), health and end offsets (recorded for the RPO estimate); only its
    role, process and ``down`` as its error when ``down`` says it did not answer just now."""
    if c.kind is Kind.LOCAL:
        lc = estate.local_cluster(c.name)
        entry = ClusterStatus(
            name=c.name,
            role=c.role,
            kind=c.kind,
            process=lc.state(),
            bootstrap=lc.bootstrap,
            brokers_declared=c.brokers,
            running_nodes=lc.running_nodes(),
        )
        if entry.process in ("absent", "stopped"):
            return entry
    else:
        entry = ClusterStatus(name=c.name, role=c.role, kind=c.kind, bootstrap=c.bootstrap_servers)
    if down is not None:
        entry.error = down
        return entry
    try:
        ep = estate.endpoint(c.name)
    except (ConfigError, AuthError) as exc:
        entry.error = exc.problem
        return entry
    topics = [t.name for t in (topics_on(estate.topology, c) if c.holds_topics else estate.topology.topics)]
    health = cluster_health(
        ep,
        expected_brokers=c.brokers if c.kind is Kind.LOCAL else None,
        topics=topics if c.holds_topics else None,
        isr=isr,
    )
    entry.health = HealthStatus.of(health, isr=isr)
    if estate.topology.shape().peers:  # the remote copies of the peers' topics, for the links' lag
        topics = [*topics, *remote_topics_on(estate.topology, c.name)]
    if health.reachable:
        seen.endpoints[c.name] = ep
        try:
            seen.ends[c.name] = end_offsets(ep, topics)
            entry.end_offsets = encode_offsets(seen.ends[c.name])
            if snapshot and c.role in (Role.ACTIVE, Role.PASSIVE):
                record_offsets(estate.state, c.name, seen.ends[c.name])
        except ClusterError as exc:
            entry.error = exc.problem
    return entry


def _link_entry(estate: Estate, link: Link, ends: dict[str, Offsets]) -> LinkStatus:
    """One link: state, engine, whether it runs (process or connectors) and its lag per partition."""
    topology = estate.topology
    entry = LinkStatus(name=link.name, source=link.source, target=link.target, state=link.state, engine=link.engine)
    if link.is_running and topology.placement(link) is Placement.CONNECT:
        _connect_link(entry, estate, link.connect or "")
    elif topology.both_local(link):
        runner = estate.link_runner(link.name)
        entry.failure = runner.failure()
        entry.process = "task dead" if entry.failure else ("running" if runner.alive() else "stopped")
        if done := runner.restarts():
            last = done[-1]
            entry.restarts = len(done)
            entry.last_restart = f"{last['at']}: " + "; ".join(f"task {t}: {c}" for t, c in last["tasks"].items())
    if link.source in ends and link.target in ends:
        wanted = {t.name for t in topology.topics_for(link)}
        # a prefixed link (active-active, a hub-and-spoke edge) compares each topic with its <source>.<topic> copy
        copied = {
            (topic, p): ends[link.target].get((target_topic(topology, link, topic), p), 0)
            for topic, p in ends[link.source]
        }
        per = {tp: n for tp, n in lag(ends[link.source], copied).items() if tp[0] in wanted}
        stored = estate.copied_positions(link.name) if link.is_running else None
        if stored is not None:  # runs here: its committed positions (ends count commit markers too)
            try:
                behind = uncopied(estate.endpoint(link.source), ends[link.source], stored())
                per = {tp: n for tp, n in behind.items() if tp[0] in wanted}
            except ClusterError as exc:
                entry.error = f"lag unknown: {exc.problem}"
        entry.lag = encode_offsets(per)
        entry.total_lag = sum(per.values())
    else:
        entry.error = "lag unknown: a side is unreachable"
    return entry


def _group_entry(topology: Topology, app: Application, seen: _Seen) -> GroupStatus:
    """One application's consumer group: committed offsets and lag on every cluster that answers."""
    group = app.consumer_group or ""
    consumes = topology.consumed_by(app)
    entry = GroupStatus(group=group, application=app.name, topics=consumes, positions={})
    for name, ep in seen.endpoints.items():
        if not topology.cluster(name).holds_topics:
            continue
        try:
            done = {tp: n for tp, n in committed_offsets(ep, group).items() if tp[0] in consumes}
        except ClusterError as exc:
            entry.positions[name] = GroupPosition(error=exc.problem)
            continue
        behind = {tp: max(0, n - done.get(tp, 0)) for tp, n in seen.ends.get(name, {}).items() if tp[0] in consumes}
        entry.positions[name] = GroupPosition(
            committed=encode_offsets(done), committed_total=sum(done.values()), lag_total=sum(behind.values())
        )
        links = [link for link in topology.links_into(name) if link.selects_group(group)]
        if topology.cluster(name).role is Role.PASSIVE and links:
            translated = _translations(links, name, ep, seen).get(group, {})
            ahead = offsets_ahead(group, name, done, translated, seen.ends.get(name, {}))
            if ahead:  # the link may have copied and synced since the ends and checkpoints were read: again, fresh
                seen.translations.pop(name)
                translated = _translations(links, name, ep, seen).get(group, {})
                ends = _fresh_ends(ep, sorted({tp[0] for tp in done}), seen.ends.get(name, {}))
                ahead = offsets_ahead(group, name, done, translated, ends)
            entry.positions[name].ahead = ahead
    return entry


def _fresh_ends(ep: Endpoint, topics: list[str], known: Offsets) -> Offsets:
    try:
        return end_offsets(ep, topics)
    except ClusterError:
        return dict(known)


def _translations(links: list[Link], cluster: str, ep: Endpoint, seen: _Seen) -> dict[str, Offsets]:
    """Every group's translation on passive ``cluster`` from its MirrorMaker 2 links' checkpoints, read
    once; what cannot be read counts as no translation (the end offsets still bound the commits)."""
    if cluster not in seen.translations:
        found: dict[str, dict[tuple[str, int], int]] = {}
        for link in links:
            if link.engine is Engine.MIRRORMAKER2:
                try:
                    for group, offsets in translated_offsets(ep, link.source).items():
                        found.setdefault(group, {}).update(offsets)
                except ClusterError:
                    pass
        seen.translations[cluster] = dict(found)
    return seen.translations[cluster]


def _with_holder(last: LastFailover, journal: Journal) -> LastFailover:
    """``last`` with the lease holder of a team database (holder, step, since when)."""
    if journal.store is None:
        return last
    lease = journal.store.lease(journal.path.parent.parent.name)
    if lease is None:
        return last
    step = next((s.name for s in last.steps if s.status in ("running", "interrupted")), None)
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(lease.acquired_at))
    state = "STALE, " if lease.stale else ""
    session = f", database user {lease.db_user} from {lease.db_client}" if lease.db_user else ""
    last.holder = (
        f"{lease.holder} (pid {lease.pid} on {lease.host}{session}) since {since}, {state}heartbeat "
        f"{lease.heartbeat_age_s:.0f} s ago (stale after {lease.stale_after_s:g} s)"
        + (f", step {step}" if step else "")
    )
    return last


def lock_held(home: Path) -> bool:
    """True while a process holds the stack's failover lock (``<home>/failover.lock``, see
    :class:`~dr.failover.frame.journal.StackLock`). Tested with a shared, non-blocking ``flock`` released at once.
    With a team database: while a lease with a fresh heartbeat exists."""
    from dr.failover.frame.journal import team_store_for

    if (store := team_store_for(Path(home))) is not None:
        lease = store.lease(Path(home).name)
        return lease is not None and not lease.stale
    path = Path(home) / "failover.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _cluster_problem(c: ClusterStatus) -> str | None:
    if c.role not in (Role.ACTIVE, Role.PASSIVE, Role.EDGE):
        return None  # a standby is not provisioned yet; a decommissioned cluster is stopped on purpose
    what = f"cluster {c.name} ({c.role})"
    if c.process in ("absent", "stopped"):
        return f"{what} is {c.process}"
    h = c.health
    if h and not h.reachable:
        return f"{what} is unreachable: {h.error or 'no answer'}"
    if c.process == "degraded":
        return f"{what} is degraded: nodes {c.running_nodes} of {c.brokers_declared} brokers run"
    if h and h.brokers_down:
        return f"{what} has {h.brokers_down} of {h.expected_brokers} brokers down"
    if h and h.offline:
        return f"{what} has {len(h.offline)} offline partitions"
    if not h and c.error:
        return f"{what}: {c.error}"
    return None


def _connect_link(entry: LinkStatus, estate: Estate, connect: str) -> None:
    """A link on a Connect cluster: each connector's and task's state (and worker), and ``process``
    ``running`` only when all run."""

    entry.connect = connect
    try:
        runner = estate.link_runner(entry.name)
        states = runner.states()
    except (ClusterError, ConfigError) as exc:
        entry.process = "unreachable"
        entry.connect_error = exc.problem
        return
    running = all(runs(name, s) for name, s in states.items())
    bad = sorted(
        {s["state"] for s in states.values() if s["state"] != "RUNNING"}
        | {t["state"] for s in states.values() for t in s["tasks"] if t["state"] != "RUNNING"}
    )
    entry.connectors = {name: ConnectorStatus.model_validate(s) for name, s in states.items()}
    entry.process = "running" if running else ("stopped" if bad == ["STOPPED"] else "/".join(bad).lower() or "no tasks")
    if not running:
        entry.connect_error = next((e for e in _connector_errors(entry.connectors)), None)


def _connector_errors(connectors: dict[str, ConnectorStatus]) -> list[str]:
    """Each failed connector's and task's reason, as ``<connector> [task <id>]: <root cause>``."""
    out = [f"{name}: {c.error}" for name, c in connectors.items() if c.error]
    out += [f"{name} task {t.id}: {t.error}" for name, c in connectors.items() for t in c.tasks if t.error]
    return out


def link_problem(link: LinkStatus) -> str | None:
    """The problem :func:`status_problems` lists for ``link`` (stopped, not copying, unmeasurable), or None."""
    return _link_problem(link)


def _link_problem(link: LinkStatus) -> str | None:
    if link.state is not LinkState.RUNNING:
        return None  # a cluster link kept, promoted, after a failover: it no longer replicates
    what = f"link {link.name} ({link.source} → {link.target})"
    if link.process == "no tasks":
        return (
            f"{what} is running with no tasks: it replicates nothing; the Connect worker's log says why (often "
            "it cannot reach, authenticate to or trust a cluster: check the link's TLS and SASL settings)"
        )
    if link.failure is not None:
        return (
            f"{what} does not copy: {link.failure}. Its watchdog starts the process again (restarted "
            f"{link.restarts or 0} time(s) so far); the topology says it runs"
        )
    if link.process not in (None, "running"):
        return f"{what} is {link.process}; the topology says it runs" + (
            f" ({link.connect_error})" if link.connect_error else ""
        )
    if link.error is not None:
        return f"{what}: {link.error}"
    return None


def _failover_problem(last: LastFailover | None) -> str | None:
    if last is None:
        return None
    what = f"last failover {last.failover_id} ({last.source} → {last.target})"
    failed = next((s.name for s in last.steps if s.status == "failed"), None)
    if last.status == "failed":
        return f"{what} failed" + (f" at step {failed}" if failed else "")
    if last.status == "interrupted" or (last.status == "running" and not last.lock_held):
        return f"{what} was interrupted: its journal says running, but no process holds the stack's lock"
    return None


def status_problems(report: StatusReport) -> list[str]:
    """What is wrong in a :func:`status_report` (pure; its ``problems`` are not read): one line per stopped
    or unmeasurable running link, down or unreachable active/passive cluster, committed offset on a
    passive cluster that its translation does not explain, and a failed or interrupted last failover.

    A standby that does not exist yet, a decommissioned cluster that is stopped, and a failover whose
    decommissioning waits (``pending``) are not problems.
    """
    found = [p for c in report.clusters if (p := _cluster_problem(c))]
    found += [p for link in report.links if (p := _link_problem(link))]
    found += [p for g in report.consumer_groups for pos in g.positions.values() for p in pos.ahead or []]
    if (p := _failover_problem(report.last_failover)) is not None:
        found.append(p)
    found += [
        f"Pulumi lock left by an engine that is gone: {lock.holder}" for lock in report.pulumi_locks if not lock.alive
    ]
    found += [p for p in (_journal_problem(report), _abandoned_problem(report)) if p]
    if report.pulumi_state_error:
        found.append(report.pulumi_state_error)
    if report.endpoint and (p := endpoint_drift(report.endpoint, report.stack, _unfinished(report.last_failover))):
        found.append(p)
    return found


def _unfinished(last: LastFailover | None) -> bool:
    return last is not None and last.status in ("running", "failed", "interrupted")


def _journal_problem(report: StatusReport) -> str | None:
    if report.journal_foreign is None:
        return None
    last = report.last_failover
    what = f"the journal of failover {last.failover_id}" if last else "the failover journal"
    return (
        f"{what} belongs to other clusters — {report.journal_foreign}; it will never be resumed "
        "(the next `drctl failover` archives it and refuses; the one after starts afresh)"
    )


def _abandoned_problem(report: StatusReport) -> str | None:
    ended = report.abandoned_journal
    if ended is None or ended.get("status_before") == "completed":
        return None
    return (
        f"last failover {ended.get('failover_id')} was ended unfinished ({ended.get('status_before')}) and its "
        f"journal archived to {ended.get('path')}: {ended.get('reason')} — nothing of it applies to the clusters "
        "running now"
    )


def _failover_flag(architecture: Architecture, c: ClusterStatus) -> str | None:
    """The ``drctl failover`` flags that take over from cluster ``c`` when it is lost ('' for the stack's
    own failover), or None when no failover does (a passive cluster, a standby): a lost site's flag when
    ``c`` is one of the sites its architecture fails over alone (``--region``, ``--edge``)."""
    site = ARCHITECTURES[architecture].lost_site
    if site is not None and c.role is site.role:
        return f" --{site.flag} {c.name}"
    return "" if c.role is Role.ACTIVE else None


def _lost_cluster_fix(report: StatusReport, c: ClusterStatus) -> str | None:
    """What to do about a cluster that is gone (stopped with its data, or unreachable). An active or edge cluster,
    whose loss a failover takes over: start it again if it can come back (wait for it, when it is not
    this machine's), else fail it over — or, when its failover is under way, let that finish. An
    external passive cluster: wait for it. None otherwise (the generic restart advice covers a local
    passive cluster and the other problems)."""
    gone = c.process == "stopped" or (c.health is not None and not c.health.reachable)  # absent: never built here
    flag = _failover_flag(report.architecture, c)
    if not gone or _cluster_problem(c) is None:
        return None
    if c.health is not None and TLS_FAILED in (c.health.error or ""):  # it answers: neither lost nor stopped
        return (
            f"{c.name}'s brokers answer but TLS fails: check that the CA the stack gives for {c.name} (tls.ca_file/"
            "ca_pem; local_tls: tls/local-ca.pem under the stack's state) signed its brokers' certificates, that "
            "they are not expired, and that they name the host dialled — no failover is needed for this"
        )
    if flag is None:  # a passive cluster: no failover takes over from it
        return (
            None
            if c.kind is Kind.LOCAL
            else f"wait for {c.name} ({c.kind.value}: drctl does not restart it); its links resume when it answers"
        )
    stack, last = report.stack, report.last_failover
    if last is not None and last.source == c.name and last.status not in ("completed", "pending"):
        if last.status == "running" and last.lock_held:
            return f"failover {last.failover_id} of {c.name} is running: let it finish (`drctl status --stack {stack}`)"
        return None  # its failed or interrupted failover is a problem of its own, with its rerun command
    back = (
        f"if {c.name} can come back, start it with its data (`drctl estate start --stack {stack} --cluster {c.name}`)"
        if c.kind is Kind.LOCAL
        else f"wait for {c.name} if it is coming back (its own operators restart it; drctl does not)"
    )
    dry_run = f"drctl failover --stack {stack}{flag} --mode unplanned --dry-run"
    return f"{back}; if it is lost, fail over: `{dry_run}`, then the same without --dry-run ({ARCHITECTURES[report.architecture].runbook})"


def raise_for_problems(report: StatusReport) -> None:
    """Raise when the report lists problems: FailoverError (exit 6) when the last failover failed or was
    interrupted, else ClusterError (exit 4). The message lists every problem; None when there is none."""
    problems = report.problems
    if not problems:
        return
    stack = report.stack
    last = report.last_failover
    journal = [p for p in (_journal_problem(report), _abandoned_problem(report)) if p]
    failover = _failover_problem(last) in problems or bool(journal)
    fixes = []
    lost = {c.name: fix for c in report.clusters if (fix := _lost_cluster_fix(report, c))}
    stopped = [
        link.name
        for link in report.links
        if (p := _link_problem(link))
        and "the topology says it runs" in p
        and not {link.source, link.target} & set(lost)
    ]
    fixes += [f"start link {name} again: `drctl link start --stack {stack} --link {name}`" for name in stopped]
    fixes += lost.values()
    if any(p.startswith("cluster ") and p.split()[1] not in lost for p in problems) or any(
        link.source not in lost and link.target not in lost and "unreachable" in (_link_problem(link) or "")
        for link in report.links
    ):
        fixes.append(
            f"start the local clusters and links that stopped, with their data: "
            f"`drctl estate up --stack {stack} --refresh`"
        )
    if any(p.startswith("consumer group ") for p in problems):
        fixes.append(
            "only the replicator writes a passive cluster's group offsets: find who committed these (the "
            "brokers' authorizer log), then delete the group there as the admin "
            "(`kafka-consumer-groups --delete --group <group>`) so the link writes its translation again"
        )
    stale_lock = any(p.startswith("Pulumi lock left") for p in problems)
    if stale_lock and not failover:
        fixes.append(
            f"`drctl estate up --stack {stack}` removes that lock and settles what the killed engine left "
            "(a `drctl failover` that was interrupted does the same when rerun)"
        )
    if report.journal_foreign is not None:
        fixes.append(
            f"do not resume it: `drctl failover --stack {stack} --dry-run` plans a new failover of the clusters "
            "running now (the next `drctl failover` archives the old journal first)"
        )
    elif _abandoned_problem(report) is not None and report.abandoned_journal is not None:
        fixes.append(
            f"read {report.abandoned_journal['path']}, then move it out of its directory to acknowledge it (or start "
            f"the next failover: `drctl failover --stack {stack} --dry-run`)"
        )
    elif failover and last is not None and last.status == "failed":
        fixes.extend(last.next or [f"rerun `drctl failover --stack {stack} --yes`: it resumes"])
    elif failover:
        fixes.append(f"rerun `drctl failover --stack {stack} --yes`: it resumes where the interrupted run stopped")
    if report.pulumi_state_error:
        from dr.estate.stack_state import state_fix

        fixes.append(state_fix(stack))
    cls: type[DRError] = FailoverError if failover else ConfigError if report.pulumi_state_error else ClusterError
    count = len(problems)
    raise cls(
        f"stack {stack} has {count} problem{'s' if count != 1 else ''}:\n" + "\n".join(f"  - {p}" for p in problems),
        "; ".join(fixes) or f"look at `drctl status --stack {stack}`",
    )


def render_status(st: StatusReport) -> str:
    """``drctl status`` as text."""
    lines = [f"stack {st.stack}" + (" (after a failover)" if st.failover_done else "")]
    for c in st.clusters:
        h = c.health
        if c.process in ("absent", "stopped"):
            detail = ""  # the process column says it
        elif h:
            detail = (
                f"{len(h.brokers)}/{h.expected_brokers or '?'} brokers, {len(h.offline)} offline, "
                f"{len(h.under_replicated)} under-replicated"
                if h.reachable
                else f"UNREACHABLE ({h.error})"
            )
        else:
            detail = c.error or ""
        lines.append(
            f"  cluster {c.name:<6} {c.role:<14} {c.process or c.kind:<9} {c.bootstrap or '':<40} {detail}".rstrip()
        )
        for key, part in sorted((h.partitions if h and h.partitions else {}).items()):
            lines.append(f"      {key:<24} leader {part.leader} replicas {part.replicas} isr {part.isr}")
    if st.endpoint is not None:
        lines.append(f"  endpoint {st.endpoint['bootstrap']} {endpoint_text(st.endpoint)}")
    for link in st.links:
        detail = f"lag {link.total_lag} records" if link.total_lag is not None else link.error or ""
        process = link.process or link.engine or "?"
        if link.state != "running":
            process, detail = link.state, f"no longer replicates ({detail})" if detail else "no longer replicates"
        lines.append(f"  link    {link.name:<12} {process:<8} {detail}")
        if link.failure:
            lines.append(f"      {link.failure}")
        if link.restarts:
            lines.append(
                f"      restarted {link.restarts}× by its watchdog after a task died; last {link.last_restart}"
            )
        if link.connect:
            lines.append(
                f"      on Connect cluster {link.connect}" + (f": {link.connect_error}" if link.connect_error else "")
            )
        for name, conn in (link.connectors or {}).items():
            tasks = ", ".join(f"task {t.id} {t.state} on {t.worker or '?'}" for t in conn.tasks)
            lines.append(f"      connector {name:<22} {conn.state:<8} {tasks or 'no tasks'}")
        for key, n in (link.lag or {}).items():
            if n:
                lines.append(f"      {key:<24} lag {n}")
    for g in st.consumer_groups:
        pos = ", ".join(
            f"{name}: committed {p.committed_total} lag {p.lag_total}" if p.error is None else f"{name}: {p.error}"
            for name, p in g.positions.items()
        )
        lines.append(f"  group   {g.group:<12} {pos or 'no reachable cluster'}")
    last = st.last_failover
    if last:
        steps = " ".join(f"{s.name}={s.status}" for s in last.steps)
        lines.append(
            f"  last failover {last.failover_id} ({last.mode}): {last.status}; RTO {seconds_text(last.rto_s)}; "
            f"A→B→C {seconds_text(last.a_b_c_s)}"
        )
        lines.append(f"      {steps}")
        if last.holder:
            lines.append(f"      lease: {last.holder}")
        lines.extend(f"      next: {n}" for n in last.next)
    else:
        lines.append("  no failover recorded")
    if st.journal_shared is False:
        lines.append(
            f"  failover journal: {st.journal_home}/failover/ — in this machine's state, not in the backend "
            "(not file://): an operator who resumes a failover from another clone must use this same "
            "KDR_STATE_DIR (shared storage)"
        )
    if st.problems:
        lines.append(f"problems ({len(st.problems)}):")
        lines.extend(f"  - {p}" for p in st.problems)
    else:
        lines.append("problems: none")
    return "\n".join(lines)
