"""Existing estates over TLS, started OUTSIDE the product as a platform team runs them.

:class:`MtlsEstate`: mutual TLS. :class:`SaslSslEstate`: SCRAM over TLS (``SASL_SSL``), the brokers'
certificates signed by the team's private CA and naming ``127.0.0.1`` only (so dialling ``localhost`` is a
hostname mismatch), the Connect worker trusting that CA alone. Both share :class:`TeamCa` and the listener
settings below.

The same plain KRaft nodes and Connect worker as :mod:`tests.integration.existing_estate`, but the
clients' listener is ``SSL`` with ``ssl.client.auth=required``, signed by the team's private CA (made
here with ``cryptography``; no system trust store is touched), and ``ssl.principal.mapping.rules`` turns
a certificate's DN ``CN=<name>`` into ``User:<name>``, so the ACLs the product writes name ``User:replicator``
and ``User:orders-app``. ``admin`` and the Connect worker's own principal ``connect`` are super users;
inter-broker and controller traffic stays SASL_PLAINTEXT on the loopback interface.

What the platform team hands over: the CA (``ca.pem``), the admin's certificate and key, and, on the
Connect worker, the replicator's PKCS#12 keystore with its password in the worker's secrets file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12

from dr.runtime.certificates import Issued, issue, make_ca
from tests.integration.existing_estate import Broker, ExistingEstate, Worker

MAPPING_RULES = "RULE:^CN=([^,]+)$/$1/,DEFAULT"


def private_file(path: Path, data: bytes) -> Path:
    """``data`` at ``path``, 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def p12(path: Path, made: Issued, password: str) -> Path:
    """``made`` as a PKCS#12 keystore at ``path`` (0600), encrypted with ``password``."""
    key = serialization.load_pem_private_key(made.key_pem, password=None)
    cert = x509.load_pem_x509_certificate(made.certificate_pem)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    data = pkcs12.serialize_key_and_certificates(
        b"k", key, cert, None, serialization.BestAvailableEncryption(password.encode())
    )
    return private_file(path, data)


@dataclass
class TeamCa:
    """The platform team's CA and the certificates it issues, as files under ``root/pki``."""

    root: Path
    ca: Issued = field(default_factory=lambda: make_ca("platform team CA"))

    @property
    def ca_file(self) -> Path:
        return self.root / "pki" / "ca.pem"

    def __post_init__(self) -> None:
        private_file(self.ca_file, self.ca.certificate_pem)

    def pem(self, name: str, hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A certificate ``CN=<name>`` and its key as PEM files."""
        made = issue(self.ca, name, hosts)
        return (
            private_file(self.root / "pki" / f"{name}.pem", made.certificate_pem),
            private_file(self.root / "pki" / f"{name}.key", made.key_pem),
        )

    def keystore(self, name: str, password: str, hosts: tuple[str, ...] = ()) -> Path:
        """A PKCS#12 keystore of a certificate ``CN=<name>``."""
        return p12(self.root / "pki" / f"{name}.p12", issue(self.ca, name, hosts), password)


def _server_tls(keystore: Path, password: str, ca_file: Path) -> dict[str, str]:
    """The client listener's own keystore and the CA it trusts (for client certificates)."""
    return {
        "listener.name.client.ssl.keystore.type": "PKCS12",
        "listener.name.client.ssl.keystore.location": str(keystore),
        "listener.name.client.ssl.keystore.password": password,
        "listener.name.client.ssl.key.password": password,
        "listener.name.client.ssl.truststore.type": "PEM",
        "listener.name.client.ssl.truststore.location": str(ca_file),
    }


@dataclass
class MtlsBroker(Broker):
    """One node whose client listener is SSL with client authentication required."""

    team: TeamCa | None = None
    store_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def properties(self) -> dict[str, str]:
        assert self.team is not None
        keystore = self.team.keystore(f"broker-{self.name}", self.store_password, ("127.0.0.1", "localhost"))
        props = super().properties()
        for key in [k for k in props if k.startswith("listener.name.client.")]:
            del props[key]
        props["listener.security.protocol.map"] = props["listener.security.protocol.map"].replace(
            "CLIENT:SASL_PLAINTEXT", "CLIENT:SSL"
        )
        props.update(
            {
                **_server_tls(keystore, self.store_password, self.team.ca_file),
                "listener.name.client.ssl.client.auth": "required",
                "ssl.principal.mapping.rules": MAPPING_RULES,
                "super.users": "User:broker;User:admin;User:connect",
            }
        )
        return props


@dataclass
class MtlsWorker(Worker):
    """The Connect worker: its own certificate (``connect``) to its home cluster, and the replicator's
    keystore with its password in the secrets file the stack names."""

    team: TeamCa | None = None
    store_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    @property
    def replicator_keystore(self) -> Path:
        return self.root / "connect-secrets" / "replicator.p12"

    def properties(self) -> dict[str, str]:
        assert self.team is not None
        keystore = self.team.keystore("connect", self.store_password)
        props = super().properties()
        client = {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": self.store_password,
            "ssl.key.password": self.store_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.team.ca_file),
        }
        for prefix in ("", "producer.", "consumer.", "admin."):
            props.pop(prefix + "sasl.mechanism", None)
            props.pop(prefix + "sasl.jaas.config", None)
            props.update({prefix + k: v for k, v in client.items()})
        return props

    def write_secrets(self, username: str = "replicator") -> None:
        super().write_secrets(username)
        assert self.team is not None
        p12(self.replicator_keystore, issue(self.team.ca, "replicator"), self.replicator_password)


