"""Region failover of an active-active stack: move one peer's applications to a surviving peer.

``drctl failover --region A`` runs these steps, journaled and resumable with the active-passive
pipeline's own machinery (:class:`~dr.failover.frame.journal.Journal`, :class:`~dr.failover.frame.journal.StackLock`,
:func:`dr.failover.frame.run.run_step`, the ``desired-state`` step itself):

1. preflight — the survivor B is healthy; A's reachability; the lag of the link A→B per partition;
2. fence-drain — planned: A's applications lose their write ACLs on A, and the link A→B drains to lag 0;
3. move — the links A→B and B→A stop; A's applications get their write ACLs on B (their new home);
4. consumer-groups — before anything is published, each moved group's position on B: on B's own
   ``<topic>`` from what it had consumed of ``B.<topic>`` on A (the link B→A's offset syncs map it back:
   :mod:`dr.failover.act.positions`), on ``A.<topic>`` MirrorMaker 2's translation (checkpoints, offset
   sync); a partition without one starts at its first record — never skipping — and is listed;
5. clients — B's client configuration for every application that moves;
6. desired-state — A decommissioned, the links of A gone, the applications' home B; ``pulumi up``;
7. integrity — A's topics against their remote copies ``A.<topic>`` on B when A is readable: the records
   never replicated are listed (``drctl failover --region A --recover`` replays them into ``A.<topic>``);
8. decommission — stop A (no record missing, or ``--force-decommission``).

The moved producers write B's local topic; the moved consumers read B's local topic and ``A.<topic>``
(subscribe to ``^(A\\.)?orders$``, or ``^([^.]+\\.)?orders$`` for every peer).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict

from dr.base.errors import FailoverError
from dr.estate.estate import acl_bindings
from dr.failover.act.health import listening
from dr.failover.act.positions import commit_positions, moved_groups_summary, positioned, survivor_positions
from dr.failover.frame.desired_state import desired_state
from dr.failover.frame.site_loss import (
    SiteContext,
    decommission,
    fence_drain,
    integrity,
    published,
    reach_and_lag,
    require_healthy,
    require_writes,
    result,
)
from dr.failover.frame.step import Step, StepResult
from dr.kafka.client import create_acls
from dr.kafka.offset_syncs import read_offset_syncs
from dr.kafka.offsets import Offsets, committed_offsets, end_offsets, start_offsets
from dr.topology import Kind, Link, Topology
from dr.topology.access import peer_rules
from dr.topology.active_active import (
    moving_applications,
    remote_topics_on,
)
from dr.topology.topics import remote_topic

__all__ = ["REGION_STEPS", "RegionContext"]


@dataclass
class RegionContext(SiteContext):
    """A step's context in a region failover: A is the failed ``region``, B the ``survivor``."""

    kind: ClassVar[str] = "region"

    @property
    def region(self) -> str:
        """A: the region failing over."""
        return self.site

    @property
    def survivor(self) -> str:
        """B: the peer taking A's applications."""
        return self.peer

    @property
    def link(self) -> Link:
        """The link A→B."""
        return self._link(self.region, self.survivor)

    def _link(self, source: str, target: str) -> Link:
        return self._link_of(self.original, source, target, "stack", "")

    def _link_of(self, topology: Topology, source: str, target: str, stack: str, then: str) -> Link:
        """The link ``source`` → ``target`` of ``topology`` (``stack`` names it in a refusal)."""
        found = [lk for lk in topology.links if lk.source == source and lk.target == target]
        if not found:
            raise FailoverError(
                f"{stack} '{self.stack}' has no link {source} → {target}.",
                f"active-active peers replicate both ways: declare it in kafka-dr:links{then}",
            )
        return found[0]

    @property
    def moving(self) -> list[str]:
        """The applications whose home is A."""
        return moving_applications(self.original, self.region)

    def remote(self, topic: str) -> str:
        """``A.<topic>``: A's topic on B."""
        return remote_topic(self.region, topic)

    def unreadable(self) -> str:
        """Why A's lost records cannot be listed yet, and how to bring A back."""
        return (
            f"{self.region} is not readable ({self.a_ep.bootstrap} does not answer): its records that never reached "
            f"{self.survivor} cannot be listed yet. Bring its brokers back with their data ("
            + (
                f"`drctl estate start --stack {self.stack} --cluster {self.region}`"
                if self.original.cluster(self.region).kind is Kind.LOCAL
                else "the cluster's own tooling"
            )
            + f"), then rerun `drctl failover --stack {self.stack} --region {self.region}`"
        )


