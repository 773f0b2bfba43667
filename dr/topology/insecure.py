"""What a stack declares that switches a protection off, said as a warning on every command.

Each is accepted only because the stack says so in a field of its own (``tls.hostname_verification:
false``, ``tls.insecure_skip_verify: true``, ``endpoint.insecure_remote_runtime_api: true``), and a CA
file that also holds something other than certificates (a private key) is used for its certificates
alone. None of it may go unnoticed: ``drctl`` prints these lines on stderr whenever it loads the stack
(:func:`dr.topology.stackconfig.load_stack_file`), the Pulumi program as warnings of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dr.kafka.tls import foreign_pem_blocks, uses_tls

if TYPE_CHECKING:
    from dr.topology.model import Topology

__all__ = ["insecure_warnings"]


def insecure_warnings(t: Topology) -> list[str]:
    """One line per protection ``t`` switches off (empty for a stack that switches none off)."""
    out: list[str] = []
    for c in t.clusters:
        tls = c.tls
        if c.is_local or tls is None or not uses_tls(c.security_protocol):
            continue
        if tls.insecure_skip_verify:
            out.append(
                f"INSECURE: cluster {c.name!r} declares tls.insecure_skip_verify: the Pulumi Kafka provider, which "
                "logs in as the admin, checks no certificate of its brokers (anyone on the path can pose as them); "
                "give the brokers certificates that name the hosts dialled and remove it"
            )
        if not tls.hostname_verification:
            out.append(
                f"cluster {c.name!r} declares tls.hostname_verification: false: drctl, MirrorMaker 2, the connectors "
                "and Spark do not check that its brokers' certificates name the host dialled"
            )
        if tls.ca_file:
            try:
                foreign = foreign_pem_blocks(Path(tls.ca_file).expanduser().read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                foreign = []  # reported by the rules (dr.topology.tls_rules)
            if foreign:
                out.append(
                    f"cluster {c.name!r}: tls.ca_file {tls.ca_file} holds {', '.join(sorted(set(foreign)))} besides "
                    "its certificates; only the certificates are used — keep private keys out of a CA bundle"
                )
        if tls.ca_pem and foreign_pem_blocks(tls.ca_pem):
            out.append(
                f"cluster {c.name!r}: tls.ca_pem holds {', '.join(sorted(set(foreign_pem_blocks(tls.ca_pem))))} "
                "besides its certificates, in the stack file; only the certificates are used — remove the rest"
            )
    e = t.endpoint
    if e is not None and e.insecure_remote_runtime_api and e.runtime_api is not None:
        out.append(
            f"INSECURE: endpoint.insecure_remote_runtime_api: the proxy's runtime API at {e.runtime_api} has no "
            "authentication; whoever reaches it can point every client of the endpoint elsewhere"
        )
    return out
