"""What the loss of one site shares, whether a region of an active-active stack or an edge of a hub-spoke one.

A is the lost ``site``; B the ``peer`` holding its copies ``<site>.<topic>`` (the surviving region, or the
hub). :class:`SiteContext` is the steps' context (:class:`~dr.failover.kinds.active_active.steps.RegionContext`,
:class:`~dr.failover.kinds.hub_spoke.steps.EdgeContext`); the steps whose logic is the same for both live here
(``fence-drain``, ``integrity``, ``decommission``), with the pieces of the others (B's health, A's lag,
the grants' check, a client publication), the run's opening, the content comparison of A's topics with
their copies, and the plan's lines.
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar

from pydantic import Field

from dr.base.errors import ClusterError, DRError, FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Model
from dr.base.types import Reporter as Progress
from dr.failover.act.clients import publish_clients
from dr.failover.act.fencing import fence, write_bindings
from dr.failover.act.health import ClusterHealth, Reachability, cluster_health, listening, reachability
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal, failover_dir
from dr.failover.frame.outcomes import Outcome
from dr.failover.frame.run import OnStep, already_finished, new_context, refuse_damaged_state, run_frame, run_mode
from dr.failover.frame.step import Context, FailoverOptions, Step, StepResult, named_roles
from dr.failover.frame.summary import FailoverSummary
from dr.kafka.client import Endpoint
from dr.kafka.records import read_to_end
from dr.kafka.replay import replay
from dr.topology import Kind, StackFile, Topology, dump_stack_config, load_topology, read_stack_file, stack_file_diff
from dr.topology.topics import remote_topic

__all__ = [
    "CopyCount",
    "LostRecord",
    "RegionComparison",
    "SiteContext",
    "SiteOutcome",
    "SiteRecovery",
    "TopicCopies",
    "compare_region",
    "decommission",
    "fence_drain",
    "integrity",
    "lost_site",
    "named_roles",
    "open_site_run",
    "plan_site_loss",
    "recover_site",
    "resumed_topologies",
    "run_site_loss",
    "site_topologies",
]


class SiteOutcome(Outcome):
    """What a step of a site's loss or rejoin found and did (journaled as the step's ``outcome``)."""

    details: dict[str, Any] = Field(default_factory=dict)


def result(status: Any, summary: str, **details: Any) -> StepResult:
    """A step's result, its ``details`` journaled as they are."""
    return StepResult(status, SiteOutcome(details=details), summary)


@dataclass
class SiteContext(Context, ABC):
    """A step's context in the loss of a site: A is the lost ``site``, B the ``peer`` holding its copies."""

    site: str = ""
    peer: str = ""

    kind: ClassVar[str] = "site"
    """The ``drctl failover`` flag naming the site (``region``, ``edge``); also the report's prefix."""
    noun: ClassVar[str] = "failover"
    """What the run is called in a refusal (``a planned failover fences and drains it first``)."""

    @property
    def source(self) -> str:
        """A: the lost site."""
        return self.site

    @property
    def target(self) -> str:
        """B: the peer holding the site's copies ``<site>.<topic>``."""
        return self.peer

    @property
    def standby(self) -> str | None:
        """The loss of a site makes no standby passive."""
        return None

    @property
    def topics(self) -> list[str]:
        """The site's topics its link A→B carries (drained, and compared with their copies on B)."""
        return [t.name for t in self.original.topics_for(self.link)]

    @property
    @abstractmethod
    def moving(self) -> list[str]:
        """The applications that move off the site (each kind of site says which)."""

    @property
    def producers(self) -> list[str]:
        """The moving applications that write."""
        return [a for a in self.moving if self.original.principals.application(a).writes]

    @property
    def named(self) -> str:
        """The site as a message names it."""
        return self.site

    @property
    def flag(self) -> str:
        """The ``drctl failover`` flag and value naming this site."""
        return f"--{self.kind} {self.site}"

    def endpoint(self, cluster: str) -> Endpoint:
        """Admin endpoint of ``cluster`` as declared before the loss."""
        return self.before.endpoint(cluster)

    def unreadable(self) -> str:
        """The ``integrity`` step's summary while A does not answer."""
        return f"{self.site} is not readable; rerun when it is"

    def counted(self, topic: str, counts: CopyCount) -> str:
        """One topic's counts in the ``integrity`` step's summary."""
        return f"{topic}: {counts['source']} on {self.site}, {counts['copy']} copied"


