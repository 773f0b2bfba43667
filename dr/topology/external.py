"""The admin endpoint of an external cluster (``kind: external``), from its decrypted stack settings."""

from __future__ import annotations

from dr.base.errors import ConfigError
from dr.kafka.client import Endpoint
from dr.topology.model import Cluster

__all__ = ["external_endpoint"]


def external_endpoint(cluster: Cluster) -> Endpoint:
    """The admin endpoint of an external cluster from its (decrypted) stack settings."""
    pw = cluster.admin_password
    if not cluster.bootstrap_servers or not cluster.admin_username or pw is None or getattr(pw, "is_encrypted", False):
        raise ConfigError(
            f"cluster {cluster.name!r}: no usable admin credentials (password missing or still encrypted).",
            "pass --source-bootstrap/--target-bootstrap and --credentials FILE, or run inside `pulumi` "
            "where secrets are decrypted",
        )
    return Endpoint(
        cluster.bootstrap_servers,
        cluster.admin_username,
        pw.get_secret_value(),
        cluster.security_protocol,
        cluster.sasl_mechanism,
    )
