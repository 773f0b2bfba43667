"""Why a broker's certificate does not verify, in OpenSSL's words.

librdkafka reports a failed verification as ``certificate verify failed`` alone, whatever the cause. On
that error the product makes one TLS handshake of its own to the same address with the same trust (the
declared CA, else the system roots, as librdkafka had) and hostname check, and keeps OpenSSL's reason:
``Hostname mismatch, certificate is not valid for 'localhost'``, ``certificate has expired``, ``unable to
get local issuer certificate``. Nothing is sent but the handshake; no credential is used.
"""

from __future__ import annotations

import socket
import ssl

from dr.kafka.tls import TlsFiles

__all__ = ["verify_reason"]


def verify_reason(bootstrap: str, tls: TlsFiles | None, timeout: float = 3.0) -> str | None:
    """OpenSSL's reason the first answering address of ``bootstrap`` fails verification; None when the
    handshake verifies, or nothing answers."""
    tls = tls or TlsFiles()
    context = ssl.create_default_context(cafile=tls.ca_location)
    context.check_hostname = tls.hostname_verification
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with (
                socket.create_connection((host, int(port)), timeout=timeout) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                return None
        except ssl.SSLCertVerificationError as exc:
            return str(exc.verify_message or exc.reason or exc)
        except (OSError, ValueError):
            continue
    return None
