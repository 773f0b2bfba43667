"""PySpark integrity verification between two Kafka clusters (or Parquet archives), and recovery.

Public API::

    from verification import KafkaSide, ArchiveSide, run_verification, recover

    result = run_verification(source=KafkaSide(endpoint=a), target=KafkaSide(endpoint=b),
                              out_dir="out/verify", cutoff_ms=None)
    result.clean, result.counts(), result.raise_for_verdict()
    recover("out/verify", source=a, target=b)          # idempotent

Modules: :mod:`~verification.sources` (read a side), :mod:`~verification.fingerprint` (per-record
checksums, JVM built-ins + Python reference), :mod:`~verification.compare` (two-pass multiset
comparison), :mod:`~verification.report` (JSON, HTML, Parquet), :mod:`~verification.recover`
(replay), :mod:`~verification.job` (entry point, also for ``spark-submit``), :mod:`~verification.command`
(the options ``drctl verify`` — :mod:`dr.cli.verify` — shares with the submitted job).
"""

from __future__ import annotations

import importlib
from typing import Any

# Attributes load on first use, so importing the command line does not start pulling in Spark.
_EXPORTS = {
    "ArchiveSide": "verification.sides",
    "KafkaSide": "verification.sides",
    "RecoveryResult": "verification.recover",
    "VerificationResult": "verification.result",
    "checksum": "verification.fingerprint",
    "key_hash": "verification.fingerprint",
    "recover": "verification.recover",
    "record_hash": "verification.fingerprint",
    "run_verification": "verification.job",
}

__all__ = [
    "ArchiveSide",
    "KafkaSide",
    "RecoveryResult",
    "VerificationResult",
    "checksum",
    "key_hash",
    "record_hash",
    "recover",
    "run_verification",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'verification' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
