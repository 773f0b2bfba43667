"""The active-passive failover's run: A→B→C through the frame (:func:`dr.failover.frame.run.run_frame`).

Its topologies (:func:`topologies`: from the stack file, or from the journal of an unfinished run), its
journal, the check of A's and B's credentials before a journal is started, and :func:`run_failover`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dr.base.errors import FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal
from dr.failover.frame.roles import Roles
from dr.failover.frame.run import OnStep, new_context, run_frame, run_mode
from dr.failover.frame.step import Context, FailoverOptions, Step
from dr.failover.frame.summary import FailoverSummary, rerun_command
from dr.failover.kinds.active_passive.steps import STEPS
from dr.topology import StackFile, Topology, dump_stack_config, load_topology

__all__ = ["run_failover", "topologies"]


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
