"""An OAUTHBEARER cluster's login settings for the product's clients, from its declaration (issue 49).

:func:`oauth_settings` gives the identity provider as :class:`~dr.kafka.oauth.OAuthSettings`: the token
endpoint, scope, expected audience and the CA of an ``https`` endpoint — ``oauth.tls`` (its ``ca_pem``
written to a 0600 file under ``<state>/tls``), else the cluster's own CA. The client identities stay in the
stack; their secrets are decrypted by the caller (:mod:`dr.estate.stack_secrets`), never written here.
"""

from __future__ import annotations

from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.files import private_dir, write_atomic
from dr.kafka.oauth import OAUTHBEARER, OAuthSettings
from dr.kafka.tls import certificate_blocks
from dr.topology.model import Cluster, OAuthClient
from dr.topology.transport import tls_files

__all__ = ["oauth_client", "oauth_identity", "oauth_settings", "uses_oauth"]


def uses_oauth(cluster: Cluster) -> bool:
    """True for a cluster whose clients log in with OAUTHBEARER tokens."""
    return cluster.sasl_mechanism == OAUTHBEARER and not cluster.is_local


def oauth_settings(cluster: Cluster, state: Path) -> OAuthSettings:
    """The identity provider of OAUTHBEARER ``cluster`` as its clients reach it (ConfigError without one)."""
    o = cluster.oauth
    if o is None or not o.token_endpoint:
        raise ConfigError(
            f"cluster {cluster.name!r} declares OAUTHBEARER but no oauth.token_endpoint",
            "declare the identity provider's token endpoint under oauth (see the OAuth guide in docs/production)",
        )
    ca: str | None = None
    if o.token_endpoint.startswith("https:"):
        if o.tls is not None and o.tls.ca_pem:
            path = private_dir(state / "tls") / f"{cluster.name}-idp-ca.pem"
            text = certificate_blocks(o.tls.ca_pem)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                write_atomic(path, text, 0o600)
            ca = str(path)
        elif o.tls is not None and o.tls.ca_file:
            ca = str(Path(o.tls.ca_file).expanduser().resolve())
        else:
            files = tls_files(cluster, state)
            ca = files.ca_location if files is not None else None
    return OAuthSettings(o.token_endpoint, o.scope, o.audience, ca)


def oauth_client(cluster: Cluster, who: str) -> OAuthClient:
    """The declared client identity ``who`` of ``cluster``: ``admin``, ``replicator``, an application's
    name, or ``applications.<name>`` — the form :func:`oauth_identity` returns, never mistaken for the admin's
    or the replicator's even when the application bears one of those names."""
    o = cluster.oauth
    app = who.removeprefix("applications.") if who.startswith("applications.") else None
    client = None
    if o is not None:
        if app is not None:
            client = o.applications.get(app)
        else:
            client = o.admin if who == "admin" else o.replicator if who == "replicator" else o.applications.get(who)
    if client is None:
        path = f"oauth.{who}" if app is None and who in ("admin", "replicator") else f"oauth.applications.{app or who}"
        raise ConfigError(
            f"cluster {cluster.name!r} declares no OAUTHBEARER client identity for {who!r} ({path})",
            f"declare {path}.client_id (and its client_secret as a secret) in the stack",
        )
    return client


def oauth_identity(principal: str, *, admin: str, replicator: str) -> str:
    """The declared identity a client acting as Kafka principal ``principal`` logs in with: ``admin`` for the
    product's admin principal ``admin``, ``replicator`` for the stack's replicator principal ``replicator``,
    else ``applications.<principal>`` (an application's identity maps to its principal). Its client secret is
    the stack's secret under that name (:func:`dr.estate.stack_secrets.reveal_oauth_secret`)."""
    if principal == admin:
        return "admin"
    if principal == replicator:
        return "replicator"
    return f"applications.{principal}"
