"""The eight steps of a failover from the active cluster A to the passive B, with C as the new passive.

Each step is a function of a :class:`Context` returning a :class:`StepResult`; each is idempotent
(running it again after a crash converges to the same state) and refuses with
:class:`~dr.base.errors.FailoverError` — message and next step — when it must not go on.

1. ``preflight`` — topology valid; B healthy (brokers up, no offline partition, topics present);
   link lag per partition; whether A is reachable. Read-only.
2. ``fence-drain`` — planned: delete the application principals' write ACLs on A, then wait until
   the link lag is 0 (refusing past ``--drain-timeout`` without ``--force``, after giving A its
   write ACLs back). Unplanned: fence A only if it answers.
3. ``promote`` — stop the link A→B, grant application principals write access on B.
4. ``clients`` — publish B's client configuration for every application at once, so applications
   move before anything slower happens.
5. ``consumer-groups`` — every synced group's translated committed offsets on B; groups without
   any, and what their consumers will do.
6. ``desired-state`` — write the new topology (A decommissioned, B active, C passive, link B→C)
   to the stack file and converge it with ``pulumi up`` (:mod:`dr.failover.frame.converge`).
7. ``integrity`` — verification A vs B when A is readable (fencing A first if it came back);
   deferred while A is unreadable.
8. ``decommission`` — stop A, only with a clean verdict or ``--force-decommission``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

import dr.failover.act.edge_resume as hub
import dr.failover.act.integrity as integrity
from dr.base.errors import AuthError, ClusterError, FailoverError
from dr.estate.estate import application_acls
from dr.failover.act.clients import publish_clients
from dr.failover.act.endpoint_switch import check_endpoint, switch_endpoint
from dr.failover.act.fencing import fence, unfence, write_bindings
from dr.failover.act.groups import GroupState, describe_group
from dr.failover.act.health import cluster_health, listening, reachability
from dr.failover.act.snapshots import last_offsets, record_offsets, write_rate
from dr.failover.frame.desired_state import desired_state
from dr.failover.frame.journal import Journal, failover_dir
from dr.failover.frame.outcomes import (
    ClientsOutcome,
    ConsumerGroupsOutcome,
    DecommissionDeferred,
    DecommissionOutcome,
    Drained,
    FenceOnly,
    FenceSkipped,
    IntegrityDeferred,
    IntegrityOutcome,
    IntegritySeen,
    IntegritySkipped,
    LinkState,
    OpenTransactions,
    PreflightOutcome,
    PromoteOutcome,
)
from dr.failover.frame.shorten import MANY, names_text
from dr.failover.frame.step import Context, Step, StepResult
from dr.failover.record.metrics import (
    Offsets,
    RpoEstimate,
    encode_offsets,
    group_positions,
    lag,
    rpo_estimate,
    utc_text,
)
from dr.kafka.client import Endpoint, create_acls
from dr.kafka.copied import uncopied
from dr.kafka.offsets import OffsetReader, committed_offsets_of, end_offsets, end_offsets_together
from dr.runtime.process import wait_until
from dr.runtime.transactions import abort_open, open_transactions
from dr.topology import Kind, Role, Topology
from dr.topology.access import applications_on
from dr.topology.hub_spoke import remote_topic_names
from dr.topology.topics import topics_on

__all__ = ["STEPS", "fence_drain", "mark_writable", "promote", "target_bound", "verified_topics"]


@contextmanager
def _reading_offsets(what: str, check: str = "the cluster answers") -> Iterator[None]:
    """A failed offset read of ``what`` as the failover's error (dr.kafka.offsets names the client's)."""
    try:
        yield
    except (ClusterError, AuthError) as exc:
        raise FailoverError(
            f"cannot read the end offsets of {what}: {str(exc).splitlines()[0]}",
            f"check {check} (`drctl status`), then rerun the failover (it resumes)",
        ) from exc


def _offsets(ep: Endpoint, topics: list[str], what: str) -> dict[tuple[str, int], int]:
    with _reading_offsets(what):
        return end_offsets(ep, topics)


def _readers(ctx: Context) -> tuple[OffsetReader, OffsetReader]:
    """A and B's offset readers for a polling loop (each: one client, its partitions looked up once)."""
    with _reading_offsets(f"{ctx.source} and {ctx.target}", "the clusters answer"):
        return OffsetReader(ctx.a_ep, ctx.topics), OffsetReader(ctx.b_ep, ctx.topics)


def _ends(ctx: Context, readers: tuple[OffsetReader, OffsetReader]) -> tuple[Offsets, Offsets]:
    """A's and B's end offsets, both requests in flight at once."""
    with _reading_offsets(f"{ctx.source} and {ctx.target}", "the clusters answer"):
        a_end, b_end = end_offsets_together(list(readers))
    return a_end, b_end


class Inputs(TypedDict):
    """What every step of an active-passive failover is given (journaled as the step's ``inputs``)."""

    mode: str
    source: str
    target: str
    standby: str | None
    topics: list[str]


