"""Before the program declares a resource: the TLS handshake of every external cluster it provisions.

A wrong CA, or a certificate that does not name the host dialled, fails every call the Kafka provider
and the connectors make; caught here, the run (``pulumi up``, ``pulumi preview``, ``drctl estate
preview/up`` alike) stops before any resource is registered, so nothing is created, updated or pointed at
the wrong CA. One handshake per cluster (its first server that answers), nothing sent but the handshake,
no credential used. A cluster nothing answers for is left to the run (a lost cluster may be declared),
and local clusters are skipped: the program may be about to start them, with a CA it makes itself.

The handshake checks what the Pulumi Kafka provider will check: the chain against the declared CA and,
since the provider cannot skip the host check alone, the host name — unless the stack declares
``tls.insecure_skip_verify``, when only the chain is checked (every other client still verifies it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dr.base.errors import ClusterError
from dr.kafka.client import TLS_FAILED
from dr.kafka.tls import uses_tls
from dr.kafka.tls_diagnosis import verify_reason
from dr.topology import Cluster, Kind, Role, Topology
from dr.topology.transport import tls_files

__all__ = ["HANDSHAKE_TIMEOUT_S", "refuse_failing_handshakes"]

HANDSHAKE_TIMEOUT_S = 3.0
"""Per server: the time to connect and finish the handshake before the next server is tried."""


def refuse_failing_handshakes(topology: Topology, state_dir: Path) -> None:
    """Raise the :class:`ClusterError` (exit 4) of the first provisioned external TLS cluster whose
    brokers answer but whose certificate does not verify as the stack declares it."""
    for c in topology.clusters:
        if c.kind is not Kind.EXTERNAL or not uses_tls(c.security_protocol) or not c.bootstrap_servers:
            continue
        if c.role in (Role.STANDBY, Role.DECOMMISSIONED):  # the program declares nothing that reaches them
            continue
        files = tls_files(c, state_dir)
        if files is None:
            continue
        # the provider checks the host whatever hostname_verification says (it cannot skip that alone)
        checked = replace(files, hostname_verification=files.hostname_verification or not files.insecure_skip_verify)
        reason = verify_reason(c.bootstrap_servers, checked, HANDSHAKE_TIMEOUT_S)
        if reason is not None:
            raise _refusal(c, reason, host_only=checked.hostname_verification and not files.hostname_verification)


def _ca_input(c: Cluster) -> str:
    tls = c.tls
    if tls is not None and tls.ca_file:
        return f"tls.ca_file {tls.ca_file}"
    if tls is not None and tls.ca_pem:
        return "tls.ca_pem"
    return "no tls.ca_file or ca_pem (the system's roots)"


def _refusal(c: Cluster, reason: str, *, host_only: bool) -> ClusterError:
    where = f"cluster {c.name!r} ({c.bootstrap_servers}): {TLS_FAILED}: certificate verify failed ({reason})"
    if host_only and "mismatch" in reason.lower():  # OpenSSL's "Hostname mismatch", "IP address mismatch"
        return ClusterError(
            f"{where}; the stack declares tls.hostname_verification: false, but the Pulumi Kafka provider cannot "
            "skip only the host check. Nothing was changed",
            "give the brokers certificates that name the host dialled (or dial the name they carry in "
            "bootstrap_servers); only if that cannot be, declare tls.insecure_skip_verify: true — the provider then "
            "checks no certificate at all, and every command warns of it — then run again",
        )
    return ClusterError(
        f"{where}, with {_ca_input(c)}. Nothing was changed",
        f"check that {_ca_input(c)} is the CA that signed cluster {c.name!r}'s broker certificates, that they are "
        "not expired and (hostname verification on) that they name the host dialled — `openssl s_client -connect "
        "<host:port> -CAfile <ca>` shows the chain the brokers send — correct the stack's tls block, then run again",
    )