# ---------------------------------------------------------------------------------- pieces of steps


def require_healthy(
    ctx: Context, cluster: str, ep: Endpoint, topics: list[str], unfit: str, *, after: str = ""
) -> ClusterHealth:
    """``cluster``'s health (its topics ``topics`` present), refused as ``unfit`` when it is not fit."""
    health = cluster_health(ep, expected_brokers=ctx.original.cluster(cluster).expected_brokers, topics=topics)
    if not health.reachable or health.offline or health.missing_topics:
        raise FailoverError(
            f"{unfit}: "
            f"{health.error or f'offline partitions {health.offline}, missing topics {health.missing_topics}'}",
            f"bring {cluster} back to health (`drctl status --stack {ctx.stack}`), then rerun{after}",
        )
    return health


def reach_and_lag(ctx: SiteContext) -> tuple[Reachability, dict[str, int]]:
    """A's reachability and, when it answers, the lag of A→B per partition; a planned run refused when
    A does not answer."""
    a = reachability(ctx.a_ep)
    lag: dict[str, int] = {}
    if a["reachable"]:
        try:
            lag = {f"{t}-{p}": n for (t, p), n in sorted(ctx.before.link_runner(ctx.link.name).lag(ctx.topics).items())}
        except ClusterError as exc:
            a = {**a, "error": str(exc).splitlines()[0]}
    if ctx.mode == "planned" and not a["reachable"]:
        raise FailoverError(
            f"{ctx.named} does not answer ({a['error']}); a planned {ctx.noun} fences and drains it first.",
            f"use --mode unplanned: `drctl failover --stack {ctx.stack} {ctx.flag} --mode unplanned`",
        )
    return a, lag


def require_writes(ep: Endpoint, producers: list[str], cluster: str) -> None:
    """Refused unless every one of ``producers`` holds its write ACLs on ``cluster`` (after granting them)."""
    have = {b.principal.removeprefix("User:") for b in write_bindings(ep, producers)}
    lacking = sorted(set(producers) - have)
    if lacking:
        raise FailoverError(
            f"after granting, {', '.join(lacking)} still cannot write on {cluster}.",
            "check the cluster's authorizer and rerun the failover (it resumes here)",
        )


def published(ctx: Context, cluster: str, apps: list[str]) -> StepResult:
    """The ``clients`` step for one cluster: its client configuration for ``apps``."""
    written = publish_clients(ctx.after, cluster, apps=apps)
    return result(
        "done",
        f"{len(written)} client configurations for {cluster} in {ctx.state / 'clients'}",
        files=[{k: v for k, v in w.items() if k != "password"} for w in written],
    )


# ---------------------------------------------------------------------------------- steps


def fence_drain(ctx: SiteContext) -> StepResult:
    """Planned: remove the moving producers' write ACLs on A, then drain A→B to lag 0."""
    if ctx.mode == "unplanned":
        return result("skipped", f"unplanned: {ctx.site} is gone, nothing to fence or drain")
    removed = fence(ctx.a_ep, ctx.producers)
    ctx.journal.measure(fenced_at=round(time.time(), 3))
    try:
        waited = ctx.before.link_runner(ctx.link.name).wait_caught_up(ctx.topics, timeout=ctx.options.drain_timeout)
    except ClusterError as exc:
        if not ctx.options.force:
            raise FailoverError(
                f"link {ctx.link.name} did not drain within {ctx.options.drain_timeout:.0f}s: "
                f"{str(exc).splitlines()[0]}",
                "rerun (it resumes), raise --drain-timeout, or pass --force to go on (the lag is then lost "
                "until the integrity step lists it for recovery)",
            ) from exc
        waited = ctx.options.drain_timeout
    iv = ctx.link.intervals
    time.sleep(iv.emit_checkpoints_s + iv.sync_group_offsets_s + 1)  # the moving groups' last commits reach B
    return result(
        "done",
        f"{len(removed)} write ACLs of {', '.join(ctx.producers) or 'no producer'} removed on {ctx.site}; "
        f"link drained in {waited:.1f}s",
        fenced=removed,
        drained_s=round(waited, 3),
    )


