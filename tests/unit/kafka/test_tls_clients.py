"""Every client's TLS settings come from the cluster's declaration (dr.kafka.tls, dr.topology.transport):
librdkafka, Java, Spark, the Pulumi Kafka provider, Connect connectors, published client files; PEMs
given in the stack land in 0600 files; a TLS failure reads as its TLS cause, not "cannot reach"."""

from __future__ import annotations

import json
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pulumi
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from pulumi.runtime import config as pulumi_config

from dr.base.errors import ClusterError, ConfigError, TopologyError
from dr.failover.act.clients import _kept_json, _kept_properties
from dr.kafka.client import Endpoint, connected_admin
from dr.kafka.tls import TlsFiles, java_tls, librdkafka_tls, provider_tls, spark_tls
from dr.runtime.certificates import Issued, issue, make_ca
from dr.topology import Topology, load_topology
from dr.topology.external import external_endpoint
from dr.topology.transport import application_tls_files, java_keystore, tls_files
from stacks.links.connect_config import connector_configs
from tests.unit.stacks.test_stack_program import PROVIDER, is_secret, plain_leaves, provider_input, run_program


@pytest.fixture(scope="module")
def ca() -> Issued:
    return make_ca("kdr unit CA")


@pytest.fixture(scope="module")
def admin(ca: Issued) -> Issued:
    return issue(ca, "admin")


def _topology(
    a: dict[str, Any],
    b: dict[str, Any] | None = None,
    keystore: str | None = None,
    worker_tls: dict[str, str] | None = None,
    **extra: Any,
) -> Topology:
    def ext(name: str, role: str, more: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": f"{name.lower()}.example:9093",
            "admin_username": "admin",
            "admin_password": "pw",
            **more,
        }

    return load_topology(
        "tls",
        {
            "kafka-dr:clusters": [ext("A", "active", a), ext("B", "passive", b or {})],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {
                "replicator_password": "rpw",
                "applications": [{"name": "app", "produces": ["orders"]}],
            },
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B", **extra}],
            **(
                {
                    "kafka-dr:connectClusters": [
                        {
                            "name": "dr",
                            "cluster": "B",
                            "url": "http://connect.example:8083",
                            "replicator_credentials": {"provider": "file", "path": "/etc/kc/r.properties"}
                            | ({"keystore_file": keystore} if keystore else {}),
                            **({"worker_tls": worker_tls} if worker_tls else {}),
                        }
                    ]
                }
                if extra.get("connect")
                else {}
            ),
        },
    )


FILES = TlsFiles("/ca.pem", "/c.pem", "/c.key", "/ks.pem", hostname_verification=True)


def test_renderers_name_files_only_and_no_system_store() -> None:
    assert librdkafka_tls("SASL_PLAINTEXT", FILES) == {}
    assert librdkafka_tls("SSL", FILES) == {
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/c.key",
    }
    assert java_tls("SASL_SSL", TlsFiles("/ca.pem", hostname_verification=False)) == {
        "ssl.endpoint.identification.algorithm": "",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
    }
    java = java_tls("SSL", FILES)
    assert java["ssl.keystore.type"] == "PEM" and java["ssl.keystore.location"] == "/ks.pem"
    assert not any("cacerts" in v or "password" in k for k, v in java.items())
    assert spark_tls("SSL", FILES)["kafka.ssl.truststore.location"] == "/ca.pem"


def test_provider_args_carry_the_pems_and_skip_verify_only_when_declared(tmp_path: Path, ca: Issued) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    args = provider_tls("SASL_SSL", TlsFiles(str(tmp_path / "ca.pem")))
    assert args == {"tls_enabled": True, "skip_tls_verify": False, "ca_cert": ca.certificate_pem.decode()}
    # the provider cannot skip the host check alone: only the declared insecure_skip_verify skips its checks
    assert provider_tls("SASL_SSL", TlsFiles(hostname_verification=False))["skip_tls_verify"] is False
    assert provider_tls("SASL_SSL", TlsFiles(insecure_skip_verify=True))["skip_tls_verify"] is True
    assert provider_tls("SASL_PLAINTEXT", None) == {"tls_enabled": False}