class MtlsEstate(ExistingEstate):
    """A, B, C with mutual TLS client listeners and a Connect worker homed on C."""

    def __post_init__(self) -> None:
        self.team = TeamCa(self.root)
        self.clusters = {n: MtlsBroker(n, p, self.root, team=self.team) for n, p in zip("ABC", self.ports, strict=True)}
        self.connect = MtlsWorker("platform", self.ports[2] + 60, self.clusters["C"], self.root, team=self.team)


@dataclass
class SaslSslBroker(Broker):
    """One node whose client listener is SCRAM over TLS (``SASL_SSL``), its certificate naming 127.0.0.1 only."""

    team: TeamCa | None = None
    store_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def properties(self) -> dict[str, str]:
        assert self.team is not None
        keystore = self.team.keystore(f"broker-{self.name}", self.store_password, ("127.0.0.1",))
        props = super().properties()
        props["listener.security.protocol.map"] = props["listener.security.protocol.map"].replace(
            "CLIENT:SASL_PLAINTEXT", "CLIENT:SASL_SSL"
        )
        props.update(_server_tls(keystore, self.store_password, self.team.ca_file))
        return props


@dataclass
class SaslSslWorker(Worker):
    """The Connect worker: SCRAM over TLS to its home cluster, trusting the team's CA alone (no cacerts)."""

    team: TeamCa | None = None

    def properties(self) -> dict[str, str]:
        assert self.team is not None
        props = super().properties()
        client = {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.team.ca_file),
        }
        for prefix in ("", "producer.", "consumer.", "admin."):
            props.update({prefix + k: v for k, v in client.items()})
        return props


class SaslSslEstate(ExistingEstate):
    """A, B, C with SASL_SSL client listeners signed by the team's CA, and a Connect worker homed on C."""

    def __post_init__(self) -> None:
        self.team = TeamCa(self.root)
        self.clusters = {
            n: SaslSslBroker(n, p, self.root, team=self.team) for n, p in zip("ABC", self.ports, strict=True)
        }
        self.connect = SaslSslWorker("platform", self.ports[2] + 60, self.clusters["C"], self.root, team=self.team)


E = TypeVar("E", bound=ExistingEstate)


@contextmanager
def running(estate: E) -> Iterator[E]:
    """``estate`` started for the module and stopped after it, leaving no process behind."""
    try:
        estate.start()
        yield estate
    finally:
        estate.stop()
        assert not estate.pids(), f"a process of {type(estate).__name__} was left running"


def orders_stack(clusters: list[dict[str, Any]], connect: dict[str, Any]) -> dict[str, Any]:
    """The stack the TLS estates' tests declare: ``clusters`` (A active, B passive, C standby, each with its
    listener's settings), the topic ``orders`` written by orders-app, and the link A→B on the Connect cluster
    ``platform`` homed on C (``connect``: its ``url`` and ``replicator_credentials``)."""
    roles = ("active", "passive", "standby")
    return {
        "config": {
            "kafka-dr:profile": "dev",
            "kafka-dr:failoverDone": False,
            "kafka-dr:clusters": [
                {"role": role, "kind": "external", **c} for c, role in zip(clusters, roles, strict=True)
            ],
            "kafka-dr:topics": [
                {"name": "orders", "partitions": 3, "replication_factor": 1, "min_insync_replicas": 1},
            ],
            "kafka-dr:principals": {
                "admin": "admin",
                "replicator": "replicator",
                "applications": [{"name": "orders-app", "produces": ["orders"], "consumer_group": "orders-app"}],
            },
            "kafka-dr:links": [
                {
                    "name": "A-to-B",
                    "source": "A",
                    "target": "B",
                    "topics": ["orders"],
                    "consumer_groups": [".*"],
                    "connect": "platform",
                }
            ],
            "kafka-dr:connectClusters": [{"name": "platform", "cluster": "C", "tasks_max": 1, **connect}],
        }
    }


__all__ = [
    "MAPPING_RULES",
    "MtlsEstate",
    "SaslSslEstate",
    "TeamCa",
    "orders_stack",
    "p12",
    "private_file",
    "running",
]
