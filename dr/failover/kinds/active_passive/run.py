"""The active-passive failover's run: A→B→C through the frame (:func:`dr.failover.frame.run.run_frame`).

Its topologies (:func:`topologies`: from the stack file, or from the journal of an unfinished run), its
journal, the check of A's and B's credentials before a journal is started, and :func:`run_failover`.

Its plan — ``drctl failover --dry-run``: the plan, the stack file diff and Pulumi's preview; changes nothing.

The plan names, for each step, what it would do with this stack's clusters, principals and link,
and whether the journal already has it done. Read-only observations (reachability, B's health,
link lag) are added when the clusters answer; nothing is written — not even the journal — and
the lock is not taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.errors import AuthError, ClusterError, ConfigError, DRError, FailoverError, JournalMismatch
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack, PulumiPreview
from dr.failover.act.edge_resume import edge_links_into
from dr.failover.act.health import cluster_health, reachability
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal
from dr.failover.frame.plan import FailoverPlan, FinishedPlan, PlanStep
from dr.failover.frame.render import endpoint_text
from dr.failover.frame.roles import Roles
from dr.failover.frame.run import OnStep, already_finished, new_context, refuse_damaged_state, run_frame, run_mode
from dr.failover.frame.step import MODES, Context, FailoverOptions, Step
from dr.failover.frame.summary import FailoverSummary, rerun_command, summarize
from dr.failover.kinds.active_passive.steps import STEPS, verified_topics
from dr.failover.record.metrics import encode_offsets, lag
from dr.kafka.copied import uncopied
from dr.kafka.offsets import end_offsets
from dr.topology import Kind, Placement, Role, StackFile, Topology, dump_stack_config, load_topology, read_stack_file
from dr.topology.access import applications_on
from dr.topology.client_endpoint import EndpointStatus, endpoint_pointing
from dr.topology.stackfile import stack_file_diff
from dr.topology.topics import topics_on

__all__ = ["ActivePassivePlan", "desired_state_diff", "plan_failover", "pulumi_preview", "run_failover", "topologies"]


def topologies(
    ref: StackRef, read: StackFile, journal: Journal | None, mode: str | None = None
) -> tuple[Topology, Topology, bool]:
    """``(original, desired, resuming)`` for a failover of the stack ``ref``, whose stack file is ``read``.

    A journal of an unfinished failover fixes both topologies; otherwise the stack file is the
    original and :meth:`Topology.after_failover` gives the desired one. A stack file that is
    neither the journal's original nor its desired state means someone changed it mid-failover:
    refused.
    """
    stack, stack_path, current = ref.name, read.path, read.topology
    if journal is None or journal.finished:
        return current, current.after_failover(mode=mode or "planned"), False
    if rerun_command(journal) != f"drctl failover --stack {stack}":  # a region's or an edge's loss, a rejoin
        raise FailoverError(
            f"failover {journal.failover_id} of {journal.record.source} ({journal.mode}) is unfinished, and is not "
            f"a failover of the stack's active cluster: it is not resumed as one.",
            f"finish it first: `{rerun_command(journal)} --yes`",
        )
    original = load_topology(stack, journal.record.original_config)
    desired = load_topology(stack, journal.record.desired_config)
    now = dump_stack_config(current)
    if now not in (journal.record.original_config, journal.record.desired_config):
        raise FailoverError(
            f"{stack_path} changed while failover {journal.failover_id} was under way (it is neither "
            "the topology before nor the one after the failover).",
            f"restore it from {journal.path.parent} (the step desired-state keeps a copy) and rerun, so the "
            "failover can finish",
        )
    return original, desired, True


def _create_journal(
    stack: str, state: Path, mode: str, original: Topology, desired: Topology, steps: Sequence[Step[Context]]
) -> Journal:
    """The journal of a new failover of ``original`` to ``desired``."""
    roles = Roles.of(original)
    return Journal.create(
        state,
        stack=stack,
        mode=mode,
        source=roles.source.name,
        target=roles.target.name,
        standby=roles.standby_name,
        original_config=dump_stack_config(original),
        desired_config=dump_stack_config(desired),
        steps=[s.name for s in steps],
    )


def run_failover(
    ref: StackRef,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
    steps: Sequence[Step[Context]] = STEPS,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """Fail the stack ``ref`` over (or resume its failover); return the summary (see :func:`summarize`).

    ``stack``: its stack file as the command read it (None: read once the stack's lock is held).

    ``steps``: the active-passive :data:`~dr.failover.kinds.active_passive.steps.STEPS`, or a kind's that
    wraps them (a hub's, :data:`dr.failover.kinds.hub_spoke.steps.HUB_STEPS`).

    Raises :class:`~dr.base.errors.FailoverError` when a step refuses (the journal keeps what was done;
    a rerun resumes) and :class:`~dr.base.errors.LockHeld` when another run holds the lock. ``on_step``
    is called after each step's outcome is journaled.
    """
    state = ref.made_state_dir()

    def open_run(journal: Journal | None, read: StackFile) -> tuple[Context, bool]:
        resuming = journal is not None and not journal.finished
        mode = run_mode(options, journal, resuming)
        original, desired, resuming = topologies(ref, read, journal, mode)
        if journal is None or not resuming:
            _precheck(original, state)
            journal = _create_journal(ref.name, ref.made_failover_home(), mode, original, desired, steps)
        ctx = new_context(
            Context, ref, journal, original, desired, mode, options=options, converger=converger, progress=progress
        )
        return ctx, resuming

    def title(ctx: Context) -> str:
        chain = f"{ctx.source} → {ctx.target}" + (f" → {ctx.standby}" if ctx.standby else "")
        return f"failover {ctx.journal.failover_id} of stack {ref.name}: {chain}"

    return run_frame(ref, steps, open_run, title=title, progress=progress, on_step=on_step, probe=True, stack=stack)


def _precheck(original: Topology, state: Path) -> None:
    """What must hold before a new failover starts a journal: the credentials of A and B resolve
    (decrypted from the stack as ``pulumi`` does). A refusal here leaves no journal behind."""
    from dr.estate.estate import Estate

    roles = Roles.of(original)
    estate = Estate(original, state)
    for cluster in (roles.source, roles.target):
        if not cluster.is_local:  # a local cluster's credentials are this machine's own
            estate.endpoint(cluster.name)


# ---------------------------------------------------------------------------------- its plan (--dry-run)
def desired_state_diff(stack_path: Path, desired: Topology) -> str:
    """The unified diff the failover will make to the stack file (only the values that change)."""
    return stack_file_diff(stack_path, desired)


def pulumi_preview(ref: StackRef, desired: Topology) -> PulumiPreview:
    """Pulumi's preview of the desired state, or why there is none (never provisioned, unreachable)."""
    stack = ref.name
    es = EstateStack(ref)
    if not es.exists():
        return {"error": f"stack {stack!r} was never provisioned here: run `drctl estate up --stack {stack}` first"}
    try:
        preview = es.preview_of(desired)
    except DRError as exc:
        return {"error": exc.problem}
    gone = [c.name for c in desired.clusters if c.role.value == "decommissioned"]
    note = (
        (
            f"users, topics and ACLs of {', '.join(gone)} show as deletes here; the failover forgets them from "
            "the state instead (they stay on the cluster as the fence left them)"
        )
        if gone
        else ""
    )
    return {"changes": preview.changes, "text": preview.text, "note": note}


def _actions(
    original: Topology, desired: Topology, mode: str, options: FailoverOptions, state: Path, stack_path: Path
) -> dict[str, str]:
    roles = Roles.of(original)
    A, B, C = roles.source, roles.target, roles.standby
    link = next((lk for lk in original.links_into(B.name) if lk.source == A.name), None)
    link_name = link.name if link else f"{A.name}-to-{B.name} (MISSING)"
    apps = [a.name for a in original.principals.applications]
    producers = [a.name for a in original.principals.applications if a.writes]
    groups = [a.consumer_group for a in original.principals.applications if a.consumer_group]
    topics = [t.name for t in topics_on(original, A) if link is None or link.selects_topic(t.name)]
    edge_links = edge_links_into(original, A.name)
    edges = ", ".join(f"{lk.name}" for lk in edge_links)
    producers = [a.name for a in applications_on(desired, Role.ACTIVE, B.name) if a.writes]
    new_links = ", ".join(f"{lk.source}→{lk.target}" for lk in desired.links) or "none"
    if mode == "planned":
        fence = (
            f"delete the ALLOW WRITE topic ACLs of {', '.join(apps)} on {A.name}; wait up to "
            f"{options.drain_timeout:.0f}s until link {link_name} lags 0 on every partition of "
            f"{', '.join(topics)}; past it refuse and restore the ACLs"
            + (f" (first stop the edge links {edges}, so {A.name} holds still)" if edge_links else "")
            + (" (--force: go on and accept the lag as loss)" if options.force else " (unless --force)")
        )
    else:
        fence = f"fence {A.name} only if it answers; no drain (unplanned)"
    standby = _standby_action(original, desired, B.name, C)
    compared = verified_topics(original, A.name, topics)
    copies = [t for t in topics if t not in compared]
    verify = (
        "skipped (--skip-verify)"
        if options.skip_verify
        else f"verify {A.name} vs {B.name} over {', '.join(compared) or 'no topic'} with the PySpark job when "
        f"{A.name} is readable; deferred otherwise"
        + (
            f" (the edge copies {', '.join(copies)} are not compared with {A.name}: on {B.name} they gain what "
            f"the edges wrote after {A.name} was lost; check them against their edges: "
            + ", ".join(f"`drctl verify --stack {original.name} --edge {lk.source}`" for lk in edge_links)
            + ")"
            if copies
            else ""
        )
    )
    decom = (
        f"stop {A.name} (data kept)"
        if A.kind is Kind.LOCAL
        else f"forget {A.name}'s users, topics and ACLs from the stack (nothing deleted on {A.name}: its topics "
        "and data stay, the fence stays)"
    ) + (
        " even without a clean verdict (--force-decommission)"
        if options.force_decommission
        else " only on a clean verdict"
    )
    return {
        "preflight": f"check {B.name} (brokers, offline partitions, topics), link {link_name} lag per partition, "
        f"{A.name} reachability",
        "fence-drain": fence,
        "promote": f"stop link {link_name}; grant write ACLs on {B.name} to {', '.join(producers) or 'nobody'}"
        + (
            f"; stop the edge links {edges} and record, per edge partition, where {B.name}'s copy ended "
            f"(each re-pointed edge link resumes there: no gap)"
            if edge_links
            else ""
        )
        + (
            f"; switch the client endpoint {original.endpoint.bootstrap} to {B.name} and close its sessions "
            f"to {A.name} (HAProxy runtime API, no restart)"
            if original.endpoint is not None
            else ""
        ),
        "consumer-groups": f"check translated offsets on {B.name} of groups {', '.join(groups) or '(none)'}",
        "desired-state": f"write {stack_path} (roles: {', '.join(f'{c.name}={c.role.value}' for c in desired.clusters)}"
        f"; links: {new_links}) and `pulumi up` the stack: {standby}",
        "clients": f"write {state / 'clients'}/<app>.properties and .json (mode 0600) for "
        f"{', '.join(a.name for a in applications_on(desired, Role.ACTIVE, B.name))}",
        "integrity": verify,
        "decommission": decom,
    }


def _standby_action(original: Topology, desired: Topology, b: str, c: Any) -> str:
    """What converging the desired state does to C, in the words of its kind."""
    if c is None:
        return "no standby declared: no new passive cluster"
    link = next((lk for lk in desired.links if lk.source == b and lk.target == c.name), None)
    if link is not None and desired.placement(link) is Placement.CONNECT:
        runner = f"the link {link.name} as MirrorMaker 2 connectors on Connect cluster {link.connect}"
    elif link is not None and link.engine.value == "cluster-link":
        runner = f"the cluster link {link.name}"
    else:
        runner = f"MirrorMaker 2 {b}-to-{c.name}"
    if c.kind is Kind.LOCAL:
        return f"start {c.name} ({c.brokers} broker(s)) with its users, topics and ACLs, then {runner}"
    return f"create on {c.kind.value} cluster {c.name} (already running) its users, topics and ACLs, then {runner}"


class SourceSeen(TypedDict):
    """A's name and whether it answers (:func:`~dr.failover.act.health.reachability`)."""

    name: str
    reachable: bool
    brokers: int | None
    error: str | None


class TargetSeen(TypedDict):
    """B's name and health (:class:`~dr.failover.act.health.ClusterHealth`, abridged)."""

    name: str
    healthy: bool
    reachable: bool
    brokers: list[int]
    offline: list[str]
    missing_topics: list[str]
    error: str | None


class Observations(TypedDict, total=False):
    """What a dry run read from the clusters when they answer, or the ``error`` that kept it from reading."""

    error: str
    source: SourceSeen
    target: TargetSeen
    endpoint: EndpointStatus
    lag_total: int
    lag: dict[str, int]
    """``{"topic:partition": records}`` the link has not copied yet."""
    lag_error: str


def _observe(original: Topology, state: Path) -> Observations:
    roles = Roles.of(original)
    A, B = roles.source, roles.target
    obs: Observations = {}
    local = [c.name for c in (A, B) if c.kind is Kind.LOCAL]
    if local and not (state / "credentials.json").exists():
        return {"error": f"the local estate of {', '.join(local)} was never started here ({state})"}
    estate = Estate(original, state)
    try:
        a_ep, b_ep = estate.endpoint(A.name), estate.endpoint(B.name)
    except (ConfigError, AuthError) as exc:
        return {"error": exc.problem}
    obs["source"] = {"name": A.name, **reachability(a_ep, timeout=3.0)}
    health = cluster_health(
        b_ep, expected_brokers=B.brokers if B.kind is Kind.LOCAL else None, topics=[t.name for t in original.topics]
    )
    obs["target"] = {
        "name": B.name,
        "healthy": health.healthy,
        "reachable": health.reachable,
        "brokers": health.brokers,
        "offline": health.offline,
        "missing_topics": health.missing_topics,
        "error": health.error,
    }
    if original.endpoint is not None:  # only then: the plan of estates without one is unchanged
        try:
            obs["endpoint"] = {
                "bootstrap": original.endpoint.bootstrap,
                "points_at": endpoint_pointing(original, state),
            }
        except DRError as exc:
            obs["endpoint"] = {"bootstrap": original.endpoint.bootstrap, "error": exc.problem}
    if obs["source"]["reachable"] and health.reachable:
        topics = [t.name for t in original.topics]
        try:
            link = next((lk for lk in original.links_into(B.name) if lk.source == A.name), None)
            stored = estate.copied_positions(link.name) if link and estate.runs_here(link.name) else None
            a_end = end_offsets(a_ep, topics)
            # a link running here: judged by its committed positions (B's ends count commit markers, not records)
            per = uncopied(a_ep, a_end, stored()) if stored else lag(a_end, end_offsets(b_ep, topics))
            obs["lag_total"] = sum(per.values())
            obs["lag"] = encode_offsets(per)
        except ClusterError as exc:
            obs["lag_error"] = exc.problem
    return obs


class ActivePassivePlan(FailoverPlan):
    """What ``drctl failover`` would do (``--dry-run``), step by step, with the stack-file diff."""

    dry_run: Literal[True] = True
    already_finished: Literal[False] = False
    mode: str
    resuming: bool
    failover_id: str | None
    """The journal's failover when the plan resumes one."""
    source: str
    target: str
    standby: str | None
    steps: list[PlanStep]
    desired_state_diff: str
    converger: str
    observations: Observations | None = None
    """Reachability, B's health and link lag, read when the clusters answer (None: not observed)."""
    pulumi_preview: PulumiPreview | None = None

    def render(self) -> str:
        """The plan for a person."""
        return _render(self)


def _refuse_foreign(ref: StackRef, journal: Journal | None) -> None:
    """A journal of other clusters is never planned as resumed (the dry run writes nothing: the next
    ``drctl failover`` archives it)."""
    from dr.failover.frame.identity import foreign_reason, refusal_text

    reason = foreign_reason(ref, journal) if journal is not None else None
    if journal is None or reason is None:
        return
    raise JournalMismatch(
        f"{refusal_text(ref, journal.failover_id, reason)}. Nothing was changed (a dry run writes nothing).",
        f"`drctl failover --stack {ref.name} --yes` archives that journal and refuses; the run after it starts a "
        f"new failover from the stack file (`drctl failover --stack {ref.name} --dry-run` then plans it)",
    )


def plan_failover(
    ref: StackRef, *, options: FailoverOptions, observe: bool = True, stack_file: StackFile | None = None
) -> ActivePassivePlan | FinishedPlan:
    """The failover plan of the stack ``ref`` (resuming its journal if one is unfinished); writes nothing.
    ``stack_file``: the stack file as the command read it (None: read here)."""
    stack, stack_path, state = ref.name, ref.existing_stack_file(), ref.made_state_dir()
    read = stack_file or read_stack_file(stack_path)
    journal = Journal.load(ref.failover_home)
    _refuse_foreign(ref, journal)
    if already_finished(journal, read):
        return FinishedPlan(stack=stack, summary=summarize(journal, already_finished=True))
    refuse_damaged_state(ref)
    original, desired, resuming = topologies(ref, read, journal, options.mode)
    resumed = journal if resuming else None
    mode = options.mode or (resumed.mode if resumed else "planned")
    if mode not in MODES:
        raise FailoverError(f"unknown mode {mode!r}.", "use --mode planned or --mode unplanned")
    roles = Roles.of(original)
    actions = _actions(original, desired, mode, options, state, stack_path)
    plan = ActivePassivePlan(
        stack=stack,
        mode=mode,
        resuming=resuming,
        failover_id=resumed.failover_id if resumed else None,
        source=roles.source.name,
        target=roles.target.name,
        standby=roles.standby_name,
        steps=[
            PlanStep(name=s.name, status=resumed.step(s.name).status if resumed else "pending", action=actions[s.name])
            for s in STEPS
        ],
        desired_state_diff=desired_state_diff(stack_path, desired),
        converger="pulumi (`pulumi up` of the stack through the Automation API)",
    )
    if observe:
        plan.observations = _observe(original, state)
        plan.pulumi_preview = pulumi_preview(ref, desired)
    return plan


def _render(p: ActivePassivePlan) -> str:
    """The dry-run plan: steps, the desired-state diff, observations."""
    chain = f"{p.source} → {p.target}" + (f" → {p.standby}" if p.standby else "")
    head = "resume" if p.resuming else "plan"
    lines = [f"DRY RUN — {head} of a {p.mode} failover of stack {p.stack}: {chain}; nothing is changed"]
    for i, st in enumerate(p.steps, 1):
        lines.append(f"  {i}. {st.name:<15} [{st.status}] {st.action}")
    lines.append(f"converger: {p.converger}")
    lines.append("desired state (stack file) diff:")
    lines.append(p.desired_state_diff.rstrip() or "  (no change)")
    preview = p.pulumi_preview or {}
    if preview.get("error"):
        lines.append(f"pulumi preview: not available — {preview['error']}")
    elif preview:
        lines.append("pulumi preview of the desired state:")
        lines.append(preview["text"].rstrip())
        if preview.get("note"):
            lines.append(f"note: {preview['note']}")
    obs = p.observations
    if obs:
        if obs.get("error"):
            lines.append(f"observed: {obs['error']}")
        else:
            src, tgt = obs["source"], obs["target"]
            lines.append(
                f"observed: {src['name']} {'reachable' if src['reachable'] else 'UNREACHABLE'}; "
                f"{tgt['name']} {'healthy' if tgt['healthy'] else 'NOT healthy'}"
                + (f"; link lag {obs['lag_total']} records" if "lag_total" in obs else "")
            )
        if ep := obs.get("endpoint"):
            lines.append(f"observed: client endpoint {ep['bootstrap']} {endpoint_text(ep)}")
    return "\n".join(lines)
