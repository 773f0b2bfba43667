"""A link placed ``elsewhere``: MirrorMaker 2 run by others (a Connect cluster not declared here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stacks.links.args import LinkArgs


def component(args: LinkArgs) -> None:
    """Nothing to register: say so, and how to get its connector configs."""
    import pulumi

    link, topology = args.link, args.topology
    pulumi.log.warn(
        f"link {link.name}: MirrorMaker 2 between clusters that do not run on this machine "
        "runs on Kafka Connect; this program does not start it (`drctl connect-config "
        f"--stack {topology.name} --link {link.name}` prints its connector configs)"
    )
