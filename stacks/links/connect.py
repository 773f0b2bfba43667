"""A link placed ``connect``: MirrorMaker 2 connectors on a declared Kafka Connect cluster
(:class:`stacks.connect.ConnectMirrorLink`), and the check of an external Connect cluster's credentials."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr.base.errors import DRError
from dr.runtime.links import LinkRunner, connect_runner
from dr.topology import Kind, Link, Topology

if TYPE_CHECKING:
    import pulumi

    from stacks.links.args import LinkArgs, RunnerSite


def component(args: LinkArgs) -> pulumi.Resource:
    """The link's three connectors, after the Connect cluster's workers and both ends' access."""
    from stacks.connect import ConnectMirrorLink, ConnectMirrorLinkArgs

    link = args.link
    return ConnectMirrorLink(
        link.name,
        ConnectMirrorLinkArgs(
            topology=args.topology,
            link=link,
            state_dir=args.state_dir,
            workers=args.workers.get(link.connect or ""),
            depends_on=[args.access[n] for n in (link.source, link.target) if n in args.access],
            internal_rf=internal_rf(args.topology, link.target, args.credentials),
        ),
    )


def runner(site: RunnerSite, link: Link) -> LinkRunner:
    """The link's connectors on its Connect cluster; its ends' endpoints are read when its lag is."""
    connect = link.connect or ""
    return connect_runner(
        site.connect_rest(connect), link.name, connect, lambda: (site.endpoint(link.source), site.endpoint(link.target))
    )


def check_workers(topology: Topology, declared: Callable[[Any], str | None]) -> None:
    """Before any resource: every external Connect cluster that runs a link resolves the replicator's
    credentials through its declared config provider (:mod:`stacks.links.connect_credentials`);
    ``declared`` reads a secret the engine decrypted (None when not declared)."""
    import pulumi

    from dr.kafka.connect_rest import ConnectRest
    from stacks.links.connect_credentials import check_worker_credentials

    used = {lk.connect for lk in topology.links if lk.connect is not None and lk.is_running}
    password = declared(topology.principals.replicator_password)
    for cc in topology.connect_clusters:
        if cc.is_local or cc.name not in used or password is None:
            continue
        try:
            rest = ConnectRest(cc.url or "", username=cc.username, password=declared(cc.password))
            check_worker_credentials(rest, cc, topology.principals.replicator, password)
        except DRError as exc:
            raise pulumi.RunError(f"error: {exc}") from None


def internal_rf(topology: Topology, target: str, credentials: Any) -> int | None:
    """The replication factor of MirrorMaker 2's internal topics on an external ``target``: its
    declared value, else min(3, its broker count) read now; None for a local target (the model's
    own rule)."""
    import pulumi

    c = topology.cluster(target)
    if c.is_local or c.kind is not Kind.EXTERNAL:
        return None
    if c.internal_topics_replication_factor is not None:
        return c.internal_topics_replication_factor
    from dr.kafka.client import TLS_FAILED, cluster_metadata
    from dr.topology.external import external_endpoint

    state = Path(credentials.path).parent
    ep = external_endpoint(c, external_endpoint(c, state=state).password, state)
    try:
        brokers = len(cluster_metadata(ep).brokers)
    except DRError as exc:
        # a failing TLS handshake fails every call to the cluster: declaring the factor would not help
        instead = (
            ""
            if TLS_FAILED in str(exc)
            else f". Declare it instead: kafka-dr:clusters[{target}].internal_topics_replication_factor"
        )
        raise pulumi.RunError(
            f"error: cannot read the broker count of cluster {target!r} (the replication factor of the link's "
            f"internal topics follows it): {exc}{instead}"
        ) from None
    return max(1, min(3, brokers))
