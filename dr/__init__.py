"""Kafka disaster-recovery orchestrator: topology, local runtime, the Pulumi stack, failover pipeline.

Public API is curated here; submodules prefixed with ``_`` are private.
"""

from dr.base.errors import DRError

__all__ = ["DRError"]
__version__ = "0.1.0"
