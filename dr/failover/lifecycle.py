"""The lifecycle around a failover: a link stopped and started alone, the old cluster made the next standby.

* :func:`link_stop` / :func:`link_start` — the MirrorMaker 2 process of one link between two local
  clusters (``drctl link stop|start``). A link whose source was failed over is never started again
  (:func:`restart_refusal`): the records ``drctl recover`` replayed went to the target directly, and
  the link would copy them a second time from the positions it had reached on the old source.
* :func:`make_standby` — the old active cluster, decommissioned by a completed failover, is wiped
  and declared ``standby`` (``drctl estate standby``): its role is rewritten in the stack file and
  ``pulumi up`` deletes its cluster resource (processes stopped, data removed). The next
  ``drctl failover`` makes it the passive cluster again, A→B→C then B→C→A.

The checks are pure functions of the topology and the failover journals (:func:`find_link`,
:func:`restart_refusal`, :func:`standby_refusal`, :func:`standby_topology`); the commands hold the
stack's failover lock while they act, so they never run beside a failover. Importing this module
starts nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from dr.base.errors import ClusterError, ConfigError, DRError, FailoverError, LockHeld
from dr.base.types import Model, Reporter
from dr.estate.stack import EstateStack, PulumiPreview
from dr.runtime.process import pid_alive
from dr.topology import Engine, Placement, Role, Topology, load_stack_file, stack_file_diff, write_stack_config
from verification.link_ref import LinkRef

if TYPE_CHECKING:
    from dr.base.stackref import StackRef
    from dr.failover.frame.journal import StackLock
    from dr.failover.record.journal_doc import JournalDocument
    from dr.runtime.links import LinkRunner
    from dr.topology import Link

__all__ = [
    "LinkChange",
    "StandbyRebuild",
    "destroy_estate",
    "find_link",
    "former_link",
    "journals",
    "link_start",
    "link_stop",
    "make_standby",
    "restart_refusal",
    "standby_plan",
    "standby_refusal",
    "standby_topology",
]


#: Journal statuses after which a failover is over (the other ones: running, pending, failed, interrupted).
_FINISHED = "completed"


def _quiet(_message: str) -> None:
    return None


# ------------------------------------------------------------------------------------ journals
def journals(home: Path) -> list[JournalDocument]:
    """The stack's failover journals (under ``home``: :attr:`dr.base.stackref.StackRef.failover_home`) as data, the current one first, then the archived ones newest first.

    The current journal is read with :meth:`dr.failover.frame.journal.Journal.load` (a damaged one is a
    ConfigError); an archived one that cannot be read is left out.
    """
    # The journal loads the Kafka client (its probe results): only when read, so importing this module
    # loads neither confluent-kafka nor Pulumi.
    from dr.failover.frame.journal import Journal

    found: list[JournalDocument] = []
    current = Journal.load(Path(home))
    if current is not None:
        found.append(current.record.to_json())
    archive = Path(home) / "failover"
    older = (
        sorted(archive.glob("journal-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        if archive.is_dir()
        else []
    )
    for path in older:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found.append(cast("JournalDocument", data))
    return found


def _chain(journal: JournalDocument) -> str:
    chain = f"{journal.get('source')} → {journal.get('target')}"
    return chain + (f" → {journal['standby']}" if journal.get("standby") else "")


def _link_past(journal: JournalDocument) -> bool:
    """True when the failover of ``journal`` reached the step that stops the link (promote) — or
    its steps cannot be read, which counts as reached."""
    steps = journal.get("steps")
    if not isinstance(steps, dict) or not isinstance(steps.get("promote"), dict):
        return True
    return bool(steps["promote"].get("status", "pending") != "pending")


# ------------------------------------------------------------------------------------ links (pure)
def former_link(name: str, history: list[JournalDocument]) -> tuple[dict[str, Any], JournalDocument] | None:
    """``(link, journal)`` when a failover in ``history`` replaced a link called ``name`` (it was in the
    topology before that failover), newest first; None otherwise."""
    for journal in history:
        config = journal.get("original_config") or {}
        links = config.get("kafka-dr:links") if isinstance(config, dict) else None
        for link in links or []:
            if isinstance(link, dict) and link.get("name") == name:
                return link, journal
    return None


def _restart_error(
    stack: str, name: str, source: str, target: str, journal: JournalDocument | None, why: str
) -> FailoverError:
    problem = (
        f"link {name} ({source} → {target}) is not started: {why}. After a failover the records "
        f"`drctl recover` replayed were written to {target} directly, and a restarted link would copy "
        f"them again from the positions it had reached on {source}: each would arrive twice."
    )
    if journal is not None and journal.get("status") != _FINISHED:
        fix = (
            f"do not restart it; finish the failover first (`drctl failover --stack {stack} --yes`, and "
            f"`drctl recover --report <dir>` if its verification lists records missing), then wipe {source} "
            f"and declare it the next standby: `drctl estate standby --stack {stack} --cluster {source} --yes`"
        )
    else:
        fix = (
            f"do not restart it; to use {source} again, wipe it and declare it the next standby: "
            f"`drctl estate standby --stack {stack} --cluster {source} --yes` — the next "
            "`drctl failover` links it afresh"
        )
    return FailoverError(problem, fix)


def find_link(topology: Topology, name: str, history: list[JournalDocument]) -> Link:
    """The link ``name`` of the current topology, if ``drctl link`` may act on it.

    Raises FailoverError when a failover replaced it (it is in a journal's original topology
    only), ConfigError when no such link is declared (naming the declared ones) or when either
    end is not a local cluster (naming the tooling that runs it).
    """

    link = next((lk for lk in topology.links if lk.name == name), None)
    if link is None:
        former = former_link(name, history)
        if former is not None:
            old, journal = former
            why = (
                f"failover {journal.get('failover_id')} ({_chain(journal)}, {journal.get('status')}) replaced it; "
                f"the topology no longer declares it"
            )
            raise _restart_error(topology.name, name, str(old.get("source")), str(old.get("target")), journal, why)
        known = ", ".join(lk.name for lk in topology.links) or "(none)"
        raise ConfigError(f"stack '{topology.name}' declares no link {name!r}.", f"use one of: {known}")
    if link.engine is Engine.CLUSTER_LINK:
        raise ConfigError(
            f"link {name} is a Confluent Cloud cluster link ({link.source} → {link.target}); it does not run "
            "on this machine.",
            "it is managed by Confluent Cloud through the stack (`pulumi up`); pause or resume its mirror "
            "topics with the Confluent CLI (`confluent kafka mirror pause|resume`)",
        )
    if topology.placement(link) is Placement.ELSEWHERE:
        outside = [n for n in (link.source, link.target) if not topology.cluster(n).is_local]
        raise ConfigError(
            f"link {name} ({link.source} → {link.target}) joins {' and '.join(outside)}, which "
            f"{'does' if len(outside) == 1 else 'do'} not run on this machine: its MirrorMaker 2 runs on "
            "Kafka Connect, not here.",
            f"pause or resume its connectors with your Kafka Connect cluster's REST API "
            f"(`drctl connect-config --stack {topology.name} --link {name}` prints their configs)",
        )
    return link


def restart_refusal(topology: Topology, link: Link, history: list[JournalDocument]) -> FailoverError | None:
    """Why ``link`` must not be started again, or None: its source is decommissioned in the stack,
    or the last failover (``history[0]``) failed it over and got as far as stopping the link."""

    source = topology.cluster(link.source)
    last = history[0] if history else None
    why: str | None = None
    if source.role is Role.DECOMMISSIONED:
        why = f"its source {link.source} is decommissioned in the stack"
    elif last is not None and last.get("source") == link.source and _link_past(last):
        why = (
            f"its source {link.source} was failed over by failover {last.get('failover_id')} "
            f"({_chain(last)}, {last.get('status')})"
        )
    if why is None:
        return None
    return _restart_error(topology.name, link.name, link.source, link.target, last, why)


# ------------------------------------------------------------------------------------ links (commands)
def _load(stack_path: Path) -> Topology:
    return load_stack_file(stack_path)


def _locked(home: Path, stack: str, what: str) -> StackLock:
    from dr.failover.frame.journal import StackLock

    lock = StackLock(home, stack)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise LockHeld(f"cannot {what}: {exc.problem}", exc.fix) from None
    return lock


class LinkChange(LinkRef):
    """What ``drctl link stop|start`` reports: the link (its :class:`~verification.link_ref.LinkRef`), its
    state before and after, the seconds taken."""

    was: str
    now: str
    seconds: float


class StandbyPlan(TypedDict):
    """What ``drctl estate standby --dry-run`` shows (:func:`standby_plan`)."""

    stack: str
    cluster: str
    old_role: str
    new_role: str
    process: str
    data_to_remove: str | None
    stack_file_diff: str
    pulumi_preview: NotRequired[PulumiPreview]


class StandbyRebuild(Model):
    """The old active cluster declared, wiped, as the next standby (:func:`make_standby`)."""

    stack: str
    cluster: str
    old_role: str
    new_role: str
    stack_file: str
    stack_file_changed: bool
    data_removed: str
    removed_by: str
    stopped_pids: list[int]
    pulumi_up_s: float | None
    seconds: float
    next: list[str]


def link_stop(ref: StackRef, name: str, progress: Reporter = _quiet) -> LinkChange:
    """Stop the MirrorMaker 2 process of link ``name`` (its positions stay on the target); return what was done.

    The stack still declares the link: ``drctl status`` then exits non-zero until it runs again
    (``drctl link start``, or ``drctl estate up --refresh``).
    """
    from dr.estate.estate import Estate

    stack, stack_path, state = ref.name, ref.existing_stack_file(), ref.made_state_dir()
    t0 = time.monotonic()
    lock = _locked(ref.made_failover_home(), stack, f"stop link {name}")
    try:
        topology = _load(stack_path)
        link = find_link(topology, name, journals(ref.failover_home))
        mirror = Estate(topology, state).link_runner(link.name)
        was = _runner_state(mirror)
        progress(f"link {name} ({link.source} → {link.target}): {was}; stopping")
        mirror.stop()
        if mirror.alive():
            where = mirror.log_hint() or f"look at `drctl status --stack {stack}` (connector states)"
            raise ClusterError(f"link {name} is still running after the stop.", where)
    finally:
        lock.release()
    return _link_result(stack, name, link, was, "stopped", t0)


def _runner_state(runner: LinkRunner) -> str:
    """``running``, ``task dead`` (it runs, a task of it died: :meth:`LinkRunner.failure`) or ``stopped``."""
    if runner.failure() is not None:
        return "task dead"
    return "running" if runner.alive() else "stopped"


def _link_result(stack: str, name: str, link: Link, was: str, now: str, t0: float) -> LinkChange:
    return LinkChange(
        stack=stack,
        link=name,
        source=link.source,
        target=link.target,
        was=was,
        now=now,
        seconds=round(time.monotonic() - t0, 3),
    )


def _cluster_ready(stack: str, estate: Any, cluster: str, side: str, link: str) -> None:
    state = estate.local_cluster(cluster).state()
    if state in ("running", "degraded"):
        return
    role = estate.topology.cluster(cluster).role.value
    if state == "absent":
        raise ClusterError(
            f"cluster {cluster} ({side} of link {link}, {role}) does not exist on this machine.",
            f"provision it first: `drctl estate up --stack {stack}`",
        )
    raise ClusterError(
        f"cluster {cluster} ({side} of link {link}, {role}) is stopped.",
        f"start it with its data first: `drctl estate up --stack {stack} --refresh` (or "
        f"`drctl estate start --stack {stack} --cluster {cluster}`), then start the link again",
    )


def link_start(ref: StackRef, name: str, progress: Reporter = _quiet) -> LinkChange:
    """Start the MirrorMaker 2 process of link ``name`` again; return what was done.

    It resumes from the positions it had reached (kept on the target). Refused: a link the
    topology does not declare, an external link, a link whose source was failed over
    (:func:`restart_refusal`), and a link whose source or target cluster is not running.
    """
    from dr.estate.estate import Estate

    stack, stack_path, state = ref.name, ref.existing_stack_file(), ref.made_state_dir()
    t0 = time.monotonic()
    lock = _locked(ref.made_failover_home(), stack, f"start link {name}")
    try:
        topology = _load(stack_path)
        history = journals(ref.failover_home)
        link = find_link(topology, name, history)
        refusal = restart_refusal(topology, link, history)
        if refusal is not None:
            raise refusal
        estate = Estate(topology, state)
        mirror = estate.link_runner(link.name)
        if mirror.alive():
            progress(f"link {name} ({link.source} → {link.target}) is already running")
            was = "running"
        else:
            was = _runner_state(mirror)
            _cluster_ready(stack, estate, link.source, "source", name)
            _cluster_ready(stack, estate, link.target, "target", name)
            # the stack declares the replicator's user and ACLs (stacks/access.py): resume grants nothing
            progress(f"link {name} ({link.source} → {link.target}): {mirror.resuming()}")
            mirror.resume()
    finally:
        lock.release()
    return _link_result(stack, name, link, was, "running", t0)


# ------------------------------------------------------------------------------------ destroy
def destroy_estate(ref: StackRef, destroy: Callable[[], None], progress: Reporter = _quiet) -> Path | None:
    """``drctl estate down --destroy``: run ``destroy`` (``pulumi destroy`` of the stack) holding the
    stack's failover lock — never beside a failover — then end the stack's failover journal: its
    clusters are gone, so it is archived (:meth:`dr.failover.frame.journal.Journal.abandon`), never resumed.
    Returns where the journal was archived (None: there was none)."""
    from dr.failover.frame.journal import Journal

    home = ref.made_failover_home()
    lock = _locked(home, ref.name, f"destroy the estate of stack {ref.name}")
    try:
        destroy()
        journal = Journal.load(home)
        if journal is None:
            return None
        status = journal.status
        where = journal.abandon(
            f"the estate was destroyed (`drctl estate down --destroy`) while this failover was {status}",
            by="drctl estate down --destroy",
        )
    finally:
        lock.release()
    progress(f"failover {journal.failover_id} ({status}): its clusters are destroyed; journal archived to {where}")
    return where


# ------------------------------------------------------------------------------------ standby (pure)
def standby_refusal(topology: Topology, cluster: str, last: JournalDocument | None) -> DRError | None:
    """Why ``cluster`` may not be wiped and declared standby now, or None.

    It must be a local cluster (ConfigError otherwise, as for an unknown one) whose role is
    ``decommissioned``; the stack's last failover (``last``: its journal data), if any, must be
    ``completed`` — until then its data may hold records recovery still needs (FailoverError).
    A cluster already ``standby`` is not refused (the command then only finishes the convergence).
    """

    stack = topology.name
    try:
        c = topology.cluster(cluster)
    except ConfigError as exc:
        return exc
    if not c.is_local:
        return ConfigError(
            f"cluster {cluster} is {c.kind.value}: drctl wipes only clusters it runs on this machine.",
            f"wipe it with its own tooling, then set `role: standby` for it under kafka-dr:clusters in "
            f"Pulumi.{stack}.yaml and check with `drctl failover --stack {stack} --dry-run`",
        )
    if c.role is Role.STANDBY:
        return None
    if c.role is not Role.DECOMMISSIONED:
        return FailoverError(
            f"cluster {cluster} is {c.role.value}: only a cluster a failover decommissioned can be wiped and "
            "declared the next standby.",
            f"fail {cluster} over first (`drctl failover --stack {stack} --dry-run` shows the plan)"
            if c.role.value == "active"
            else f"a {c.role.value} cluster is still in use; look at `drctl status --stack {stack}`",
        )
    if last is not None and last.get("status") != _FINISHED:
        status = last.get("status")
        reason = {
            "pending": "is waiting to verify and decommission its source",
            "failed": "failed",
            "interrupted": "was interrupted",
            "running": "is running or was interrupted",
        }.get(str(status), f"has status {status!r}")
        return FailoverError(
            f"cluster {cluster} is not wiped: the last failover of stack '{stack}', {last.get('failover_id')} "
            f"({_chain(last)}), {reason}; {cluster}'s data may hold records recovery still needs.",
            f"finish the failover first: `drctl failover --stack {stack} --yes` (and `drctl recover --report <dir>` "
            f"when its verification lists records missing), then run this again",
        )
    return None


def standby_topology(topology: Topology, cluster: str) -> Topology:
    """``topology`` with ``cluster``'s role set to ``standby``, validated again (pure)."""

    clusters = [c.model_copy(update={"role": Role.STANDBY}) if c.name == cluster else c for c in topology.clusters]
    return Topology.model_validate(
        {**{k: getattr(topology, k) for k in type(topology).model_fields}, "clusters": clusters}
    )