def _common_inputs(ctx: Context) -> Inputs:
    return Inputs(mode=ctx.mode, source=ctx.source, target=ctx.target, standby=ctx.standby, topics=ctx.topics)


# ---------------------------------------------------------------------------------- 1 preflight
def _refuse_unverifiable(ctx: Context) -> None:
    """Refuse, before anything changes, a replicated topic the integrity step could not verify."""
    from dr.failover.act.integrity import topics_left_unread

    unread = [] if ctx.options.skip_verify else topics_left_unread(ctx.topics)
    if unread:
        raise FailoverError(
            f"the verification would not read the replicated topics {', '.join(unread)} (it takes them for "
            "internal topics), so the integrity step could not pass after A was fenced and B promoted.",
            f"rename them in Pulumi.{ctx.stack}.yaml (kafka-dr:topics), or rerun with --skip-verify if you verify "
            "them by other means (A is then decommissioned only with --force-decommission); nothing was changed",
        )


def preflight(ctx: Context) -> StepResult:
    """Check the topology, B's health, the link's lag and A's reachability; change nothing."""
    A, B = ctx.source, ctx.target
    _refuse_unverifiable(ctx)
    b_decl = ctx.original.cluster(B)
    expected = b_decl.brokers if b_decl.kind is Kind.LOCAL else None
    b = cluster_health(ctx.b_ep, expected_brokers=expected, topics=ctx.topics)
    a = reachability(ctx.a_ep)
    nothing = "nothing was changed"
    if not b.reachable:
        raise FailoverError(
            f"cluster {B} (the passive cluster to promote) is unreachable: {b.error}.",
            f"start it (local estate: `drctl estate up --stack {ctx.stack}`) or fix its network, then rerun; {nothing}",
        )
    if b.offline:
        raise FailoverError(
            f"cluster {B} has {len(b.offline)} offline partitions: {', '.join(b.offline[:10])}.",
            f"bring the brokers that lead them back (`drctl status --stack {ctx.stack} --isr`), then rerun; {nothing}",
        )
    if b.brokers_down and not ctx.options.force:
        raise FailoverError(
            f"cluster {B} has {b.brokers_down} of {expected} brokers down (registered: {b.brokers}).",
            f"start them and rerun, or pass --force to promote a degraded cluster; {nothing}",
        )
    if b.missing_topics:
        raise FailoverError(
            f"cluster {B} lacks topics {', '.join(b.missing_topics)} that the link replicates.",
            f"check the link {ctx.link.name} runs and has created them, then rerun; {nothing}",
        )
    if ctx.mode == "planned" and not a["reachable"]:
        raise FailoverError(
            f"cluster {A} is unreachable ({a['error']}); a planned failover fences and drains it first.",
            f"if {A} is lost, run an unplanned failover: `drctl failover --stack {ctx.stack} "
            f"--mode unplanned`; {nothing}",
        )
    endpoint_at = check_endpoint(ctx.original, ctx.state, ctx.stack)  # refused here when its API is silent
    b_end = _offsets(ctx.b_ep, ctx.topics, B)
    link = LinkState(name=ctx.link.name)
    if ctx.before.runs_here(ctx.link.name):
        runner = ctx.before.link_runner(ctx.link.name)
        link.process = "running" if runner.alive() else "stopped"
        if ctx.link.connect:
            link.connect = ctx.link.connect
    outcome = PreflightOutcome(
        source={"name": A, **a},
        target={"name": B, **b.to_dict()},
        link=link,
        target_end_offsets=encode_offsets(b_end),
    )
    if a["reachable"]:
        a_end = _offsets(ctx.a_ep, ctx.topics, A)
        record_offsets(ctx.state, A, a_end)
        per_partition = _link_lag(ctx)(a_end, b_end)
        outcome.source_end_offsets = encode_offsets(a_end)
        outcome.lag = encode_offsets(per_partition)
        outcome.lag_total = sum(per_partition.values())
        rpo: RpoEstimate = {
            "records": sum(per_partition.values()),
            "basis": "live link lag at preflight",
            "per_partition": encode_offsets({k: v for k, v in per_partition.items() if v}),
        }
        lag_text = f"link lag {outcome.lag_total} records"
    else:
        at, last = last_offsets(ctx.state, A)
        rpo = rpo_estimate(
            last,
            b_end,
            snapshot_at=at,
            failed_at=time.time(),
            write_rate=write_rate(ctx.state, A),
            copied=_copied_now(ctx),
        )
        span = f"{rpo['records']}" + (f"–{rpo['upper_bound']}" if rpo.get("upper_bound") is not None else "")
        lag_text = (
            f"RPO estimate {span} records (snapshot {rpo['snapshot_age_s']}s old)"
            if rpo["records"] is not None
            else "RPO unknown (no snapshot of A's offsets)"
        )
    outcome.rpo_estimate = rpo
    if ctx.mode == "unplanned":
        ctx.journal.measure(rpo_estimate=rpo)
    state_a = "reachable" if a["reachable"] else "UNREACHABLE"
    return StepResult(
        "done",
        outcome,
        f"{B} healthy ({len(b.brokers)} broker(s), 0 offline partitions, "
        f"{len(b.under_replicated)} under-replicated); {A} {state_a}; {lag_text}"
        + (f"; client endpoint points at {', '.join(endpoint_at) or 'nothing'}" if endpoint_at is not None else ""),
    )


