"""``ReplicationLink``: one link of the topology — MirrorMaker 2 between local clusters.

``engine: mirrormaker2`` between two local clusters is a dedicated MirrorMaker 2 process (a
resource, :mod:`stacks.mirror_link`) started after the replicator's users and ACLs exist on both
sides. ``engine: cluster-link`` is built by :mod:`stacks.confluent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi

from dr.runtime.mirrormaker import DEFAULT_POLICY
from dr.topology import Cluster, Link, Topology
from dr.topology.topics import copied_topics_regex, prefixed_link
from stacks.mirror_link import MirrorMakerProcess, MirrorMakerProcessArgs

__all__ = ["ReplicationLink", "ReplicationLinkArgs"]


@dataclass(frozen=True, kw_only=True)
class ReplicationLinkArgs:
    """A link, its two clusters, and what must exist before it starts."""

    topology: Topology
    link: Link
    state_dir: Path
    depends_on: list[pulumi.Resource]


class ReplicationLink(pulumi.ComponentResource):
    """A running replication flow from ``link.source`` to ``link.target``."""

    def __init__(self, name: str, args: ReplicationLinkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("kafka-dr:index:ReplicationLink", name, None, opts)
        link = args.link
        source: Cluster = args.topology.cluster(link.source)
        target: Cluster = args.topology.cluster(link.target)
        self.process = MirrorMakerProcess(
            f"{link.name}-mirrormaker2",
            MirrorMakerProcessArgs(
                source=source.name,
                target=target.name,
                source_brokers=source.brokers,
                target_brokers=target.brokers,
                source_port=source.base_port or 0,
                target_port=target.base_port or 0,
                topics=copied_topics_regex(args.topology, link),
                groups=link.groups_regex,
                intervals=link.intervals.model_dump(),
                state_dir=str(args.state_dir),
                replication_policy=DEFAULT_POLICY if prefixed_link(args.topology, link) else None,
                source_tls=source.local_tls,
                target_tls=target.local_tls,
                delivery=args.topology.delivery_of(link).value,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.register_outputs(
            {"source": link.source, "target": link.target, "engine": link.engine.value, "running": self.process.running}
        )
