"""Fail-back of an active-active stack: the rebuilt region rejoins as an active peer.

``drctl failover --region A --rejoin`` runs after a region failover of A finished (A decommissioned,
every record of A verified on B or replayed there). Journaled and resumable like the failover itself
(:func:`dr.failover.frame.run.run_frame`), in these steps:

1. preflight — the region failover of A is finished and was not forced past lost records; B is healthy;
2. rebuild — a local A is wiped (its old records are all in ``A.<topic>`` on B: the failover's
   integrity step proved it) so ``pulumi up`` creates it fresh; an external A is the team's rebuilt
   cluster, which must answer;
3. desired-state — A ``active`` again, its links A→B and B→A back, the returning applications still
   homed on B (their writes kept there); ``pulumi up``; then the link B→A copies B's topics into
   ``B.<topic>`` on A;
4. consumer-groups — each returning group positioned on A before it moves: A's own ``<topic>`` from what
   it consumed of ``A.<topic>`` on B, ``B.<topic>`` from its commits on B's ``<topic>`` (MirrorMaker 2's
   offset syncs of each link; :func:`dr.failover.act.positions.survivor_positions`, the region
   failover's in the other direction), so ``auto.offset.reset`` never applies; partitions without a
   derived position are named with the re-reads they may cost; what it has not read yet of
   ``A.<topic>`` on B is listed (those records stay only on B);
5. clients — the returning applications' writes granted on A, then A's client configuration published
   for them: they move while B still takes their writes, so none is refused;
6. release — the applications homed on A again (``home: A``); ``pulumi up`` removes their writes on B;
   the time they had to move (publication → removal) is journaled and printed.

The records A's applications wrote on B while away stay in B's local topics (B's log is theirs); the
link B→A copies them to ``B.<topic>`` on A, so a consumer of the global view (``^([^.]+\\.)?orders$``)
sees each of them once, on either peer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, TypedDict

from dr.base.errors import FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import acl_bindings
from dr.estate.stack import EstateStack
from dr.failover.act.health import reachability
from dr.failover.act.positions import commit_positions, moved_groups_summary, positioned, survivor_positions
from dr.failover.frame.converge import wait_copied
from dr.failover.frame.journal import Journal, failover_dir
from dr.failover.frame.plan import FailoverPlan, plan_lines
from dr.failover.frame.run import OnStep, run_frame
from dr.failover.frame.site_loss import (
    SiteOutcome,
    named_steps,
    open_site_run,
    published,
    require_healthy,
    require_writes,
    result,
)
from dr.failover.frame.step import FailoverOptions, Step, StepResult
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.active_active.run import recovered_marker
from dr.failover.kinds.active_active.steps import RegionContext
from dr.kafka.client import create_acls
from dr.kafka.offset_syncs import read_offset_syncs
from dr.kafka.offsets import committed_offsets, end_offsets, start_offsets
from dr.topology import Kind, Link, Role, StackFile, Topology, load_topology, read_stack_file, stack_file_diff
from dr.topology.access import peer_rules
from dr.topology.active_active import is_active_active, remote_topics_on
from dr.topology.topics import remote_topic

__all__ = ["REJOIN_STEPS", "plan_region_rejoin", "rejoin_topology", "run_region_rejoin", "staged_topology"]

MODE = "rejoin"
"""The journal's mode of a rejoin (a region failover's is ``planned`` or ``unplanned``)."""


@dataclass
class RejoinContext(RegionContext):
    """A rejoin's context: ``region`` is A (rejoining), ``survivor`` B (the peer that held A's applications).
    ``original`` is the stack before the rejoin, ``desired`` after it."""

    @property
    def returning(self) -> list[str]:
        """The applications whose home becomes A again."""
        return [a.name for a in self.desired.principals.applications if a.home == self.region]

    @property
    def topics(self) -> list[str]:
        """The declared topics (every peer's local topics)."""
        return [t.name for t in self.desired.topics]

    def _link(self, source: str, target: str) -> Link:
        """A link of the stack after the rejoin (before it, the region had none)."""
        return self._link_of(self.desired, source, target, "the rejoined stack", " and rerun the rejoin")


def rejoin_topology(current: Topology, before_failover: Topology, region: str) -> Topology:
    """The stack once ``region`` rejoined (pure): its role ``active``, its links as they were before the
    region failover, and the applications whose home it was back home."""
    homes = {a.name: a.home for a in before_failover.principals.applications}
    clusters = [c.model_copy(update={"role": Role.ACTIVE}) if c.name == region else c for c in current.clusters]
    apps = [
        a.model_copy(update={"home": region}) if homes.get(a.name) == region else a
        for a in current.principals.applications
    ]
    others = [lk for lk in current.links if region not in (lk.source, lk.target)]
    restored = [lk for lk in before_failover.links if region in (lk.source, lk.target)]
    return current.revised(
        clusters=clusters,
        principals=current.principals.model_copy(update={"applications": apps}),
        links=[*others, *restored],
        failover_done=before_failover.failover_done,
    )


class Inputs(TypedDict):
    """What every step of a rejoin is given (journaled as the step's ``inputs``)."""

    region: str
    peer: str
    returning: list[str]


def _inputs(ctx: RejoinContext) -> Inputs:
    return Inputs(region=ctx.region, peer=ctx.survivor, returning=ctx.returning)


# ---------------------------------------------------------------------------------- steps


def preflight(ctx: RejoinContext) -> StepResult:
    """B healthy; changes nothing (the region failover's verdict was checked before the journal began)."""
    unfit = f"peer {ctx.survivor} is not fit to link with the rejoining {ctx.region}"
    b = require_healthy(ctx, ctx.survivor, ctx.b_ep, ctx.topics, unfit)
    return result(
        "done",
        f"{ctx.survivor} healthy; {ctx.region} rejoins; returning {', '.join(ctx.returning) or 'none'}",
        peer_brokers=b.brokers,
    )


def rebuild(ctx: RejoinContext) -> StepResult:
    """A local A is wiped (``pulumi up`` creates it fresh); an external A must answer."""
    declared = ctx.original.cluster(ctx.region)
    if declared.kind is not Kind.LOCAL:
        a = reachability(ctx.a_ep)
        if not a["reachable"]:
            raise FailoverError(
                f"the rebuilt {ctx.region} does not answer at {ctx.a_ep.bootstrap} ({a['error']}).",
                f"bring the team's rebuilt cluster up (SASL/SCRAM, an ACL authorizer, the stack's admin "
                f"principal), then rerun `drctl failover --stack {ctx.stack} --region {ctx.region} --rejoin`",
            )
        return result("done", f"{ctx.region} is external and answers: the stack provisions it as it is")
    local = ctx.before.local_cluster(ctx.region)
    had = local.state()
    local.destroy()
    return result(
        "done",
        f"{ctx.region}'s old data removed ({had}; every record of it is in {ctx.region}.<topic> on "
        f"{ctx.survivor}); `pulumi up` creates it fresh",
        was=had,
    )


def staged_topology(desired: Topology, before: Topology) -> Topology:
    """The rejoin's first convergence (pure): ``desired`` — A active, its links back — with every application
    still homed where it is in ``before``, so the returning applications keep their writes on B until A's
    client configuration is published (:func:`release`)."""
    homes = {a.name: a.home for a in before.principals.applications}
    apps = [a.model_copy(update={"home": homes.get(a.name, a.home)}) for a in desired.principals.applications]
    return desired.revised(principals=desired.principals.model_copy(update={"applications": apps}))


def desired_state(ctx: RejoinContext) -> StepResult:
    """Write A active and its links back, the returning applications still homed on B (their writes kept
    there); ``pulumi up``; B→A catches up."""
    backup = failover_dir(ctx.home) / f"{ctx.stack_path.name}.before-{ctx.journal.failover_id}"
    if not backup.exists():
        backup.write_text(ctx.stack_path.read_text())
    written = ctx.write_stack(staged_topology(ctx.desired, ctx.original))
    ctx.say(
        f"{ctx.region} active with its links, the returning applications' writes still on {ctx.survivor}: written "
        f"to {ctx.stack_path} ({'changed' if written else 'already there'}); pulumi up"
    )
    timings = EstateStack(ctx.ref).up(ctx.desired, refresh=True, progress=ctx.progress)
    t0 = time.monotonic()
    link = ctx._link(ctx.survivor, ctx.region)
    wait_copied(
        ctx.b_ep,
        ctx.a_ep,
        ctx.topics,
        timeout=ctx.options.catch_up_timeout,
        what=f"link {link.name}",
        rename=lambda topic: remote_topic(ctx.survivor, topic),
        copied=ctx.after.copied_positions(link.name),
    )
    links = [f"{lk.source}→{lk.target}" for lk in ctx.desired.links]
    return result(
        "done",
        f"{ctx.region} active; links {', '.join(links)}; {link.name} copied {ctx.survivor}'s topics in "
        f"{time.monotonic() - t0:.1f}s",
        backup=str(backup),
        timings={**timings, "catch up": round(time.monotonic() - t0, 3)},
        links=links,
    )


def clients(ctx: RejoinContext) -> StepResult:
    """The returning applications' writes granted on A, then A's client configuration published for them
    — while B still takes their writes, so none is refused whichever side it reaches."""
    grants = acl_bindings(peer_rules(ctx.desired, ctx.region))
    create_acls(ctx.a_ep, grants)  # the release's `pulumi up` adopts them as declared
    require_writes(ctx.a_ep, [a for a in ctx.returning if ctx.desired.principals.application(a).writes], ctx.region)
    done = published(ctx, ctx.region, ctx.returning)
    files = SiteOutcome.model_validate(done.outcome.journaled()).details
    return result(done.status, done.summary, **files, published_at=round(time.time(), 3))


def release(ctx: RejoinContext) -> StepResult:
    """The final desired state (the returning applications homed on A) written; ``pulumi up`` removes their
    writes on B. The time between A's configuration and that removal is the applications' window to move
    without a refused write: measured and journaled."""
    published_at = ctx.journal.outcome_as("rejoin-clients", SiteOutcome).details.get("published_at")
    written = ctx.write_stack(ctx.desired)
    ctx.say(f"desired state written to {ctx.stack_path} ({'changed' if written else 'already there'}); pulumi up")
    started = time.time()
    timings = EstateStack(ctx.ref).up(ctx.desired, progress=ctx.progress)
    removed = time.time()
    lead = None if published_at is None else round(started - published_at, 3)
    last = None if published_at is None else round(removed - published_at, 3)
    text = f"the returning applications' writes on {ctx.survivor} removed" + (
        f" {lead:.1f}–{last:.1f}s after {ctx.region}'s client configuration was published: no write refused "
        f"for an application that follows its file within {lead:.1f}s"
        if lead is not None and last is not None
        else ""
    )
    return result(
        "done",
        text,
        published_at=published_at,
        removal_started_at=round(started, 3),
        removed_at=round(removed, 3),
        moved_within_s=lead,
        removed_within_s=last,
        refusal_window_s=0.0 if lead is not None and lead >= 0 else None,
        timings=timings,
    )


def consumer_groups(ctx: RejoinContext) -> StepResult:
    """Before A's client configuration is published: every returning group gets a committed offset on each
    partition of its topics on A — A's own ``<topic>`` derived from what it consumed of ``A.<topic>`` on B
    (offset syncs of the link A→B), ``B.<topic>`` from its commits on B's ``<topic>`` (those of the link
    B→A) — so none of its consumers falls back to ``auto.offset.reset`` when it moves. What it reads on B
    after this step it reads again on A (counted by the drill). Also listed: what it has not read yet of
    ``A.<topic>`` on B (those records stay only on B)."""
    A, B = ctx.region, ctx.survivor
    topics = ctx.topics
    remote_on_b = [remote_topic(A, t) for t in topics]
    on_a_topics = [*topics, *remote_topics_on(ctx.desired, A, topics)]
    start, end = start_offsets(ctx.a_ep, on_a_topics), end_offsets(ctx.a_ep, on_a_topics)
    ends_b = end_offsets(ctx.b_ep, remote_on_b)
    back = read_offset_syncs(ctx.a_ep, B, topics) or read_offset_syncs(ctx.b_ep, B, topics)  # link A→B
    forward = read_offset_syncs(ctx.b_ep, A, topics) or read_offset_syncs(ctx.a_ep, A, topics)  # link B→A
    found: dict[str, Any] = {}
    gaps: list[str] = []
    refused: list[str] = []
    unread_total = 0
    for app in ctx.returning:
        application = ctx.desired.principals.application(app)
        group = application.consumer_group
        if not group:
            continue
        on_b = committed_offsets(ctx.b_ep, group)
        reads = [t for t in topics if t in ctx.desired.consumed_by(application)]
        mine = {*reads, *remote_topics_on(ctx.desired, A, reads)}
        positions = survivor_positions(
            region=B,
            survivor=A,
            local_topics=reads,
            committed_on_region=on_b,
            syncs=back,
            committed_on_survivor=committed_offsets(ctx.a_ep, group),
            start=start,
            end={tp: n for tp, n in end.items() if tp[0] in mine},
            forward_syncs=forward,
        )
        committed = commit_positions(ctx.a_ep, group, positions, refused)
        gaps += [
            f"{group}:{p.topic}-{p.partition}" for p in positions if p.source != "translated" and p.rereads_at_most
        ]
        unread = {f"{t}-{p}": n - on_b.get((t, p), 0) for (t, p), n in ends_b.items() if n > on_b.get((t, p), 0)}
        unread_total += sum(unread.values())
        found[group] = {
            "unread_on_peer": unread,
            **positioned(group, positions, committed),
        }
    summary = moved_groups_summary(
        found,
        gaps,
        refused,
        on=f" on {A}",
        unknown="",
        resume_from=f"the group's commit on {A}",
        there=f"on {A}",
        derived_from=f"the group's commits on {B}",
        short_of=f"its commits, and what it reads on {B} until it moves",
    )
    if unread_total:
        summary += (
            f"; {unread_total} records of {A}.<topic> on {B} not read yet by "
            f"{', '.join(g for g, v in found.items() if v['unread_on_peer'])} — they are only on {B}: "
            f"read them there (client configuration for {B}) before or after the move"
        )
    return result("done", summary, groups=found, unread=unread_total, gaps=gaps, refused=refused)


REJOIN_STEPS: list[Step[RejoinContext]] = [
    Step("rejoin-preflight", preflight, "check B's health", _inputs),
    Step("rebuild", rebuild, "local A: remove its old data (all of it is on B); external A: it answers", _inputs),
    Step(
        "rejoin-desired-state", desired_state, "write A active, links A↔B (apps' writes kept on B); pulumi up", _inputs
    ),
    Step(
        "rejoin-consumer-groups",
        consumer_groups,
        "position the returning groups on A's <topic> (from A.<topic> on B) and B.<topic>, before they move",
        _inputs,
    ),
    Step("rejoin-clients", clients, "grant the returning apps' writes on A, publish A's client configuration", _inputs),
    Step("rejoin-release", release, "write the apps home A; pulumi up removes their writes on B", _inputs),
]


# ---------------------------------------------------------------------------------- running


def _failover_undone(ref: StackRef, journal: Journal | None, region: str) -> Journal:
    """The journal of the finished region failover of ``region`` that the rejoin undoes; refused when
    ``region`` cannot rejoin now: its region failover must be finished, and not forced past records that
    never reached the peer."""
    refusal = _refusal(ref, journal, region)
    if refusal is not None:
        raise refusal
    if journal is None:  # _refusal refuses a stack without one; this keeps the type honest
        raise FailoverError(
            f"stack '{ref.name}' has no region failover of {region} to fail back from.",
            f"a region rejoins after `drctl failover --stack {ref.name} --region {region}` decommissioned it",
        )
    return journal


def _refusal(ref: StackRef, journal: Journal | None, region: str) -> FailoverError | None:
    """Why ``region`` cannot rejoin now (None when it can)."""
    again = f"`drctl failover --stack {ref.name} --region {region}`"
    if journal is None or journal.record.source != region:
        return FailoverError(
            f"stack '{ref.name}' has no region failover of {region} to fail back from.",
            f"a region rejoins after {again} decommissioned it",
        )
    if journal.mode == MODE:
        return FailoverError(
            f"region {region} already rejoined stack '{ref.name}' (rejoin {journal.failover_id}"
            + (", finished)" if journal.finished else ", unfinished)")
            + ": there is no region failover to fail back from.",
            f"to move {region}'s applications to a peer again: {again}"
            if journal.finished
            else f"finish it: `{again[1:-1]} --rejoin`",
        )
    if not journal.finished:
        return FailoverError(
            f"the region failover {journal.failover_id} of {region} is not finished "
            f"({', '.join(s for s, e in journal.record.steps.items() if not e.done)} pending).",
            f"finish it first: bring {region} back readable if it is not (`drctl estate start --stack {ref.name} "
            f"--cluster {region}`) and rerun {again}",
        )
    forced = journal.outcome_as("decommission", SiteOutcome).details.get("forced")
    if forced and not recovered_marker(ref, journal.failover_id).exists():
        return FailoverError(
            f"{region} was decommissioned with --force-decommission: its data may hold records never "
            f"replicated, which a rebuild would remove.",
            f"replay them first (`{again[1:-1]} --recover`), or keep {region}'s data elsewhere; then rejoin",
        )
    return None


def _open(
    ref: StackRef, read: StackFile, journal: Journal | None, region: str, options: FailoverOptions, progress: Progress
) -> tuple[RejoinContext, bool]:
    current = read.topology
    if journal is not None and not journal.finished and journal.mode == MODE:
        if journal.record.source != region:
            raise FailoverError(
                f"the rejoin {journal.failover_id} of {journal.record.source} is unfinished.",
                f"finish it first: `drctl failover --stack {ref.name} --region {journal.record.source} --rejoin`",
            )
        original = load_topology(ref.name, journal.record.original_config)
        desired = load_topology(ref.name, journal.record.desired_config)
        found = (original, desired, journal.record.target, True)
    else:
        if not is_active_active(current):
            raise FailoverError(
                f"stack '{ref.name}' is {current.architecture}: --rejoin brings a region of an active-active "
                "stack back.",
                f"for an active-passive stack rebuild the old cluster as the standby: `drctl estate standby "
                f"--stack {ref.name} --cluster {region}`",
            )
        journal = _failover_undone(ref, journal, region)
        before = load_topology(ref.name, journal.record.original_config)
        found = (current, rejoin_topology(current, before, region), journal.record.target, False)
    return open_site_run(
        RejoinContext,
        ref,
        journal,
        region,
        found,
        steps=REJOIN_STEPS,
        options=options,
        converger=None,
        progress=progress,
        mode=MODE,
    )


class RejoinPlan(FailoverPlan):
    """What ``--rejoin --dry-run`` shows: the steps and the stack-file diff (``text``: for a person)."""

    region: str
    peer: str
    returning: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str
    text: str

    def render(self) -> str:
        """The plan for a person."""
        return self.text


def plan_region_rejoin(ref: StackRef, region: str, stack: StackFile | None = None) -> RejoinPlan:
    """What ``--rejoin --dry-run`` shows: the steps and the stack-file diff; changes nothing. Refused as the
    rejoin itself would be. ``stack``: the stack file as the command read it (None: read here)."""
    read = stack or read_stack_file(ref.existing_stack_file())
    journal = Journal.load(ref.made_failover_home())
    current = read.topology
    if journal is not None and not journal.finished and journal.mode == MODE:
        desired = load_topology(ref.name, journal.record.desired_config)
    else:
        journal = _failover_undone(ref, journal, region)
        desired = rejoin_topology(current, load_topology(ref.name, journal.record.original_config), region)
    peer = journal.record.target
    returning = [a.name for a in desired.principals.applications if a.home == region]
    steps = named_steps(REJOIN_STEPS, A=region, B=peer)
    diff = stack_file_diff(ref.stack_file, desired)
    text = "\n".join(
        [
            f"rejoin of region {region} in stack {ref.name} (its applications back from {peer})",
            f"applications returning: {', '.join(returning) or 'none'}",
            *plan_lines(steps, diff),
        ]
    )
    return RejoinPlan(
        stack=ref.name, region=region, peer=peer, returning=returning, steps=steps, stack_file_diff=diff, text=text
    )


def _finished(journal: Journal | None, read: StackFile) -> bool:
    return (
        journal is not None
        and journal.finished
        and journal.mode == MODE
        and read.config == journal.record.desired_config
    )


def run_region_rejoin(
    ref: StackRef,
    region: str,
    *,
    options: FailoverOptions,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """Bring region ``region`` back into the active-active stack ``ref`` as an active peer (or resume that);
    ``stack``: its stack file as the command read it (None: read once the lock is held)."""
    ref.existing_stack_file()

    def title(ctx: RejoinContext) -> str:
        return f"of region {region} (journal {ctx.journal.failover_id}) in stack {ref.name}: back from {ctx.target}"

    return run_frame(
        ref,
        REJOIN_STEPS,
        lambda journal, read: _open(ref, read, journal, region, options, progress),
        title=title,
        progress=progress,
        on_step=on_step,
        is_finished=_finished,
        stack=stack,
    )
