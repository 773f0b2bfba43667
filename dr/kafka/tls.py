"""What each client of the product needs to speak TLS to one cluster, from the files that hold its PEMs.

Pure renderers: given a security protocol and a :class:`TlsFiles` (paths of the CA bundle, and under
mutual TLS of the client certificate, its key, and a keystore PEM holding both), they return the
settings of each client — librdkafka (``drctl``, status, recovery, drill probes), a Java client
(MirrorMaker 2, Kafka Connect connectors, kafka tools), Spark's Kafka source (``kafka.`` options) and
the Pulumi Kafka provider. Every setting is a file *path*: private keys never appear inline in a
config, a connector, a command line or a log. No setting falls back to a system trust store or a
JVM's ``cacerts``: a declared CA is the only trust anchor each client gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TLS_PROTOCOLS",
    "TlsFiles",
    "certificate_blocks",
    "foreign_pem_blocks",
    "java_tls",
    "key_password_reference",
    "librdkafka_tls",
    "provider_tls",
    "spark_tls",
    "uses_sasl",
    "uses_tls",
]

TLS_PROTOCOLS = frozenset({"SASL_SSL", "SSL"})


def uses_tls(protocol: str) -> bool:
    """True for the protocols that encrypt (``SASL_SSL``, ``SSL``)."""
    return protocol in TLS_PROTOCOLS


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)


def certificate_blocks(text: str) -> str:
    """Only the ``CERTIFICATE`` blocks of the PEM ``text`` (a CA input), one after the other; empty when
    there is none. A CA bundle is public; whatever else a CA file holds (a private key left beside the
    certificate) must never reach a client's configuration, a connector or the Pulumi state."""
    blocks = [m.group(0) for m in _PEM_BLOCK.finditer(text) if m.group(1) == "CERTIFICATE"]
    return "\n".join(blocks) + "\n" if blocks else ""


def foreign_pem_blocks(text: str) -> list[str]:
    """The labels of the PEM blocks of ``text`` that are not certificates (``PRIVATE KEY``, ...)."""
    return [m.group(1) for m in _PEM_BLOCK.finditer(text) if m.group(1) != "CERTIFICATE"]


def uses_sasl(protocol: str) -> bool:
    """True for the protocols that log in with SASL (``SSL`` authenticates by client certificate)."""
    return protocol.startswith("SASL_")


@dataclass(frozen=True)
class TlsFiles:
    """Where one cluster's TLS material lives on this machine (PEM files; keys 0600)."""

    ca_location: str | None = None
    """The CA bundle that signed the brokers' certificates; None: the client library's default roots."""
    certificate_location: str | None = None
    """Mutual TLS: the client certificate (chain)."""
    key_location: str | None = None
    """Mutual TLS: the certificate's unencrypted private key."""
    keystore_location: str | None = None
    """Mutual TLS, for Java clients: one PEM file holding the key and the certificate chain."""
    hostname_verification: bool = True
    key_password_location: str | None = None
    """Mutual TLS, for Java clients: a 0600 properties file whose ``password=`` opens ``keystore_location``,
    then a PKCS#12 keystore (the product's own copy of the key, encrypted); without it the keystore is PEM."""
    insecure_skip_verify: bool = False
    """The Pulumi Kafka provider checks no certificate at all (declared ``tls.insecure_skip_verify``);
    every other client keeps verifying the chain."""

    @property
    def mutual(self) -> bool:
        """True when a client certificate is presented."""
        return self.certificate_location is not None


def librdkafka_tls(protocol: str, tls: TlsFiles | None) -> dict[str, str]:
    """librdkafka (confluent-kafka) settings for ``protocol`` with ``tls``; empty for a plaintext protocol."""
    if not uses_tls(protocol):
        return {}
    tls = tls or TlsFiles()
    conf = {"ssl.endpoint.identification.algorithm": "https" if tls.hostname_verification else "none"}
    if tls.ca_location:
        conf["ssl.ca.location"] = tls.ca_location
    if tls.certificate_location and tls.key_location:
        conf["ssl.certificate.location"] = tls.certificate_location
        conf["ssl.key.location"] = tls.key_location
    return conf


def java_tls(protocol: str, tls: TlsFiles | None) -> dict[str, str]:
    """Java client properties for ``protocol`` with ``tls`` (PEM trust and key stores, read from files)."""
    if not uses_tls(protocol):
        return {}
    tls = tls or TlsFiles()
    props = {"ssl.endpoint.identification.algorithm": "https" if tls.hostname_verification else ""}
    if tls.ca_location:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = tls.ca_location
    if tls.keystore_location:
        props["ssl.keystore.type"] = "PKCS12" if tls.key_password_location else "PEM"
        props["ssl.keystore.location"] = tls.keystore_location
        if tls.key_password_location:
            props |= key_password_reference(tls.key_password_location)
    return props


#: The config provider a Java client of the product resolves its key password with (a name of its own, so
#: it never replaces the ``file`` provider a worker or a team declares).
KEY_PASSWORD_PROVIDER = "kdrtls"


def key_password_reference(path: str) -> dict[str, str]:
    """``ssl.keystore.password`` and ``ssl.key.password`` as references to the ``password`` of the 0600
    properties file ``path``, and the config provider (Kafka's ``FileConfigProvider``) that resolves them:
    the password itself is in no config, command line or log."""
    p = KEY_PASSWORD_PROVIDER
    ref = f"${{{p}:{path}:password}}"
    return {
        "config.providers": p,
        f"config.providers.{p}.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "ssl.keystore.password": ref,
        "ssl.key.password": ref,
    }


def spark_tls(protocol: str, tls: TlsFiles | None) -> dict[str, str]:
    """The same as Spark Kafka source options (``kafka.``-prefixed)."""
    return {f"kafka.{key}": value for key, value in java_tls(protocol, tls).items()}


def provider_tls(protocol: str, tls: TlsFiles | None) -> dict[str, object]:
    """Arguments of the Pulumi Kafka provider (``pulumi_kafka.Provider``): ``tls_enabled``, the certificates
    of the CA file as ``ca_cert`` (only its ``CERTIFICATE`` blocks: the text lands in the Pulumi state),
    ``client_cert`` read from its file, and ``client_key`` (the caller makes it a Pulumi secret).

    The Go provider has no separate hostname check: it verifies the chain *and* the host whatever
    ``hostname_verification`` says, and checks nothing only with ``skip_tls_verify``, which is set only
    by the declared ``tls.insecure_skip_verify``."""
    if not uses_tls(protocol):
        return {"tls_enabled": False}
    tls = tls or TlsFiles()
    args: dict[str, object] = {"tls_enabled": True, "skip_tls_verify": tls.insecure_skip_verify}
    if tls.ca_location:
        args["ca_cert"] = certificate_blocks(Path(tls.ca_location).read_text(encoding="utf-8"))
    if tls.certificate_location and tls.key_location:
        args["client_cert"] = Path(tls.certificate_location).read_text(encoding="utf-8")
        args["client_key"] = Path(tls.key_location).read_text(encoding="utf-8")
    return args
