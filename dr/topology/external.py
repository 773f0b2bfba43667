"""The admin endpoint of an external cluster (``kind: external``), from its decrypted stack settings."""

from __future__ import annotations

from dr.base.errors import ConfigError
from dr.kafka.client import Endpoint
from dr.topology.model import Cluster

__all__ = ["external_endpoint"]


def external_endpoint(cluster: Cluster, password: str | None = None) -> Endpoint:
    """The admin endpoint of an external cluster: its stack settings and admin password (``password``,
    decrypted by the caller, else the stack value when it is plaintext — as in the Pulumi program)."""
    pw = cluster.admin_password
    if password is None and pw is not None and not getattr(pw, "is_encrypted", False):
        password = pw.get_secret_value()
    lacking = [
        what
        for what, value in (
            ("bootstrap_servers", cluster.bootstrap_servers),
            ("admin_username", cluster.admin_username),
            ("admin_password", password),
        )
        if not value
    ]
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
    )