# ---------------------------------------------------------------------------------- 2 fence + drain
def _fence_a(ctx: Context) -> list[dict[str, str]]:
    removed = fence(ctx.a_ep, ctx.applications)
    m = ctx.journal.measurements
    known = m.fenced_bindings
    merged = known + [b for b in removed if b not in known]
    ctx.journal.measure(fenced_bindings=merged, fenced_at=m.fenced_at or round(time.time(), 3))
    return removed


def _wait_groups_synced(
    ctx: Context, readers: tuple[OffsetReader, OffsetReader], a_end: Offsets, b_end: Offsets, stable_s: float = 2.0
) -> dict[str, Any]:
    """Give the link a moment to copy the last committed offsets of every synced group.

    A group is settled when its translated offsets equal its offsets on A, or when they have not
    moved for ``stable_s`` seconds (MirrorMaker 2 translates conservatively: positions between its
    sparse offset syncs stay behind, so consumers re-read a little — never skip). A group with no
    offset at all on B yet may simply not be discovered by the link: it is given one group-refresh
    interval of the link (plus two syncs) before it counts as settled. ``group_sync_timeout`` caps it all.
    """
    groups = [
        app.consumer_group
        for app in ctx.original.principals.applications
        if app.consumer_group and ctx.link.selects_group(app.consumer_group)
    ]
    iv = ctx.link.intervals
    discover_s = iv.refresh_groups_s + 2 * iv.sync_group_offsets_s + 1
    pending: dict[str, Any] = {}
    seen: dict[str, Any] = {}
    t0 = time.monotonic()
    changed_at = [t0]

    def settled() -> bool:
        pending.clear()
        now: dict[str, Any] = {}
        # every group at once per cluster, on the drain's clients: one round trip, not two clients per group
        on_a, on_b = readers[0].committed(groups), readers[1].committed(groups)
        for group in groups:
            src = {tp: n for tp, n in on_a[group].items() if tp[0] in ctx.topics}
            dst = on_b[group]
            now[group] = (src, dst)
            pos = group_positions(src, dst, a_end, b_end, aligned=not ctx.original.writes_in_transactions(ctx.link))
            if pos["rereads"] or pos["missing_on_target"]:
                pending[group] = {
                    "rereads": pos["rereads"],
                    "missing_on_target": pos["missing_on_target"],
                    "undiscovered": bool(src) and not dst,
                }
        if now != seen:
            seen.clear()
            seen.update(now)
            changed_at[0] = time.monotonic()
        elapsed, still = time.monotonic() - t0, time.monotonic() - changed_at[0]
        return all(still >= stable_s and (not p["undiscovered"] or elapsed >= discover_s) for p in pending.values())

    if groups:
        wait_until(settled, ctx.options.group_sync_timeout, interval=0.5)
    return {
        "groups_synced": not pending,
        "group_wait_s": round(time.monotonic() - t0, 3),
        "groups_pending": dict(pending),
    }


def _link_lag(ctx: Context) -> Callable[[Offsets, Offsets], Offsets]:
    """The link's lag per partition from A's and B's ends. A link that runs here: A's ends are compared
    with the source offsets the link committed with its copies, a gap of only markers or aborted records
    on A counting as copied (:mod:`dr.kafka.copied`) — B's end offsets count an exactly-once link's commit
    markers and would end the drain before the last records are on B, and an A that was such a target
    holds markers B never gets."""
    copied = ctx.before.copied_positions(ctx.link.name)
    if copied is None:
        return lag

    def committed_lag(a_end: Offsets, _b_end: Offsets) -> Offsets:
        with _reading_offsets(f"the offsets link {ctx.link.name} committed", "the link's runner answers"):
            return uncopied(ctx.a_ep, a_end, copied())

    return committed_lag


def _copied_now(ctx: Context) -> Offsets | None:
    """The source positions the link committed with its copies (what B holds of A, in records), or None
    when it does not run here or its store does not answer (the estimate then falls back to B's ends)."""
    copied = ctx.before.copied_positions(ctx.link.name)
    try:
        return copied() if copied is not None else None
    except ClusterError:
        return None


