"""Each architecture's failover, one folder each, and :data:`KINDS`: the one table that picks it.

Every folder has the same files — ``steps.py`` (its steps and their context), ``run.py`` (its runs
through the frame), ``plan.py`` (its :class:`~dr.failover.frame.plan.FailoverPlan`), ``drill.py`` (its
game day) — and its ``__init__.py`` declares its :class:`~dr.failover.kind.FailoverKind`, whose
methods load the rest when they run. No folder imports another, except that the hub of a hub-and-spoke
stack fails over as an active-passive pair (``hub_spoke`` wraps ``active_passive``).
"""

from __future__ import annotations

from dr.failover.kind import FailoverKind
from dr.failover.kinds.active_active import ACTIVE_ACTIVE
from dr.failover.kinds.active_passive import ACTIVE_PASSIVE
from dr.failover.kinds.hub_spoke import HUB_SPOKE
from dr.topology import Architecture

__all__ = ["KINDS"]

KINDS: dict[Architecture, FailoverKind] = {
    Architecture.ACTIVE_PASSIVE: ACTIVE_PASSIVE,
    Architecture.ACTIVE_ACTIVE: ACTIVE_ACTIVE,
    Architecture.HUB_SPOKE: HUB_SPOKE,
}
