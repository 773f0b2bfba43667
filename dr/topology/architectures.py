""":data:`ARCHITECTURES`: the one table of what each architecture decides of a topology.

Each entry is the ``SHAPE`` (a :class:`~dr.topology.model.TopologyShape`) its architecture's module declares,
found by the architecture's name (``dr/topology/<module>.py``, :attr:`Architecture.module
<dr.topology.kinds.Architecture.module>`): no line here names an architecture, as the failover's
:data:`dr.failover.kinds.KINDS` picks each architecture's failover from its folder. Validation runs the rules of
the stack's entry after the shared ones; the model (:meth:`Topology.after_failover
<dr.topology.model.Topology.after_failover>`) and the topic queries (:func:`dr.topology.topics.topics_on`)
ask it through :meth:`Topology.shape <dr.topology.model.Topology.shape>` (the package registers the table
with the model, which its modules build on), as every shared module asks what differs per architecture (how a
link names its copies, who a cluster serves, the lost site and its runbook, whether a client endpoint or the
sites' controllers apply): none of them names an architecture. A hub-and-spoke stack's hub is an active-passive pair,
so its entry adds the hub's rules to active-passive's; the other architectures' stacks keep the hub's
fields unused.
"""

from __future__ import annotations

from importlib import import_module

from dr.topology.kinds import Architecture
from dr.topology.model import TopologyShape

__all__ = ["ARCHITECTURES"]

ARCHITECTURES: dict[Architecture, TopologyShape] = {
    architecture: import_module(f"dr.topology.{architecture.module}").SHAPE for architecture in Architecture
}
