"""A link placed ``cluster-link``: a Confluent Cloud cluster link (:func:`stacks.confluent.cluster_link`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pulumi

    from stacks.links.args import LinkArgs


def component(args: LinkArgs) -> pulumi.Resource:
    """The cluster link and its mirror topics, after what creates the source topics."""
    from stacks.confluent import cluster_link

    link = args.link
    return cluster_link(
        args.topology, link, args.clusters, depends_on=[args.access[link.source]] if link.source in args.access else []
    )
