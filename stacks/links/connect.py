"""A link placed ``connect``: MirrorMaker 2 connectors on a declared Kafka Connect cluster
(:class:`stacks.connect.ConnectMirrorLink`), and the check of an external Connect cluster's credentials."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr.base.errors import ConfigError, DRError
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


def replicator_logins(topology: Topology, connect: str) -> list[tuple[str, str, Any]]:
    """``(secret field, username, secret)`` the workers of Connect cluster ``connect`` must resolve, one per end of
    each running link on it (the connectors use the same references on both ends): on an OAUTHBEARER end the
    replicator's client id and client secret there (``clusters[<i>].oauth.replicator``), else
    ``principals.replicator`` and ``principals.replicator_password``. The secrets as declared (encrypted or not)."""
    from dr.topology.oauth_login import uses_oauth

    p = topology.principals
    out: list[tuple[str, str, Any]] = []
    for link in topology.links:
        if link.connect != connect or not link.is_running:
            continue
        for end in (link.source, link.target):
            i, c = next((i, c) for i, c in enumerate(topology.clusters) if c.name == end)
            client = c.oauth.replicator if uses_oauth(c) and c.oauth is not None else None
            if client is not None:
                out.append((f"clusters[{i}].oauth.replicator.clientSecret", client.client_id, client.client_secret))
            else:
                out.append(("principals.replicatorPassword", p.replicator, p.replicator_password))
    return out


def check_workers(topology: Topology, declared: Callable[[Any], str | None]) -> None:
    """Before any resource: every external Connect cluster that runs a link resolves the replicator's
    credentials through its declared config provider (:mod:`stacks.links.connect_credentials`) — the username
    and password of :func:`replicator_logins` (over OAUTHBEARER the replicator's client id and secret);
    ``declared`` reads a secret the engine decrypted (None when not declared: nothing to compare)."""
    import pulumi

    from dr.kafka.connect_rest import ConnectRest
    from stacks.links.connect_credentials import check_worker_credentials

    for cc in topology.connect_clusters:
        logins = [(field, user, declared(secret)) for field, user, secret in replicator_logins(topology, cc.name)]
        if cc.is_local or not logins or any(password is None for _f, _u, password in logins):
            continue
        try:
            if len({(user, password) for _f, user, password in logins}) > 1:
                fields = sorted({field for field, _u, _p in logins})
                raise ConfigError(
                    f"the links on Connect cluster {cc.name!r} log the replicator in with different credentials "
                    f"({', '.join(fields)}), but its workers resolve one username and one password for every link.",
                    "declare the same replicator client id and secret on both ends of its links (or the same "
                    "replicator password), or run those links on Connect clusters of their own",
                )
            field, user, password = logins[0]
            rest = ConnectRest(cc.url or "", username=cc.username, password=declared(cc.password))
            check_worker_credentials(rest, cc, user, password or "", secret_field=field)
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