def fence_drain(ctx: Context) -> StepResult:
    """Planned: fence A, drain the link; unplanned: fence A only if it answers."""
    A = ctx.source
    if ctx.mode == "unplanned":
        if reachability(ctx.a_ep, timeout=3.0)["reachable"]:
            removed = _fence_a(ctx)
            return StepResult(
                "done",
                FenceOnly(fenced=True, removed_acls=len(removed), drained=False),
                f"{A} answers: fenced ({len(removed)} write ACLs removed); no drain (unplanned)",
            )
        return StepResult(
            "skipped",
            FenceSkipped(fenced=False, drained=False, reason=f"{A} unreachable"),
            f"{A} unreachable: not fenced now (fenced when it returns, before verification)",
        )
    readers = _readers(ctx)  # before the fence: the partitions' lookup stays out of the write outage
    removed = _fence_a(ctx)
    ctx.say(f"{A} fenced: {len(removed)} application write ACLs removed; draining link {ctx.link.name}")
    t0 = time.monotonic()
    deadline = t0 + ctx.options.drain_timeout
    last_report = 0.0
    link_lag = _link_lag(ctx)
    while True:
        a_end, b_end = _ends(ctx, readers)
        behind = {tp: n for tp, n in link_lag(a_end, b_end).items() if n}
        if not behind or time.monotonic() >= deadline:
            break
        if time.monotonic() - last_report >= 2:
            ctx.say(f"drain: {sum(behind.values())} records still to copy on {len(behind)} partitions")
            last_report = time.monotonic()
        time.sleep(0.2)
    drain_s = round(time.monotonic() - t0, 3)
    record_offsets(ctx.state, A, a_end)
    if behind and not ctx.options.force:
        restored = unfence(ctx.a_ep, ctx.journal.measurements.fenced_bindings)
        ctx.journal.measure(fenced_bindings=[], fenced_at=None)
        process = ""
        if ctx.before.runs_here(ctx.link.name):
            what = f"its connectors on Connect cluster {ctx.link.connect} are" if ctx.link.connect else "its process is"
            process = (
                f" ({what} running)" if ctx.before.link_runner(ctx.link.name).alive() else f" ({what} NOT running)"
            )
        raise FailoverError(
            f"link {ctx.link.name}{process} still lags by {sum(behind.values())} records after the "
            f"{ctx.options.drain_timeout:.0f}s drain deadline: {encode_offsets(behind)}. {A} was unfenced "
            f"({restored} write ACLs restored): applications write to {A} again.",
            f"fix the link (its log is under <state>/links/{ctx.link.source}-to-{ctx.link.target}/) and rerun, "
            "give it longer with --drain-timeout, or rerun with --force to fail over and lose those records",
        )
    groups = _wait_groups_synced(ctx, readers, a_end, b_end)
    residual = sum(behind.values())
    ctx.journal.measure(
        rpo_estimate={
            "records": residual,
            "basis": "link lag left after the drain",
            "per_partition": encode_offsets(behind),
        }
    )
    outcome = Drained(
        fenced=True,
        removed_acls=len(removed),
        drained=not behind,
        drain_s=drain_s,
        residual_lag=encode_offsets(behind),
        source_end_offsets=encode_offsets(a_end),
        **groups,
    )
    text = (
        f"{A} fenced; drained in {drain_s:.1f}s"
        if not behind
        else f"{A} fenced; --force: {residual} records NOT drained"
    )
    if not outcome.groups_synced:
        text += f"; group offsets not fully synced: {', '.join(outcome.groups_pending)}"
    return StepResult("done", outcome, text)


# ---------------------------------------------------------------------------------- 3 promote
def promote(ctx: Context) -> StepResult:
    """Stop the link A→B; grant the application principals write access on B (a run started by a controller:
    only while the witness still holds the lease with its fencing token)."""
    if ctx.options.lease_check is not None:
        ctx.options.lease_check()
    link = ctx.link
    if not ctx.before.runs_here(link.name):
        raise FailoverError(
            f"link {link.name} runs outside this machine; this drctl stops local MirrorMaker 2 "
            "links and links on a declared Connect cluster only.",
            f"stop {link.name} with its own tooling, then rerun the failover",
        )
    t0 = time.monotonic()
    mirror = ctx.before.link_runner(link.name)
    was_running = mirror.alive()
    if ctx.mode == "unplanned" or not listening(ctx.a_ep.bootstrap):
        # Nothing is left to copy, and a graceful stop waits ~15 s on the dead source: kill it.
        mirror.kill()
        how = "killed"
    elif not link.connect and nothing_left_to_flush(ctx.journal.outcome("fence-drain")):
        # A dedicated process drained to lag 0 with every group's offsets on B: a graceful stop (~2 s of every
        # application's outage) would flush nothing the failover still needs; SIGKILL ends it at once (a
        # Connect link's "kill" only asks its tasks to stop, so it keeps the stop that waits for them), and
        # a transaction it left open is aborted below.
        mirror.kill()
        how = "killed (drained)"
    else:
        mirror.stop(timeout=ctx.options.link_stop_timeout)  # graceful: last checkpoints are flushed
        how = "stopped"
    stop_s = round(time.monotonic() - t0, 3)
    transactions = (
        close_open_transactions(ctx, wait_s=0.0 if how.startswith("killed") else 10.0)
        if ctx.original.writes_in_transactions(link)
        else None
    )
    writable_from_ms = mark_writable(ctx.journal, lambda: target_bound(ctx))  # before the grant
    grants = application_acls(ctx.desired, Role.ACTIVE)
    create_acls(ctx.b_ep, grants)
    producers = [app.name for app in applications_on(ctx.desired, Role.ACTIVE, ctx.target) if app.writes]
    have = {b.principal.removeprefix("User:") for b in write_bindings(ctx.b_ep, producers)}
    lacking = sorted(set(producers) - have)
    if lacking:
        raise FailoverError(
            f"after granting, {', '.join(lacking)} still cannot write on {ctx.target}.",
            "check the cluster's authorizer and rerun the failover (it resumes here)",
        )
    outcome = PromoteOutcome(
        link_stopped=link.name,
        link_was_running=was_running,
        link_stop_s=stop_s,
        link_stop=how,
        acls_granted=len(grants),
        writable_from_ms=writable_from_ms,
        target_until_taken=ctx.journal.measurements.target_until is not None,
    )
    if transactions is not None:  # journaled only for a link writing in transactions
        outcome.open_transactions = transactions
    # B is writable: the endpoint moves to it now, before the client files are published.
    switched = switch_endpoint(ctx.original, ctx.state, ctx.target)
    if switched is not None:  # journaled only with an endpoint
        outcome.endpoint = switched
    return StepResult(
        "done",
        outcome,
        f"link {link.name} {how} ({stop_s:.1f}s); {ctx.target} writable for "
        f"{names_text(producers) or 'no producing application'}"
        + (f"; client endpoint switched to {ctx.target}, sessions to {ctx.source} closed" if switched else ""),
    )


