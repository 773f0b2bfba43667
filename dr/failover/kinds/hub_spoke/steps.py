"""Loss of an edge of a hub-and-spoke stack: move the edge's applications where the stack says.

``drctl failover --edge E1`` runs these steps, journaled and resumable with the pipeline's own
machinery (:class:`~dr.failover.frame.journal.Journal`, :class:`~dr.failover.frame.journal.StackLock`,
:func:`dr.failover.frame.run.run_step`, the ``desired-state`` step itself). H is the hub; each of E1's
applications moves to its ``fallback`` (another edge, or the hub when unset):

1. preflight — H and every fallback healthy; E1's reachability; the lag of the link E1→H per partition;
2. fence-drain — planned: E1's producers lose their write ACLs on E1, and E1→H drains to lag 0;
3. move — the link E1→H stops (killed when E1 is gone); each application gets its ACLs on its fallback;
4. consumer-groups — each moved group positioned where it moves, before it moves: on the hub's
   ``E1.<topic>`` from its commits on E1 (MirrorMaker 2's offset syncs; E1 unreadable: the link's
   checkpointed translation, its possible re-reads counted), on the hub's or another edge's own topic
   from the first record (never read on E1), so ``auto.offset.reset`` never applies;
5. clients — each fallback's client configuration for the applications moving there;
6. desired-state — E1 decommissioned (its ``lost_edge_topics`` keep ``E1.<topic>`` declared on the hub
   and its passive copy), its link gone, the applications homed on their fallbacks; ``pulumi up``;
7. integrity — when E1 is readable: E1's topics against ``E1.<topic>`` on the hub, every record never
   replicated listed (``drctl failover --edge E1 --recover`` replays them into ``E1.<topic>``);
8. decommission — stop E1 (nothing missing, or ``--force-decommission``).

A producer moved to the hub writes the hub's own topic (``readings``); a consumer moved there reads it
and ``E1.readings`` (the stack adds the copy to what it consumes). Moved to another edge, both use
that edge's local topic, which the edge's link aggregates into the hub as ``E2.readings``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypedDict

from dr.estate.estate import acl_bindings
from dr.failover.act.clients import publish_clients
from dr.failover.act.edge_resume import ResumePoint, edge_links_into, resume_points, seed_resume_points
from dr.failover.act.health import listening
from dr.failover.act.positions import commit_positions, moved_groups_summary, positioned, survivor_positions
from dr.failover.frame.desired_state import desired_state
from dr.failover.frame.site_loss import (
    CopyCount,
    SiteContext,
    decommission,
    fence_drain,
    integrity,
    reach_and_lag,
    require_healthy,
    require_writes,
    result,
)
from dr.failover.frame.step import Context, Step, StepResult
from dr.failover.kinds.active_passive import steps as active_passive
from dr.kafka.client import create_acls
from dr.kafka.offset_syncs import read_offset_syncs
from dr.kafka.offsets import committed_offsets, end_offsets, start_offsets
from dr.topology import Link, Role, Topology
from dr.topology.access import application_rules
from dr.topology.hub_spoke import (
    check_lost_edge,
    edge_applications,
    fallback_of,
)
from dr.topology.topics import remote_topic

__all__ = ["EDGE_STEPS", "HUB_STEPS", "EdgeContext"]


@dataclass
class EdgeContext(SiteContext):
    """A step's context in the loss of an edge: A is the lost ``edge``, B the ``hub`` holding its copies."""

    kind: ClassVar[str] = "edge"
    noun: ClassVar[str] = "move"

    @property
    def edge(self) -> str:
        """A: the lost edge."""
        return self.site

    @property
    def hub(self) -> str:
        """B: the hub, where the edge's copies ``<edge>.<topic>`` are."""
        return self.peer

    @property
    def named(self) -> str:
        """The edge as a message names it."""
        return f"edge {self.edge}"

    @property
    def link(self) -> Link:
        """The link E→H."""
        return check_lost_edge(self.original, self.edge)

    @property
    def moves(self) -> dict[str, str]:
        """Each of the edge's applications and the cluster it moves to."""
        return {app.name: fallback_of(self.original, app) for app in edge_applications(self.original, self.edge)}

    @property
    def moving(self) -> list[str]:
        """The edge's applications."""
        return list(self.moves)

    def role_names(self) -> dict[str, str]:
        """The role letters of the edge steps' descriptions: E the edge, H the hub."""
        return {"E": self.edge, "H": self.hub}

    def counted(self, topic: str, counts: CopyCount) -> str:
        """One topic's counts in the ``integrity`` step's summary, its duplicates too."""
        return f"{super().counted(topic, counts)}, {counts['duplicated']} duplicated"


class Inputs(TypedDict):
    """What every step of an edge's failover is given (journaled as the step's ``inputs``)."""

    mode: str
    edge: str
    hub: str
    moves: dict[str, str]


def _inputs(ctx: EdgeContext) -> Inputs:
    return Inputs(mode=ctx.mode, edge=ctx.edge, hub=ctx.hub, moves=ctx.moves)


