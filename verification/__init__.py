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
(replay), :mod:`~verification.job` (entry point, also for ``spark-submit``), :mod:`~verification.cli`
(``drctl verify`` / ``drctl recover``).
"""

from verification.fingerprint import checksum, key_hash, record_hash
from verification.job import VerificationResult, run_verification
from verification.recover import RecoveryResult, recover
from verification.sources import ArchiveSide, KafkaSide

__all__ = [
    "ArchiveSide",
    "KafkaSide",
    "RecoveryResult",
    "VerificationResult",
    "checksum",
    "key_hash",
    "recover",
    "record_hash",
    "run_verification",
]