def integrity(ctx: SiteContext) -> StepResult:
    """When A is readable: compare A's topics with ``A.<topic>`` on B; list what was never replicated."""
    if ctx.options.skip_verify:
        return result("skipped", "--skip-verify: not compared")
    if not listening(ctx.a_ep.bootstrap):
        return result("deferred", ctx.unreadable(), reason=f"{ctx.site} unreadable")
    fence(ctx.a_ep, ctx.producers)  # a site that came back must not take writes while it is compared
    found = compare_region(ctx.a_ep, ctx.b_ep, ctx.site, ctx.topics)
    report = failover_dir(ctx.home) / f"{ctx.kind}-{ctx.journal.failover_id}-missing.json"
    report.write_text(json.dumps(found, indent=2) + "\n")
    n = len(found["missing"])
    counts = ", ".join(ctx.counted(t, v) for t, v in found["topics"].items())
    if n:
        return result(
            "differences",
            f"{n} records of {ctx.site} never replicated ({counts}); listed in {report}; replay them with "
            f"`drctl failover --stack {ctx.stack} {ctx.flag} --recover`",
            report=str(report),
            missing=n,
            topics=found["topics"],
        )
    return result("done", f"nothing missing ({counts})", report=str(report), missing=0, topics=found["topics"])


def decommission(ctx: SiteContext) -> StepResult:
    """Stop A — when nothing is missing, or with ``--force-decommission``."""
    integ = ctx.journal.step("integrity")
    if integ.status != "done" and not ctx.options.force_decommission:
        missing = ctx.journal.outcome_as("integrity", SiteOutcome).details.get("missing")
        if integ.status == "differences":
            raise FailoverError(
                f"{missing} records of {ctx.named} were never replicated to {ctx.peer}; "
                f"{ctx.site} is NOT decommissioned.",
                f"replay them: `drctl failover --stack {ctx.stack} {ctx.flag} --recover`, then rerun; "
                "or pass --force-decommission to accept the loss",
            )
        return result("deferred", f"{ctx.site} kept (no verdict yet); rerun when it is readable")
    if ctx.original.cluster(ctx.site).kind is Kind.LOCAL:
        ctx.before.local_cluster(ctx.site).stop()
    ctx.write_stack(ctx.desired)
    return result("done", f"{ctx.site} stopped (data kept); decommissioned", forced=integ.status != "done")


# ---------------------------------------------------------------------------------- running

S = TypeVar("S", bound=SiteContext)


def resumed_topologies(ref: StackRef, journal: Journal, current: Topology) -> tuple[Topology, Topology]:
    """``(original, desired)`` of the unfinished run ``journal``; refused when the stack file is neither."""
    original = load_topology(ref.name, journal.record.original_config)
    desired = load_topology(ref.name, journal.record.desired_config)
    if dump_stack_config(current) not in (journal.record.original_config, journal.record.desired_config):
        raise FailoverError(
            f"{ref.stack_file} changed while failover {journal.failover_id} was under way.",
            f"restore it from {journal.path.parent} and rerun, so the failover can finish",
        )
    return original, desired


Found = tuple[Topology, Topology, str, bool]
"""``(original, desired, peer, resuming)`` of a site's loss (:func:`site_topologies`)."""


def site_topologies(
    ref: StackRef,
    read: StackFile,
    journal: Journal | None,
    *,
    unfinished: Callable[[Journal], DRError | None],
    fresh: Callable[[Topology], tuple[Topology, str]],
) -> Found:
    """``(original, desired, peer, resuming)`` of a site's loss: from the stack's unfinished journal
    (``unfinished`` gives the refusal of a journal of another run, None for this run's), else from the stack
    file as read (``read``; ``fresh`` gives the desired topology and the peer, or refuses a stack it cannot
    run on)."""
    current = read.topology
    if journal is not None and not journal.finished:
        refusal = unfinished(journal)
        if refusal is not None:
            raise refusal
        return *resumed_topologies(ref, journal, current), journal.record.target, True
    desired, peer = fresh(current)
    return current, desired, peer, False


