"""The one shape of the verification's four routes: a request each, one entry signature, one result base.

Each route is a module with ``run(request: <Route>Request, *, progress) -> <its RouteResult>``:

========================  =====================================  =========================================
route                     request                                result
========================  =====================================  =========================================
:mod:`verification.job`         :class:`VerifyRequest`           :class:`~verification.result.VerificationResult`
:mod:`verification.from_audit`  :class:`FromAuditRequest`        :class:`~verification.result.VerificationResult`
:mod:`verification.audit`       :class:`AuditRequest`            :class:`~verification.audit.AuditResult`
:mod:`verification.recover`     :class:`RecoverRequest`          :class:`~verification.recover.RecoveryResult`
========================  =====================================  =========================================

The choice between them is made in one place, :func:`verification.routes.run`. This module is light
on purpose (no Spark, no pyarrow): the command line and the failover build requests before any
route is loaded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, SkipValidation

from dr.base.errors import VerificationFailed
from dr.base.types import Model
from dr.kafka.client import Endpoint
from verification.link_ref import LinkRef
from verification.session import DEFAULT_MASTER
from verification.sides import KafkaSide, Side

__all__ = [
    "AuditRequest",
    "AuditStart",
    "FromAuditRequest",
    "FullVerificationNeeded",
    "RecoverRequest",
    "Request",
    "RouteResult",
    "VerifyRequest",
]


class RouteResult(ABC):
    """The part every route's result shares: a verdict, counts, and where its report (or state) is."""

    @property
    @abstractmethod
    def verdict(self) -> str:
        """One word: ``clean`` / ``differences`` (verification), ``clean`` / ``missing`` (audit),
        ``done`` / ``planned`` (recovery)."""

    @property
    @abstractmethod
    def report(self) -> Path | None:
        """The report directory (verification, recovery) or the state file (audit)."""

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """The route's record counts by what they are (classes, or what recovery did)."""

    @property
    def clean(self) -> bool:
        """True when nothing is missing, unexpected, duplicated or corrupted (recovery: always)."""
        return self.verdict in ("clean", "done", "planned")

    @property
    def exit_code(self) -> int:
        """0 when clean, 1 (:class:`~dr.base.errors.VerificationFailed`) otherwise."""
        return 0 if self.clean else VerificationFailed.exit_code


class _Request(Model):
    """A route's request. Its sides and endpoints are taken as given (``SkipValidation``): they are
    resolved objects holding credentials, never copied or re-validated here."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class AuditStart(_Request):
    """Where a verification may start from the last audit of a link (the failover's integrity step)."""

    state_dir: Path
    """The stack's state directory: the audit's state file is ``<state_dir>/audit/<link>.json``."""
    ref: LinkRef
    """The link, its stack and its two clusters."""


class VerifyRequest(_Request):
    """A verification of ``source`` vs ``target``: the full Spark job, or — with ``audit`` — started
    from the link's last audit when its state can be used (:func:`verification.routes.run` decides)."""

    source: SkipValidation[Side]
    target: SkipValidation[Side]
    out_dir: Path
    topics: list[str] | None = None
    cutoff_ms: int | None = None
    master: str | None = DEFAULT_MASTER
    windows: int | None = None
    context: dict[str, Any] | None = None
    audit: AuditStart | None = None


class FromAuditRequest(_Request):
    """The check started from the audit state in ``state_file`` (:mod:`verification.from_audit`)."""

    source: SkipValidation[KafkaSide]
    target: SkipValidation[KafkaSide]
    out_dir: Path
    topics: list[str]
    cutoff_ms: int | None
    state_file: Path
    ref: LinkRef
    """The link, its stack and its two clusters."""
    context: dict[str, Any] | None = None
    sample_size: int = 20


class AuditRequest(_Request):
    """One audit run of a link (:mod:`verification.audit`), its memory in ``state_file``."""

    source: SkipValidation[Endpoint]
    target: SkipValidation[Endpoint]
    state_file: Path
    ref: LinkRef
    """The link, its stack and its two clusters."""
    select: Callable[[str], bool] | None = None
    reset: bool = False
    sample: int = 10
    started: float | None = None
    first_run: str = "auto"
    master: str | None = None


class RecoverRequest(_Request):
    """A replay of a report's missing records into ``target`` (:mod:`verification.recover`)."""

    report_dir: Path
    target: SkipValidation[Endpoint]
    source: SkipValidation[Endpoint | None] = None
    source_archive: Path | None = None
    dry_run: bool = False


#: Any route's request.
Request = VerifyRequest | FromAuditRequest | AuditRequest | RecoverRequest


class FullVerificationNeeded(Exception):
    """The check cannot start from the audit (the message says why): the full verification runs instead."""