def mark_writable(journal: Journal, read_bound: Callable[[], dict[str, int] | None]) -> int:
    """Journal, once, the verification's cut-off (``writable_from_ms``, now) and its bound on B
    (``target_until``, from ``read_bound``) — called before the grant; a run resumed after it (the cut-off
    is already there) keeps both as they were and reads nothing. Returns the cut-off's instant."""
    if journal.measurements.writable_from_ms is not None:
        return journal.measurements.writable_from_ms
    until = read_bound()
    now_ms = int(time.time() * 1000)
    journal.measure(writable_from_ms=now_ms, target_until=until)
    return now_ms


def target_bound(ctx: Context) -> dict[str, int] | None:
    """B's end offsets of the link's topics (``"topic:partition": n``), read by :func:`promote` once the link
    is stopped and its transactions closed, before writes are granted: whatever lies on B from them on was
    written after the promotion, and the verification counts a record there that matches none of A's after
    the cut-off (:attr:`verification.sides.KafkaSide.until`). The high watermarks, not the last stable offsets: nothing
    is open any more, and a record the link wrote is below them either way. None, said, when B does not
    answer: the verification then bounds B by the time cut-off alone."""
    try:
        return encode_offsets(end_offsets(ctx.b_ep, ctx.topics))
    except (ClusterError, AuthError) as exc:
        ctx.say(
            f"cannot read {ctx.target}'s end offsets before granting writes ({str(exc).splitlines()[0]}): the "
            f"verification will bound {ctx.target} by the time cut-off only (records written through a client "
            "that kept older records may then count as unexpected)"
        )
        return None


def nothing_left_to_flush(drain: dict[str, Any]) -> bool:
    """True when the planned drain (``drain``: the fence-drain step's outcome) left the link nothing to copy
    and every application group's translated offsets on B (pure): then stopping the link gracefully, which
    flushes its last copies and checkpoints, brings nothing the failover needs."""
    return bool(drain.get("drained")) and bool(drain.get("groups_synced")) and not drain.get("residual_lag")


def close_open_transactions(ctx: Context, wait_s: float = 10.0) -> OpenTransactions:
    """No transaction of the stopped link left open on B: its consumers read committed and would stop at
    an open one, and the applications' new records would stay invisible behind it. A stopped task aborts
    its own within ``wait_s``; one killed leaves it open until the coordinator's timeout: aborted here
    (:func:`dr.runtime.transactions.abort_open`) — at once for a killed link (``wait_s`` 0), since nothing
    else will. Refused when one is still open after that."""
    t0 = time.monotonic()
    try:
        found = open_transactions(ctx.b_ep, ctx.topics)
        opened = dict(found)
        while opened and time.monotonic() - t0 < wait_s:
            time.sleep(0.5)
            opened = open_transactions(ctx.b_ep, ctx.topics)
        if opened:
            ctx.say(f"link {ctx.link.name} left transactions open on {ctx.target}: aborting {encode_offsets(opened)}")
            abort_open(ctx.b_ep, opened)
        left = open_transactions(ctx.b_ep, ctx.topics) if opened else {}
    except ClusterError as exc:
        raise FailoverError(
            f"cannot check the transactions link {ctx.link.name} left on {ctx.target}: {exc.problem}",
            f"check {ctx.target} answers, then rerun the failover (it resumes here)",
        ) from exc
    if left:
        raise FailoverError(
            f"transactions of link {ctx.link.name} are still open on {ctx.target} after aborting them: "
            f"{encode_offsets(left)}; consumers reading committed would stop there.",
            f"abort them with kafka-transactions.sh abort (--topic, --partition, --start-offset) on {ctx.target}, "
            "or wait for the transaction timeout, then rerun the failover (it resumes here)",
        )
    waited = round(time.monotonic() - t0, 3)
    if found:
        ctx.say(f"no transaction of link {ctx.link.name} left open on {ctx.target} ({waited:.1f}s)")
    return OpenTransactions(found=encode_offsets(found), aborted=encode_offsets(opened), waited_s=waited)


