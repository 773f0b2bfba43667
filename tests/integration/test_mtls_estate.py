"""Mutual TLS end to end on an estate started outside the product (:mod:`tests.integration.mtls_estate`).

A, B, C: SSL client listeners with ``ssl.client.auth=required``, signed by the platform team's private
CA, the DN mapped to a short principal; a Connect worker homed on C holding the replicator's keystore.
The stack declares them ``kind: external``, ``security_protocol: SSL`` with the admin's certificate and
key as files, and the link on the Connect cluster with the replicator's keystore path. One estate for
the module, the tests in order: ``drctl estate up`` from nothing, MirrorMaker 2 replicating A→B over
mutual TLS, ``drctl status`` exit 0, ``drctl tls``, then a planned failover.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from dr.base.toolchain import toolchain
from dr.failover.drill.traffic import read_keys
from dr.kafka.client import Endpoint
from dr.kafka.offsets import end_offsets
from dr.kafka.tls import TlsFiles
from dr.runtime.certificates import issue
from dr.runtime.process import wait_until
from tests import processes
from tests.integration.helpers import ProjectEnv, stop_copying
from tests.integration.mtls_estate import (
    MAPPING_RULES,
    MtlsEstate,
    orders_stack,
    p12,
    private_file,
    running,
)
from tests.integration.ports import windows
from tests.integration.test_external_estate import OUTPUTS

pytestmark = pytest.mark.integration

STACK = "mtls"


def _stack_doc(estate: MtlsEstate) -> dict[str, Any]:
    team = estate.team
    tls = {
        "ca_file": str(team.ca_file),
        "client_certificate_file": str(team.root / "pki" / "admin.pem"),
        "client_key_file": str(team.root / "pki" / "admin.key"),
        "principal_mapping_rules": MAPPING_RULES,
    }
    clusters = [
        {"name": n, "bootstrap_servers": estate.clusters[n].bootstrap, "security_protocol": "SSL", "tls": tls}
        for n in "ABC"
    ]
    credentials = {
        "provider": "file",
        "path": str(estate.connect.secrets_file),
        "keystore_file": str(estate.connect.replicator_keystore),
    }
    return orders_stack(clusters, {"url": estate.connect.url, "replicator_credentials": credentials})


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsEstate]:
    root = tmp_path_factory.mktemp("mtls-estate")
    with windows(3) as ports:
        e = MtlsEstate(root, (ports[0], ports[1], ports[2]))
        e.team.pem("admin")  # the admin's certificate and key, handed to the operator as files
        with running(e):
            yield e


@pytest.fixture(scope="module")
def env(estate: MtlsEstate, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    e = ProjectEnv(tmp_path_factory.mktemp("mtls-stack"), STACK)
    e.outputs = OUTPUTS  # the external estate's record of drctl's outputs, scanned for keys and passwords
    e.create(_stack_doc(estate))
    e.secret("kafka-dr:principals.replicatorPassword", estate.connect.replicator_password)
    return e


def _admin(estate: MtlsEstate, name: str) -> Endpoint:
    pki = estate.team.root / "pki"
    files = TlsFiles(str(estate.team.ca_file), str(pki / "admin.pem"), str(pki / "admin.key"))
    return Endpoint(estate.clusters[name].bootstrap, "", "", "SSL", tls=files, cluster=name)


def _produce(endpoint: Endpoint, n: int, tag: str) -> None:
    errors: list[object] = []
    p = Producer(endpoint.config(**{"enable.idempotence": True}))
    for i in range(n):
        p.produce("orders", key=f"{tag}-{i}".encode(), value=b"v", on_delivery=lambda e, _m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors[:3]


def _copied(estate: MtlsEstate, src: str, dst: str, timeout: float = 60) -> int:
    want = sum(end_offsets(_admin(estate, src), ["orders"]).values())
    deadline = time.monotonic() + timeout
    while (got := sum(end_offsets(_admin(estate, dst), ["orders"]).values())) < want:
        assert time.monotonic() < deadline, f"{dst} has {got} of {src}'s {want} records after {timeout} s"
        time.sleep(1)
    return want


def _app_files(env: ProjectEnv, estate: MtlsEstate) -> None:
    """What orders-app's team does: its own certificate ``CN=orders-app`` and key at the published paths —
    PEMs for librdkafka, a PKCS#12 keystore and the line ``password=`` for Java."""
    made = issue(estate.team.ca, "orders-app")
    d = env.state / "clients"
    for name, data in (("orders-app.crt", made.certificate_pem), ("orders-app.key", made.key_pem)):
        private_file(d / name, data)
    password = secrets.token_urlsafe(12)
    p12(d / "orders-app.p12", made, password)
    private_file(d / "orders-app.p12.password", f"password={password}\n".encode())


