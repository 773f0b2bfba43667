"""What one verification produces, light on purpose (no Spark import): :class:`VerificationResult`,
the common part of ``summary.json`` (:func:`summary_document`) and the caller's context made safe.

Both ways of verifying build their summary here — the Spark job (:mod:`verification.job`) and the
check started from an audit (:mod:`verification.from_audit`) — so the report, ``drctl recover`` and
the failover read one shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.errors import ConfigError, VerificationFailed
from verification.classes import CLASSES, totals_of
from verification.report import OFFENDING_DIR, iso, utc_text
from verification.route import RouteResult
from verification.sides import Side

__all__ = ["CHECKSUM_DESCRIPTION", "KEY_HASH_DESCRIPTION", "VerificationResult", "safe_context", "summary_document"]

CHECKSUM_DESCRIPTION = (
    "xxhash64(value IS NULL, value, size(headers), "
    "transform(headers, h -> struct(h.key, h.value IS NULL, h.value))) — Spark built-in, seed 42"
)


#: Context keys never written to the summary (a caller's mistake must not leak a credential).
_SECRET_WORDS = ("password", "secret", "token", "jaas", "credential")


class StartedFrom(TypedDict, total=False):
    """Where a verification started: ``audit`` True with the audit it started from
    (:func:`verification.from_audit.started_from`), or False with the ``reason`` the full job ran."""

    audit: bool
    reason: str
    state_file: str
    link: str
    audit_runs: int
    audited_at_ms: int
    audited_at_utc: str
    verified_by_audits: int
    skipped_source: int
    skipped_target: int
    residue_source: int
    residue_target: int
    read_source: int
    read_target: int
    lost_source: int
    lost_target: int
    bounds: dict[str, dict[str, dict[str, int]]]
    """side → topic → partition → the audit's bound there."""
    missing_gone_from_source: int


@dataclass(frozen=True)
class VerificationResult(RouteResult):
    """The outcome of one verification (the full job, or started from an audit): the summary (as
    written), where the report is, and — started from an audit — what the audit spared."""

    summary: dict[str, Any]
    out_dir: Path
    started_from: StartedFrom | None = None
    """``{"audit": True, ...}`` (:func:`verification.from_audit.started_from`) or ``{"audit": False,
    "reason": ...}`` when the full job ran in place of an audit that could not be used; None otherwise."""

    @property
    def verdict(self) -> str:
        """``clean`` or ``differences``, as ``summary.json`` says."""
        return str(self.summary["verdict"])

    @property
    def report(self) -> Path:
        """The report directory."""
        return self.out_dir

    @property
    def clean(self) -> bool:
        """True when no record is missing, unexpected, duplicated or corrupted."""
        return bool(self.summary["verdict"] == "clean")

    def counts(self, topic: str | None = None) -> dict[str, int]:
        """Counts per class, for one topic or in total."""
        src = self.summary["topics"][topic] if topic else self.summary["totals"]
        return {c: int(src[c]) for c in CLASSES}

    def raise_for_verdict(self) -> None:
        """Raise :class:`VerificationFailed` (exit code 1) unless the verdict is clean."""
        if not self.clean:
            t = self.summary["totals"]
            found = ", ".join(f"{t[c]} {c}" for c in CLASSES if t[c])
            raise VerificationFailed(
                f"verification found differences: {found} (report in {self.out_dir}).",
                f"open {self.out_dir / 'report.html'}; replay missing records with "
                f"`drctl recover --report {self.out_dir}`",
            )


def safe_context(context: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caller's context (a failover's id, mode, RTO, RPO, journal) as JSON, without secret-looking keys."""
    if context is None:
        return None

    def clean(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            return {
                str(k): clean(v, f"{where}.{k}")
                for k, v in value.items()
                if not any(w in str(k).lower() for w in _SECRET_WORDS)
            }
        if isinstance(value, (list, tuple)):
            return [clean(v, where) for v in value]
        if isinstance(value, Path):
            return str(value)
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        raise ConfigError(
            f"the verification's {where} is of type {type(value).__name__}, not JSON.",
            "pass strings, numbers, lists and dicts (never an endpoint or its credentials)",
        )

    cleaned: dict[str, Any] = clean(dict(context), "context")
    return cleaned


KEY_HASH_DESCRIPTION = "xxhash64(topic, key IS NULL, key)"

#: The files of a report directory, as ``summary["files"]`` lists them.
REPORT_FILES = {
    "summary": "summary.json",
    "html": "report.html",
    "chart": "missing_over_time.png",
    "offending": OFFENDING_DIR,
}


class TopicRow(TypedDict):
    """``summary["topics"][topic]``: records read, after the cut-off and compared on each side, the records
    of each class (:data:`~verification.classes.CLASSES`), and the partitions of each side."""

    source_read: int
    target_read: int
    source_after_cutoff: int
    target_after_cutoff: int
    source_compared: int
    target_compared: int
    missing: int
    unexpected: int
    duplicated: int
    corrupted: int
    target_absent: bool
    """The topic does not exist on the target."""
    source_partitions: int
    target_partitions: int


class Cutoff(TypedDict):
    """``summary["cutoff"]``: the verification's cut-off, as milliseconds and as text."""

    ms: int
    iso: str
    utc: str
    applies_to: str


def _cutoff(cutoff_ms: int | None) -> Cutoff | None:
    if cutoff_ms is None:
        return None
    ms = int(cutoff_ms)
    return Cutoff(ms=ms, iso=iso(ms), utc=utc_text(ms), applies_to="both sides")


def summary_document(
    *,
    source: Side,
    target: Side,
    out: Path,
    started_at: datetime,
    failover: dict[str, Any] | None,
    requested: list[str],
    topics: list[str],
    left_out: dict[str, dict[str, str]],
    cutoff_ms: int | None,
    per_topic: dict[str, TopicRow],
    partitions: dict[str, dict[str, dict[str, int]]],
    offsets: dict[str, Any],
    method: dict[str, Any],
    spark: dict[str, Any],
) -> dict[str, Any]:
    """``summary.json`` from its parts: the verdict and totals follow from ``per_topic``;
    ``method`` follows the checksum and key-hash descriptions."""
    totals = totals_of(per_topic)
    clean = not any(totals[c] for c in CLASSES)
    return {
        "verdict": "clean" if clean else "differences",
        "exit_code": 0 if clean else VerificationFailed.exit_code,
        "generated_at": started_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "out_dir": str(out),
        "source": source.describe(),
        "target": target.describe(),
        "failover": failover,
        "topics_requested": requested,
        "topics_compared": topics,
        "topics_left_out": left_out,
        "cutoff": _cutoff(cutoff_ms),
        "totals": totals,
        "topics": per_topic,
        "partitions": partitions,
        "offsets": offsets,
        "method": {"checksum": CHECKSUM_DESCRIPTION, "key_hash": KEY_HASH_DESCRIPTION, **method},
        "spark": spark,
        "files": dict(REPORT_FILES),
    }