# ---------------------------------------------------------------------------------- 5 consumer groups
def consumer_groups(ctx: Context) -> StepResult:
    """Report each application group's translated offsets on B, and what groups without any will do."""
    a_ok = reachability(ctx.a_ep, timeout=3.0)["reachable"]
    b_end = _offsets(ctx.b_ep, ctx.topics, ctx.target)
    a_end = _offsets(ctx.a_ep, ctx.topics, ctx.source) if a_ok else None
    groups = []
    declared = {t.name for t in topics_on(ctx.original, ctx.roles.source)}
    names = [app.consumer_group for app in ctx.original.principals.applications if app.consumer_group]
    try:  # one batch per cluster, not one round trip per group and cluster
        on_b = committed_offsets_of(ctx.b_ep, names)
        on_a = committed_offsets_of(ctx.a_ep, names) if a_ok else None
    except ClusterError as exc:
        raise FailoverError(
            f"cannot read the offsets of the consumer groups: {exc.problem}",
            "check the clusters answer, then rerun the failover (it resumes here)",
        ) from exc
    for app in ctx.original.principals.applications:
        if not app.consumer_group:
            continue
        topics = [t for t in ctx.original.consumed_by(app) if t in declared]
        target_committed = on_b[app.consumer_group]
        source_committed = None if on_a is None else on_a[app.consumer_group]
        groups.append(
            describe_group(
                group=app.consumer_group,
                application=app.name,
                topics=topics,
                synced_by_link=ctx.link.selects_group(app.consumer_group),
                source_committed=source_committed,
                target_committed=target_committed,
                source_end=a_end,
                target_end=b_end,
                aligned=not ctx.original.writes_in_transactions(ctx.link),
            )
        )
    gaps = [g["group"] for g in groups if g["status"] not in ("translated", "no-commits")]
    skips = [g["group"] for g in groups if g["would_skip"]]
    for g in groups:
        if g["group"] in gaps:
            ctx.say(f"group {g['group']}: {g['status']} — {g['consumers_will']}")
    rereads = [g["rereads"] for g in groups if g["rereads"] is not None]
    text = groups_text(groups) or "no consumer groups declared"
    if skips:
        text += f"; WOULD SKIP records: {', '.join(skips)}"
    return StepResult(
        "done",
        ConsumerGroupsOutcome(
            groups=groups,
            without_offsets=gaps,
            would_skip=skips,
            rereads_total=sum(rereads) if rereads else None,
            source_readable=a_ok,
        ),
        text,
    )


def groups_text(groups: list[GroupState]) -> str:
    """``group status (n re-reads)`` per group; past :data:`MANY` groups, how many per status, then the
    groups that re-read or lack offsets by name."""

    def one(g: GroupState) -> str:
        return f"{g['group']} {g['status']}" + (f" ({g['rereads']} re-reads)" if g["rereads"] else "")

    if len(groups) <= MANY:
        return ", ".join(one(g) for g in groups)
    counts: dict[str, int] = {}
    for g in groups:
        counts[g["status"]] = counts.get(g["status"], 0) + 1
    notable = [g for g in groups if g["rereads"] or g["status"] not in ("translated", "no-commits")]
    text = f"{len(groups)} groups: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    if notable:
        shown = [one(g) for g in notable[:MANY]]
        text += "; " + ", ".join(shown) + (f", … ({len(notable)} in all)" if len(notable) > MANY else "")
    return text


# ---------------------------------------------------------------------------------- 6 desired state
# ---------------------------------------------------------------------------------- 4 clients
def clients(ctx: Context) -> StepResult:
    """Publish B's client configuration for every application (files 0600; passwords never printed);
    a hub's edges' applications get theirs again, for their own edge."""
    written = publish_clients(ctx.after)
    on_b = sum(1 for w in written if w["cluster"] == ctx.target)
    others = sorted({w["cluster"] for w in written} - {ctx.target})
    return StepResult(
        "done",
        ClientsOutcome(files=written),
        f"{on_b} client configurations for {ctx.target}"
        + (f", {len(written) - on_b} for {', '.join(others)}" if others else "")
        + f" in {ctx.state / 'clients'}",
    )


