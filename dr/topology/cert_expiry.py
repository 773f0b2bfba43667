"""When each certificate a stack uses expires: the declared CA bundles and client certificates, and the
local estate's CA and broker certificates.

Read only: nothing is made, renewed or written (a local estate whose CA was not made yet lists nothing
for it). A certificate already expired never gets here from a declaration — the stack is refused
before anything runs, naming it with its expiry date (:mod:`dr.topology.tls_rules`) — but the local
estate's own certificates, and certificates expiring soon, are listed with the days they have left.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from pydantic import BaseModel, ConfigDict

from dr.topology.model import Cluster, Topology

__all__ = ["CertificateExpiry", "certificate_expiries", "expiring"]


class CertificateExpiry(BaseModel):
    """One certificate of the stack and when it stops being valid."""

    model_config = ConfigDict(frozen=True)

    cluster: str
    use: str
    """What it is for: ``CA bundle``, ``client certificate``, ``local CA``, ``broker certificate``."""
    source: str
    """Where it is read from: a path, or the stack field holding the PEM (e.g. ``clusters[0].tls.ca_pem``)."""
    subject: str
    issuer: str
    serial: str
    not_after: dt.datetime
    days_left: float


def _entry(cluster: str, use: str, source: str, cert: x509.Certificate, now: dt.datetime) -> CertificateExpiry:
    return CertificateExpiry(
        cluster=cluster,
        use=use,
        source=source,
        subject=cert.subject.rfc4514_string() or "(no subject)",
        issuer=cert.issuer.rfc4514_string() or "(no issuer)",
        serial=format(cert.serial_number, "x"),
        not_after=cert.not_valid_after_utc,
        days_left=round((cert.not_valid_after_utc - now).total_seconds() / 86400, 1),
    )


def _load(data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        return []  # a declared PEM that is not one is refused by the stack's rules first


def _read(path: str | Path) -> list[x509.Certificate]:
    try:
        return _load(Path(path).expanduser().read_bytes())
    except OSError:
        return []


def _declared(at: str, c: Cluster, now: dt.datetime) -> Iterator[CertificateExpiry]:
    tls = c.tls
    if tls is None:
        return
    if tls.ca_file or tls.ca_pem:
        source = tls.ca_file or f"{at}.tls.ca_pem"
        certs = _read(tls.ca_file) if tls.ca_file else _load((tls.ca_pem or "").encode())
        for cert in certs:  # every entry of the bundle: a rotation has the old and the new CA side by side
            yield _entry(c.name, "CA bundle", source, cert, now)
    if tls.client_certificate_file or tls.client_certificate_pem:
        source = tls.client_certificate_file or f"{at}.tls.client_certificate_pem"
        chain = (
            _read(tls.client_certificate_file)
            if tls.client_certificate_file
            else _load((tls.client_certificate_pem or "").encode())
        )
        for i, cert in enumerate(chain):
            yield _entry(c.name, "client certificate" if i == 0 else "client chain", source, cert, now)


def _local(c: Cluster, state: Path, now: dt.datetime) -> Iterator[CertificateExpiry]:
    tls_dir = state / "tls"
    for use, path in (("local CA", tls_dir / "local-ca.pem"), ("broker certificate", tls_dir / f"{c.name}-broker.pem")):
        for cert in _read(path)[:1]:
            yield _entry(c.name, use, str(path), cert, now)


def certificate_expiries(topology: Topology, state: Path, now: dt.datetime | None = None) -> list[CertificateExpiry]:
    """Every certificate ``topology`` uses (with ``state``, the stack's state directory, for a local
    estate's own), soonest expiry first. The local CA, shared by the estate, is listed once."""
    now = now or dt.datetime.now(dt.UTC)
    found: list[CertificateExpiry] = []
    for i, c in enumerate(topology.clusters):
        if c.is_local:
            if c.local_tls:
                found.extend(_local(c, Path(state), now))
        else:
            found.extend(_declared(f"clusters[{i}]", c, now))
    seen: set[tuple[str, str]] = set()
    unique = []
    for e in found:
        if e.use == "local CA":
            if ("local CA", e.serial) in seen:
                continue
            seen.add(("local CA", e.serial))
            e = e.model_copy(update={"cluster": "(estate)"})
        unique.append(e)
    return sorted(unique, key=lambda e: (e.not_after, e.cluster, e.use))


def expiring(entries: list[CertificateExpiry], within_days: float) -> list[CertificateExpiry]:
    """The entries that expire within ``within_days`` days (or have expired)."""
    return [e for e in entries if e.days_left <= within_days]