def plan_site_loss(
    ref: StackRef, topologies: Callable[[Journal | None, StackFile], Found], stack: StackFile | None = None
) -> tuple[Topology, Topology, str, str]:
    """``(original, desired, peer, stack-file diff)`` for the plan of a site's loss (a damaged state
    refused first) from the stack file as the command read it (``stack``; None: read here); changes nothing."""
    read = stack or read_stack_file(ref.existing_stack_file())
    refuse_damaged_state(ref)
    original, desired, peer, _resuming = topologies(Journal.load(ref.made_failover_home()), read)
    return original, desired, peer, stack_file_diff(ref.stack_file, desired)


def lost_site(
    ref: StackRef, site: str, *, is_loss: Callable[[Journal, Topology], bool], refusal: DRError
) -> tuple[Journal, Topology]:
    """The journal of the loss of ``site`` and the topology before it, that a ``--recover`` reads from:
    ``refusal`` unless the stack's journal is one (its source is ``site`` and ``is_loss``)."""
    journal = Journal.load(ref.made_failover_home())
    if journal is None or journal.record.source != site:
        raise refusal
    original = load_topology(ref.name, journal.record.original_config)
    if not is_loss(journal, original):
        raise refusal
    return journal, original


def open_site_run(
    kind: type[S],
    ref: StackRef,
    journal: Journal | None,
    site: str,
    found: tuple[Topology, Topology, str, bool],
    *,
    steps: Sequence[Step[Any]],
    options: FailoverOptions,
    converger: Converger | None,
    progress: Progress,
    mode: str | None = None,
) -> tuple[S, bool]:
    """The context of the loss (or the rejoin) of ``site`` and whether it resumes
    (:data:`dr.failover.frame.run.OpenRun`): ``found`` is ``(original, desired, peer, resuming)``; a new
    run's journal is created. ``mode``: the run's own (a rejoin's), else :func:`run_mode`'s."""
    original, desired, peer, resuming = found
    mode = mode or run_mode(options, journal, resuming)
    if journal is None or not resuming:
        journal = Journal.create(
            ref.made_failover_home(),
            stack=ref.name,
            mode=mode,
            source=site,
            target=peer,
            standby=None,
            original_config=dump_stack_config(original),
            desired_config=dump_stack_config(desired),
            steps=[s.name for s in steps],
        )
    ctx = new_context(
        kind,
        ref,
        journal,
        original,
        desired,
        mode,
        options=options,
        converger=converger,
        progress=progress,
        site=site,
        peer=peer,
    )
    return ctx, resuming