# ---------------------------------------------------------------------------------- 7 integrity
def integrity_check(ctx: Context) -> StepResult:
    """Verify A vs B when A is readable (fencing A first if it came back); defer otherwise.

    When ``drctl audit`` has audited the link A→B, the check starts from the last audit's bounds
    (only newer records and the audit's residue are read; see :mod:`verification.from_audit`);
    without a usable audit state — none, damaged, foreign — the full verification runs. The
    outcome's ``started_from`` and the summary line say which.
    """
    A, B = ctx.source, ctx.target
    a = reachability(ctx.a_ep)
    removed = _fence_a(ctx) if a["reachable"] else []
    if removed:
        ctx.say(f"{A} is back: fenced ({len(removed)} application write ACLs removed)")
    if ctx.options.skip_verify:
        return StepResult(
            "skipped",
            IntegritySkipped(verdict=None, reason="--skip-verify", fenced_on_return=len(removed)),
            "verification skipped (--skip-verify): no verdict",
        )
    if not a["reachable"]:
        return StepResult(
            "deferred",
            IntegrityDeferred(verdict=None, reason=f"{A} unreadable: {a['error']}"),
            f"{A} unreadable: verification deferred until it is back",
        )
    cutoff = ctx.journal.cutoff_ms()
    until = ctx.journal.target_until()
    attempt = ctx.journal.step("integrity").attempts
    out_dir = failover_dir(ctx.home) / f"verify-{ctx.journal.failover_id}-{attempt}"
    ctx.say(
        f"verifying {A} vs {B} (records up to cut-off {utc_text(cutoff) or 'none'}"
        + (f" = {cutoff} ms" if cutoff is not None else "")
        + (f"; {B} bounded by its end offsets at the promotion" if until is not None else "")
        + f") into {out_dir}"
    )
    m = ctx.journal.measurements
    verdict = integrity.verify(
        source=ctx.a_ep,
        target=ctx.b_ep,
        out_dir=out_dir,
        topics=verified_topics(ctx.original, A, ctx.topics),
        cutoff_ms=cutoff,
        target_until=until,
        stack=ctx.stack,
        source_name=A,
        target_name=B,
        progress=ctx.progress,
        audit_link=ctx.link.name,
        state_dir=ctx.state,
        context={
            "failover_id": ctx.journal.failover_id,
            "mode": ctx.mode,
            "stack": ctx.stack,
            "source": A,
            "target": B,
            "rto_s": m.rto_s,
            "write_outage_s": m.write_outage_s,
            "rpo_estimate": m.rpo_estimate,
            "journal": str(ctx.journal.path),
        },
    )
    counts = ", ".join(f"{n} {c}" for c, n in verdict.counts.items())
    origin = verdict.started_from or {}
    outcome = IntegrityOutcome(
        verdict=verdict,
        fenced_on_return=len(removed),
        cutoff_ms=cutoff,
        cutoff_utc=utc_text(cutoff),
        started_from=origin or None,
    )
    if origin.get("audit"):
        how = (
            f"started from audit run {origin['audit_runs']} of {ctx.link.name} ({origin['audited_at_utc']}): "
            f"{origin['skipped_source']:,} source + {origin['skipped_target']:,} target records not read again"
        )
    elif origin:
        how = f"full verification ({origin['reason']})"
    else:
        how = "full verification"
    if verdict.clean:
        return StepResult("done", outcome, f"verdict CLEAN ({counts}; {how}); report {verdict.html}")
    return StepResult("differences", outcome, f"verdict: DIFFERENCES ({counts}; {how}); report {verdict.html}")


def verified_topics(original: Topology, source: str, topics: list[str]) -> list[str]:
    """Which of ``topics`` (the link A→B's) the integrity step compares, A = ``source``: all of them, but
    on a hub not the edges' copies ``<edge>.<topic>`` — those are proven against their edges
    (``drctl verify --edge``), not against the old hub: the re-pointed edge links carry into B records
    the old hub never received (they would all count as unexpected)."""
    edge_copies = remote_topic_names(original) if hub.edge_links_into(original, source) else set()
    return [t for t in topics if t not in edge_copies]