def _role_in(topology: Topology, cluster: str) -> Role:
    return topology.cluster(cluster).role


# ---------------------------------------------------------------------------------- steps


def preflight(ctx: EdgeContext) -> StepResult:
    """The hub and every fallback healthy; the edge's reachability; the lag of E→H. Changes nothing."""
    checked: dict[str, Any] = {}
    copies = [remote_topic(ctx.edge, t) for t in ctx.topics]
    for name in sorted({ctx.hub, *ctx.moves.values()}):
        unfit = f"{name} is not fit to take edge {ctx.edge}'s applications"
        topics = copies if name == ctx.hub else ctx.topics
        health = require_healthy(ctx, name, ctx.endpoint(name), topics, unfit, after="; nothing was changed")
        checked[name] = health.brokers
    a, lag = reach_and_lag(ctx)
    total = sum(lag.values())
    moves = ", ".join(f"{app} → {to}" for app, to in ctx.moves.items()) or "none"
    return result(
        "done",
        f"{', '.join(checked)} healthy; {ctx.edge} {'reachable' if a['reachable'] else 'UNREACHABLE'}; "
        f"link {ctx.link.name} lag {total if a['reachable'] else 'unknown'}; moving {moves}",
        healthy=checked,
        edge=a,
        lag=lag,
        total_lag=total,
    )


def move(ctx: EdgeContext) -> StepResult:
    """Stop the link E→H (kill it when E is gone); grant each moving application its ACLs on its fallback."""
    runner = ctx.before.link_runner(ctx.link.name)
    if ctx.mode == "unplanned" or not listening(ctx.a_ep.bootstrap):
        runner.kill()  # a graceful stop would wait on the dead edge
        how = "killed"
    else:
        runner.stop(timeout=ctx.options.link_stop_timeout)
        how = "stopped"
    ctx.journal.measure(writable_from_ms=ctx.journal.measurements.writable_from_ms or int(time.time() * 1000))
    granted: dict[str, int] = {}
    for target in sorted(set(ctx.moves.values())):
        grants = acl_bindings(application_rules(ctx.desired, _role_in(ctx.desired, target), target))
        create_acls(ctx.endpoint(target), grants)
        granted[target] = len(grants)
        require_writes(ctx.endpoint(target), [a for a in ctx.producers if ctx.moves[a] == target], target)
    return result(
        "done",
        f"link {ctx.link.name} {how}; "
        + ("; ".join(f"{n} ACLs on {t}" for t, n in granted.items()) or "no application moves"),
        link=how,
        acls_granted=granted,
    )


def clients(ctx: EdgeContext) -> StepResult:
    """Publish each fallback's client configuration for the applications moving there."""
    written: list[dict[str, str]] = []
    for target in sorted(set(ctx.moves.values())):
        written += publish_clients(ctx.after, target, apps=[a for a, t in ctx.moves.items() if t == target])
    return result(
        "done",
        f"{len(written)} client configurations in {ctx.state / 'clients'}: "
        + (", ".join(f"{w['application']} → {w['cluster']}" for w in written) or "none"),
        files=[{k: v for k, v in w.items() if k != "password"} for w in written],
    )


def consumer_groups(ctx: EdgeContext) -> StepResult:
    """Before the moved applications' configuration is published: every moved group gets a committed offset on
    each partition of what it reads where it moves — on the hub ``E.<topic>`` from its commits on E's
    ``<topic>`` (offset syncs of the link E→H; with E unreadable, the link's checkpointed translation, its
    possible re-reads counted), the hub's own ``<topic>`` and another edge's from their first record (no
    copy of them was on E: nothing there was read) — so none of its consumers falls back to
    ``auto.offset.reset``. The partitions without a derived position are named with the re-reads they may
    cost."""
    edge_up = listening(ctx.a_ep.bootstrap)
    forward = read_offset_syncs(ctx.a_ep, ctx.hub, ctx.topics) if edge_up else {}  # link E→H, on E
    if not forward:
        forward = read_offset_syncs(ctx.b_ep, ctx.hub, ctx.topics)  # on Kafka Connect: on the hub
    found: dict[str, Any] = {}
    gaps: list[str] = []
    refused: list[str] = []
    for name, target in ctx.moves.items():
        app = ctx.original.principals.application(name)
        group = app.consumer_group
        if not group:
            continue
        reads = [t for t in ctx.topics if t in ctx.original.consumed_by(app)]
        mine = [*reads, *([remote_topic(ctx.edge, t) for t in reads] if target == ctx.hub else [])]
        there = ctx.endpoint(target)
        on_edge = committed_offsets(ctx.a_ep, group) if edge_up else None
        on_target = committed_offsets(there, group)
        positions = survivor_positions(
            region=ctx.edge,
            survivor=target,
            local_topics=[],
            committed_on_region=on_edge,
            syncs={},
            committed_on_survivor=on_target,
            start=start_offsets(there, mine),
            end=end_offsets(there, mine),
            forward_syncs=forward if target == ctx.hub else {},
            unseen=tuple(reads),
        )
        committed = commit_positions(there, group, positions, refused)
        gaps += [
            f"{group}:{p.topic}-{p.partition}" for p in positions if p.source != "translated" and p.rereads_at_most
        ]
        found[group] = {
            "moved_to": target,
            "translated": {f"{t}-{p}": n for (t, p), n in sorted(on_target.items()) if t.startswith(f"{ctx.edge}.")},
            "committed_on_edge": None if on_edge is None else len([tp for tp in on_edge if tp[0] in reads]),
            **positioned(group, positions, committed),
        }
    unknown = (
        ""
        if edge_up
        else f"; {ctx.edge} unreadable: what the groups read there since their last translation is unknown"
    )
    summary = moved_groups_summary(
        found,
        gaps,
        refused,
        on="",
        unknown=unknown,
        resume_from="the group's translated commit",
        there="where it moves",
    )
    return result("done", summary, groups=found, gaps=gaps, refused=refused)


