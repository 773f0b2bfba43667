"""The failover pipeline: A→B→C as a change of desired state, then convergence (issue 5).

Public API (each name from its module, so that importing one of them — e.g. the lifecycle behind
``drctl link`` — loads neither Pulumi nor the Kafka client)::

    from dr.base.stackref import StackRef
    from dr.failover.pipeline import run_failover
    from dr.failover.steps import FailoverOptions

    stack = StackRef.resolve("local")   # which stack: name, stack file, state directory, backend
    summary = run_failover(stack, options=FailoverOptions(mode="planned"), progress=print)
    summary.rto_s, summary.a_b_c_s, summary.steps, summary.verdict   # a FailoverSummary

Results are pydantic models — :class:`~dr.failover.summary.FailoverSummary`,
:class:`~dr.failover.plan.FailoverPlan`, :class:`~dr.failover.journal.JournalRecord`,
:class:`~dr.failover.steps.StepResult` (its outcome one of :mod:`~dr.failover.outcomes`),
:class:`~dr.failover.integrity.Verdict`, :class:`~dr.failover.integrity.RecoveryReport`,
:class:`~dr.failover.lifecycle.StandbyRebuild`, :class:`~dr.failover.status.StatusReport` — and ``--json``
prints their ``model_dump(mode="json")``.

Modules: :mod:`~dr.failover.steps` (the eight steps), :mod:`~dr.failover.pipeline` (lock,
journal, resume, RTO probe), :mod:`~dr.failover.summary`, :mod:`~dr.failover.journal`, :mod:`~dr.failover.converge`
(stack-file write-back and the :class:`Converger` protocol; ``pulumi up`` of the stack converges),
:mod:`~dr.failover.fencing`,
:mod:`~dr.failover.groups`, :mod:`~dr.failover.clients`, :mod:`~dr.failover.integrity` (the
verification adapter), :mod:`~dr.failover.metrics` (pure RPO/RTO/re-read computations),
:mod:`~dr.failover.plan` (``--dry-run``), :mod:`~dr.failover.status`, :mod:`~dr.failover.drill`,
:mod:`~dr.failover.lifecycle` (standby, link stop/start); the commands are :mod:`~dr.cli.failover`.
"""
