"""A link placed ``dedicated``: its own MirrorMaker 2 process (:class:`stacks.link.ReplicationLink`)."""

from __future__ import annotations

import pulumi

from stacks.link import ReplicationLink, ReplicationLinkArgs
from stacks.links.args import LinkArgs


def component(args: LinkArgs) -> pulumi.Resource:
    """The link's MirrorMaker 2 process, started once the replicator's user and ACLs exist on both ends."""
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
