"""A cluster's TLS material as files on this machine (:class:`~dr.kafka.tls.TlsFiles`), from its declaration.

Paths declared in the stack are used as they are, but a CA input gives its certificates alone: a CA
file holding anything else (a private key beside the certificate) is copied without it. PEM text declared in the stack (``ca_pem``,
``client_certificate_pem``, the ``client_key_pem`` secret) is written to 0600 files under the stack's
state directory (``<state>/tls/``), rewritten only when it changed; so is, under mutual TLS, the one
keystore Java clients read: the product's own copy of the key and the certificate chain in PKCS#12,
encrypted (Kafka reads a keystore's key only with ``ssl.key.password``) with a random password kept in a
0600 file beside it, which Java clients resolve through a config provider. (A PEM keystore would need a
PBES1-encrypted key: Java 17 cannot decrypt the PBES2 keys ``cryptography`` and OpenSSL write.) The
declared key stays as it is. Nothing is written elsewhere, and no system trust store is read or changed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12

from dr.base.errors import ConfigError
from dr.base.files import private_dir, write_atomic
from dr.kafka.tls import TlsFiles, certificate_blocks, foreign_pem_blocks, uses_tls
from dr.topology.model import Cluster

__all__ = ["application_tls_files", "java_keystore", "tls_files"]


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
    ca = _ca_file(state, cluster.name, tls.ca_file) if tls.ca_file else None
    if tls.ca_pem:
        ca = _materialised(state, f"{cluster.name}-ca.pem", certificate_blocks(tls.ca_pem))
    cert = _absolute(tls.client_certificate_file) if tls.client_certificate_file else None
    if tls.client_certificate_pem:
        cert = _materialised(state, f"{cluster.name}-client.pem", tls.client_certificate_pem)
    key = _absolute(tls.client_key_file) if tls.client_key_file else None
    secret = tls.client_key_pem
    if key_pem is None and secret is not None and not secret.is_encrypted:
        key_pem = secret.get_secret_value()
    if key_pem is not None:
        key = _materialised(state, f"{cluster.name}-client.key", key_pem)
    keystore = password_file = None
    if cert and key:
        keystore, password_file = java_keystore(state, cluster.name, Path(key), Path(cert))
    return TlsFiles(ca, cert, key, keystore, tls.hostname_verification, password_file, tls.insecure_skip_verify)


def _ca_file(state: Path, name: str, declared: str) -> str:
    """The declared CA file, or — when it holds more than certificates (a private key left beside the CA
    certificate) — a 0600 copy of its certificates alone under ``<state>/tls``: no client is given the rest."""
    path = _absolute(declared)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return path  # the rules (dr.topology.tls_rules) report an unreadable CA file before anything runs
    if not foreign_pem_blocks(text):
        return path
    return _materialised(state, f"{name}-ca.pem", certificate_blocks(text))


def application_tls_files(cluster: Cluster, state: Path, app: str) -> TlsFiles | None:
    """What an application's client of ``cluster`` names (None for a plaintext or local cluster): the
    cluster's CA and hostname check and, under mutual TLS (``SSL``), where the application team puts its
    own certificate, key and PKCS#12 keystore with its password file (``<state>/clients/<app>.crt``,
    ``.key``, ``.p12``, ``.p12.password``) — the product never holds an application's key."""
    files = tls_files(cluster, state)
    if files is None:
        return None
    if cluster.security_protocol != "SSL":
        return TlsFiles(ca_location=files.ca_location, hostname_verification=files.hostname_verification)
    d = Path(state) / "clients"
    return TlsFiles(
        files.ca_location,
        str(d / f"{app}.crt"),
        str(d / f"{app}.key"),
        str(d / f"{app}.p12"),
        files.hostname_verification,
        str(d / f"{app}.p12.password"),
    )


def java_keystore(state: Path, name: str, key_path: Path, cert_path: Path) -> tuple[str, str]:
    """``(keystore, password file)`` under ``<state>/tls``: ``<name>-keystore.p12``, a PKCS#12 keystore of
    the key of ``key_path`` and the certificate chain of ``cert_path``, encrypted with the random password
    of ``<name>-keystore.password`` (0600, ``password=...``). Kept while it still holds that key and that
    chain, remade otherwise."""
    tls_dir = private_dir(state / "tls")
    keystore, password_file = tls_dir / f"{name}-keystore.p12", tls_dir / f"{name}-keystore.password"
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    chain = x509.load_pem_x509_certificates(cert_path.read_bytes())
    try:
        password = password_file.read_text(encoding="utf-8").removeprefix("password=").strip()
        kept_key, kept_cert, kept_more = pkcs12.load_key_and_certificates(keystore.read_bytes(), password.encode())
        raw = serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        if (
            kept_key is not None
            and kept_key.private_bytes(*raw) == key.private_bytes(*raw)
            and [kept_cert, *kept_more] == chain
        ):
            return str(keystore), str(password_file)
    except (OSError, ValueError, TypeError):
        pass  # missing, foreign or stale: made again below
    if not isinstance(
        key, (rsa.RSAPrivateKey, dsa.DSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)
    ):
        raise ConfigError(
            f"cluster {name!r}: the client key {key_path} is of a type a PKCS#12 keystore cannot hold",
            "give an RSA, EC or Ed25519 key",
        )
    password = secrets.token_urlsafe(24)
    write_atomic(password_file, f"password={password}\n", 0o600)
    data = pkcs12.serialize_key_and_certificates(
        b"kafka-dr", key, chain[0], chain[1:] or None, serialization.BestAvailableEncryption(password.encode())
    )
    fd = os.open(keystore.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(keystore.with_suffix(".tmp"), keystore)
    return str(keystore), str(password_file)
