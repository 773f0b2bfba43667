"""The one place that chooses a verification route for a request (:mod:`verification.route`).

``drctl verify`` / ``recover`` / ``audit`` (:mod:`dr.cli.verify`) and the failover's integrity step
(:mod:`dr.failover.act.integrity`) all call :func:`run`. A :class:`~verification.route.VerifyRequest` with
``audit`` set starts from the link's last audit when its state can be used, and runs the full Spark job
otherwise (the result's ``started_from`` says which, and why); without ``audit`` the full job runs.

The route modules are imported when a request runs, not with this module: the Spark job, the audit's
fingerprints and recovery pull in pyspark, pyarrow and confluent-kafka, which ``drctl --help`` and the
failover's other steps should not pay for at start-up.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, overload

from verification.progress import Reporter
from verification.route import (
    AuditRequest,
    FromAuditRequest,
    FullVerificationNeeded,
    RecoverRequest,
    Request,
    RouteResult,
    VerifyRequest,
)

if TYPE_CHECKING:  # the results' modules load with their routes (see the module docstring)
    from verification.audit import AuditResult
    from verification.recover import RecoveryResult
    from verification.result import StartedFrom, VerificationResult

__all__ = ["run"]


@overload
def run(request: VerifyRequest | FromAuditRequest, *, progress: Reporter | None = None) -> VerificationResult: ...
@overload
def run(request: AuditRequest, *, progress: Reporter | None = None) -> AuditResult: ...
@overload
def run(request: RecoverRequest, *, progress: Reporter | None = None) -> RecoveryResult: ...
def run(request: Request, *, progress: Reporter | None = None) -> RouteResult:
    """Run the route ``request`` asks for and return its result (see the module docstring)."""
    if isinstance(request, AuditRequest):
        from verification import audit

        return audit.run(request, progress=progress)
    if isinstance(request, RecoverRequest):
        from verification import recover

        return recover.run(request, progress=progress)
    if isinstance(request, FromAuditRequest):
        from verification import from_audit

        return from_audit.run(request, progress=progress)
    return _verify(request, progress)


def _verify(request: VerifyRequest, progress: Reporter | None) -> VerificationResult:
    """From the audit when ``request.audit`` names a usable one, else the full job."""
    from verification import job

    started_from: StartedFrom | None = None
    if request.audit is not None:
        try:
            return run(_from_audit(request), progress=progress)
        except FullVerificationNeeded as why:
            started_from = {"audit": False, "reason": str(why)}
    result = job.run(request, progress=progress)
    return result if started_from is None else replace(result, started_from=started_from)


def _from_audit(request: VerifyRequest) -> FromAuditRequest:
    """The request started from the audit; :class:`FullVerificationNeeded` when it cannot be made."""
    from verification.audit import state_file
    from verification.sides import KafkaSide

    start = request.audit
    if start is None:
        raise FullVerificationNeeded("the request names no audit")
    if not (isinstance(request.source, KafkaSide) and isinstance(request.target, KafkaSide)):
        raise FullVerificationNeeded("an audit reads Kafka clusters, not archives")
    try:
        path = state_file(start.state_dir, start.ref.link)
    except Exception as exc:  # a link name that cannot name a file: no audit state to use
        raise FullVerificationNeeded(str(exc)) from exc
    return FromAuditRequest(
        source=request.source,
        target=request.target,
        out_dir=request.out_dir,
        topics=list(request.topics or []),
        cutoff_ms=request.cutoff_ms,
        state_file=path,
        ref=start.ref,
        context=request.context,
    )
