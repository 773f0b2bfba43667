"""A cluster's transport declaration (security_protocol + tls): the model, and the rules checked before
anything runs — each naming the cluster and the field (exit 2)."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.runtime.certificates import Issued, issue, make_ca
from dr.topology import Topology, load_stack_file, load_topology

_NOBODY = 65534


@pytest.fixture(scope="module")
def ca() -> Issued:
    return make_ca("kdr test CA")


@pytest.fixture(scope="module")
def client(ca: Issued) -> Issued:
    return issue(ca, "admin")


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def _topology(a: dict[str, Any]) -> Topology:
    base = {"name": "A", "role": "active", "kind": "external", "bootstrap_servers": "a.example:9093"}
    clusters = [
        {**base, **a},
        {"name": "B", "role": "passive", "kind": "external", "bootstrap_servers": "b.example:9093"},
    ]
    return load_topology(
        "tls",
        {
            "kafka-dr:clusters": clusters,
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )


def _refused(a: dict[str, Any]) -> str:
    with pytest.raises(TopologyError) as info:
        _topology(a)
    assert info.value.exit_code == 2
    return str(info.value)


def test_sasl_ssl_with_a_private_ca_file_is_accepted(tmp_path: Path, ca: Issued) -> None:
    t = _topology(
        {"security_protocol": "SASL_SSL", "tls": {"ca_file": _write(tmp_path / "ca.pem", ca.certificate_pem)}}
    )
    tls = t.cluster("A").tls
    assert tls is not None and tls.ca_file == str(tmp_path / "ca.pem") and tls.hostname_verification is True


def test_mutual_tls_with_certificate_and_key_files_is_accepted(tmp_path: Path, ca: Issued, client: Issued) -> None:
    t = _topology(
        {
            "security_protocol": "SSL",
            "tls": {
                "caPem": ca.certificate_pem.decode(),
                "clientCertificateFile": _write(tmp_path / "admin.pem", client.certificate_pem),
                "clientKeyFile": _write(tmp_path / "admin.key", client.key_pem),
                "hostnameVerification": False,
                "principalMappingRules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            },
        }
    )
    a = t.cluster("A")
    assert a.security_protocol == "SSL" and a.tls is not None and a.tls.hostname_verification is False


def test_a_missing_ca_file_names_the_cluster_and_field(tmp_path: Path) -> None:
    text = _refused({"tls": {"ca_file": str(tmp_path / "nowhere.pem")}})
    assert "clusters[0].tls.ca_file" in text and "'A'" in text and "does not exist" in text


def test_a_ca_file_that_is_not_pem_is_refused(tmp_path: Path) -> None:
    text = _refused({"tls": {"ca_file": _write(tmp_path / "ca.der", b"\x30\x82\x01\x0a garbage")}})
    assert "clusters[0].tls.ca_file" in text and "no PEM certificate" in text


@contextmanager
def _as_nobody_when_root() -> Iterator[None]:
    """Root reads any file: as root (how CI runs), act as ``nobody`` for the block (effective uid only; the
    saved uid brings root back)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(_NOBODY)
    os.seteuid(_NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_an_unreadable_ca_file_is_refused(ca: Issued) -> None:
    _topology({"tls": {"ca_pem": ca.certificate_pem.decode()}})  # every module the check needs imported first
    with tempfile.TemporaryDirectory() as where:
        Path(where).chmod(0o755)  # the file's own mode is what refuses it, not its directory's
        path = _write(Path(where) / "ca.pem", ca.certificate_pem)
        Path(path).chmod(0)
        with _as_nobody_when_root():
            assert not os.access(path, os.R_OK, effective_ids=True)
            text = _refused({"tls": {"ca_file": path}})
    assert "cannot be read" in text and "clusters[0].tls.ca_file" in text


def test_an_expired_client_certificate_names_its_expiry_date(tmp_path: Path, ca: Issued) -> None:
    old = issue(ca, "admin", days=30, not_before=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    text = _refused(
        {
            "security_protocol": "SSL",
            "tls": {
                "ca_pem": ca.certificate_pem.decode(),
                "client_certificate_file": _write(tmp_path / "old.pem", old.certificate_pem),
                "client_key_file": _write(tmp_path / "old.key", old.key_pem),
            },
        }
    )
    assert "clusters[0].tls.client_certificate_file" in text
    assert "expired on 2024-01-31" in text and "CN=admin" in text


def test_an_expired_ca_is_refused(ca: Issued) -> None:
    old = make_ca("old CA", days=1, not_before=dt.datetime(2023, 5, 1, tzinfo=dt.UTC))
    assert "expired on 2023-05-02" in _refused({"tls": {"ca_pem": old.certificate_pem.decode()}})


def test_a_key_without_its_certificate_is_refused(tmp_path: Path, client: Issued) -> None:
    text = _refused({"tls": {"client_key_file": _write(tmp_path / "k.pem", client.key_pem)}})
    assert "clusters[0].tls.client_key_file" in text and "without its certificate" in text


def test_a_key_that_is_not_the_certificates_is_refused(tmp_path: Path, ca: Issued, client: Issued) -> None:
    other = issue(ca, "other")
    text = _refused(
        {
            "tls": {
                "client_certificate_file": _write(tmp_path / "c.pem", client.certificate_pem),
                "client_key_file": _write(tmp_path / "k.pem", other.key_pem),
            }
        }
    )
    assert "not the private key of the client certificate" in text


def test_a_sasl_mechanism_with_protocol_ssl_is_refused(tmp_path: Path, client: Issued) -> None:
    text = _refused(
        {
            "security_protocol": "SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "tls": {
                "client_certificate_file": _write(tmp_path / "c.pem", client.certificate_pem),
                "client_key_file": _write(tmp_path / "k.pem", client.key_pem),
            },
        }
    )
    assert "clusters[0].sasl_mechanism" in text and "security_protocol SSL" in text


def test_ssl_without_a_client_certificate_is_refused(tmp_path: Path, ca: Issued) -> None:
    text = _refused({"security_protocol": "SSL", "tls": {"ca_file": _write(tmp_path / "ca.pem", ca.certificate_pem)}})
    assert "clusters[0].tls.client_certificate_file" in text and "mutual TLS" in text
    assert "no client certificate" in _refused({"security_protocol": "SSL"})


def test_tls_with_sasl_plaintext_is_refused(ca: Issued) -> None:
    text = _refused({"security_protocol": "SASL_PLAINTEXT", "tls": {"ca_pem": ca.certificate_pem.decode()}})
    assert "clusters[0].tls" in text and "SASL_PLAINTEXT" in text


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = _refused(
        {
            "security_protocol": "SSL",
            "sasl_mechanism": "PLAIN",
            "tls": {"ca_file": str(tmp_path / "no.pem"), "client_key_file": str(tmp_path / "no.key")},
        }
    )
    for field in ("sasl_mechanism", "tls.client_certificate_file", "tls.ca_file", "tls.client_key_file"):
        assert f"clusters[0].{field}" in text


def test_an_unknown_tls_key_and_protocol_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"clusters\[0\].tls.caFiel|ca_fiel"):
        _topology({"tls": {"ca_fiel": "/x"}})
    with pytest.raises(ConfigError, match="security_protocol"):
        _topology({"security_protocol": "TLS"})


def test_a_client_key_in_plain_text_in_the_stack_file_is_refused(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.tls.yaml"
    stack.write_text(
        "config:\n"
        "  kafka-dr:clusters:\n"
        "    - {name: A, role: active, kind: external, bootstrap_servers: 'a:9093',\n"
        "       tls: {clientKeyPem: '-----BEGIN PRIVATE KEY-----'}}\n"
    )
    with pytest.raises(ConfigError, match=r"tls.clientKeyPem"):
        load_stack_file(stack)


def test_the_key_secret_is_a_secret_field_and_never_shown(client: Issued) -> None:
    t = _topology(
        {
            "tls": {
                "client_certificate_pem": client.certificate_pem.decode(),
                "client_key_pem": client.key_pem.decode(),
            }
        }
    )
    assert [p for p, _k, _v in t.secret_fields()] == ["clusters[0].tls.client_key_pem"]
    assert "PRIVATE" not in repr(t) and "PRIVATE" not in str(t.model_dump(mode="json"))
