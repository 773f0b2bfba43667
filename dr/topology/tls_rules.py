"""The rules of a cluster's transport declaration (``security_protocol`` and its ``tls`` block).

Checked with every other rule (:mod:`dr.topology.validation`) before anything runs: a protocol and a
mechanism that do not fit, mutual TLS without a client certificate, a key without its certificate, and
every declared PEM read as the clients will read it — a CA file that is missing, unreadable or not
PEM, an expired certificate (with its expiry date), a key file readable by its group or others, a key
that does not match its certificate. A
secret still encrypted (a raw stack file read without the engine) is checked where it is decrypted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from dr.topology.kinds import Kind

if TYPE_CHECKING:
    from dr.topology.model import Cluster, Tls, Topology

__all__ = ["tls_problems"]

Problem = tuple[str, str, str]
_MAX_PEM_BYTES = 1024 * 1024


def tls_problems(t: Topology) -> Iterator[Problem]:
    """(field path, problem, fix) of every broken transport rule of ``t``'s clusters."""
    for i, c in enumerate(t.clusters):
        yield from _cluster_problems(f"clusters[{i}]", c)
    tls_local = {c.name for c in t.clusters if c.is_local and c.local_tls}
    for i, cc in enumerate(t.connect_clusters):
        if cc.is_local and cc.cluster in tls_local:
            yield (
                f"connect_clusters[{i}].cluster",
                f"local Connect cluster {cc.name!r} lives on cluster {cc.cluster!r}, which runs local_tls: "
                "local Connect workers over TLS are not supported yet",
                "run the link as dedicated MirrorMaker 2 (no `connect`), or drop local_tls",
            )
    mutual = {c.name for c in t.clusters if not c.is_local and c.security_protocol == "SSL"}
    connects = {cc.name: cc for cc in t.connect_clusters}
    for i, link in enumerate(t.links):
        on = connects.get(link.connect or "")
        creds = on.replicator_credentials if on is not None else None
        ends = sorted({link.source, link.target} & mutual)
        if on is not None and not on.is_local and ends and (creds is None or not creds.keystore_file):
            yield (
                f"links[{i}].connect",
                f"link {link.name!r} runs on Connect cluster {on.name!r} and {', '.join(ends)} uses mutual TLS (SSL), "
                "but the workers are given no replicator certificate",
                f"set replicator_credentials.keystore_file of Connect cluster {on.name!r}: the path on every worker of "
                "the replicator's keystore (PKCS#12 or PEM), encrypted with the password its provider resolves",
            )
        if link.connect and {link.source, link.target} & tls_local:
            yield (
                f"links[{i}].connect",
                f"link {link.name!r} runs on Connect between clusters of which one runs local_tls: not supported yet",
                "remove `connect` (dedicated MirrorMaker 2 runs over TLS), or drop local_tls",
            )


def _cluster_problems(at: str, c: Cluster) -> Iterator[Problem]:
    name, tls = c.name, c.tls
    if c.local_tls and not c.is_local:
        yield (
            f"{at}.local_tls",
            f"is set on {c.kind} cluster {name!r}; only local clusters have a CA made by the product",
            "remove it, and declare security_protocol and tls (its CA bundle) instead",
        )
    if c.is_local:
        if tls is not None:
            yield (
                f"{at}.tls",
                f"is set on local cluster {name!r}; local clusters take no CA or certificates from the stack",
                "remove it (local clusters listen on 127.0.0.1 with credentials the product makes)",
            )
        return
    if c.security_protocol == "SSL":
        if c.kind == Kind.CONFLUENT_CLOUD:
            yield (
                f"{at}.security_protocol",
                f"confluent-cloud cluster {name!r} cannot use SSL (mutual TLS): Confluent Cloud takes SASL_SSL",
                "use security_protocol: SASL_SSL",
            )
        if "sasl_mechanism" in c.model_fields_set:
            yield (
                f"{at}.sasl_mechanism",
                f"cluster {name!r} declares SASL mechanism {c.sasl_mechanism} with security_protocol SSL, "
                "which authenticates by client certificate, not SASL",
                "remove sasl_mechanism, or use security_protocol: SASL_SSL for SASL over TLS",
            )
        if tls is None or not tls.has_client_certificate:
            yield (
                f"{at}.tls.client_certificate_file",
                f"cluster {name!r} uses SSL (mutual TLS) but declares no client certificate",
                "set tls.client_certificate_file and tls.client_key_file: the PEM certificate whose mapped DN "
                "is the admin principal, and its key (or client_certificate_pem and, as a secret, client_key_pem)",
            )
    if tls is None:
        return
    if c.security_protocol == "SASL_PLAINTEXT":
        yield (
            f"{at}.tls",
            f"is set on cluster {name!r} whose security_protocol SASL_PLAINTEXT does not use TLS",
            "set security_protocol: SASL_SSL (or SSL for mutual TLS), or remove tls",
        )
        return
    yield from _tls_problems(f"{at}.tls", name, tls)


