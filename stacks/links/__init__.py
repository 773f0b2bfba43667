"""One Pulumi component per link placement, picked from one table: :data:`LINK_COMPONENTS`.

``Topology.placement(link)`` says where a link runs; the table gives the function that registers its
component from one :class:`LinkArgs`. A new engine is a placement value, a module here and a table line.
"""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from dr.topology import Placement
from stacks.links import cluster_link, connect, dedicated, elsewhere
from stacks.links.args import LinkArgs

__all__ = ["LINK_COMPONENTS", "LinkArgs", "link_component"]


LINK_COMPONENTS: dict[Placement, Callable[[LinkArgs], pulumi.Resource | None]] = {
    Placement.DEDICATED: dedicated.component,
    Placement.CONNECT: connect.component,
    Placement.CLUSTER_LINK: cluster_link.component,
    Placement.ELSEWHERE: elsewhere.component,
}
"""Where a link runs → the function registering its component (None: nothing runs it from here)."""


def link_component(args: LinkArgs) -> pulumi.Resource | None:
    """Register the component of ``args.link`` for its placement; None when this program runs nothing."""
    return LINK_COMPONENTS[args.topology.placement(args.link)](args)