class Inputs(TypedDict):
    """What every step of a region's failover is given (journaled as the step's ``inputs``)."""

    mode: str
    region: str
    survivor: str
    moving: list[str]


def _inputs(ctx: RegionContext) -> Inputs:
    return Inputs(mode=ctx.mode, region=ctx.region, survivor=ctx.survivor, moving=ctx.moving)


# ---------------------------------------------------------------------------------- steps


def preflight(ctx: RegionContext) -> StepResult:
    """B healthy; A's reachability; the lag of A→B per partition (when A answers). Changes nothing."""
    unfit = f"survivor {ctx.survivor} is not fit to take {ctx.region}'s applications"
    b = require_healthy(ctx, ctx.survivor, ctx.b_ep, ctx.topics, unfit)
    a, lag = reach_and_lag(ctx)
    total = sum(lag.values())
    return result(
        "done",
        f"{ctx.survivor} healthy; {ctx.region} {'reachable' if a['reachable'] else 'unreachable'}; "
        f"link {ctx.link.name} lag {total if a['reachable'] else 'unknown'}; moving {', '.join(ctx.moving) or 'none'}",
        survivor_brokers=b.brokers,
        region=a,
        lag=lag,
        total_lag=total,
    )


def move(ctx: RegionContext) -> StepResult:
    """Stop the links A→B and B→A; grant the moving applications their writes on B."""
    stopped: dict[str, str] = {}
    gone = ctx.mode == "unplanned" or not listening(ctx.a_ep.bootstrap)
    for link in (ctx.link, ctx._link(ctx.survivor, ctx.region)):
        runner = ctx.before.link_runner(link.name)
        if gone:
            runner.kill()  # a graceful stop would wait on the dead side
            stopped[link.name] = "killed"
        else:
            runner.stop(timeout=ctx.options.link_stop_timeout)
            stopped[link.name] = "stopped"
    ctx.journal.measure(writable_from_ms=ctx.journal.measurements.writable_from_ms or int(time.time() * 1000))
    grants = acl_bindings(peer_rules(ctx.desired, ctx.survivor))
    create_acls(ctx.b_ep, grants)
    require_writes(ctx.b_ep, ctx.producers, ctx.survivor)
    return result(
        "done",
        f"links {', '.join(f'{k} {v}' for k, v in stopped.items())}; {len(grants)} ACLs on {ctx.survivor}",
        links=stopped,
        acls_granted=len(grants),
    )


def clients(ctx: RegionContext) -> StepResult:
    """Publish B's client configuration for every moving application."""
    return published(ctx, ctx.survivor, ctx.moving)


def _settled_commits(ctx: RegionContext, group: str, copies: list[str], settle_s: float = 3.0) -> Offsets:
    """The group's commits on A once its consumers there stopped advancing on ``copies`` (A's topics and
    ``B.<topic>``: fenced and the links stopped, they no longer grow): every committed partition at its end,
    no change for a second, or ``settle_s`` — a later commit on A only means records read twice on B,
    never skipped."""
    deadline = time.monotonic() + settle_s
    last = committed_offsets(ctx.a_ep, group)
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        ends = end_offsets(ctx.a_ep, copies, timeout=5.0)
        mine = {tp: n for tp, n in last.items() if tp[0] in copies}
        if all(n >= ends.get(tp, 0) for tp, n in mine.items()) or time.monotonic() - still_since >= 1.0:
            break
        time.sleep(0.25)
        now = committed_offsets(ctx.a_ep, group)
        if now != last:
            last, still_since = now, time.monotonic()
    return last


