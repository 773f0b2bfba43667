"""The failover's gate: the verification (``verification/``, issue 4) behind a small adapter.

The pipeline only calls :func:`verify`, :func:`recover` and :func:`missing_records`. They build typed
requests (:mod:`verification.route`) and hand them to the one place that chooses a route,
:func:`verification.routes.run`; both are imported with this module (they load no Spark: the route
modules load when a request runs). When a route cannot be imported (pyspark missing), the
integrity step fails loudly with :class:`~dr.base.errors.FailoverError` — it never passes silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from dr.base.errors import FailoverError
from dr.base.types import Model
from dr.base.types import Reporter as Progress
from dr.failover.record.journal_doc import VerdictDocument
from dr.kafka import offsets
from dr.kafka.client import Endpoint
from verification import routes
from verification.link_ref import LinkRef
from verification.result import StartedFrom
from verification.route import AuditStart, RecoverRequest, VerifyRequest
from verification.sides import KafkaSide

__all__ = ["CLASSES", "RecoveryReport", "Verdict", "missing_records", "recover", "topics_left_unread", "verify"]

#: The verification's classes of offending records.
CLASSES = ("missing", "unexpected", "duplicated", "corrupted")


class Verdict(BaseModel):
    """What the verification of source vs target found (the dr side of the verification's summary)."""

    model_config = ConfigDict(frozen=True)

    clean: bool
    counts: dict[str, int]
    """Records per class: ``missing``, ``unexpected``, ``duplicated``, ``corrupted``."""
    per_topic: dict[str, dict[str, int]] = Field(default_factory=dict)
    report_dir: str = ""
    html: str = ""
    cutoff_ms: int | None = None
    seconds: float = 0.0
    started_from: StartedFrom | None = None
    """``{"audit": True, ...}`` — the audit of the link it started from, its bounds and the records
    not read again — or ``{"audit": False, "reason": ...}`` when the full verification ran."""

    def to_dict(self) -> VerdictDocument:
        """JSON form (for the journal and ``--json``)."""
        return cast(VerdictDocument, self.model_dump(mode="json"))


class RecoveryReport(Model):
    """What recovery replayed (:class:`verification.recover.RecoveryResult`, as JSON)."""

    report_dir: str
    dry_run: bool
    missing: int
    already_present: int
    to_write: int
    written: int
    per_topic: dict[str, dict[str, int]]
    ledger: str | None
    run_id: str
    seconds: float

    def __getitem__(self, name: str) -> Any:
        """A figure by name, as the dict this adapter returned before (``report["written"]``)."""
        return getattr(self, name)


@contextmanager
def _route_loaded() -> Iterator[None]:
    """A route that cannot be imported (pyspark or pyarrow missing) fails the step, loudly."""
    try:
        yield
    except ImportError as exc:
        raise FailoverError(
            f"the verification job is not available: importing `verification` failed ({exc}).",
            "install the project with its verification package (make setup); until then the integrity "
            "step cannot pass — rerun with --skip-verify only if you verify by other means, and "
            "decommission with --force-decommission",
        ) from exc


def topics_left_unread(topics: list[str]) -> list[str]:
    """The topics among ``topics`` that the verification would not read (it takes them for internal
    bookkeeping): a failover refuses them in preflight, before A is fenced, rather than at the integrity
    step. Asks the verification's own rule (:func:`verification.cluster.is_internal_topic`)."""
    from verification.cluster import is_internal_topic

    return [t for t in topics if is_internal_topic(t)]


def verify(
    *,
    source: Endpoint,
    target: Endpoint,
    out_dir: Path,
    topics: list[str],
    cutoff_ms: int | None,
    target_until: Mapping[str, Mapping[int, int]] | None = None,
    stack: str | None = None,
    source_name: str | None = None,
    target_name: str | None = None,
    progress: Progress = lambda _m: None,
    context: dict[str, Any] | None = None,
    audit_link: str | None = None,
    state_dir: Path | None = None,
) -> Verdict:
    """Run the verification ``source`` vs ``target`` over ``topics`` (records after ``cutoff_ms`` left out).

    ``target_until`` (topic → partition → offset; the failover: B's end offsets just before the promotion
    granted writes) bounds the target by offset too, by whichever route runs
    (:attr:`verification.sides.KafkaSide.until`): a target record at or beyond it still matches a source
    record (a copy recovery wrote), but one that matches none — written on the promoted cluster, e.g. a
    record a client created while A was gone and delivered after the switch, stamped before the cut-off —
    is counted as after the cut-off (``target_after_cutoff``), never as unexpected; the report's cut-off
    line says so. None: every target record before the cut-off is compared, as before.

    With ``audit_link`` (the link A→B) and ``state_dir`` (the stack's state directory), the check
    starts from the last ``drctl audit`` of that link when its state file is valid for this stack,
    link and clusters (:mod:`verification.from_audit`): only what lies past the audited bounds and
    the audit's residue are read and compared; the report and its missing records are those
    ``drctl recover`` replays. Otherwise — no audit, a damaged or foreign state file, a large
    increment, target records that need the whole source to classify — the full job runs.
    ``Verdict.started_from`` says which, and why.

    When no topic holds a record on either side there is nothing to compare: no job runs. Otherwise
    the job gets every topic that exists on the source (it leaves the empty ones out and says so in
    the report) and those with records on the target only (the job refuses them: a topic the
    source lacks cannot be verified). ``context`` — the failover's id, mode, source, target,
    ``rto_s``, ``rpo_estimate`` and journal path — is shown at the top of the report.
    """
    t0 = time.monotonic()
    topics_read = _topics_to_verify(source, target, topics)
    if topics_read is None:
        return Verdict(
            clean=True,
            counts={c: 0 for c in CLASSES},
            cutoff_ms=cutoff_ms,
            report_dir="",
            html="(no records on either side: nothing to verify)",
        )
    audit = None
    if audit_link and stack and state_dir is not None and source_name and target_name:
        audit = AuditStart(
            state_dir=Path(state_dir),
            ref=LinkRef(stack=stack, link=audit_link, source=source_name, target=target_name),
        )
    request = VerifyRequest(
        source=KafkaSide(endpoint=source, name=source_name, stack=stack),
        target=KafkaSide(endpoint=target, name=target_name, stack=stack, until=target_until),
        out_dir=Path(out_dir),
        topics=topics_read,
        cutoff_ms=cutoff_ms,
        context=context,
        audit=audit,
    )
    with _route_loaded():
        result = routes.run(request, progress=progress)
    per_topic = {t: {c: int(row[c]) for c in CLASSES} for t, row in result.summary["topics"].items()}
    return Verdict(
        clean=result.clean,
        counts=result.counts(),
        per_topic=per_topic,
        report_dir=str(result.out_dir),
        html=str(Path(result.out_dir) / "report.html"),
        cutoff_ms=cutoff_ms,
        seconds=round(time.monotonic() - t0, 3),
        started_from=getattr(result, "started_from", None),
    )


def _topics_to_verify(source: Endpoint, target: Endpoint, topics: list[str]) -> list[str] | None:
    """The topics the job gets (on the source, or with records on the target); None when no topic holds a record."""

    ends = [offsets.end_offsets(source, topics), offsets.end_offsets(target, topics)]
    with_records = {t for side in ends for (t, _p), n in side.items() if n}
    if not with_records:
        return None
    on_source = {t for (t, _p) in ends[0]}
    return [t for t in topics if t in on_source or t in with_records]


def recover(
    report_dir: Path | str, *, source: Endpoint, target: Endpoint, progress: Progress = lambda _m: None
) -> RecoveryReport:
    """Replay the records a verification found missing (idempotent: a second run writes nothing)."""
    request = RecoverRequest(report_dir=Path(report_dir), source=source, target=target)
    with _route_loaded():
        result = routes.run(request, progress=progress)
    return RecoveryReport.model_validate(result.to_dict())


def missing_records(report_dir: Path | str) -> list[dict[str, Any]]:
    """The ``missing`` rows of a report: topic, partition, offset (source coordinates), key."""
    with _route_loaded():  # pyarrow, loaded when a report is read rather than with the failover
        from verification.report import read_offending

    table = read_offending(Path(report_dir), ["missing"])
    rows: list[dict[str, Any]] = table.select(["topic", "partition", "offset", "key"]).to_pylist()
    return rows