EDGE_STEPS: list[Step[EdgeContext]] = [
    Step(
        "preflight", preflight, "check the hub's and the fallbacks' health, E's reachability, the lag of E→H", _inputs
    ),
    Step("fence-drain", fence_drain, "planned: fence E's producers on E, drain E→H to lag 0", _inputs),
    Step("move", move, "stop the link E→H; grant E's applications their ACLs on their fallbacks", _inputs),
    Step(
        "consumer-groups",
        consumer_groups,
        "position the moved groups where they move (E.<topic> from their commits on E), before they move",
        _inputs,
    ),
    Step("clients", clients, "publish each fallback's client configuration for E's applications", _inputs),
    Step(
        "desired-state",
        desired_state,
        "write E decommissioned (its copies kept), its link gone, its apps on their fallbacks; converge",
        _inputs,
    ),
    Step("integrity", integrity, "compare E's topics with their copies E.<topic> on the hub", _inputs),
    Step("decommission", decommission, "stop E (nothing missing, or --force-decommission)", _inputs),
]


# ---------------------------------------------------------------------------------- the hub's failover
# The hub fails over as an active-passive pair (its steps, :data:`HUB_STEPS`, are the active-passive
# ones); around two of them the edges' links into it: stopped while it drains, and re-pointed at the
# promoted hub from where its copy of each edge ended.


def hub_fence_drain(ctx: Context) -> StepResult:
    """Planned: the edges' links into the hub stopped, so the hub holds still while it drains; then the
    active-passive fence and drain."""
    if ctx.mode != "unplanned" and (links := edge_links_into(ctx.original, ctx.source)):
        # the edges' links write to the hub as well: stop them so the hub holds still while it drains
        stopped = stop_edge_links(ctx, links)
        ctx.say(f"edge links stopped so {ctx.source} holds still: {', '.join(stopped)}")
    return active_passive.fence_drain(ctx)


def hub_promote(ctx: Context) -> StepResult:
    """The active-passive promote; then each edge's link into the old hub stopped and the point where it
    resumes into the promoted hub written (journaled with the promote's outcome)."""
    done = active_passive.promote(ctx)
    links = edge_links_into(ctx.original, ctx.source)
    if not links:
        return done
    stopped = stop_edge_links(ctx, links)
    resume = seed_edges(ctx, links)
    outcome = done.outcome.model_copy(update={"edge_links_stopped": stopped, "edge_resume": resume})
    edges = ", ".join(lk.source for lk in links)
    return StepResult(done.status, outcome, f"{done.summary}; edges {edges} resume into {ctx.target}")


def stop_edge_links(ctx: Context, links: list[Link]) -> list[str]:
    """Stop each edge's link into the old hub (killed when the hub is gone: nothing is left to flush)."""
    dead = ctx.mode == "unplanned" or not listening(ctx.a_ep.bootstrap)
    for link in links:
        runner = ctx.before.link_runner(link.name)
        if dead:
            runner.kill()
        else:
            runner.stop(timeout=ctx.options.link_stop_timeout)
    return [link.name for link in links]


def seed_edges(ctx: Context, links: list[Link]) -> list[dict[str, Any]]:
    """Where each edge's link resumes on the promoted hub, written where its MirrorMaker 2 reads it."""
    points: list[ResumePoint] = []
    for link in links:
        topics = [t.name for t in ctx.original.topics_for(link)]
        found = resume_points(link.source, ctx.before.endpoint(link.source), ctx.b_ep, topics)
        points += found
        to_copy = sum(p.edge_end - max(p.resume_at, 0) for p in found)
        ctx.say(f"edge {link.source}: the copy on {ctx.target} ended {to_copy} records before the edge's end")
    seed_resume_points(ctx.b_ep, points, replication_factor=min(3, ctx.roles.target.brokers))
    return [p.to_dict() for p in points]


#: The hub's failover: the active-passive steps, fence-drain and promote wrapped for the edges' links.
HUB_STEPS: list[Step[Context]] = [
    replace(s, run={"fence-drain": hub_fence_drain, "promote": hub_promote}.get(s.name, s.run))
    for s in active_passive.STEPS
]