def consumer_groups(ctx: RegionContext) -> StepResult:
    """Before the moved applications' configuration is published: every moved group gets a committed
    offset on each partition of its topics on B — B's own ``<topic>`` derived from what it had consumed
    of ``B.<topic>`` on A (offset syncs of the link B→A), ``A.<topic>`` translated by the link A→B's
    checkpoints — so none of its consumers falls back to ``auto.offset.reset``. What cannot be derived
    starts at the partition's first record (never skipping) and is listed with the re-reads it may cost."""
    a_up = listening(ctx.a_ep.bootstrap)
    local = ctx.topics
    copies_on_a = [remote_topic(ctx.survivor, t) for t in local]
    on_survivor = [*local, *remote_topics_on(ctx.original, ctx.survivor, local)]
    start, end = start_offsets(ctx.b_ep, on_survivor), end_offsets(ctx.b_ep, on_survivor)
    syncs = read_offset_syncs(ctx.b_ep, ctx.region, local)  # link B→A in dedicated mode: on its source B
    if not syncs and a_up:
        syncs = read_offset_syncs(ctx.a_ep, ctx.region, local)  # on Kafka Connect: on its target A
    # link A→B: on its source A in dedicated mode, on B on Kafka Connect; a lagging checkpoint is caught up
    forward = read_offset_syncs(ctx.a_ep, ctx.survivor, local) if a_up else {}
    if a_up and not forward:
        forward = read_offset_syncs(ctx.b_ep, ctx.survivor, local)
    found: dict[str, Any] = {}
    gaps: list[str] = []
    refused: list[str] = []
    for name in ctx.moving:
        group = ctx.original.principals.application(name).consumer_group
        if not group:
            continue
        on_a: Offsets | None = None
        if a_up:
            on_a = (
                _settled_commits(ctx, group, [*local, *copies_on_a])
                if ctx.mode == "planned"
                else committed_offsets(ctx.a_ep, group)
            )
        on_b = committed_offsets(ctx.b_ep, group)
        reads = [t for t in local if t in ctx.original.consumed_by(ctx.original.principals.application(name))]
        mine = {*reads, *remote_topics_on(ctx.original, ctx.survivor, reads)}
        positions = survivor_positions(
            region=ctx.region,
            survivor=ctx.survivor,
            local_topics=reads,
            committed_on_region=on_a,
            syncs=syncs,
            committed_on_survivor=on_b,
            start=start,
            end={tp: n for tp, n in end.items() if tp[0] in mine},
            forward_syncs=forward,
        )
        committed = commit_positions(ctx.b_ep, group, positions, refused)
        started = [p for p in positions if p.source != "translated" and (p.rereads_at_most or on_a is None)]
        gaps += [f"{group}:{p.topic}-{p.partition}" for p in started]
        translated = {f"{t}-{p}": n for (t, p), n in sorted(on_b.items()) if t.startswith(f"{ctx.region}.")}
        local_a = {(t, p) for (t, p) in (on_a or {}) if t in local}
        missing = sorted(f"{ctx.remote(t)}-{p}" for (t, p) in local_a if (ctx.remote(t), p) not in on_b)
        found[group] = {
            "translated": translated,
            "committed_on_region": None if on_a is None else len(local_a),
            "untranslated": missing,
            **positioned(group, positions, committed),
        }
    unknown = "" if a_up else f"; {ctx.region} unreadable: what the groups read there is unknown"
    summary = moved_groups_summary(
        found,
        gaps,
        refused,
        on=f" on {ctx.survivor}",
        unknown=unknown,
        resume_from=f"the group's commit on {ctx.survivor}",
        there=f"on {ctx.survivor}",
    )
    return result("done", summary, groups=found, gaps=gaps, refused=refused)


REGION_STEPS: list[Step[RegionContext]] = [
    Step("preflight", preflight, "check B's health, A's reachability and the lag of A→B", _inputs),
    Step("fence-drain", fence_drain, "planned: fence A's applications on A, drain A→B to lag 0", _inputs),
    Step("move", move, "stop the links A→B and B→A; grant A's applications their writes on B", _inputs),
    Step(
        "consumer-groups",
        consumer_groups,
        "position the moved groups on B's <topic> (from B.<topic> on A) and A.<topic>, before they move",
        _inputs,
    ),
    Step("clients", clients, "publish B's client configuration for A's applications", _inputs),
    Step(
        "desired-state", desired_state, "write A decommissioned, its links gone, its apps homed on B; converge", _inputs
    ),
    Step("integrity", integrity, "compare A's topics with their remote copies A.<topic> on B", _inputs),
    Step("decommission", decommission, "stop A (nothing missing, or --force-decommission)", _inputs),
]
