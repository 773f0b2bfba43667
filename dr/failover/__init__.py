"""The failover pipeline: A→B→C as a change of desired state, then convergence (issue 5).

Public API (each name from its module, so that importing one of them — e.g. the lifecycle behind
``drctl link`` — loads neither Pulumi nor the Kafka client)::

    from dr.base.stackref import StackRef
    from dr.failover.kinds.active_passive.run import run_failover
    from dr.failover.frame.step import FailoverOptions

    stack = StackRef.resolve("local")   # which stack: name, stack file, state directory, backend
    summary = run_failover(stack, options=FailoverOptions(mode="planned"), progress=print)
    summary.rto_s, summary.a_b_c_s, summary.steps, summary.verdict   # a FailoverSummary

Results are pydantic models — :class:`~dr.failover.frame.summary.FailoverSummary`,
:class:`~dr.failover.frame.plan.FailoverPlan`, :class:`~dr.failover.frame.journal.JournalRecord`,
:class:`~dr.failover.frame.step.StepResult` (its outcome one of :mod:`~dr.failover.frame.outcomes`),
:class:`~dr.failover.act.integrity.Verdict`, :class:`~dr.failover.act.integrity.RecoveryReport`,
:class:`~dr.failover.lifecycle.StandbyRebuild`, :class:`~dr.failover.status.StatusReport` — and ``--json``
prints their ``model_dump(mode="json")``.

Modules: :mod:`~dr.failover.kinds.active_passive.steps` (the eight steps), :mod:`~dr.failover.frame.run` (lock,
journal, resume, RTO probe), :mod:`~dr.failover.frame.summary`, :mod:`~dr.failover.frame.journal`, :mod:`~dr.failover.frame.converge`
(stack-file write-back and the :class:`Converger` protocol; ``pulumi up`` of the stack converges),
:mod:`~dr.failover.act.fencing`,
:mod:`~dr.failover.act.groups`, :mod:`~dr.failover.act.clients`, :mod:`~dr.failover.act.integrity` (the
verification adapter), :mod:`~dr.failover.frame.metrics` (pure RPO/RTO/re-read computations),
:mod:`~dr.failover.kinds.active_passive.plan` (``--dry-run``), :mod:`~dr.failover.status`, :mod:`~dr.failover.kinds.active_passive.drill`,
:mod:`~dr.failover.lifecycle` (standby, link stop/start); the commands are :mod:`~dr.cli.failover`.
"""
