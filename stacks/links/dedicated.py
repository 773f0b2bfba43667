"""A link placed ``dedicated``: its own MirrorMaker 2 process (:class:`stacks.link.ReplicationLink`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr.runtime.links import LinkRunner, dedicated_runner
from dr.topology import Delivery, Link
from dr.topology.topics import copied_topics_regex, prefixed_link

if TYPE_CHECKING:
    import pulumi

    from stacks.links.args import LinkArgs, RunnerSite


def component(args: LinkArgs) -> pulumi.Resource:
    """The link's MirrorMaker 2 process, started once the replicator's user and ACLs exist on both ends."""
    from stacks.link import ReplicationLink, ReplicationLinkArgs

    link, topology = args.link, args.topology
    return ReplicationLink(
        link.name,
        ReplicationLinkArgs(
            topology=topology,
            link=link,
            state_dir=args.state_dir,
            depends_on=[
                r
                for name in (link.source, link.target)
                for r in args.access[name].needed_by(topology.principals.replicator)
            ],
        ),
    )


def runner(site: RunnerSite, link: Link) -> LinkRunner:
    """The link's MirrorMaker 2 process between two local clusters (refused when an end is not local)."""
    topology = site.topology
    return dedicated_runner(
        site.local_cluster(link.source),
        site.local_cluster(link.target),
        site.state,
        topics=copied_topics_regex(topology, link),
        groups=link.groups_regex,
        intervals=link.intervals.model_dump(),
        prefixed=prefixed_link(topology, link),
        exactly_once=topology.delivery_of(link) == Delivery.EXACTLY_ONCE,
    )
