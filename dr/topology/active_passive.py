"""Active-passive: one active cluster, its passive copy fed by a link, and a standby.

A failover promotes the passive cluster (:func:`after_failover`); :meth:`Topology.after_failover
<dr.topology.model.Topology.after_failover>` asks it for an active-passive estate (and for an architecture
without a shape of its own), as it asks :func:`dr.topology.hub_spoke.after_hub_failover` for a hub.
"""

from __future__ import annotations

from dr.topology.kinds import Engine, LinkState, Role
from dr.topology.model import FAILOVER_STATES, Link, Topology

__all__ = ["after_failover"]


def after_failover(t: Topology, mode: str = "planned") -> Topology:
    """The desired topology once the passive cluster of ``t`` is promoted (pure; ``t`` is unchanged).

    The active cluster becomes decommissioned, the passive becomes active and the standby (if any)
    becomes passive. A ``cluster-link`` link into the promoted cluster is kept, no longer running: its
    state becomes ``promoted`` (``mode="planned"``) or ``failed-over`` (``mode="unplanned"``), which is
    how its mirror topics are promoted. Every other link is dropped, and one link
    ``<passive>-to-<standby>`` is added with the engine, topics, consumer groups and intervals of the
    link that fed the old passive cluster.
    """
    old_active = t.active()
    new_active = t.to_promote()
    new_passive = t.standby()
    into = t.links_into(new_active.name)
    feeding = [link for link in into if link.is_running] or into
    template = next((link for link in feeding if link.source == old_active.name), feeding[0])

    roles = {old_active.name: Role.DECOMMISSIONED, new_active.name: Role.ACTIVE}
    links: list[Link] = [
        link.model_copy(update={"state": FAILOVER_STATES[mode]}) if link.is_running else link
        for link in into
        if link.engine == Engine.CLUSTER_LINK
    ]
    if new_passive is not None:
        roles[new_passive.name] = Role.PASSIVE
        links.append(
            template.model_copy(
                update={
                    "name": f"{new_active.name}-to-{new_passive.name}",
                    "source": new_active.name,
                    "target": new_passive.name,
                    "state": LinkState.RUNNING,
                }
            )
        )
    clusters = [c.model_copy(update={"role": roles[c.name]}) if c.name in roles else c for c in t.clusters]
    # A Connect cluster living on the decommissioned cluster would lose its internal topics: it
    # moves (new group and internal topics) to the cluster that now receives the link.
    home = new_passive.name if new_passive is not None else new_active.name
    connect_clusters = [
        cc.model_copy(update={"cluster": home}) if cc.is_local and cc.cluster == old_active.name else cc
        for cc in t.connect_clusters
    ]
    return Topology(
        name=t.name,
        profile=t.profile,
        clusters=clusters,
        topics=t.topics,
        principals=t.principals,
        links=links,
        connect_clusters=connect_clusters,
        failover_done=True,
        provisioning=t.provisioning,
        endpoint=t.endpoint,
        failover_policy=t.failover_policy,
    )