def _tls_problems(at: str, name: str, tls: Tls) -> Iterator[Problem]:
    for field in ("ca", "client_certificate", "client_key"):
        if getattr(tls, f"{field}_file") and getattr(tls, f"{field}_pem") is not None:
            yield (
                f"{at}.{field}_file",
                f"cluster {name!r} declares both {field}_file and {field}_pem",
                f"keep one of them: the path of a PEM file, or the PEM itself in {field}_pem",
            )
    if tls.has_client_key and not tls.has_client_certificate:
        yield (
            f"{at}.client_key_file",
            f"cluster {name!r} declares a client key without its certificate",
            "add tls.client_certificate_file (or client_certificate_pem) with the key's certificate",
        )
    if tls.has_client_certificate and not tls.has_client_key:
        yield (
            f"{at}.client_certificate_file",
            f"cluster {name!r} declares a client certificate without its private key",
            "add tls.client_key_file (a 0600 PEM file), or client_key_pem as a secret",
        )
    ca, problem = _certificates(tls.ca_file, tls.ca_pem, "ca")
    if problem:
        yield (f"{at}.{problem[0]}", f"cluster {name!r}: {problem[1]}", problem[2])
    for cert in ca:
        yield from _expired(f"{at}.{'ca_file' if tls.ca_file else 'ca_pem'}", name, "CA certificate", cert)
    chain, problem = _certificates(tls.client_certificate_file, tls.client_certificate_pem, "client_certificate")
    if problem:
        yield (f"{at}.{problem[0]}", f"cluster {name!r}: {problem[1]}", problem[2])
    where = "client_certificate_file" if tls.client_certificate_file else "client_certificate_pem"
    for cert in chain[:1]:
        yield from _expired(f"{at}.{where}", name, "client certificate", cert)
    key_problem = _key_problem(tls, chain[0] if chain else None)
    if key_problem:
        yield (f"{at}.{key_problem[0]}", f"cluster {name!r}: {key_problem[1]}", key_problem[2])


def _read(path: str, field: str) -> tuple[bytes | None, Problem | None]:
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            return None, (field, f"{field} {path} does not exist or is not a file", "give the path of a PEM file")
        if p.stat().st_size > _MAX_PEM_BYTES:
            return None, (field, f"{field} {path} is larger than 1 MiB: not a PEM bundle", "give a PEM file")
        return p.read_bytes(), None
    except OSError as exc:
        return None, (field, f"{field} {path} cannot be read ({exc.strerror})", "make it readable by this user")


def _certificates(path: str | None, pem: str | None, field: str) -> tuple[list[x509.Certificate], Problem | None]:
    if path:
        data, problem = _read(path, f"{field}_file")
        where = f"{field}_file {path}"
        if problem:
            return [], problem
    elif pem:
        data, where = pem.encode(), f"{field}_pem"
    else:
        return [], None
    try:
        return x509.load_pem_x509_certificates(data or b""), None
    except ValueError:
        return [], (
            f"{field}_file" if path else f"{field}_pem",
            f"{where} holds no PEM certificate",
            "give PEM text (-----BEGIN CERTIFICATE-----); convert DER or a JKS/PKCS12 store with openssl first",
        )


def _expired(at: str, name: str, what: str, cert: x509.Certificate) -> Iterator[Problem]:
    now = dt.datetime.now(dt.UTC)
    subject = cert.subject.rfc4514_string() or "(no subject)"
    if cert.not_valid_after_utc <= now:
        yield (
            at,
            f"cluster {name!r}: the {what} {subject} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC",
            "renew it and point the stack at the new PEM",
        )
    elif cert.not_valid_before_utc > now:
        yield (
            at,
            f"cluster {name!r}: the {what} {subject} is not valid before "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC",
            "check this machine's clock, or use a certificate valid now",
        )


def _key_problem(tls: Tls, cert: x509.Certificate | None) -> Problem | None:
    if tls.client_key_file:
        data, problem = _read(tls.client_key_file, "client_key_file")
        if problem:
            return problem
        field = "client_key_file"
        mode = Path(tls.client_key_file).expanduser().stat().st_mode & 0o777
        if mode & 0o077:
            return (
                field,
                f"client_key_file {tls.client_key_file} is readable by others than its owner (mode {mode:04o}): "
                "a private key must be the owner's alone",
                f"`chmod 600 {tls.client_key_file}` (and check who read it meanwhile), then run again",
            )
    elif tls.client_key_pem is not None and not tls.client_key_pem.is_encrypted:
        data, field = tls.client_key_pem.get_secret_value().encode(), "client_key_pem"
    else:
        return None
    try:
        key = serialization.load_pem_private_key(data or b"", password=None)
    except TypeError:
        return (field, f"{field} is an encrypted private key", "give the key unencrypted in a 0600 file or a secret")
    except (ValueError, UnsupportedAlgorithm):
        return (field, f"{field} holds no PEM private key", "give PEM text (-----BEGIN PRIVATE KEY-----)")
    if cert is not None:
        raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(*raw) != cert.public_key().public_bytes(*raw):
            return (
                field,
                f"{field} is not the private key of the client certificate",
                "give the key the certificate was issued for",
            )
    return None