# ------------------------------------------------------------------------------------ standby (commands)
def _standby_inputs(stack_path: Path, home: Path, cluster: str) -> tuple[Topology, Topology, str]:
    topology = _load(stack_path)
    history = journals(home)
    refusal = standby_refusal(topology, cluster, history[0] if history else None)
    if refusal is not None:
        raise refusal
    return topology, standby_topology(topology, cluster), topology.cluster(cluster).role.value


def standby_plan(ref: StackRef, cluster: str, *, preview: bool = True) -> StandbyPlan:
    """What :func:`make_standby` would do (``drctl estate standby --dry-run``): the checks, the stack
    file diff, the data that would be removed and, with ``preview``, Pulumi's preview. Changes nothing."""
    from dr.estate.estate import Estate

    stack, stack_path, state = ref.name, ref.existing_stack_file(), ref.made_state_dir()
    topology, desired, old_role = _standby_inputs(stack_path, ref.failover_home, cluster)
    local = Estate(topology, state).local_cluster(cluster)
    plan: StandbyPlan = {
        "stack": stack,
        "cluster": cluster,
        "old_role": old_role,
        "new_role": "standby",
        "process": local.state(),
        "data_to_remove": str(local.dir) if local.dir.exists() else None,
        "stack_file_diff": stack_file_diff(stack_path, desired),
    }
    if preview:
        try:
            summary = EstateStack(ref).preview_of(desired)
            plan["pulumi_preview"] = {"changes": summary.changes, "text": summary.text}
        except DRError as exc:
            plan["pulumi_preview"] = {"error": exc.problem}
    return plan