# ---------------------------------------------------------------------------------- 8 decommission
def decommission(ctx: Context) -> StepResult:
    """Stop A — only with a clean verdict or ``--force-decommission``; otherwise defer or refuse."""
    A = ctx.source
    integ = ctx.journal.step("integrity")
    verdict = ctx.journal.verdict()
    clean = integ.status == "done" and bool(verdict and verdict.clean)
    if not clean and not ctx.options.force_decommission:
        if integ.status == "differences" and verdict:
            c = verdict.counts
            raise FailoverError(
                f"the verification of {A} vs {ctx.target} found {c['missing']} missing, {c['unexpected']} "
                f"unexpected, {c['duplicated']} duplicated and {c['corrupted']} corrupted records "
                f"(report {verdict.html}); {A} is NOT decommissioned.",
                refusal_advice(c, stack=ctx.stack, source=A, target=ctx.target, report_dir=verdict.report_dir),
            )
        reason = ctx.journal.outcome_as("integrity", IntegritySeen).reason or "no verdict"
        return StepResult(
            "deferred",
            DecommissionDeferred(reason=reason, stopped=False),
            f"{A} kept ({reason}); when it is readable rerun `drctl failover --stack {ctx.stack}` "
            f"to verify and decommission it, or pass --force-decommission",
        )
    outcome = DecommissionOutcome(forced=not clean)
    if ctx.original.cluster(A).kind is Kind.LOCAL:
        cluster = ctx.before.local_cluster(A)
        cluster.stop()
        outcome.stopped, outcome.data_kept = True, str(cluster.dir)
        text = f"{A} stopped (data kept in {cluster.dir})"
    else:
        # A cluster this product does not own: access is forgotten (the stack no longer manages its
        # users, topics and ACLs — `pulumi up` forgets them), its data and topics stay, the fence stays.
        outcome.stopped, outcome.access_forgotten, outcome.data_kept, outcome.fenced = False, True, True, True
        text = (
            f"{A} is {ctx.original.cluster(A).kind.value}: its users, topics and ACLs are forgotten by the stack, "
            "nothing on it was deleted (topics and data kept, applications fenced); stop or reuse it with its own "
            "tooling"
        )
    ctx.write_stack(ctx.desired)  # A stays declared, decommissioned, without links
    outcome.role = Role.DECOMMISSIONED.value
    if not clean and not integ.done:
        # The operator waived the verdict: the failover is complete, the step keeps what it found.
        before = integ.outcome or {}
        ctx.journal.finish_step(
            "integrity",
            "skipped",
            {
                **before,
                "waived_by": "--force-decommission",
                "status_before": integ.status,
                "summary": f"{before.get('summary') or integ.status} — waived by --force-decommission",
            },
            integ.seconds or 0.0,
        )
    return StepResult("done", outcome, text + (" — FORCED without a clean verdict" if not clean else ""))


def refusal_advice(counts: dict[str, int], *, stack: str, source: str, target: str, report_dir: str) -> str:
    """What to do when differences stop the decommissioning — fitted to the classes found.

    ``drctl recover`` replays *missing* records only; duplicates, unexpected and corrupted records
    are not fixed by it, and saying otherwise sends the operator round in a loop.
    """
    advice = []
    rerun = f"then rerun `drctl failover --stack {stack}` (it verifies again and decommissions {source} when clean)"
    if counts.get("missing"):
        advice.append(
            f"replay the {counts['missing']} missing records: `drctl recover --report {report_dir}`; " + rerun
        )
    if counts.get("duplicated"):
        advice.append(
            f"the {counts['duplicated']} duplicated records are extra copies on {target} (the link "
            "delivers at least once): nothing is lost and `drctl recover` does not remove them — "
            "consumers must tolerate them (idempotent processing)"
        )
    if counts.get("corrupted"):
        advice.append(
            f"the {counts['corrupted']} corrupted records have the same key and a different value on "
            f"{target}: compare them in the report's samples ({report_dir}) and rewrite them with the "
            f"application; `drctl recover` does not overwrite them"
        )
    if counts.get("unexpected"):
        advice.append(
            f"the {counts['unexpected']} unexpected records exist only on {target} before the cut-off: "
            f"something besides the link wrote there (samples in {report_dir}); `drctl recover` does "
            "not remove them"
        )
    if not counts.get("missing"):
        advice.append(
            f"once you accept what the report lists, `drctl failover --stack {stack} "
            f"--force-decommission` decommissions {source} (no record is missing)"
        )
    else:
        advice.append("or pass --force-decommission to accept the differences as they are")
    return "; ".join(advice)


STEPS: list[Step[Context]] = [
    Step(
        "preflight",
        preflight,
        "check the topology, B's health, link lag per partition and A's reachability",
        _common_inputs,
    ),
    Step(
        "fence-drain",
        fence_drain,
        "fence A (remove application write ACLs); planned: drain the link to lag 0",
        lambda ctx: {**_common_inputs(ctx), "drain_timeout": ctx.options.drain_timeout, "force": ctx.options.force},
    ),
    Step(
        "promote",
        promote,
        "stop the link A→B; grant application write ACLs on B; point the client endpoint (if any) at B",
        _common_inputs,
    ),
    Step("clients", clients, "publish B's client configuration for every application", _common_inputs),
    Step("consumer-groups", consumer_groups, "check translated committed offsets of every group on B", _common_inputs),
    Step(
        "desired-state",
        desired_state,
        "write A decommissioned, B active, C passive + link B→C; converge",
        lambda ctx: {**_common_inputs(ctx), "converger": ctx.converger.name},
    ),
    Step(
        "integrity",
        integrity_check,
        "verify A vs B (when A is readable)",
        lambda ctx: {**_common_inputs(ctx), "skip_verify": ctx.options.skip_verify},
    ),
    Step(
        "decommission",
        decommission,
        "stop A (clean verdict or --force-decommission)",
        lambda ctx: {**_common_inputs(ctx), "force_decommission": ctx.options.force_decommission},
    ),
]