def run_site_loss(
    context: type[S],
    ref: StackRef,
    site: str,
    steps: Sequence[Step[S]],
    topologies: Callable[[Journal | None, StackFile], Found],
    *,
    title: Callable[[S], str],
    options: FailoverOptions,
    converger: Converger | None,
    progress: Progress,
    on_step: OnStep | None,
    is_finished: Callable[[Journal | None, StackFile], bool] | None = None,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """The loss of ``site`` run through the frame (:func:`dr.failover.frame.run.run_frame`) — whichever the
    kind of site: ``context`` is its steps' context, ``topologies`` gives ``(original, desired, peer,
    resuming)`` from the stack's journal and its stack file as read (or refuses), ``title`` names the run in
    its first line; ``stack``: the stack file as the command read it (None: read once the lock is held)."""

    def finished(journal: Journal | None, read: StackFile) -> bool:
        # a finished run of another site (the hub's own failover before this edge's loss) is not this one
        same_site = journal is not None and journal.record.source == site
        return same_site and (is_finished or already_finished)(journal, read)

    def open_run(journal: Journal | None, read: StackFile) -> tuple[S, bool]:
        return open_site_run(
            context,
            ref,
            journal,
            site,
            topologies(journal, read),
            steps=steps,
            options=options,
            converger=converger,
            progress=progress,
        )

    return run_frame(
        ref, steps, open_run, title=title, progress=progress, on_step=on_step, is_finished=finished, stack=stack
    )


def named_steps(steps: Sequence[Step[Any]], **names: str) -> list[dict[str, str]]:
    """Each step's name and description, its role letters replaced by ``names``, as a plan lists them."""
    return [{"name": s.name, "description": named_roles(s.description, **names)} for s in steps]


# ---------------------------------------------------------------------------------- comparison, recovery


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else (value or b"")


def _fingerprints(ep: Endpoint, topic: str, timeout: float = 120.0) -> list[tuple[int, int, str, str]]:
    """``(partition, offset, key, checksum of value and headers)`` of every record of ``topic`` now."""
    out: list[tuple[int, int, str, str]] = []
    for msg in read_to_end(ep, topic, timeout=timeout, group="kdr-region"):
        digest = hashlib.sha256(_bytes(msg.value()))
        for header in list(msg.headers() or []):
            digest.update(_bytes(header[0]) + b"\0" + _bytes(header[1]))
        key = _bytes(msg.key()).decode(errors="replace")
        out.append((msg.partition() or 0, msg.offset() or 0, key, digest.hexdigest()[:16]))
    return out


class CopyCount(TypedDict):
    """One topic of A against its remote copy on B: records on A, in the copy, never copied, copied twice
    (the JSON of :class:`TopicCopies`, which a recovery report reads back)."""

    source: int
    copy: int
    missing: int
    duplicated: int


class LostRecord(TypedDict):
    """A record of A never replicated, by its coordinates on A."""

    topic: str
    partition: int
    offset: int
    key: str


class RegionComparison(TypedDict):
    """What :func:`compare_region` found (the ``integrity`` step's report file)."""

    topics: dict[str, CopyCount]
    missing: list[LostRecord]


def compare_region(a_ep: Endpoint, b_ep: Endpoint, region: str, topics: list[str]) -> RegionComparison:
    """A's topics against their remote copies on B, matched by content (key + checksum, as multisets):
    per topic the counts, and every record of A never replicated (its coordinates on A)."""
    per_topic: dict[str, CopyCount] = {}
    missing: list[LostRecord] = []
    for topic in topics:
        source = _fingerprints(a_ep, topic)
        copies = Counter((k, c) for _p, _o, k, c in _fingerprints(b_ep, remote_topic(region, topic)))
        originals = Counter((k, c) for _p, _o, k, c in source)  # counted once: per copy, the comparison was quadratic
        left = Counter(copies)
        lost: list[LostRecord] = []
        for partition, offset, key, checksum in source:
            if left[(key, checksum)] > 0:
                left[(key, checksum)] -= 1
            else:
                lost.append({"topic": topic, "partition": partition, "offset": offset, "key": key})
        per_topic[topic] = {
            "source": len(source),
            "copy": sum(copies.values()),
            "missing": len(lost),
            "duplicated": sum(max(0, n - originals[kc]) for kc, n in copies.items()),
        }
        missing += lost
    return RegionComparison(topics=per_topic, missing=missing)


class TopicCopies(Model):
    """One topic of A against its copy ``<site>.<topic>`` on B, counted by content."""

    source: int
    copy_: int = Field(alias="copy")
    """Records in the copy (``copy`` in JSON)."""
    missing: int
    duplicated: int


class SiteRecovery(Model):
    """The one recovery report of a lost site (``drctl failover --region|--edge <site> --recover``)."""

    replayed: int
    """Records written into ``<site>.<topic>`` on B by this run."""
    missing_before: int
    """Records of A found missing on B before this run."""
    topics: dict[str, TopicCopies]
    """Per topic, the comparison that ran first."""
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The report's JSON (what ``--recover`` prints)."""
        return self.model_dump(mode="json", by_alias=True)


def recover_site(
    a_ep: Endpoint, b_ep: Endpoint, site: str, topics: list[str], *, rerun: str, progress: Progress = lambda _m: None
) -> SiteRecovery:
    """Replay into ``<site>.<topic>`` on B the records of A's ``topics`` never replicated: the content
    comparison runs first (so a second run finds nothing and writes nothing), then every partition's
    missing offsets are read once and written in batches (:func:`dr.kafka.replay.replay`). Records
    keep their key, value, headers, timestamp and partition. ``rerun`` is the next step of a failure."""
    t0 = time.monotonic()
    progress(f"comparing {site}'s {', '.join(topics)} with {site}.<topic> on {b_ep.bootstrap}")
    found = compare_region(a_ep, b_ep, site, topics)
    wanted = [(m["topic"], m["partition"], m["offset"]) for m in found["missing"]]
    written = replay(a_ep, b_ep, wanted, lambda topic: remote_topic(site, topic), rerun=rerun, progress=progress)
    return SiteRecovery.model_validate(
        {
            "replayed": written,
            "missing_before": len(wanted),
            "topics": found["topics"],
            "seconds": round(time.monotonic() - t0, 3),
        }
    )
