""":data:`ARCHITECTURES`: the one table of what each architecture decides of a topology.

Each entry is a :class:`~dr.topology.model.TopologyShape` built from its architecture's module —
:mod:`dr.topology.active_passive`, :mod:`dr.topology.active_active`, :mod:`dr.topology.hub_spoke` — as the
failover's :data:`dr.failover.kinds.KINDS` picks each architecture's failover. Validation runs the rules of
the stack's entry after the shared ones; the model (:meth:`Topology.after_failover
<dr.topology.model.Topology.after_failover>`) and the topic queries (:func:`dr.topology.topics.topics_on`)
ask it through :meth:`Topology.shape <dr.topology.model.Topology.shape>` (the package registers the table
with the model, which its modules build on). A hub-and-spoke stack's hub is an active-passive pair,
so its entry adds the hub's rules to active-passive's; the other architectures' stacks keep the hub's
fields unused.
"""

from __future__ import annotations

from functools import partial

from dr.topology import active_active, active_passive, hub_spoke
from dr.topology.kinds import Architecture
from dr.topology.model import TopologyShape

__all__ = ["ARCHITECTURES"]

ARCHITECTURES: dict[Architecture, TopologyShape] = {
    Architecture.ACTIVE_PASSIVE: TopologyShape(
        rules=(*active_passive.RULES, partial(hub_spoke.hub_fields_unused, homes=False)),
        after_failover=active_passive.after_failover,
    ),
    # A failover of the whole stack (not ``--region``) promotes as an active-passive pair does.
    Architecture.ACTIVE_ACTIVE: TopologyShape(
        rules=(*active_active.RULES, partial(hub_spoke.hub_fields_unused, homes=True)),
        after_failover=active_passive.after_failover,
        writes_at_home=True,
    ),
    Architecture.HUB_SPOKE: TopologyShape(
        rules=(*active_passive.RULES, *hub_spoke.RULES),
        after_failover=hub_spoke.after_hub_failover,
        remote_copies=hub_spoke.aggregated_topics,
        writes_at_home=True,
    ),
}