def test_endpoint_under_mutual_tls_has_no_sasl_and_under_sasl_ssl_both() -> None:
    mtls = Endpoint("h:9093", "", "", "SSL", tls=FILES).config()
    assert not [k for k in mtls if k.startswith("sasl")] and mtls["ssl.key.location"] == "/c.key"
    java = Endpoint("h:9093", "u", "p", "SASL_SSL", tls=FILES).java_config()
    assert java["sasl.mechanism"] == "SCRAM-SHA-512" and java["ssl.truststore.location"] == "/ca.pem"
    assert Endpoint("h:9093", "u", "p", "SASL_SSL", tls=FILES).with_user("x", "y").tls == FILES


def test_pems_in_the_stack_become_0600_files_under_the_state_dir(tmp_path: Path, ca: Issued, admin: Issued) -> None:
    t = _topology(
        {
            "security_protocol": "SSL",
            "tls": {
                "ca_pem": ca.certificate_pem.decode(),
                "client_certificate_pem": admin.certificate_pem.decode(),
                "client_key_pem": admin.key_pem.decode(),
            },
        }
    )
    files = tls_files(t.cluster("A"), tmp_path)
    assert files is not None and files.ca_location and files.key_location and files.keystore_location
    for path in (files.ca_location, files.certificate_location, files.key_location, files.keystore_location):
        p = Path(str(path))
        assert p.parent == tmp_path / "tls" and stat.S_IMODE(p.stat().st_mode) == 0o600
    assert files.key_password_location and files.keystore_location.endswith(".p12")
    password = Path(files.key_password_location).read_text().removeprefix("password=").strip()
    with pytest.raises(ValueError):  # the product's copy of the key is encrypted ...
        pkcs12.load_key_and_certificates(Path(files.keystore_location).read_bytes(), None)
    _key, cert, _ = pkcs12.load_key_and_certificates(Path(files.keystore_location).read_bytes(), password.encode())
    assert cert is not None and cert.public_bytes(serialization.Encoding.PEM) == admin.certificate_pem
    java = java_tls("SSL", files)  # ... and Java clients resolve its password through a config provider
    assert java["ssl.keystore.type"] == "PKCS12" and password not in str(java)
    assert java["ssl.key.password"] == f"${{kdrtls:{files.key_password_location}:password}}"
    assert java["config.providers.kdrtls.class"].endswith("FileConfigProvider")
    ep = external_endpoint(t.cluster("A"), state=tmp_path)
    assert ep.cluster == "A" and ep.config()["ssl.ca.location"] == files.ca_location
    assert "PRIVATE" not in repr(ep)


def test_connectors_trust_the_declared_ca_without_a_key_inline(tmp_path: Path, ca: Issued) -> None:
    (tmp_path / "a-ca.pem").write_bytes(ca.certificate_pem)
    t = _topology(
        {"tls": {"ca_file": str(tmp_path / "a-ca.pem")}},
        {"tls": {"ca_pem": ca.certificate_pem.decode(), "hostname_verification": False}},
        connect="dr",
    )
    source = connector_configs(t, t.links[0])["A-to-B-source"]
    assert source["source.cluster.ssl.truststore.type"] == "PEM"
    assert source["source.cluster.ssl.truststore.location"] == str(tmp_path / "a-ca.pem")
    assert source["source.cluster.ssl.endpoint.identification.algorithm"] == "https"
    assert source["target.cluster.ssl.truststore.certificates"] == ca.certificate_pem.decode()
    assert source["producer.override.ssl.endpoint.identification.algorithm"] == ""
    assert not any("PRIVATE KEY" in v or "keystore" in k for k, v in source.items())


INHERITING = ("producer.override", "consumer.override", "admin.override")


@pytest.mark.parametrize("store", ["none", "PKCS12", "JKS", "PEM", "PEM-inline"])
@pytest.mark.parametrize("declared", ["ca_file", "ca_pem"])
def test_the_clients_connect_builds_keep_a_workers_own_truststore_whole(
    tmp_path: Path, ca: Issued, store: str, declared: str
) -> None:
    """Connect lays a connector's overrides over the workers' own ``producer.``/``consumer.``/``admin.``
    settings and an override removes none: over a declared truststore of the workers' own (a PKCS12/JKS
    password, a PEM location or inline certificates) those clients set no truststore key; MirrorMaker 2's
    own clients of both ends always take the stack's CA."""
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    pem = ca.certificate_pem.decode()
    tls = {"tls": {"ca_file": str(tmp_path / "ca.pem")} if declared == "ca_file" else {"ca_pem": pem}}
    t = _topology(tls, tls, worker_tls={"truststore": store}, connect="dr")
    for config in connector_configs(t, t.links[0]).values():
        for prefix in ("source.cluster", "target.cluster", *INHERITING):
            truststore = {k for k in config if k.startswith(f"{prefix}.ssl.truststore.")}
            if prefix in INHERITING and store != "none":
                assert truststore == set(), f"{prefix} over a {store} worker truststore: {sorted(truststore)}"
                continue
            assert config[f"{prefix}.ssl.truststore.type"] == "PEM"
            where = "location" if declared == "ca_file" else "certificates"
            assert truststore == {f"{prefix}.ssl.truststore.type", f"{prefix}.ssl.truststore.{where}"}
            assert config[f"{prefix}.ssl.endpoint.identification.algorithm"] == "https"


