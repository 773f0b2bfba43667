"""The ``desired-state`` step every run shares: the new topology written to the stack file, then converged.

A copy of the stack file is kept beside the journal first (``<stack file>.before-<failover id>``); the
write is guarded (:func:`dr.failover.frame.stack_guard.guarded_write`), and the converger is the run's
(``pulumi up`` of the stack through the Automation API unless a test gives its own).
"""

from __future__ import annotations

from dr.failover.frame.journal import failover_dir
from dr.failover.frame.outcomes import DesiredStateOutcome
from dr.failover.frame.step import Context, StepResult

__all__ = ["desired_state"]


def desired_state(ctx: Context) -> StepResult:
    """Write the new topology to the stack file and converge it (C with users, ACLs, topics, link B→C)."""
    backup = failover_dir(ctx.home) / f"{ctx.stack_path.name}.before-{ctx.journal.failover_id}"
    if not backup.exists():
        backup.write_text(ctx.stack_path.read_text())
    written = ctx.write_stack(ctx.desired)
    ctx.say(
        f"desired state written to {ctx.stack_path} ({'changed' if written else 'already there'}); "
        f"converging with {ctx.converger.name}"
    )
    timings = ctx.converger.converge(ctx.desired, ctx.progress)
    recovered = list(getattr(ctx.converger, "recovered", []))
    roles = {c.name: c.role.value for c in ctx.desired.clusters}
    links = [f"{lk.source}→{lk.target}" for lk in ctx.desired.links]
    return StepResult(
        "done",
        DesiredStateOutcome(
            stack_file=str(ctx.stack_path),
            written=written,
            backup=str(backup),
            converger=ctx.converger.name,
            timings=timings,
            roles=roles,
            links=links,
            recovered=recovered,
        ),
        f"roles {', '.join(f'{k}={v}' for k, v in roles.items())}; links {', '.join(links) or 'none'}; "
        f"converged by {ctx.converger.name}"
        + (f" (after repairing an interrupted run: {len(recovered)} repairs, see the journal)" if recovered else ""),
    )
