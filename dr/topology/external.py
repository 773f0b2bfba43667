"""The admin endpoint of an external cluster (``kind: external``), from its decrypted stack settings."""

from __future__ import annotations

from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.pulumi_env import state_base
from dr.kafka.client import Endpoint
from dr.topology.model import Cluster
from dr.topology.oauth_login import oauth_client, oauth_settings, uses_oauth
from dr.topology.transport import tls_files

__all__ = ["external_endpoint"]


def external_endpoint(
    cluster: Cluster,
    password: str | None = None,
    state: Path | None = None,
    key_pem: str | None = None,
    identity: str = "admin",
) -> Endpoint:
    """The admin endpoint of an external cluster: its stack settings and admin password (``password``,
    decrypted by the caller, else the stack value when it is plaintext — as in the Pulumi program), and
    its TLS files (PEMs declared in the stack are written under ``state``/tls, default the state base;
    ``key_pem``: the decrypted client key secret). Under mutual TLS (``SSL``) the certificate is the
    login: no username or password is needed. Under OAUTHBEARER the login is ``oauth.admin``'s client id and
    its secret (``password``: the decrypted ``client_secret``) — or, with ``identity`` (``replicator``,
    ``applications.<name>``: :func:`~dr.topology.oauth_login.oauth_identity`), that client's."""
    if uses_oauth(cluster):
        return _oauth_endpoint(cluster, password, state or state_base(), identity)
    pw = cluster.admin_password
    if password is None and pw is not None and not getattr(pw, "is_encrypted", False):
        password = pw.get_secret_value()
    needed = [("bootstrap_servers", cluster.bootstrap_servers)]
    if cluster.security_protocol != "SSL":
        needed += [("admin_username", cluster.admin_username), ("admin_password", password)]
    lacking = [what for what, value in needed if not value]
    if lacking:
        raise ConfigError(
            f"cluster {cluster.name!r} is {cluster.kind.value} and its stack settings lack {', '.join(lacking)}.",
            "declare them under kafka-dr:clusters (the password as a secret: "
            "`pulumi config set --path --secret 'kafka-dr:clusters[<i>].adminPassword' <password>`)",
        )
    return Endpoint(
        cluster.bootstrap_servers or "",
        cluster.admin_username or "",
        password or "",
        cluster.security_protocol,
        cluster.sasl_mechanism,
        tls_files(cluster, state or state_base(), key_pem),
        cluster.name,
    )


def _oauth_endpoint(cluster: Cluster, secret: str | None, state: Path, identity: str) -> Endpoint:
    client = oauth_client(cluster, identity)
    declared = client.client_secret
    if secret is None and declared is not None and not declared.is_encrypted:
        secret = declared.get_secret_value()
    if not cluster.bootstrap_servers or not secret:
        lacking = [
            what
            for what, v in (
                ("bootstrap_servers", cluster.bootstrap_servers),
                (f"oauth.{identity}.client_secret", secret),
            )
            if not v
        ]
        raise ConfigError(
            f"cluster {cluster.name!r} is {cluster.kind.value} and its stack settings lack {', '.join(lacking)}.",
            "declare them under kafka-dr:clusters (the secret with "
            f"`pulumi config set --path --secret 'kafka-dr:clusters[<i>].oauth.{identity}.clientSecret' <secret>`)",
        )
    return Endpoint(
        cluster.bootstrap_servers,
        client.client_id,
        secret,
        cluster.security_protocol,
        cluster.sasl_mechanism,
        tls_files(cluster, state),
        cluster.name,
        oauth_settings(cluster, state),
    )
