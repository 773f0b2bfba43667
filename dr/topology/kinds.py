"""The topology's vocabulary: roles, kinds, engines, link states, profiles and the port window.

Plain enums (and the runtime's port window, handed on) with no other import of the product, so that the
model (:mod:`dr.topology.model`) and its rules (:mod:`dr.topology.validation`) share them.
"""

from __future__ import annotations

from enum import StrEnum

from dr.runtime.reserved import PORT_WINDOW

__all__ = [
    "PORT_WINDOW",
    "Architecture",
    "Delivery",
    "Engine",
    "Kind",
    "LinkState",
    "Naming",
    "Placement",
    "Profile",
    "Role",
]


class Architecture(StrEnum):
    """The shape of the estate's replication: one active and its passive copy, peers replicating both ways
    with prefixed remote topics, or edges aggregated into a hub."""

    ACTIVE_PASSIVE = "active-passive"
    ACTIVE_ACTIVE = "active-active"
    HUB_SPOKE = "hub-spoke"

    @property
    def module(self) -> str:
        """The name of its rooms: its topology module ``dr/topology/<module>.py`` (its rules and ``SHAPE``) and its
        failover's folder ``dr/failover/kinds/<module>/`` (its ``KIND``), each table built from them by this name."""
        return self.name.lower()


class Role(StrEnum):
    """What a cluster does in the disaster-recovery topology."""

    ACTIVE = "active"
    PASSIVE = "passive"
    STANDBY = "standby"
    DECOMMISSIONED = "decommissioned"
    EDGE = "edge"
    """Hub-and-spoke only: a cluster whose local topics a link aggregates into the hub (the active cluster)."""


class Kind(StrEnum):
    """Where a cluster runs: on this machine, or elsewhere reached by bootstrap servers."""

    LOCAL = "local"
    EXTERNAL = "external"
    CONFLUENT_CLOUD = "confluent-cloud"


class Engine(StrEnum):
    """The replication technology behind a link."""

    MIRRORMAKER2 = "mirrormaker2"
    CLUSTER_LINK = "cluster-link"


class Placement(StrEnum):
    """Where a link runs, which picks its runner (``Estate.link_runner``) and its stack component
    (``stacks.links.LINK_COMPONENTS``). The value and the rule that places a link there (:meth:`of`) live
    here together: a new placement is one value and one line of that rule."""

    DEDICATED = "dedicated"
    """A MirrorMaker 2 process of its own, between two clusters run on this machine."""
    CONNECT = "connect"
    """MirrorMaker 2 connectors on a declared Kafka Connect cluster."""
    CLUSTER_LINK = "cluster-link"
    """A Confluent Cloud cluster link (Confluent runs it)."""
    ELSEWHERE = "elsewhere"
    """MirrorMaker 2 with an end not on this machine and no declared Connect cluster: run by others."""

    @classmethod
    def of(cls, engine: Engine, *, on_connect: bool, both_local: bool) -> Placement:
        """Where a link of ``engine`` runs: a cluster link; MirrorMaker 2 on its declared Connect cluster
        (``on_connect``); a dedicated MirrorMaker 2 process when both its ends run on this machine
        (``both_local``); else elsewhere (run by others)."""
        if engine is Engine.CLUSTER_LINK:
            return cls.CLUSTER_LINK
        if on_connect:
            return cls.CONNECT
        return cls.DEDICATED if both_local else cls.ELSEWHERE


class Naming(StrEnum):
    """What a link names its copies on the target and which topics it copies, decided once per link
    (``Topology.naming``) from what its architecture's shape declares (``TopologyShape.naming`` and
    ``edge_naming``): a new architecture declares it in its own module, and no other module asks the
    architecture to name a topic."""

    IDENTITY = "identity"
    """The source's names kept (MirrorMaker 2's IdentityReplicationPolicy): active → passive, and the hub
    → its passive copy."""
    PREFIXED = "prefixed"
    """``<source>.<topic>`` on the target (DefaultReplicationPolicy), of every topic the link's patterns
    select: an edge's link into its hub."""
    PEER = "peer"
    """``<source>.<topic>`` on the target, of the declared topics only, so a peer's remote copies are never
    copied on: every link between active-active peers."""

    @property
    def prefixed(self) -> bool:
        """True when the copies are named ``<source>.<topic>`` rather than keeping the source's names."""
        return self is not Naming.IDENTITY

    @property
    def declared_only(self) -> bool:
        """True when the link copies exactly the declared topics it selects, whatever its patterns match."""
        return self is Naming.PEER


class Delivery(StrEnum):
    """What a link promises about each record of its source on its target.

    ``exactly-once``: every record once, written in transactions (Kafka Connect's exactly-once source
    support, KIP-618); consumers of the target read committed records. ``at-least-once``: a replicator
    that dies between copying records and committing its position copies them again.
    """

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


class LinkState(StrEnum):
    """Whether a link still replicates, or what became of its mirror topics after a failover.

    Only ``cluster-link`` links outlive a failover: their mirror topics on the promoted cluster are
    Pulumi resources whose status is the failover itself (``PROMOTED`` after a planned failover,
    ``FAILED_OVER`` after an unplanned one), so the link stays declared, no longer replicating.
    """

    RUNNING = "running"
    PROMOTED = "promoted"
    FAILED_OVER = "failed-over"


class Profile(StrEnum):
    """How strict the durability rules are: ``production`` adds rules ``dev`` does not apply."""

    DEV = "dev"
    PRODUCTION = "production"
