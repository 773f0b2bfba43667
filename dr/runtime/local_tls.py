"""The TLS of a local estate: one CA per estate, made by the product, and a certificate per local cluster.

``<state>/tls/local-ca.pem`` is the CA every client of the estate trusts (the only trust anchor they
get: no system store, no JVM ``cacerts``); its key ``local-ca.key`` (0600) never leaves the directory.
The CA is made once and cached with the estate; each cluster's brokers share one certificate for
``127.0.0.1`` and ``localhost`` (``<cluster>-broker.pem``/``.key``, 0600), reissued when missing, when
the CA changed, or within 30 days of expiry. Their client listener is SASL_SSL; the inter-broker and
controller listeners stay SASL_PLAINTEXT on the loopback interface.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from dr.base.files import private_dir, write_atomic
from dr.kafka.tls import TlsFiles
from dr.runtime.certificates import Issued, issue, make_ca

__all__ = ["broker_certificate", "local_ca", "local_tls_files"]

_RENEW_BEFORE = dt.timedelta(days=30)


def _dir(state: Path) -> Path:
    return private_dir(Path(state) / "tls")


def _fresh(path: Path) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc - _RENEW_BEFORE > dt.datetime.now(dt.UTC)


def _signed_by(path: Path, ca: Issued) -> bool:
    try:
        x509.load_pem_x509_certificate(path.read_bytes()).verify_directly_issued_by(
            x509.load_pem_x509_certificate(ca.certificate_pem)
        )
    except (OSError, ValueError, TypeError, InvalidSignature):
        return False
    return True


def local_ca(state: Path) -> Issued:
    """The estate's CA (made on first use, kept under ``<state>/tls``)."""
    d = _dir(state)
    cert, key = d / "local-ca.pem", d / "local-ca.key"
    if not (key.is_file() and _fresh(cert)):
        ca = make_ca(f"kafka-dr local CA ({Path(state).name})")
        write_atomic(key, ca.key_pem.decode(), 0o600)
        write_atomic(cert, ca.certificate_pem.decode(), 0o600)
    return Issued(cert.read_bytes(), key.read_bytes())


def local_tls_files(state: Path) -> TlsFiles:
    """What a client of a local TLS cluster needs: the estate's CA (hostname verification on)."""
    local_ca(state)
    return TlsFiles(ca_location=str(_dir(state) / "local-ca.pem"))


def broker_certificate(state: Path, cluster: str) -> Issued:
    """The certificate (and key) the brokers of local cluster ``cluster`` present, signed by the estate's CA."""
    ca = local_ca(state)
    d = _dir(state)
    cert, key = d / f"{cluster}-broker.pem", d / f"{cluster}-broker.key"
    if not (key.is_file() and _fresh(cert) and _signed_by(cert, ca)):
        made = issue(ca, f"{cluster}.kafka-dr.local", ("127.0.0.1", "localhost"))
        write_atomic(key, made.key_pem.decode(), 0o600)
        write_atomic(cert, made.certificate_pem.decode(), 0o600)
    return Issued(cert.read_bytes(), key.read_bytes())
