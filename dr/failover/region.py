"""Region failover of an active-active stack: move one peer's applications to a surviving peer.

``drctl failover --region A`` runs these steps, journaled and resumable with the active-passive
pipeline's own machinery (:class:`~dr.failover.journal.Journal`, :class:`~dr.failover.journal.StackLock`,
:func:`dr.failover.pipeline.run_step`, the ``desired-state`` step itself):

1. preflight — the survivor B is healthy; A's reachability; the lag of the link A→B per partition;
2. fence-drain — planned: A's applications lose their write ACLs on A, and the link A→B drains to lag 0;
3. move — the links A→B and B→A stop; A's applications get their write ACLs on B (their new home);
4. clients — B's client configuration for every application that moves;
5. consumer-groups — the moved groups' translated offsets on the remote topics ``A.<topic>`` of B
   (MirrorMaker 2's checkpoints and offset sync);
6. desired-state — A decommissioned, the links of A gone, the applications' home B; ``pulumi up``;
7. integrity — A's topics against their remote copies ``A.<topic>`` on B when A is readable: the records
   never replicated are listed (``drctl failover --region A --recover`` replays them into ``A.<topic>``);
8. decommission — stop A (no record missing, or ``--force-decommission``).

The moved producers write B's local topic; the moved consumers read B's local topic and ``A.<topic>``
(subscribe to ``^(A\\.)?orders$``, or ``^([^.]+\\.)?orders$`` for every peer).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from pydantic import Field

from dr.base.errors import ClusterError, FailoverError
from dr.base.files import write_atomic
from dr.base.stackref import StackRef
from dr.estate.estate import Progress, acl_bindings
from dr.failover.clients import publish_clients
from dr.failover.converge import Converger, PulumiConverger, write_stack_config
from dr.failover.fencing import fence, write_bindings
from dr.failover.health import cluster_health, listening, reachability
from dr.failover.journal import Journal, failover_dir
from dr.failover.outcomes import Outcome
from dr.failover.pipeline import OnStep, already_finished, run_frame
from dr.failover.steps import Context, FailoverOptions, Step, StepResult, desired_state
from dr.failover.summary import FailoverSummary
from dr.kafka.client import Endpoint, create_acls
from dr.kafka.offsets import committed_offsets
from dr.kafka.records import read_to_end
from dr.topology import Kind, Link, Topology, dump_stack_config, load_stack_file, load_topology, stack_file_diff
from dr.topology.access import peer_rules
from dr.topology.active_active import (
    after_region_failover,
    is_active_active,
    moving_applications,
    remote_topic,
    survivor_for,
)

__all__ = ["RegionContext", "RegionPlan", "plan_region_failover", "recover_region", "run_region_failover"]

MODES = ("planned", "unplanned")


class RegionOutcome(Outcome):
    """What a region step found and did (journaled as the step's ``outcome``)."""

    details: dict[str, Any] = Field(default_factory=dict)


def _result(status: Any, summary: str, **details: Any) -> StepResult:
    return StepResult(status, RegionOutcome(details=details), summary)


@dataclass
class RegionContext(Context):
    """A step's context in a region failover: A is the failed ``region``, B the ``survivor``."""

    region: str = ""
    survivor: str = ""

    @property
    def source(self) -> str:
        """A: the region failing over."""
        return self.region

    @property
    def target(self) -> str:
        """B: the peer taking A's applications."""
        return self.survivor

    @property
    def standby(self) -> str | None:
        """Active-active has no standby."""
        return None

    @property
    def link(self) -> Link:
        """The link A→B."""
        return self._link(self.region, self.survivor)

    def _link(self, source: str, target: str) -> Link:
        found = [lk for lk in self.original.links if lk.source == source and lk.target == target]
        if not found:
            raise FailoverError(
                f"stack '{self.stack}' has no link {source} → {target}.",
                "active-active peers replicate both ways: declare it in kafka-dr:links",
            )
        return found[0]

    @property
    def topics(self) -> list[str]:
        """The declared topics the link A→B copies (drained, and compared with their remote copies)."""
        return [t.name for t in self.original.topics_for(self.link)]

    @property
    def moving(self) -> list[str]:
        """The applications whose home is A."""
        return moving_applications(self.original, self.region)

    def remote(self, topic: str) -> str:
        """``A.<topic>``: A's topic on B."""
        return remote_topic(self.region, topic)


def _inputs(ctx: Context) -> dict[str, Any]:
    assert isinstance(ctx, RegionContext)
    return {"mode": ctx.mode, "region": ctx.region, "survivor": ctx.survivor, "moving": ctx.moving}


# ---------------------------------------------------------------------------------- steps


def preflight(ctx: Context) -> StepResult:
    """B healthy; A's reachability; the lag of A→B per partition (when A answers). Changes nothing."""
    assert isinstance(ctx, RegionContext)
    b_decl = ctx.original.cluster(ctx.survivor)
    b = cluster_health(ctx.b_ep, expected_brokers=b_decl.brokers if b_decl.is_local else None, topics=ctx.topics)
    if not b.reachable or b.offline or b.missing_topics:
        raise FailoverError(
            f"survivor {ctx.survivor} is not fit to take {ctx.region}'s applications: "
            f"{b.error or f'offline partitions {b.offline}, missing topics {b.missing_topics}'}",
            f"bring {ctx.survivor} back to health (`drctl status --stack {ctx.stack}`), then rerun",
        )
    a = reachability(ctx.a_ep)
    lag: dict[str, int] = {}
    if a["reachable"]:
        try:
            lag = {f"{t}-{p}": n for (t, p), n in sorted(ctx.before.mirror(ctx.link.name).lag(ctx.topics).items())}
        except ClusterError as exc:
            a = {**a, "error": str(exc).splitlines()[0]}
    if ctx.mode == "planned" and not a["reachable"]:
        raise FailoverError(
            f"{ctx.region} does not answer ({a['error']}); a planned failover fences and drains it first.",
            f"use --mode unplanned: `drctl failover --stack {ctx.stack} --region {ctx.region} --mode unplanned`",
        )
    total = sum(lag.values())
    return _result(
        "done",
        f"{ctx.survivor} healthy; {ctx.region} {'reachable' if a['reachable'] else 'unreachable'}; "
        f"link {ctx.link.name} lag {total if a['reachable'] else 'unknown'}; moving {', '.join(ctx.moving) or 'none'}",
        survivor_brokers=b.brokers,
        region=a,
        lag=lag,
        total_lag=total,
    )


def fence_drain(ctx: Context) -> StepResult:
    """Planned: remove the moving producers' write ACLs on A, then drain A→B to lag 0."""
    assert isinstance(ctx, RegionContext)
    if ctx.mode == "unplanned":
        return _result("skipped", f"unplanned: {ctx.region} is gone, nothing to fence or drain")
    producers = [a for a in ctx.moving if ctx.original.principals.application(a).writes]
    removed = fence(ctx.a_ep, producers)
    ctx.journal.measure(fenced_at=round(time.time(), 3))
    mirror = ctx.before.mirror(ctx.link.name)
    try:
        waited = mirror.wait_caught_up(ctx.topics, timeout=ctx.options.drain_timeout)
    except ClusterError as exc:
        if not ctx.options.force:
            raise FailoverError(
                f"link {ctx.link.name} did not drain within {ctx.options.drain_timeout:.0f}s: "
                f"{str(exc).splitlines()[0]}",
                "rerun (it resumes), raise --drain-timeout, or pass --force to go on (the lag is then lost "
                "until the integrity step lists it for recovery)",
            ) from exc
        waited = ctx.options.drain_timeout
    time.sleep(_group_sync_s(ctx))  # the last commits of the moving groups reach B's checkpoints
    return _result(
        "done",
        f"{len(removed)} write ACLs of {', '.join(producers) or 'no producer'} removed on {ctx.region}; "
        f"link drained in {waited:.1f}s",
        fenced=removed,
        drained_s=round(waited, 3),
    )


def _group_sync_s(ctx: RegionContext) -> float:
    iv = ctx.link.intervals
    return float(iv.emit_checkpoints_s + iv.sync_group_offsets_s + 1)


def move(ctx: Context) -> StepResult:
    """Stop the links A→B and B→A; grant the moving applications their writes on B."""
    assert isinstance(ctx, RegionContext)
    stopped: dict[str, str] = {}
    gone = ctx.mode == "unplanned" or not listening(ctx.a_ep.bootstrap)
    for link in (ctx.link, ctx._link(ctx.survivor, ctx.region)):
        runner = ctx.before.mirror(link.name)
        if gone:
            runner.kill()  # a graceful stop would wait on the dead side
            stopped[link.name] = "killed"
        else:
            runner.stop(timeout=ctx.options.link_stop_timeout)
            stopped[link.name] = "stopped"
    ctx.journal.measure(writable_from_ms=ctx.journal.measurements.writable_from_ms or int(time.time() * 1000))
    grants = acl_bindings(peer_rules(ctx.desired, ctx.survivor))
    create_acls(ctx.b_ep, grants)
    producers = [a for a in ctx.moving if ctx.original.principals.application(a).writes]
    have = {b.principal.removeprefix("User:") for b in write_bindings(ctx.b_ep, producers)}
    lacking = sorted(set(producers) - have)
    if lacking:
        raise FailoverError(
            f"after granting, {', '.join(lacking)} still cannot write on {ctx.survivor}.",
            "check the cluster's authorizer and rerun the failover (it resumes here)",
        )
    return _result(
        "done",
        f"links {', '.join(f'{k} {v}' for k, v in stopped.items())}; {len(grants)} ACLs on {ctx.survivor}",
        links=stopped,
        acls_granted=len(grants),
    )


def clients(ctx: Context) -> StepResult:
    """Publish B's client configuration for every moving application."""
    assert isinstance(ctx, RegionContext)
    written = publish_clients(ctx.after, ctx.survivor, apps=ctx.moving)
    return _result(
        "done",
        f"{len(written)} client configurations for {ctx.survivor} in {ctx.state / 'clients'}",
        files=[{k: v for k, v in w.items() if k != "password"} for w in written],
    )


def consumer_groups(ctx: Context) -> StepResult:
    """The moving groups' translated offsets on ``A.<topic>`` of B, against their last commits on A."""
    assert isinstance(ctx, RegionContext)
    a_up = listening(ctx.a_ep.bootstrap)
    found: dict[str, Any] = {}
    gaps: list[str] = []
    for name in ctx.moving:
        group = ctx.original.principals.application(name).consumer_group
        if not group:
            continue
        on_b = committed_offsets(ctx.b_ep, group)
        translated = {f"{t}-{p}": n for (t, p), n in sorted(on_b.items()) if t.startswith(f"{ctx.region}.")}
        on_a = committed_offsets(ctx.a_ep, group) if a_up else {}
        local = {(t, p) for (t, p) in on_a if t in ctx.topics}
        missing = sorted(f"{ctx.remote(t)}-{p}" for (t, p) in local if (ctx.remote(t), p) not in on_b)
        gaps += [f"{group}:{m}" for m in missing]
        found[group] = {"translated": translated, "committed_on_region": len(local), "untranslated": missing}
    summary = f"{len(found)} groups; {len(gaps)} partitions without a translated offset" + (
        f" ({', '.join(gaps[:5])}) — those start per auto.offset.reset" if gaps else ""
    )
    return _result("done", summary, groups=found, gaps=gaps)


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


def compare_region(a_ep: Endpoint, b_ep: Endpoint, region: str, topics: list[str]) -> dict[str, Any]:
    """A's topics against their remote copies on B, matched by content (key + checksum, as multisets):
    per topic the counts, and every record of A never replicated (its coordinates on A)."""
    per_topic: dict[str, Any] = {}
    missing: list[dict[str, Any]] = []
    for topic in topics:
        source = _fingerprints(a_ep, topic)
        copies = Counter((k, c) for _p, _o, k, c in _fingerprints(b_ep, remote_topic(region, topic)))
        left = Counter(copies)
        lost = []
        for partition, offset, key, checksum in source:
            if left[(key, checksum)] > 0:
                left[(key, checksum)] -= 1
            else:
                lost.append({"topic": topic, "partition": partition, "offset": offset, "key": key})
        per_topic[topic] = {
            "source": len(source),
            "copy": sum(copies.values()),
            "missing": len(lost),
            "duplicated": sum(max(0, n - Counter((k, c) for _p, _o, k, c in source)[kc]) for kc, n in copies.items()),
        }
        missing += lost
    return {"topics": per_topic, "missing": missing}


def integrity(ctx: Context) -> StepResult:
    """When A is readable: compare A's topics with ``A.<topic>`` on B; list what was never replicated."""
    assert isinstance(ctx, RegionContext)
    if ctx.options.skip_verify:
        return _result("skipped", "--skip-verify: not compared")
    if not listening(ctx.a_ep.bootstrap):
        return _result(
            "deferred",
            f"{ctx.region} is not readable ({ctx.a_ep.bootstrap} does not answer): its records that never reached "
            f"{ctx.survivor} cannot be listed yet. Bring its brokers back with their data ("
            + (
                f"`drctl estate start --stack {ctx.stack} --cluster {ctx.region}`"
                if ctx.original.cluster(ctx.region).kind is Kind.LOCAL
                else "the cluster's own tooling"
            )
            + f"), then rerun `drctl failover --stack {ctx.stack} --region {ctx.region}`",
            reason=f"{ctx.region} unreadable",
        )
    producers = [a for a in ctx.moving if ctx.original.principals.application(a).writes]
    fence(ctx.a_ep, producers)  # a region that came back must not take writes while it is compared
    found = compare_region(ctx.a_ep, ctx.b_ep, ctx.region, ctx.topics)
    report = failover_dir(ctx.home) / f"region-{ctx.journal.failover_id}-missing.json"
    report.write_text(json.dumps(found, indent=2) + "\n")
    n = len(found["missing"])
    counts = ", ".join(f"{t}: {v['source']} on {ctx.region}, {v['copy']} copied" for t, v in found["topics"].items())
    if n:
        return _result(
            "differences",
            f"{n} records of {ctx.region} never replicated ({counts}); listed in {report}; replay them with "
            f"`drctl failover --stack {ctx.stack} --region {ctx.region} --recover`",
            report=str(report),
            missing=n,
            topics=found["topics"],
        )
    return _result("done", f"nothing missing ({counts})", report=str(report), missing=0, topics=found["topics"])


def decommission(ctx: Context) -> StepResult:
    """Stop A — when nothing is missing, or with ``--force-decommission``."""
    assert isinstance(ctx, RegionContext)
    integ = ctx.journal.step("integrity")
    if integ.status != "done" and not ctx.options.force_decommission:
        missing = (integ.outcome or {}).get("details", {}).get("missing")
        if integ.status == "differences":
            raise FailoverError(
                f"{missing} records of {ctx.region} were never replicated to {ctx.survivor}; "
                f"{ctx.region} is NOT decommissioned.",
                f"replay them: `drctl failover --stack {ctx.stack} --region {ctx.region} --recover`, then rerun; "
                "or pass --force-decommission to accept the loss",
            )
        return _result("deferred", f"{ctx.region} kept (no verdict yet); rerun when it is readable")
    if ctx.original.cluster(ctx.region).kind is Kind.LOCAL:
        ctx.before.local_cluster(ctx.region).stop()
    write_stack_config(ctx.stack_path, ctx.desired)
    return _result("done", f"{ctx.region} stopped (data kept); decommissioned", forced=integ.status != "done")


REGION_STEPS: list[Step] = [
    Step("preflight", preflight, "check B's health, A's reachability and the lag of A→B", _inputs),
    Step("fence-drain", fence_drain, "planned: fence A's applications on A, drain A→B to lag 0", _inputs),
    Step("move", move, "stop the links A→B and B→A; grant A's applications their writes on B", _inputs),
    Step("clients", clients, "publish B's client configuration for A's applications", _inputs),
    Step("consumer-groups", consumer_groups, "check the moved groups' translated offsets on A.<topic>", _inputs),
    Step(
        "desired-state", desired_state, "write A decommissioned, its links gone, its apps homed on B; converge", _inputs
    ),
    Step("integrity", integrity, "compare A's topics with their remote copies A.<topic> on B", _inputs),
    Step("decommission", decommission, "stop A (nothing missing, or --force-decommission)", _inputs),
]


# ---------------------------------------------------------------------------------- running


def _topologies(ref: StackRef, journal: Journal | None, region: str) -> tuple[Topology, Topology, str, bool]:
    current = load_stack_file(ref.stack_file)
    if journal is not None and not journal.finished:
        if journal.mode == "rejoin":
            raise FailoverError(
                f"the rejoin {journal.failover_id} of region {journal.record.source} is unfinished.",
                f"finish it first: `drctl failover --stack {ref.name} --region {journal.record.source} --rejoin`",
            )
        if journal.record.source != region:
            raise FailoverError(
                f"failover {journal.failover_id} of region {journal.record.source} is unfinished.",
                f"finish it first: `drctl failover --stack {ref.name} --region {journal.record.source}`",
            )
        original = load_topology(ref.name, journal.record.original_config)
        desired = load_topology(ref.name, journal.record.desired_config)
        if dump_stack_config(current) not in (journal.record.original_config, journal.record.desired_config):
            raise FailoverError(
                f"{ref.stack_file} changed while failover {journal.failover_id} was under way.",
                f"restore it from {journal.path.parent} and rerun, so the failover can finish",
            )
        return original, desired, journal.record.target, True
    if not is_active_active(current):
        raise FailoverError(
            f"stack '{ref.name}' is {current.architecture}: --region fails over one peer of an active-active stack.",
            f"run `drctl failover --stack {ref.name}` without --region",
        )
    survivor = survivor_for(current, region)
    return current, after_region_failover(current, region, survivor), survivor, False


def run_region_failover(
    ref: StackRef,
    region: str,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
) -> FailoverSummary:
    """Fail region ``region`` of the active-active stack ``ref`` over to a surviving peer (or resume it)."""

    def open_run(journal: Journal | None) -> tuple[Context, bool]:
        original, desired, survivor, resuming = _topologies(ref, journal, region)
        mode = options.mode or (journal.mode if resuming and journal else "planned")
        if mode not in MODES:
            raise FailoverError(f"unknown mode {mode!r}.", "use --mode planned or --mode unplanned")
        if journal is None or not resuming:
            journal = Journal.create(
                ref.made_failover_home(),
                stack=ref.name,
                mode=mode,
                source=region,
                target=survivor,
                standby=None,
                original_config=dump_stack_config(original),
                desired_config=dump_stack_config(desired),
                steps=[s.name for s in REGION_STEPS],
            )
        ctx = RegionContext(
            ref=ref,
            original=original,
            desired=desired,
            mode=mode,
            options=options,
            journal=journal,
            converger=converger or PulumiConverger(ref, catch_up_timeout=options.catch_up_timeout),
            progress=progress,
            region=region,
            survivor=survivor,
        )
        return ctx, resuming

    def title(ctx: Context) -> str:
        return f"region failover {ctx.journal.failover_id} of stack {ref.name}: {region}'s applications → {ctx.target}"

    def finished(journal: Journal | None, stack_path: Path) -> bool:
        return already_finished(journal, stack_path) and journal.mode != "rejoin"

    return run_frame(ref, REGION_STEPS, open_run, title=title, progress=progress, on_step=on_step, is_finished=finished)


@dataclass
class RegionPlan:
    """What ``drctl failover --region A --dry-run`` shows: the steps, who moves, and the stack-file diff."""

    stack: str
    mode: str
    region: str
    survivor: str
    moving: list[str]
    links_stopped: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str

    def to_json(self) -> dict[str, Any]:
        """The plan as ``--json`` prints it."""
        return dict(self.__dict__)

    def render(self) -> str:
        """The plan for a person."""
        lines = [
            f"{self.mode} region failover of stack {self.stack}: {self.region} → {self.survivor}",
            f"applications moving: {', '.join(self.moving) or 'none'}",
            f"links stopped: {', '.join(self.links_stopped) or 'none'}",
            "steps:",
            *(f"  {i}. {s['name']}: {s['description']}" for i, s in enumerate(self.steps, 1)),
            "stack file diff:",
            self.stack_file_diff or "  (none)",
        ]
        return "\n".join(lines)


def plan_region_failover(ref: StackRef, region: str, *, options: FailoverOptions) -> RegionPlan:
    """The plan of a region failover; changes nothing."""
    ref.existing_stack_file()
    original, desired, survivor, _resuming = _topologies(ref, Journal.load(ref.made_failover_home()), region)
    return RegionPlan(
        stack=ref.name,
        mode=options.mode or "planned",
        region=region,
        survivor=survivor,
        moving=moving_applications(original, region),
        links_stopped=[lk.name for lk in original.links if region in (lk.source, lk.target)],
        steps=[{"name": s.name, "description": named_roles(s.description, A=region, B=survivor)} for s in REGION_STEPS],
        stack_file_diff=stack_file_diff(ref.stack_file, desired),
    )


def recover_region(ref: StackRef, region: str, progress: Progress = lambda _m: None) -> dict[str, Any]:
    """Replay into ``<region>.<topic>`` on the survivor the records of ``region`` never replicated.

    The comparison runs again first, so a second run writes nothing. Records keep their key, value,
    headers and timestamp.
    """
    journal = Journal.load(ref.made_failover_home())
    if journal is None or journal.record.source != region or journal.mode == "rejoin":
        raise FailoverError(
            f"no region failover of {region} in stack '{ref.name}' to recover.",
            f"run `drctl failover --stack {ref.name} --region {region}` first",
        )
    original = load_topology(ref.name, journal.record.original_config)
    from dr.estate.estate import Estate

    estate = Estate(original, ref.state_dir)
    a_ep, b_ep = estate.endpoint(region), estate.endpoint(journal.record.target)
    if not listening(a_ep.bootstrap):
        local = original.cluster(region).kind is Kind.LOCAL
        raise ClusterError(
            f"{region} does not answer at {a_ep.bootstrap}: its records that never reached "
            f"{journal.record.target} are read from it, so nothing was replayed.",
            "bring its brokers back with their data ("
            + (f"`drctl estate start --stack {ref.name} --cluster {region}`" if local else "the cluster's own tooling")
            + f"), then rerun `drctl failover --stack {ref.name} --region {region} --recover`",
        )
    topics = [t.name for t in original.topics]
    found = compare_region(a_ep, b_ep, region, topics)
    wanted = {(m["topic"], m["partition"], m["offset"]) for m in found["missing"]}
    written = 0
    failed: list[str] = []
    if wanted:
        producer = Producer(b_ep.config(**{"acks": "all", "enable.idempotence": True}))
        for topic, partition, offset in sorted(wanted):
            consumer = Consumer(
                a_ep.config(**{"group.id": f"kdr-recover-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
            )
            consumer.assign([TopicPartition(topic, partition, offset)])
            msg = None
            deadline = time.monotonic() + 30
            while msg is None and time.monotonic() < deadline:
                got = consumer.poll(0.5)
                if got is not None and got.error() is None:
                    msg = got
            consumer.close()
            if msg is None:
                raise ClusterError(f"could not read {topic}-{partition}@{offset} on {region}.", "rerun the recovery")
            producer.produce(
                remote_topic(region, topic),
                key=msg.key(),
                value=msg.value(),
                headers=msg.headers(),
                timestamp=msg.timestamp()[1],
                partition=partition,
                on_delivery=lambda err, _msg: failed.append(str(err)) if err is not None else None,
            )
            written += 1
        unsent = producer.flush(60)
        if unsent or failed:
            raise ClusterError(
                f"{unsent + len(failed)} of the {written} records replayed into {journal.record.target} were not "
                f"acknowledged{': ' + failed[0] if failed else ''}.",
                f"rerun `drctl failover --stack {ref.name} --region {region} --recover` (it compares again first)",
            )
    progress(f"replayed {written} records of {region} into their remote topics on {journal.record.target}")
    result = {"failover_id": journal.failover_id, "replayed": written, "missing_before": len(wanted)}
    write_atomic(recovered_marker(ref, journal.failover_id), json.dumps(result))
    return {"replayed": written, "missing_before": len(wanted)}


def named_roles(text: str, **names: str) -> str:
    """``text`` with the role letters standing alone (``A``, ``B``) replaced by cluster names, in one pass
    (so region B with peer A reads right)."""
    return re.sub(r"\b([A-Z])\b", lambda m: names.get(m.group(1), m.group(1)), text)


def recovered_marker(ref: StackRef, failover_id: str) -> Path:
    """Written when a ``--recover`` of region failover ``failover_id`` left nothing of the region missing."""
    return ref.made_failover_home() / f"recovered-{failover_id}.json"
