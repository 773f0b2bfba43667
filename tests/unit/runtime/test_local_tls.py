"""Local TLS estates (``local_tls: true``): the estate's CA, the brokers' certificates, their listeners."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509

from dr.base.errors import TopologyError
from dr.runtime.cluster import ClusterSpec, LocalCluster, server_properties
from dr.runtime.local_tls import broker_certificate, local_ca, local_tls_files
from dr.topology import load_stack_file, load_topology

ROOT = Path(__file__).resolve().parents[3]


def test_the_ca_is_made_once_per_estate_and_keys_are_private(tmp_path: Path) -> None:
    first = local_ca(tmp_path)
    assert local_ca(tmp_path) == first
    for name in ("local-ca.key", "local-ca.pem"):
        assert stat.S_IMODE((tmp_path / "tls" / name).stat().st_mode) == 0o600
    assert local_tls_files(tmp_path).ca_location == str(tmp_path / "tls" / "local-ca.pem")
    assert b"PRIVATE" not in Path(str(local_tls_files(tmp_path).ca_location)).read_bytes()


def test_broker_certificates_name_loopback_and_follow_a_new_ca(tmp_path: Path) -> None:
    cert = x509.load_pem_x509_certificate(broker_certificate(tmp_path, "A").certificate_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert broker_certificate(tmp_path, "A") == broker_certificate(tmp_path, "A")
    (tmp_path / "tls" / "local-ca.pem").unlink()  # a new CA: the brokers' certificate is reissued under it
    again = x509.load_pem_x509_certificate(broker_certificate(tmp_path, "A").certificate_pem)
    again.verify_directly_issued_by(x509.load_pem_x509_certificate(local_ca(tmp_path).certificate_pem))


def test_a_tls_cluster_serves_clients_sasl_ssl_and_keeps_loopback_plaintext(tmp_path: Path) -> None:
    spec = ClusterSpec("A", brokers=1, base_port=17100, tls=True)
    props = server_properties(spec, 1, tmp_path, "pw", broker_certificate(tmp_path, "A"))
    assert (
        props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
    )
    assert props["listener.name.client.ssl.keystore.type"] == "PEM"
    assert "listener.name.client.ssl.keystore.key" in props
    plain = server_properties(ClusterSpec("A", brokers=1, base_port=17100), 1, tmp_path, "pw")
    assert not [k for k in plain if "ssl" in k]
    ep = LocalCluster(spec, tmp_path).endpoint_as("app", "pw")
    assert ep.security_protocol == "SASL_SSL" and ep.config()["ssl.ca.location"].endswith("local-ca.pem")
    assert ep.config()["ssl.endpoint.identification.algorithm"] == "https"


def test_the_example_stack_runs_every_cluster_over_tls() -> None:
    t = load_stack_file(ROOT / "Pulumi.local-tls.yaml")
    assert all(c.local_tls and c.client_protocol == "SASL_SSL" for c in t.clusters)


def test_local_tls_only_on_local_clusters() -> None:
    with pytest.raises(TopologyError, match=r"clusters\[0\].local_tls"):
        load_topology(
            "x",
            {
                "kafka-dr:clusters": [
                    {
                        "name": "A",
                        "role": "active",
                        "kind": "external",
                        "bootstrap_servers": "a:9093",
                        "local_tls": True,
                    }
                ]
            },
        )