def test_a_replicator_keystore_that_cannot_sit_over_the_workers_own_is_refused(admin: Issued, tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_bytes(admin.certificate_pem)
    (tmp_path / "c.key").write_bytes(admin.key_pem)
    (tmp_path / "c.key").chmod(0o600)
    a = {
        "security_protocol": "SSL",
        "tls": {"client_certificate_file": str(tmp_path / "c.pem"), "client_key_file": str(tmp_path / "c.key")},
    }

    def configs(keystore: str, worker_keystore: str) -> dict[str, dict[str, str]]:
        t = _topology(a, a, keystore=keystore, worker_tls={"keystore": worker_keystore}, connect="dr")
        creds = t.connect_clusters[0].replicator_credentials
        assert creds is not None
        return connector_configs(t, t.links[0], credentials=creds.references(), keystore=creds)

    with pytest.raises(ConfigError, match=r"store password.*\n.*PKCS#12 keystore"):
        configs("/etc/kc/replicator.pem", "JKS")
    with pytest.raises(ConfigError, match=r"own key inline.*\n.*keystore file"):
        configs("/etc/kc/replicator.p12", "PEM-inline")
    source = configs("/etc/kc/replicator.p12", "PKCS12")["A-to-B-source"]
    assert source["producer.override.ssl.keystore.password"] == "${file:/etc/kc/r.properties:password}"
    assert configs("/etc/kc/replicator.pem", "PEM")["A-to-B-source"]["producer.override.ssl.keystore.type"] == "PEM"


def test_connectors_under_mutual_tls_use_the_replicators_keystore_on_the_workers(tmp_path: Path, admin: Issued) -> None:
    (tmp_path / "c.pem").write_bytes(admin.certificate_pem)
    (tmp_path / "c.key").write_bytes(admin.key_pem)
    (tmp_path / "c.key").chmod(0o600)
    a = {
        "security_protocol": "SSL",
        "tls": {"client_certificate_file": str(tmp_path / "c.pem"), "client_key_file": str(tmp_path / "c.key")},
    }
    with pytest.raises(TopologyError, match=r"links\[0\].connect: .*A uses mutual TLS.*keystore_file"):
        _topology(a, connect="dr")
    t = _topology(a, keystore="/etc/kc/replicator.p12", connect="dr")
    creds = t.connect_clusters[0].replicator_credentials
    assert creds is not None
    with pytest.raises(ConfigError, match=r"mutual TLS.*\n.*replicator_credentials.keystore_file"):
        connector_configs(t, t.links[0], credentials=creds.references())  # a caller that forgets it
    source = connector_configs(t, t.links[0], credentials=creds.references(), keystore=creds)["A-to-B-source"]
    assert source["source.cluster.security.protocol"] == "SSL"
    assert not [k for k in source if k.startswith("source.cluster.sasl")]  # the certificate is the login
    assert source["source.cluster.ssl.keystore.type"] == "PKCS12"
    assert source["source.cluster.ssl.keystore.location"] == "/etc/kc/replicator.p12"
    password_ref = "${file:/etc/kc/r.properties:password}"
    assert source["source.cluster.ssl.key.password"] == source["source.cluster.ssl.keystore.password"] == password_ref
    assert source["target.cluster.sasl.mechanism"] == "SCRAM-SHA-512"  # B stays SASL_SSL
    assert "target.cluster.ssl.keystore.location" not in source and "PRIVATE" not in json.dumps(source)


def test_a_rewritten_client_file_keeps_the_keys_the_product_does_not_own(tmp_path: Path) -> None:
    props = tmp_path / "app.properties"
    props.write_text(
        "# old header\nbootstrap.servers=a:9093\nssl.keystore.location=/apps/me.pem\n"
        "sasl.jaas.config=old\nlinger.ms=50\nlong.value=a\\\n  b\n"
    )
    assert _kept_properties(props) == ["ssl.keystore.location=/apps/me.pem", "linger.ms=50", "long.value=a\\", "  b"]
    js = tmp_path / "app.json"
    js.write_text(json.dumps({"bootstrap.servers": "a", "ssl.key.password": "mine", "linger.ms": 5}))
    assert _kept_json(js) == {"ssl.key.password": "mine", "linger.ms": 5}
    # under mutual TLS the product writes the keystore path itself: the old value is replaced
    assert "ssl.keystore.location=/apps/me.pem" not in _kept_properties(props, frozenset({"ssl.keystore.location"}))


# -- a real TLS handshake refused: the error names the cluster, the endpoint and the TLS cause ----------


@contextmanager
def _serving(tmp_path: Path, leaf: Issued) -> Iterator[int]:
    """A TLS server on 127.0.0.1 presenting ``leaf`` (it only completes handshakes); its port."""
    (tmp_path / "srv.pem").write_bytes(leaf.certificate_pem)
    (tmp_path / "srv.key").write_bytes(leaf.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "srv.pem", tmp_path / "srv.key")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(2)
    sock.close()


@pytest.fixture
def tls_listener(tmp_path: Path) -> Iterator[int]:
    """A TLS server on 127.0.0.1 whose certificate an unrelated CA signed."""
    with _serving(tmp_path, issue(make_ca("someone else's CA"), "localhost", ("127.0.0.1", "localhost"))) as port:
        yield port


def test_a_certificate_naming_another_host_reads_as_a_hostname_mismatch(tmp_path: Path, ca: Issued) -> None:
    """librdkafka says only "certificate verify failed"; the error adds OpenSSL's reason."""
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    with _serving(tmp_path, issue(ca, "broker", ("localhost",))) as port:
        ep = Endpoint(f"127.0.0.1:{port}", "admin", "pw", "SASL_SSL", tls=TlsFiles(str(tmp_path / "ca.pem")))
        with pytest.raises(ClusterError) as info:
            connected_admin(ep, timeout=8)
    assert "certificate verify failed" in str(info.value) and "IP address mismatch" in str(info.value)


def test_a_wrong_ca_reads_as_certificate_verify_failed(tmp_path: Path, ca: Issued, tls_listener: int) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    ep = Endpoint(
        f"127.0.0.1:{tls_listener}", "admin", "pw", "SASL_SSL", tls=TlsFiles(str(tmp_path / "ca.pem")), cluster="A"
    )
    with pytest.raises(ClusterError) as info:
        connected_admin(ep, timeout=8)
    text = str(info.value)
    assert "cluster 'A'" in text and f"127.0.0.1:{tls_listener}" in text and "certificate verify failed" in text
    assert "cannot reach" not in text and "tls.ca_file" in text and str(tmp_path / "ca.pem") in text


@pytest.mark.timeout(60)
def test_a_tls_failure_comes_back_in_seconds_not_after_the_whole_timeout(
    tmp_path: Path, ca: Issued, tls_listener: int
) -> None:
    """``drctl status`` of a cluster whose handshake fails: the error callback is read after a first short
    try, not after all of the timeout (it was 10 s per cluster)."""
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    ep = Endpoint(f"127.0.0.1:{tls_listener}", "admin", "pw", "SASL_SSL", tls=TlsFiles(str(tmp_path / "ca.pem")))
    # A timeout far above the test's own (60 s): a client that waited it out fails the test by pytest-timeout,
    # a wall-clock bound no load reaches; the short first try answers in about a second.
    with pytest.raises(ClusterError, match="certificate verify failed"):
        connected_admin(ep, timeout=600)


# -- the Pulumi program: the provider gets the CA and (secret) client key, SASL only where it applies ----


@pytest.fixture(autouse=True)
def _no_config_leak() -> Iterator[None]:
    found = dict(pulumi_config.CONFIG.get())
    pulumi.runtime.set_all_config({})
    yield
    pulumi.runtime.set_all_config(found)


def test_the_program_gives_each_provider_its_clusters_tls(tmp_path: Path, ca: Issued, admin: Issued) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    t = _topology(
        {"tls": {"ca_file": str(tmp_path / "ca.pem")}},
        {
            "security_protocol": "SSL",
            "tls": {
                "ca_pem": ca.certificate_pem.decode(),
                "client_certificate_pem": admin.certificate_pem.decode(),
                "client_key_pem": admin.key_pem.decode(),
            },
        },
    )
    run = run_program(t, tmp_path / "state")
    a, b = run.named(PROVIDER, "A-kafka").inputs, run.named(PROVIDER, "B-kafka").inputs
    assert provider_input(a["tlsEnabled"]) is True and a["caCert"] == ca.certificate_pem.decode()
    assert a["saslUsername"] == "admin" and "clientKey" not in a
    assert provider_input(b["skipTlsVerify"]) is False and b["clientCert"] == admin.certificate_pem.decode()
    assert is_secret(b["clientKey"]) and "saslUsername" not in b
    assert not [v for v in plain_leaves(b) if "PRIVATE KEY" in str(v)]
    client = run.outputs["clientConfigs"]["app"]
    assert client["ssl.truststore.type"] == "PEM" and client["ssl.ca.location"] == str(tmp_path / "ca.pem")


def test_the_client_configs_output_under_mutual_tls_names_the_certificate_the_published_files_name(
    tmp_path: Path, ca: Issued, admin: Issued
) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.certificate_pem)
    (tmp_path / "c.pem").write_bytes(admin.certificate_pem)
    (tmp_path / "c.key").write_bytes(admin.key_pem)
    (tmp_path / "c.key").chmod(0o600)
    mutual = {
        "security_protocol": "SSL",
        "tls": {
            "ca_file": str(tmp_path / "ca.pem"),
            "client_certificate_file": str(tmp_path / "c.pem"),
            "client_key_file": str(tmp_path / "c.key"),
        },
    }
    t = _topology(mutual, mutual)
    state = tmp_path / "state"
    client = run_program(t, state).outputs["clientConfigs"]["app"]
    files = application_tls_files(t.cluster("A"), state, "app")
    assert files is not None and files.certificate_location and files.key_location and files.keystore_location
    assert client["security.protocol"] == "SSL" and not [k for k in client if k.startswith("sasl.")]
    assert client["ssl.certificate.location"] == files.certificate_location
    assert client["ssl.key.location"] == files.key_location
    assert client["ssl.keystore.location"] == files.keystore_location and client["ssl.keystore.type"] == "PKCS12"
    assert client["ssl.keystore.password"] == f"${{kdrtls:{files.key_password_location}:password}}"
    assert client["ssl.ca.location"] == str(tmp_path / "ca.pem")
    assert "PRIVATE" not in json.dumps(client)


