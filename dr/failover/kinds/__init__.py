"""Each architecture's failover, one folder each, and :data:`KINDS`: the one table that picks it.

Every folder has the same files — ``steps.py`` (its steps and their context), ``run.py`` (its runs
through the frame and their :class:`~dr.failover.frame.plan.FailoverPlan`), ``drill.py`` (its game day) — and its ``__init__.py`` declares its :class:`~dr.failover.kind.FailoverKind` as ``KIND``, whose
methods load the rest when they run; :data:`KINDS` finds it by the architecture's name
(:attr:`Architecture.module <dr.topology.kinds.Architecture.module>`), so no line here names an architecture. No folder imports another, except that the hub of a hub-and-spoke
stack fails over as an active-passive pair (``hub_spoke`` wraps ``active_passive``).
"""

from __future__ import annotations

from importlib import import_module

from dr.failover.kind import FailoverKind
from dr.topology import Architecture

__all__ = ["KINDS"]

KINDS: dict[Architecture, FailoverKind] = {
    architecture: import_module(f"dr.failover.kinds.{architecture.module}").KIND for architecture in Architecture
}
