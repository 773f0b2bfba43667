"""A local estate over TLS (Pulumi.local-tls.yaml, ``local_tls: true``), driven as an operator drives it.

One estate for the module, from nothing: the product makes the estate's CA and the brokers' certificates,
the brokers' client listeners speak SASL_SSL, and every client — the Pulumi Kafka provider, drctl,
MirrorMaker 2, the Spark verification, the published client files — verifies them against that CA alone
(no system trust store). Then a planned failover: B promoted, C fed by B over TLS, preview clean. Last,
a client given the wrong CA: the error names the cluster, the endpoint and "certificate verify failed".
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl

import pytest
from confluent_kafka import Producer

from dr.runtime.certificates import make_ca
from tests.integration.helpers import StackEnv, drctl, link_copied

pytestmark = pytest.mark.integration

STACK = "tlsestate"
LOCAL_EXAMPLE = "Pulumi.local-tls.yaml"


def _write_through_published_file(env: StackEnv, app: str, count: int, tag: str) -> int:
    conf = json.loads((env.state / "clients" / f"{app}.json").read_text())
    conf.pop("group.id", None)
    errors: list[object] = []
    producer = Producer(conf)
    for i in range(count):
        producer.produce(
            "orders", key=f"{tag}-{i}".encode(), value=b"x", on_delivery=lambda e, _m: e and errors.append(e)
        )
    assert producer.flush(30) == 0 and not errors, errors[:3]
    return count


def test_brokers_speak_tls_signed_by_the_estate_ca_and_accept_writes_through_the_published_file(env: StackEnv) -> None:
    ca = env.state / "tls" / "local-ca.pem"
    a = env.estate().local_cluster("A")
    context = ssl.create_default_context(cafile=str(ca))  # with a cafile: that CA only, no system roots
    raw = socket.create_connection(("127.0.0.1", a.spec.client_port(1)), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    published = json.loads((env.state / "clients" / "orders-app.json").read_text())
    assert published["security.protocol"] == "SASL_SSL" and published["ssl.ca.location"] == str(ca)
    props = (env.state / "clients" / "orders-app.properties").read_text()
    assert "ssl.truststore.type=PEM" in props and f"ssl.truststore.location={ca}" in props
    assert _write_through_published_file(env, "orders-app", 50, "before") == 50


def test_status_is_clean_over_tls(env: StackEnv) -> None:
    res = drctl(env, "status", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "link    A-to-B       running" in res.stdout


def test_planned_failover_then_C_receives_from_B_over_tls(env: StackEnv) -> None:
    res = drctl(env, "failover", "--stack", STACK, "--yes")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-3000:]
    assert "COMPLETED" in res.stdout and "verdict CLEAN" in res.stdout
    # the failover rewrote the published file for B: the application writes there, over TLS
    assert json.loads((env.state / "clients" / "orders-app.json").read_text())["bootstrap.servers"].endswith(
        str(env.estate().local_cluster("B").spec.client_port(1))
    )
    _write_through_published_file(env, "orders-app", 30, "after")
    estate = env.estate()
    c = estate.endpoint("C")
    assert c.security_protocol == "SASL_SSL"
    assert link_copied(estate, "B-to-C", ["orders"], 60), "C did not receive B's records over TLS within 60 s"
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_a_wrong_ca_names_the_cluster_the_endpoint_and_certificate_verify_failed(env: StackEnv) -> None:
    ca = env.state / "tls" / "local-ca.pem"
    kept = env.root / "ca-kept.pem"
    shutil.copy(ca, kept)
    try:
        ca.write_bytes(make_ca("an impostor CA").certificate_pem)
        res = drctl(env, "status", "--stack", STACK)
    finally:
        shutil.copy(kept, ca)
    b = env.estate().local_cluster("B").bootstrap
    assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"cluster 'B' ({b}): TLS to the brokers failed" in res.stderr
    assert "certificate verify failed" in res.stderr
    assert "B's brokers answer but TLS fails" in res.stderr and "Broker transport failure" not in res.stderr
    assert drctl(env, "status", "--stack", STACK).returncode == 0  # the right CA back: clean again