def test_the_batched_sets_reach_the_cluster_with_its_tls_files() -> None:
    from dataclasses import asdict

    from stacks.kafka_sets import Connection, _endpoint

    conn = Connection(
        cluster="A", bootstrap="a:9093", username="u", password="p", mechanism="PLAIN", security_protocol="SASL_SSL"
    )
    assert "tls" not in conn  # a stack without TLS keeps the inputs it had
    props = {**conn, "password": "p", "tls": asdict(TlsFiles("/ca.pem"))}
    assert _endpoint(props).config()["ssl.ca.location"] == "/ca.pem"


def test_the_java_keystore_is_kept_while_key_and_certificate_are_the_same(
    tmp_path: Path, ca: Issued, admin: Issued
) -> None:
    key, cert = tmp_path / "admin.key", tmp_path / "admin.pem"
    key.write_bytes(admin.key_pem)
    cert.write_bytes(admin.certificate_pem)
    first = java_keystore(tmp_path, "A", key, cert)
    made = Path(first[0]).read_bytes(), Path(first[1]).read_text()
    assert java_keystore(tmp_path, "A", key, cert) == first
    assert (Path(first[0]).read_bytes(), Path(first[1]).read_text()) == made  # not re-encrypted at each call
    renewed = issue(ca, "admin")
    key.write_bytes(renewed.key_pem)
    cert.write_bytes(renewed.certificate_pem)
    java_keystore(tmp_path, "A", key, cert)
    password = Path(first[1]).read_text().removeprefix("password=").strip()
    _, got, _ = pkcs12.load_key_and_certificates(Path(first[0]).read_bytes(), password.encode())
    assert got is not None and got.public_bytes(serialization.Encoding.PEM) == renewed.certificate_pem
    assert stat.S_IMODE(Path(first[0]).stat().st_mode) == stat.S_IMODE(Path(first[1]).stat().st_mode) == 0o600