def make_standby(ref: StackRef, cluster: str, progress: Reporter = _quiet) -> StandbyRebuild:
    """Wipe the decommissioned local cluster ``cluster`` and declare it the stack's next standby.

    Checks :func:`standby_refusal`; rewrites the cluster's role to ``standby`` in the stack file
    (only that value changes; comments and layout kept), then ``pulumi up`` deletes its cluster
    resource — every node stopped, its data directory removed — and checks both. Holds the
    stack's failover lock throughout. Running it again after an interruption finishes the job.

    Returns the :class:`StandbyRebuild`: ``cluster``, ``old_role``, ``new_role``, ``stack_file_changed``,
    ``data_removed`` (the directory that is gone), ``stopped_pids``, ``seconds`` and ``next``.
    """
    from dr.estate.estate import Estate

    stack, stack_path, state = ref.name, ref.existing_stack_file(), ref.made_state_dir()
    t0 = time.monotonic()
    lock = _locked(ref.made_failover_home(), stack, f"declare cluster {cluster} standby")
    try:
        topology, desired, old_role = _standby_inputs(stack_path, ref.failover_home, cluster)
        local = Estate(topology, state).local_cluster(cluster)
        pids = sorted(local.pids().values()) if local.dir.exists() else []
        changed = write_stack_config(stack_path, desired)
        progress(
            f"cluster {cluster}: role {old_role} → standby in {stack_path.name}"
            + ("" if changed else " (already written)")
        )
        progress(f"cluster {cluster}: `pulumi up` deletes its cluster resource (processes stopped, data removed)")
        timings = EstateStack(ref).up(desired, progress=progress)
        removed_by = "pulumi up"
        if local.dir.exists() or local.running_nodes():
            # The stack's state did not hold the cluster (e.g. started outside Pulumi): remove it here.
            progress(
                f"cluster {cluster}: the stack did not delete it (not in its state); stopping it and "
                "removing its data directly"
            )
            local.destroy()
            removed_by = "drctl (the stack's state did not hold the cluster)"
        alive = [p for p in pids if pid_alive(p)]
        if local.state() != "absent" or alive:
            raise ClusterError(
                f"cluster {cluster} is declared standby but was not wiped: "
                + (f"its data is still at {local.dir}" if local.dir.exists() else f"pids {alive} still run"),
                f"stop those processes and remove {local.dir}, then run "
                f"`drctl estate standby --stack {stack} --cluster {cluster} --yes` again",
            )
    finally:
        lock.release()
    progress(f"cluster {cluster}: absent (no process, no data); it is the standby of the next failover")
    return StandbyRebuild(
        stack=stack,
        cluster=cluster,
        old_role=old_role,
        new_role="standby",
        stack_file=str(stack_path),
        stack_file_changed=changed,
        data_removed=str(local.dir),
        removed_by=removed_by,
        stopped_pids=pids,
        pulumi_up_s=timings.get("pulumi up"),
        seconds=round(time.monotonic() - t0, 3),
        next=[
            f"`drctl failover --stack {stack} --dry-run` shows {cluster} as the standby of the next "
            "failover, which provisions it as the passive cluster"
        ],
    )
