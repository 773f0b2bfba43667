"""The failover's gate: the verification job (``verification/``, issue 4) behind a small adapter.

The pipeline only calls :func:`verify`, :func:`recover` and :func:`missing_records`. The
``verification`` package (PySpark) is imported lazily, on the first call: when it cannot be
imported, the integrity step fails loudly with :class:`~dr.base.errors.FailoverError` — it never
passes silently.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dr.base.errors import FailoverError
from dr.estate.estate import Progress
from dr.kafka import offsets
from dr.kafka.client import Endpoint

__all__ = ["CLASSES", "Verdict", "missing_records", "recover", "verify"]

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
    started_from: dict[str, Any] | None = None
    """``{"audit": True, ...}`` — the audit of the link it started from, its bounds and the records
    not read again — or ``{"audit": False, "reason": ...}`` when the full verification ran."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for the journal and ``--json``)."""
        return self.model_dump(mode="json")


def _import_verification() -> Any:
    try:
        import verification
    except ImportError as exc:
        raise FailoverError(
            f"the verification job is not available: importing `verification` failed ({exc}).",
            "install the project with its verification package (make setup); until then the integrity "
            "step cannot pass — rerun with --skip-verify only if you verify by other means, and "
            "decommission with --force-decommission",
        ) from exc
    return verification


def verify(
    *,
    source: Endpoint,
    target: Endpoint,
    out_dir: Path,
    topics: list[str],
    cutoff_ms: int | None,
    stack: str | None = None,
    source_name: str | None = None,
    target_name: str | None = None,
    progress: Progress = lambda _m: None,
    context: dict[str, Any] | None = None,
    audit_link: str | None = None,
    state_dir: Path | None = None,
) -> Verdict:
    """Run the verification ``source`` vs ``target`` over ``topics`` (records after ``cutoff_ms`` left out).

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
    v = _import_verification()
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
    job: dict[str, Any] = {
        "source": v.KafkaSide(endpoint=source, name=source_name, stack=stack),
        "target": v.KafkaSide(endpoint=target, name=target_name, stack=stack),
        "out_dir": out_dir,
        "topics": topics_read,
        "cutoff_ms": cutoff_ms,
        "progress": progress,
    }
    result, started_from = None, None
    if audit_link and stack and state_dir is not None and source_name and target_name:
        result, started_from = _from_audit(job, context, Path(state_dir), stack, audit_link, source_name, target_name)
    if result is None:
        result = v.run_verification(**job, context=context)
    per_topic = {t: {c: int(row[c]) for c in CLASSES} for t, row in result.summary["topics"].items()}
    return Verdict(
        clean=result.clean,
        counts=result.counts(),
        per_topic=per_topic,
        report_dir=str(result.out_dir),
        html=str(Path(result.out_dir) / "report.html"),
        cutoff_ms=cutoff_ms,
        seconds=round(time.monotonic() - t0, 3),
        started_from=started_from,
    )


def _topics_to_verify(source: Endpoint, target: Endpoint, topics: list[str]) -> list[str] | None:
    """The topics the job gets (on the source, or with records on the target); None when no topic holds a record."""

    ends = [offsets.end_offsets(source, topics), offsets.end_offsets(target, topics)]
    with_records = {t for side in ends for (t, _p), n in side.items() if n}
    if not with_records:
        return None
    on_source = {t for (t, _p) in ends[0]}
    return [t for t in topics if t in on_source or t in with_records]


def _from_audit(
    job: dict[str, Any],
    context: dict[str, Any] | None,
    state_dir: Path,
    stack: str,
    link: str,
    source_name: str,
    target_name: str,
) -> tuple[Any, dict[str, Any] | None]:
    """The check started from the link's last audit: ``(result, started_from)``; the result is None when
    no audit state can be used (``started_from`` then says why, or is None when the job decides later)."""
    from verification.audit import state_file
    from verification.from_audit import verify_from_audit

    try:
        path = state_file(state_dir, link)
    except Exception as exc:  # a link name that cannot name a file: no audit state to use
        return None, {"audit": False, "reason": str(exc)}
    started = verify_from_audit(
        **job,
        state_file=path,
        stack=stack,
        link=link,
        source_cluster=source_name,
        target_cluster=target_name,
        context=context,
    )
    return started.result, started.started_from


def recover(
    report_dir: Path | str, *, source: Endpoint, target: Endpoint, progress: Progress = lambda _m: None
) -> dict[str, Any]:
    """Replay the records a verification found missing (idempotent: a second run writes nothing)."""
    _import_verification()
    # by name from its module: once the submodule verification.recover is imported (the check
    # started from an audit reads records back with it), the package attribute is that module
    from verification.recover import recover as replay

    return replay(report_dir, source=source, target=target, progress=progress).to_dict()


def missing_records(report_dir: Path | str) -> list[dict[str, Any]]:
    """The ``missing`` rows of a report: topic, partition, offset (source coordinates), key."""
    _import_verification()
    from verification.report import read_offending

    table = read_offending(Path(report_dir), ["missing"])
    rows: list[dict[str, Any]] = table.select(["topic", "partition", "offset", "key"]).to_pylist()
    return rows
