"""Before ``pulumi up`` changes anything: a TLS handshake that fails stops the run.

A wrong CA, a certificate that does not name the host dialled or a protocol that does not match the
listener fails every Kafka call of the run; found first, it is reported as the TLS failure it is (exit
4, naming the cluster, the endpoint and the cause) with nothing changed, instead of as a refused
topology half-way through the program. A cluster that does not answer at all is left to the run (a
lost cluster may still be declared).
"""

from __future__ import annotations

from dr.base.errors import ClusterError
from dr.estate.estate import Estate
from dr.failover.act.health import listening
from dr.kafka.client import TLS_FAILED, cluster_metadata
from dr.kafka.tls import uses_tls
from dr.topology import Kind, Role

__all__ = ["refuse_tls_failures"]


def refuse_tls_failures(estate: Estate, timeout: float = 5.0) -> None:
    """Raise the :class:`ClusterError` of the first external TLS cluster whose handshake fails."""
    for c in estate.topology.clusters:
        if c.kind is not Kind.EXTERNAL or not uses_tls(c.security_protocol) or c.role is Role.DECOMMISSIONED:
            continue
        endpoint = estate.endpoint(c.name)
        if not listening(endpoint.bootstrap):
            continue
        try:
            cluster_metadata(endpoint, timeout)
        except ClusterError as exc:
            if TLS_FAILED in exc.problem:
                raise