def _java_producer(env: ProjectEnv, count: int) -> list[dict[str, Any]]:
    """Kafka's own VerifiableProducer on the published ``orders-app.properties`` as written."""
    props = env.state / "clients" / "orders-app.properties"
    bootstrap = next(line.split("=", 1)[1] for line in props.read_text().splitlines() if line.startswith("bootstrap"))
    tc = toolchain()
    cmd = [
        tc.java, "-Xmx192m", "-cp", f"{tc.kafka_lib}/*", "org.apache.kafka.tools.VerifiableProducer",
        "--bootstrap-server", bootstrap.replace("\\:", ":"), "--topic", "orders", "--acks", "-1",
        "--max-messages", str(count), "--command-config", str(props),
    ]  # fmt: skip
    res = processes.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert res.returncode == 0, res.stderr[-3000:]
    return events


def test_an_expired_certificate_or_a_key_not_its_own_is_refused_before_anything_runs(
    env: ProjectEnv, estate: MtlsEstate
) -> None:
    """Before the first ``up``: the admin's certificate expired, then a key that is not the certificate's —
    each exit 2 naming the cluster, the field and (for the certificate) its expiry date; nothing created."""
    stack_file = env.project / f"Pulumi.{STACK}.yaml"
    kept = stack_file.read_text()
    pki = estate.team.root / "pki"
    old = issue(estate.team.ca, "admin", days=1, not_before=dt.datetime.now(dt.UTC) - dt.timedelta(days=10))
    private_file(pki / "expired-admin.pem", old.certificate_pem)
    private_file(pki / "other.key", issue(estate.team.ca, "someone").key_pem)
    cases = {
        "client_certificate_file": (str(pki / "expired-admin.pem"), "expired on "),
        "client_key_file": (str(pki / "other.key"), "is not the private key of the client certificate"),
    }
    try:
        for field, (path, why) in cases.items():
            doc = yaml.safe_load(kept)
            doc["config"]["kafka-dr:clusters"][0]["tls"] = {**doc["config"]["kafka-dr:clusters"][0]["tls"], field: path}
            stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
            res = env.drctl("estate", "up", "--stack", STACK, timeout=120)
            assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-3000:]
            assert f"clusters[0].tls.{field}" in res.stderr and why in res.stderr, res.stderr[-3000:]
    finally:
        stack_file.write_text(kept)
    assert "orders" not in AdminClient(_admin(estate, "A").config()).list_topics(timeout=10).topics


def test_up_from_nothing_over_mutual_tls(env: ProjectEnv, estate: MtlsEstate) -> None:
    res = env.drctl("estate", "up", "--stack", STACK, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]
    published = json.loads((env.state / "clients" / "orders-app.json").read_text())
    assert published["security.protocol"] == "SSL" and published["ssl.ca.location"].endswith("ca.pem")


