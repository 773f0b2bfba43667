"""One Pulumi component per link placement, picked from one table: :data:`LINK_COMPONENTS`.

``Topology.placement(link)`` says where a link runs; the table gives the function that registers its
component from one :class:`LinkArgs`, and :data:`LINK_RUNNERS` what runs it here
(``Estate.link_runner``). A new engine is a placement value, a runner, a module here and its table lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dr.runtime.links import LinkRunner
from dr.topology import Link, Placement
from stacks.links import cluster_link, connect, dedicated, elsewhere
from stacks.links.args import LinkArgs, RunnerSite

if TYPE_CHECKING:  # pulumi is loaded by the program, not by a runner's lookup (drctl status, link)
    import pulumi

__all__ = ["LINK_COMPONENTS", "LINK_RUNNERS", "LinkArgs", "RunnerSite", "link_component", "link_runner"]


LINK_COMPONENTS: dict[Placement, Callable[[LinkArgs], pulumi.Resource | None]] = {
    Placement.DEDICATED: dedicated.component,
    Placement.CONNECT: connect.component,
    Placement.CLUSTER_LINK: cluster_link.component,
    Placement.ELSEWHERE: elsewhere.component,
}
"""Where a link runs → the function registering its component (None: nothing runs it from here)."""


LINK_RUNNERS: dict[Placement, Callable[[RunnerSite, Link], LinkRunner]] = {
    Placement.DEDICATED: dedicated.runner,
    Placement.CONNECT: connect.runner,
}
"""Where a link runs → what runs it from this machine. A placement without a line is run by others: the
dedicated runner refuses it, naming the end that is not on this machine."""


def link_runner(site: RunnerSite, link: Link) -> LinkRunner:
    """What runs ``link`` for the estate ``site``, by its placement (:data:`LINK_RUNNERS`)."""
    return LINK_RUNNERS.get(site.topology.placement(link), dedicated.runner)(site, link)


def link_component(args: LinkArgs) -> pulumi.Resource | None:
    """Register the component of ``args.link`` for its placement; None when this program runs nothing."""
    return LINK_COMPONENTS[args.topology.placement(args.link)](args)
