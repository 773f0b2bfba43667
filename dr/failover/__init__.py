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

Rooms, from the ground up (no import runs back up): :mod:`~dr.failover.record` — what both the frame
and act write (:mod:`~dr.failover.record.metrics`, the journal's documents
:mod:`~dr.failover.record.journal_doc`, the team database :mod:`~dr.failover.record.team_store`);
:mod:`~dr.failover.act` — what touches Kafka (fencing, clients, groups, health, probe, the verification
adapter :mod:`~dr.failover.act.integrity`); :mod:`~dr.failover.frame` — what every run shares, never
asking the architecture (the steps' vocabulary :mod:`~dr.failover.frame.step`, the run loop
:mod:`~dr.failover.frame.run`: lock, journal, resume, RTO probe; :mod:`~dr.failover.frame.journal`,
:mod:`~dr.failover.frame.summary`, :mod:`~dr.failover.frame.plan`); :mod:`~dr.failover.lifecycle`
(standby, link stop/start) and :mod:`~dr.failover.status`; :mod:`~dr.failover.drill.frame` and its
siblings — what every drill shares; :mod:`~dr.failover.kind` — :class:`~dr.failover.kind.FailoverKind`,
what each architecture declares; :mod:`~dr.failover.kinds` — ``KINDS``, one ``FailoverKind`` per
architecture, each a folder with ``steps.py``, ``run.py`` (runs and plans), ``drill.py``. The commands are
:mod:`~dr.cli.failover`.
"""
