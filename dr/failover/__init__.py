"""The failover pipeline: A→B→C as a change of desired state, then convergence (issue 5).

Public API::

    from dr.failover import FailoverOptions, run_failover, plan_failover, status_report, run_drill

    summary = run_failover(stack="local", stack_path=path, state=state_dir,
                           options=FailoverOptions(mode="planned"), progress=print)
    summary.rto_s, summary.a_b_c_s, summary.steps, summary.verdict   # a FailoverSummary

Results are pydantic models — :class:`~dr.failover.summary.FailoverSummary`,
:class:`~dr.failover.plan.FailoverPlan`, :class:`~dr.failover.journal.JournalRecord`,
:class:`~dr.failover.steps.StepResult`, :class:`~dr.failover.integrity.Verdict`,
:class:`~dr.failover.status.StatusReport` — and ``--json``
prints their ``model_dump(mode="json")``.

Modules: :mod:`~dr.failover.steps` (the eight steps), :mod:`~dr.failover.pipeline` (lock,
journal, resume, RTO probe), :mod:`~dr.failover.summary`, :mod:`~dr.failover.journal`, :mod:`~dr.failover.converge`
(stack-file write-back and the :class:`Converger` protocol; ``pulumi up`` of the stack converges),
:mod:`~dr.failover.fencing`,
:mod:`~dr.failover.groups`, :mod:`~dr.failover.clients`, :mod:`~dr.failover.integrity` (the
verification adapter), :mod:`~dr.failover.metrics` (pure RPO/RTO/re-read computations),
:mod:`~dr.failover.plan` (``--dry-run``), :mod:`~dr.failover.status`, :mod:`~dr.failover.drill`,
:mod:`~dr.failover.commands` (``drctl failover|status|drill``).
"""

from dr.failover.converge import Converger, PulumiConverger, write_stack_config
from dr.failover.drill import run_drill
from dr.failover.journal import Journal, JournalRecord, StackLock
from dr.failover.pipeline import run_failover
from dr.failover.plan import FailoverPlan, plan_failover
from dr.failover.status import StatusReport, status_report
from dr.failover.steps import STEPS, FailoverOptions, StepResult
from dr.failover.summary import FailoverSummary, summarize

__all__ = [
    "STEPS",
    "Converger",
    "FailoverOptions",
    "FailoverPlan",
    "FailoverSummary",
    "Journal",
    "JournalRecord",
    "PulumiConverger",
    "StackLock",
    "StatusReport",
    "StepResult",
    "plan_failover",
    "run_drill",
    "run_failover",
    "status_report",
    "summarize",
    "write_stack_config",
]