def test_published_files_work_as_written_writes_accepted_on_A_refused_on_B(env: ProjectEnv, estate: MtlsEstate) -> None:
    """orders-app's librdkafka file and its Java file (Kafka's VerifiableProducer), as the product wrote
    them, once the team put its own certificate at the paths they name: accepted on A; refused on B."""
    _app_files(env, estate)
    conf = json.loads((env.state / "clients" / "orders-app.json").read_text())
    conf.pop("group.id")
    errors: list[KafkaError | None] = []
    for bootstrap in (estate.clusters["A"].bootstrap, estate.clusters["B"].bootstrap):
        p = Producer({**conf, "bootstrap.servers": bootstrap, "message.timeout.ms": 10000, "log_level": 0})
        p.produce("orders", key=b"published", value=b"x", on_delivery=lambda e, _m: errors.append(e))
        p.flush(30)
    assert errors[0] is None, errors[0]
    assert errors[1] is not None and errors[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[1]
    events = _java_producer(env, 20)
    acked = [e for e in events if e.get("name") == "producer_send_success"]
    assert len(acked) == 20, [e for e in events if e.get("name") == "producer_send_error"][:3]


def test_the_link_replicates_over_mutual_tls_and_status_is_clean(env: ProjectEnv, estate: MtlsEstate) -> None:
    _produce(_admin(estate, "A"), 200, "before")
    assert _copied(estate, "A", "B") >= 200
    res = env.drctl("status", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    tls = env.drctl("tls", "--stack", STACK, "--json")
    assert tls.returncode == 0, tls.stderr[-2000:]
    uses = {(row["cluster"], row["use"]) for row in json.loads(tls.stdout)["certificates"]}
    assert {("A", "CA bundle"), ("A", "client certificate")} <= uses


def test_planned_failover_over_mutual_tls(env: ProjectEnv, estate: MtlsEstate) -> None:
    """The RTO probe writes as orders-app with its own certificate (the files the team put at the published
    paths): refused on B until the promote grants its writes, so it took more than one attempt — with the
    admin's certificate it was accepted at once and the failover reported 0.285 s."""
    res = env.drctl("failover", "--stack", STACK, "--yes", "--json", timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "completed" and summary["verdict"]["clean"], res.stdout[-4000:]
    probe = summary["rto_probe"]
    assert probe is not None and probe["application"] == "orders-app" and probe["attempts"] > 1, probe
    print(f"\nmutual TLS planned: RTO probe {summary['rto_s']}s after {probe['attempts']} attempts")
    _produce(_admin(estate, "B"), 50, "after")
    assert _copied(estate, "B", "C") >= 250  # the failover's link B→C runs on Connect over mutual TLS too
    preview = env.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_unplanned_failover_over_mutual_tls_with_b_killed_then_recovery(env: ProjectEnv, estate: MtlsEstate) -> None:
    """B active, C fed by B→C. The team wipes A and declares it the next standby (a finished failover's
    stack file must change for another to run); records B acknowledges while the link is stopped never
    reach C; B's broker killed: the unplanned failover promotes C (C→A over mutual TLS) and defers the
    integrity check. With B back, ``drctl verify`` (Spark over mutual TLS) lists exactly those records,
    ``drctl recover`` replays them, the failover completes CLEAN, and orders-app writes to C through the
    file the failover rewrote, as written."""
    from dr.kafka.connect_rest import ConnectRest

    assert _copied(estate, "B", "C") >= 250
    admin_a = AdminClient(_admin(estate, "A").config())
    for future in admin_a.delete_topics(["orders"]).values():
        future.result(30)
    assert wait_until(lambda: "orders" not in admin_a.list_topics(timeout=10).topics, 30)
    stack_file = env.project / f"Pulumi.{STACK}.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"]["kafka-dr:clusters"][0]["role"] = "standby"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    stop_copying(ConnectRest(estate.connect.url), "B-to-C-source")
    _produce(_admin(estate, "B"), 30, "lost")
    estate.clusters["B"].kill()
    try:
        res = env.drctl("failover", "--stack", STACK, "--mode", "unplanned", "--yes", "--json", timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
        steps = {st["name"]: st["status"] for st in json.loads(res.stdout)["steps"]}
        assert steps["integrity"] == "deferred", steps
    finally:
        estate.clusters["B"].restart()
    out = env.root / "verify-b-c"
    res = env.drctl("verify", "--stack", STACK, "--source", "B", "--target", "C", "--out", str(out), "--json")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads(res.stdout)["totals"]["missing"] == 30, res.stdout[-3000:]
    res = env.drctl("recover", "--report", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    res = env.drctl("failover", "--stack", STACK, "--yes", "--json", timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    done = json.loads(res.stdout)
    assert done["status"] == "completed" and done["verdict"]["clean"], done["verdict"]
    on_c = read_keys(_admin(estate, "C"), "orders")
    assert all(on_c[f"lost-{i}"] == 1 for i in range(30)), "each never-replicated record is on C exactly once"
    conf = json.loads((env.state / "clients" / "orders-app.json").read_text())
    assert conf["bootstrap.servers"] == estate.clusters["C"].bootstrap
    conf.pop("group.id")
    errors: list[KafkaError | None] = []
    p = Producer({**conf, "message.timeout.ms": 10000, "log_level": 0})
    p.produce("orders", key=b"on-C", value=b"x", on_delivery=lambda e, _m: errors.append(e))
    p.flush(30)
    assert errors == [None], errors


def test_no_key_or_password_in_any_output(env: ProjectEnv, estate: MtlsEstate) -> None:

    text = "\n".join(OUTPUTS)
    assert "PRIVATE KEY" not in text and estate.connect.replicator_password not in text
