"""Loss of an edge of a hub-and-spoke stack: move the edge's applications where the stack says.

``drctl failover --edge E1`` runs these steps, journaled and resumable with the pipeline's own
machinery (:class:`~dr.failover.journal.Journal`, :class:`~dr.failover.journal.StackLock`,
:func:`dr.failover.pipeline.run_step`, the ``desired-state`` step itself). H is the hub; each of E1's
applications moves to its ``fallback`` (another edge, or the hub when unset):

1. preflight — H and every fallback healthy; E1's reachability; the lag of the link E1→H per partition;
2. fence-drain — planned: E1's producers lose their write ACLs on E1, and E1→H drains to lag 0;
3. move — the link E1→H stops (killed when E1 is gone); each application gets its ACLs on its fallback;
4. clients — each fallback's client configuration for the applications moving there;
5. consumer-groups — the moved groups' translated offsets on the hub's copies ``E1.<topic>``
   (MirrorMaker 2's checkpoints and offset sync); a group moved to another edge has none there;
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

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from pydantic import Field

from dr.base.errors import ClusterError, FailoverError
from dr.base.stackref import StackRef
from dr.estate.estate import Estate, Progress, acl_bindings
from dr.failover.clients import publish_clients
from dr.failover.converge import Converger, PulumiConverger, write_stack_config
from dr.failover.fencing import fence, write_bindings
from dr.failover.health import cluster_health, listening, reachability
from dr.failover.journal import Journal, failover_dir
from dr.failover.outcomes import Outcome
from dr.failover.pipeline import OnStep, run_frame
from dr.failover.region import compare_region, named_roles
from dr.failover.steps import Context, FailoverOptions, Step, StepResult, desired_state
from dr.failover.summary import FailoverSummary
from dr.kafka.client import Endpoint, create_acls
from dr.kafka.offsets import committed_offsets
from dr.topology import Kind, Link, Role, Topology, dump_stack_config, load_stack_file, load_topology, stack_file_diff
from dr.topology.access import application_rules
from dr.topology.hub_spoke import (
    after_edge_loss,
    check_lost_edge,
    edge_applications,
    fallback_of,
    is_hub_spoke,
    remote_topic,
)

__all__ = ["EDGE_STEPS", "EdgeContext", "EdgePlan", "plan_edge_failover", "recover_edge", "run_edge_failover"]

MODES = ("planned", "unplanned")


class EdgeOutcome(Outcome):
    """What an edge step found and did (journaled as the step's ``outcome``)."""

    details: dict[str, Any] = Field(default_factory=dict)


def _result(status: Any, summary: str, **details: Any) -> StepResult:
    return StepResult(status, EdgeOutcome(details=details), summary)


@dataclass
class EdgeContext(Context):
    """A step's context in the loss of an edge: A is the lost ``edge``, B the ``hub`` holding its copies."""

    edge: str = ""
    hub: str = ""

    @property
    def source(self) -> str:
        """A: the lost edge."""
        return self.edge

    @property
    def target(self) -> str:
        """B: the hub, where the edge's copies ``<edge>.<topic>`` are."""
        return self.hub

    @property
    def standby(self) -> str | None:
        """The loss of an edge makes no standby passive."""
        return None

    @property
    def link(self) -> Link:
        """The link E→H."""
        return check_lost_edge(self.original, self.edge)

    @property
    def topics(self) -> list[str]:
        """The edge's topics its link carries (drained, and compared with their copies on the hub)."""
        return [t.name for t in self.original.topics_for(self.link)]

    @property
    def moves(self) -> dict[str, str]:
        """Each of the edge's applications and the cluster it moves to."""
        return {app.name: fallback_of(self.original, app) for app in edge_applications(self.original, self.edge)}

    @property
    def producers(self) -> list[str]:
        """The moving applications that write."""
        return [a for a in self.moves if self.original.principals.application(a).writes]

    def endpoint(self, cluster: str) -> Endpoint:
        """Admin endpoint of ``cluster`` as declared before the loss."""
        return self.before.endpoint(cluster)


def _inputs(ctx: Context) -> dict[str, Any]:
    assert isinstance(ctx, EdgeContext)
    return {"mode": ctx.mode, "edge": ctx.edge, "hub": ctx.hub, "moves": ctx.moves}


def _role_in(topology: Topology, cluster: str) -> Role:
    return topology.cluster(cluster).role


# ---------------------------------------------------------------------------------- steps


def preflight(ctx: Context) -> StepResult:
    """The hub and every fallback healthy; the edge's reachability; the lag of E→H. Changes nothing."""
    assert isinstance(ctx, EdgeContext)
    checked: dict[str, Any] = {}
    copies = [remote_topic(ctx.edge, t) for t in ctx.topics]
    for name in sorted({ctx.hub, *ctx.moves.values()}):
        decl = ctx.original.cluster(name)
        health = cluster_health(
            ctx.endpoint(name),
            expected_brokers=decl.expected_brokers,
            topics=copies if name == ctx.hub else ctx.topics,
        )
        if not health.reachable or health.offline or health.missing_topics:
            raise FailoverError(
                f"{name} is not fit to take edge {ctx.edge}'s applications: "
                f"{health.error or f'offline partitions {health.offline}, missing topics {health.missing_topics}'}",
                f"bring {name} back to health (`drctl status --stack {ctx.stack}`), then rerun; nothing was changed",
            )
        checked[name] = health.brokers
    a = reachability(ctx.a_ep)
    lag: dict[str, int] = {}
    if a["reachable"]:
        try:
            lag = {f"{t}-{p}": n for (t, p), n in sorted(ctx.before.mirror(ctx.link.name).lag(ctx.topics).items())}
        except ClusterError as exc:
            a = {**a, "error": str(exc).splitlines()[0]}
    if ctx.mode == "planned" and not a["reachable"]:
        raise FailoverError(
            f"edge {ctx.edge} does not answer ({a['error']}); a planned move fences and drains it first.",
            f"use --mode unplanned: `drctl failover --stack {ctx.stack} --edge {ctx.edge} --mode unplanned`",
        )
    total = sum(lag.values())
    moves = ", ".join(f"{app} → {to}" for app, to in ctx.moves.items()) or "none"
    return _result(
        "done",
        f"{', '.join(checked)} healthy; {ctx.edge} {'reachable' if a['reachable'] else 'UNREACHABLE'}; "
        f"link {ctx.link.name} lag {total if a['reachable'] else 'unknown'}; moving {moves}",
        healthy=checked,
        edge=a,
        lag=lag,
        total_lag=total,
    )


def fence_drain(ctx: Context) -> StepResult:
    """Planned: remove the edge's producers' write ACLs on the edge, then drain E→H to lag 0."""
    assert isinstance(ctx, EdgeContext)
    if ctx.mode == "unplanned":
        return _result("skipped", f"unplanned: {ctx.edge} is gone, nothing to fence or drain")
    removed = fence(ctx.a_ep, ctx.producers)
    ctx.journal.measure(fenced_at=round(time.time(), 3))
    try:
        waited = ctx.before.mirror(ctx.link.name).wait_caught_up(ctx.topics, timeout=ctx.options.drain_timeout)
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
    time.sleep(iv.emit_checkpoints_s + iv.sync_group_offsets_s + 1)  # the last commits reach the hub's checkpoints
    return _result(
        "done",
        f"{len(removed)} write ACLs of {', '.join(ctx.producers) or 'no producer'} removed on {ctx.edge}; "
        f"link drained in {waited:.1f}s",
        fenced=removed,
        drained_s=round(waited, 3),
    )


def move(ctx: Context) -> StepResult:
    """Stop the link E→H (kill it when E is gone); grant each moving application its ACLs on its fallback."""
    assert isinstance(ctx, EdgeContext)
    runner = ctx.before.mirror(ctx.link.name)
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
        producers = [a for a in ctx.producers if ctx.moves[a] == target]
        have = {b.principal.removeprefix("User:") for b in write_bindings(ctx.endpoint(target), producers)}
        lacking = sorted(set(producers) - have)
        if lacking:
            raise FailoverError(
                f"after granting, {', '.join(lacking)} still cannot write on {target}.",
                "check the cluster's authorizer and rerun the failover (it resumes here)",
            )
    return _result(
        "done",
        f"link {ctx.link.name} {how}; "
        + ("; ".join(f"{n} ACLs on {t}" for t, n in granted.items()) or "no application moves"),
        link=how,
        acls_granted=granted,
    )


def clients(ctx: Context) -> StepResult:
    """Publish each fallback's client configuration for the applications moving there."""
    assert isinstance(ctx, EdgeContext)
    written: list[dict[str, str]] = []
    for target in sorted(set(ctx.moves.values())):
        written += publish_clients(ctx.after, target, apps=[a for a, t in ctx.moves.items() if t == target])
    return _result(
        "done",
        f"{len(written)} client configurations in {ctx.state / 'clients'}: "
        + (", ".join(f"{w['application']} → {w['cluster']}" for w in written) or "none"),
        files=[{k: v for k, v in w.items() if k != "password"} for w in written],
    )


def consumer_groups(ctx: Context) -> StepResult:
    """The moved groups' translated offsets on the hub's ``E.<topic>``, against their last commits on E."""
    assert isinstance(ctx, EdgeContext)
    edge_up = listening(ctx.a_ep.bootstrap)
    found: dict[str, Any] = {}
    gaps: list[str] = []
    for name, target in ctx.moves.items():
        group = ctx.original.principals.application(name).consumer_group
        if not group:
            continue
        on_edge = committed_offsets(ctx.a_ep, group) if edge_up else {}
        local = sorted((t, p) for (t, p) in on_edge if t in ctx.topics)
        if target != ctx.hub:
            found[group] = {
                "moved_to": target,
                "translated": {},
                "note": f"{target} holds no copy of {ctx.edge}'s topics: the group starts per auto.offset.reset",
            }
            gaps.append(f"{group}@{target}")
            continue
        on_hub = committed_offsets(ctx.b_ep, group)
        prefix = remote_topic(ctx.edge, "")
        translated = {f"{t}-{p}": n for (t, p), n in sorted(on_hub.items()) if t.startswith(prefix)}
        missing = [
            f"{remote_topic(ctx.edge, t)}-{p}" for (t, p) in local if (remote_topic(ctx.edge, t), p) not in on_hub
        ]
        gaps += [f"{group}:{m}" for m in missing]
        found[group] = {
            "moved_to": target,
            "translated": translated,
            "committed_on_edge": len(local),
            "untranslated": missing,
        }
    summary = f"{len(found)} groups; {len(gaps)} without a translated offset" + (
        f" ({', '.join(gaps[:5])}) — those start per auto.offset.reset" if gaps else ""
    )
    return _result("done", summary, groups=found, gaps=gaps)


def integrity(ctx: Context) -> StepResult:
    """When E is readable: compare E's topics with ``E.<topic>`` on the hub; list what was never replicated."""
    assert isinstance(ctx, EdgeContext)
    if ctx.options.skip_verify:
        return _result("skipped", "--skip-verify: not compared")
    if not listening(ctx.a_ep.bootstrap):
        return _result("deferred", f"{ctx.edge} is not readable; rerun when it is", reason=f"{ctx.edge} unreadable")
    fence(ctx.a_ep, ctx.producers)  # an edge that came back must not take writes while it is compared
    found = compare_region(ctx.a_ep, ctx.b_ep, ctx.edge, ctx.topics)
    report = failover_dir(ctx.home) / f"edge-{ctx.journal.failover_id}-missing.json"
    report.write_text(json.dumps(found, indent=2) + "\n")
    n = len(found["missing"])
    counts = ", ".join(
        f"{t}: {v['source']} on {ctx.edge}, {v['copy']} copied, {v['duplicated']} duplicated"
        for t, v in found["topics"].items()
    )
    if n:
        return _result(
            "differences",
            f"{n} records of {ctx.edge} never replicated ({counts}); listed in {report}; replay them with "
            f"`drctl failover --stack {ctx.stack} --edge {ctx.edge} --recover`",
            report=str(report),
            missing=n,
            topics=found["topics"],
        )
    return _result("done", f"nothing missing ({counts})", report=str(report), missing=0, topics=found["topics"])


def decommission(ctx: Context) -> StepResult:
    """Stop E — when nothing is missing, or with ``--force-decommission``."""
    assert isinstance(ctx, EdgeContext)
    integ = ctx.journal.step("integrity")
    if integ.status != "done" and not ctx.options.force_decommission:
        missing = (integ.outcome or {}).get("details", {}).get("missing")
        if integ.status == "differences":
            raise FailoverError(
                f"{missing} records of edge {ctx.edge} were never replicated to {ctx.hub}; "
                f"{ctx.edge} is NOT decommissioned.",
                f"replay them: `drctl failover --stack {ctx.stack} --edge {ctx.edge} --recover`, then rerun; "
                "or pass --force-decommission to accept the loss",
            )
        return _result("deferred", f"{ctx.edge} kept (no verdict yet); rerun when it is readable")
    if ctx.original.cluster(ctx.edge).kind is Kind.LOCAL:
        ctx.before.local_cluster(ctx.edge).stop()
    write_stack_config(ctx.stack_path, ctx.desired)
    return _result("done", f"{ctx.edge} stopped (data kept); decommissioned", forced=integ.status != "done")


EDGE_STEPS: list[Step] = [
    Step(
        "preflight", preflight, "check the hub's and the fallbacks' health, E's reachability, the lag of E→H", _inputs
    ),
    Step("fence-drain", fence_drain, "planned: fence E's producers on E, drain E→H to lag 0", _inputs),
    Step("move", move, "stop the link E→H; grant E's applications their ACLs on their fallbacks", _inputs),
    Step("clients", clients, "publish each fallback's client configuration for E's applications", _inputs),
    Step("consumer-groups", consumer_groups, "check the moved groups' translated offsets on E.<topic>", _inputs),
    Step(
        "desired-state",
        desired_state,
        "write E decommissioned (its copies kept), its link gone, its apps on their fallbacks; converge",
        _inputs,
    ),
    Step("integrity", integrity, "compare E's topics with their copies E.<topic> on the hub", _inputs),
    Step("decommission", decommission, "stop E (nothing missing, or --force-decommission)", _inputs),
]


# ---------------------------------------------------------------------------------- running


def _topologies(ref: StackRef, journal: Journal | None, edge: str) -> tuple[Topology, Topology, str, bool]:
    """``(original, desired, hub, resuming)``: from the journal of an unfinished loss of ``edge``, else
    from the stack file."""
    current = load_stack_file(ref.stack_file)
    if journal is not None and not journal.finished:
        if journal.record.source != edge:
            raise FailoverError(
                f"failover {journal.failover_id} of {journal.record.source} is unfinished.",
                f"finish it first (`drctl failover --stack {ref.name} ...` with its own flags; "
                f"{journal.path} names it), then move edge {edge}",
            )
        original = load_topology(ref.name, journal.record.original_config)
        desired = load_topology(ref.name, journal.record.desired_config)
        if dump_stack_config(current) not in (journal.record.original_config, journal.record.desired_config):
            raise FailoverError(
                f"{ref.stack_file} changed while failover {journal.failover_id} was under way.",
                f"restore it from {journal.path.parent} and rerun, so the failover can finish",
            )
        return original, desired, journal.record.target, True
    if not is_hub_spoke(current):
        raise FailoverError(
            f"stack '{ref.name}' is {current.architecture}: --edge moves the applications of a lost edge of a "
            "hub-spoke stack.",
            f"run `drctl failover --stack {ref.name}` without --edge",
        )
    return current, after_edge_loss(current, edge), current.active().name, False


def run_edge_failover(
    ref: StackRef,
    edge: str,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
) -> FailoverSummary:
    """Move the applications of edge ``edge`` of the hub-spoke stack ``ref`` to their fallbacks (or resume)."""
    stack = ref.name

    def open_run(journal: Journal | None) -> tuple[Context, bool]:
        original, desired, hub, resuming = _topologies(ref, journal, edge)
        mode = options.mode or (journal.mode if resuming and journal else "planned")
        if mode not in MODES:
            raise FailoverError(f"unknown mode {mode!r}.", "use --mode planned or --mode unplanned")
        if journal is None or not resuming:
            journal = Journal.create(
                ref.made_failover_home(),
                stack=stack,
                mode=mode,
                source=edge,
                target=hub,
                standby=None,
                original_config=dump_stack_config(original),
                desired_config=dump_stack_config(desired),
                steps=[s.name for s in EDGE_STEPS],
            )
        ctx = EdgeContext(
            ref=ref,
            original=original,
            desired=desired,
            mode=mode,
            options=options,
            journal=journal,
            converger=converger or PulumiConverger(ref, catch_up_timeout=options.catch_up_timeout),
            progress=progress,
            edge=edge,
            hub=hub,
        )
        return ctx, resuming

    def title(ctx: Context) -> str:
        assert isinstance(ctx, EdgeContext)
        moves = ", ".join(f"{a} → {t}" for a, t in ctx.moves.items()) or "no application"
        return f"loss of edge {edge} ({ctx.journal.failover_id}) of stack {stack}: {moves}"

    return run_frame(ref, EDGE_STEPS, open_run, title=title, progress=progress, on_step=on_step)


@dataclass
class EdgePlan:
    """What ``drctl failover --edge E --dry-run`` shows: the steps, who moves where, the stack-file diff."""

    stack: str
    mode: str
    edge: str
    hub: str
    moves: dict[str, str]
    link_stopped: str
    copies_kept: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str

    def to_json(self) -> dict[str, Any]:
        """The plan as ``--json`` prints it."""
        return dict(self.__dict__)

    def render(self) -> str:
        """The plan for a person."""
        lines = [
            f"{self.mode} loss of edge {self.edge} of stack {self.stack} (hub {self.hub})",
            "applications moving: " + (", ".join(f"{a} → {t}" for a, t in self.moves.items()) or "none"),
            f"link stopped: {self.link_stopped}",
            f"copies kept on {self.hub} and its passive copy: {', '.join(self.copies_kept) or 'none'}",
            "steps:",
            *(f"  {i}. {s['name']}: {s['description']}" for i, s in enumerate(self.steps, 1)),
            "stack file diff:",
            self.stack_file_diff or "  (none)",
        ]
        return "\n".join(lines)


def plan_edge_failover(ref: StackRef, edge: str, *, options: FailoverOptions) -> EdgePlan:
    """The plan of the loss of ``edge``; changes nothing."""
    ref.existing_stack_file()
    original, desired, hub, _resuming = _topologies(ref, Journal.load(ref.made_failover_home()), edge)
    link = check_lost_edge(original, edge)

    def named(text: str) -> str:
        return named_roles(text, E=edge, H=hub)

    return EdgePlan(
        stack=ref.name,
        mode=options.mode or "planned",
        edge=edge,
        hub=hub,
        moves={app.name: fallback_of(original, app) for app in edge_applications(original, edge)},
        link_stopped=link.name,
        copies_kept=[remote_topic(edge, t.name) for t in original.topics_for(link)],
        steps=[{"name": s.name, "description": named(s.description)} for s in EDGE_STEPS],
        stack_file_diff=stack_file_diff(ref.stack_file, desired),
    )


def _read_one(ep: Endpoint, topic: str, partition: int, offset: int) -> Any:
    consumer = Consumer(ep.config(**{"group.id": f"kdr-recover-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is not None and got.error() is None:
                return got
    finally:
        consumer.close()
    return None


def recover_edge(ref: StackRef, edge: str, progress: Progress = lambda _m: None) -> dict[str, Any]:
    """Replay into ``<edge>.<topic>`` on the hub the records of ``edge`` never replicated.

    The comparison runs again first, so a second run writes nothing. Records keep their key, value,
    headers, timestamp and partition.
    """
    journal = Journal.load(ref.made_failover_home())
    original = load_topology(ref.name, journal.record.original_config) if journal is not None else None
    if journal is None or original is None or journal.record.source != edge or not is_hub_spoke(original):
        raise FailoverError(
            f"no loss of edge {edge} in stack '{ref.name}' to recover.",
            f"run `drctl failover --stack {ref.name} --edge {edge}` first",
        )
    estate = Estate(original, ref.state_dir)
    a_ep, hub_ep = estate.endpoint(edge), estate.endpoint(journal.record.target)
    topics = [t.name for t in original.topics_for(check_lost_edge(original, edge))]
    progress(f"comparing {edge}'s {', '.join(topics)} with {edge}.<topic> on {journal.record.target}")
    found = compare_region(a_ep, hub_ep, edge, topics)
    wanted = sorted({(m["topic"], m["partition"], m["offset"]) for m in found["missing"]})
    if wanted:
        producer = Producer(hub_ep.config(**{"acks": "all", "enable.idempotence": True}))
        for topic, partition, offset in wanted:
            msg = _read_one(a_ep, topic, partition, offset)
            if msg is None:
                raise ClusterError(
                    f"could not read {topic}-{partition}@{offset} on {edge}.", "rerun the recovery (it resumes)"
                )
            producer.produce(
                remote_topic(edge, topic),
                key=msg.key(),
                value=msg.value(),
                headers=msg.headers(),
                timestamp=msg.timestamp()[1],
                partition=partition,
            )
        if producer.flush(60):
            raise ClusterError(
                f"the replay into {journal.record.target} did not finish within 60s.",
                "rerun the recovery (it writes only what is still missing)",
            )
    progress(f"replayed {len(wanted)} records of {edge} into {edge}.<topic> on {journal.record.target}")
    return {"replayed": len(wanted), "missing_before": len(wanted), "topics": found["topics"]}
