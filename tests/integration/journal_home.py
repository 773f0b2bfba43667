"""Where ``drctl`` keeps a test stack's failover journal and lock (they live with the stack's backend)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dr.base.stackref import StackRef


def journal_home(env: Mapping[str, str], stack: str) -> Path:
    """:attr:`StackRef.failover_home` of ``stack`` for a test's ``KDR_STACK_DIR``/``KDR_STATE_DIR``."""
    return StackRef(stack, Path(env["KDR_STACK_DIR"]), Path(env["KDR_STATE_DIR"]) / stack).failover_home
