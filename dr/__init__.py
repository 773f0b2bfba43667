"""Kafka disaster-recovery orchestrator: topology, local estate runtime, failover pipeline.

Public API is curated here; submodules prefixed with ``_`` are private.
"""

from dr.errors import DRError

__all__ = ["DRError"]
__version__ = "0.1.0"
