"""A cluster's TLS material as files on this machine (:class:`~dr.kafka.tls.TlsFiles`), from its declaration.

Paths declared in the stack are used as they are. PEM text declared in the stack (``ca_pem``,
``client_certificate_pem``, the ``client_key_pem`` secret) is written to 0600 files under the stack's
state directory (``<state>/tls/``), rewritten only when it changed; so is, under mutual TLS, the one
PEM file (key + certificate) a Java keystore of type PEM reads. Nothing is written elsewhere, and no
system trust store is read or changed.
"""

from __future__ import annotations

from pathlib import Path

from dr.base.files import private_dir, write_atomic
from dr.kafka.tls import TlsFiles, uses_tls
from dr.topology.model import Cluster

__all__ = ["tls_files"]


def _materialised(state: Path, name: str, text: str) -> str:
    path = private_dir(state / "tls") / name
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_atomic(path, text, 0o600)
    return str(path)


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def tls_files(cluster: Cluster, state: Path, key_pem: str | None = None) -> TlsFiles | None:
    """The TLS files of ``cluster`` (None for a plaintext or local cluster). ``key_pem`` is the decrypted
    ``client_key_pem`` secret when the caller holds it (else the declared value, when it is plaintext)."""
    if cluster.is_local or not uses_tls(cluster.security_protocol):
        return None
    tls = cluster.tls
    if tls is None:
        return TlsFiles()
    ca = _absolute(tls.ca_file) if tls.ca_file else None
    if tls.ca_pem:
        ca = _materialised(state, f"{cluster.name}-ca.pem", tls.ca_pem)
    cert = _absolute(tls.client_certificate_file) if tls.client_certificate_file else None
    if tls.client_certificate_pem:
        cert = _materialised(state, f"{cluster.name}-client.pem", tls.client_certificate_pem)
    key = _absolute(tls.client_key_file) if tls.client_key_file else None
    secret = tls.client_key_pem
    if key_pem is None and secret is not None and not secret.is_encrypted:
        key_pem = secret.get_secret_value()
    if key_pem is not None:
        key = _materialised(state, f"{cluster.name}-client.key", key_pem)
    keystore = None
    if cert and key:
        both = Path(key).read_text(encoding="utf-8").rstrip("\n") + "\n" + Path(cert).read_text(encoding="utf-8")
        keystore = _materialised(state, f"{cluster.name}-keystore.pem", both)
    return TlsFiles(ca, cert, key, keystore, tls.hostname_verification)
