"""SCRAM over TLS with a private CA, on an estate started outside the product (:class:`SaslSslEstate`).

A, B, C: ``SASL_SSL`` client listeners whose certificates the platform team's own CA signed (made by the
fixture; no system trust store or JVM ``cacerts`` touched); a Connect worker homed on C trusting that CA
alone. The stack declares them ``kind: external``, ``security_protocol: SASL_SSL``, ``tls.ca_file``. One
estate for the module, the tests in order: ``drctl estate up`` from nothing; writes accepted on A and
refused on B through the published client file; ``drctl status`` exit 0; a wrong CA and a hostname
mismatch refused with the cluster, the endpoint and the TLS cause, nothing changed; a bare ``pulumi up`` and
``drctl estate preview`` with a wrong CA refused by the program's handshake check, the checkpoint unchanged;
a planned failover under traffic. (The unplanned failover, ``drctl verify`` listing what never reached C and recovery over TLS run on
the mutual-TLS estate, tests/integration/test_mtls_estate.py.)
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer

from dr.failover.drill.traffic import read_keys
from dr.kafka.client import Endpoint
from dr.kafka.offsets import end_offsets
from dr.kafka.tls import TlsFiles
from dr.runtime.certificates import make_ca
from dr.runtime.process import wait_until
from tests import REPO_ROOT
from tests.integration.mtls_estate import SaslSslEstate, init_project, orders_stack, running
from tests.integration.ports import windows
from tests.integration.test_external_estate import OUTPUTS, Env

pytestmark = pytest.mark.integration

STACK = "saslssl"
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
"""The key marking a secret value in a Pulumi checkpoint."""


class SaslSslEnv(Env):
    """The operator's environment of :mod:`tests.integration.test_external_estate`, for this stack."""

    @property
    def state(self) -> Path:
        return Path(self.vars["KDR_STATE_DIR"]) / STACK

    @property
    def stack_file(self) -> Path:
        return self.project / f"Pulumi.{STACK}.yaml"

    @property
    def home(self) -> Path:
        return Path(self.vars["PULUMI_BACKEND_URL"].removeprefix("file://")) / ".pulumi" / "kdr" / "kafka-dr" / STACK


def _stack_doc(estate: SaslSslEstate) -> dict[str, Any]:
    listener = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "admin_username": "admin"}
    clusters = [
        {
            "name": n,
            "bootstrap_servers": estate.clusters[n].bootstrap,
            **listener,
            "tls": {"ca_file": str(estate.team.ca_file)},
        }
        for n in "ABC"
    ]
    credentials = {"provider": "file", "path": str(estate.connect.secrets_file)}
    return orders_stack(clusters, {"url": estate.connect.url, "replicator_credentials": credentials})


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSslEstate]:
    root = tmp_path_factory.mktemp("saslssl-estate")
    with windows(3) as ports, running(SaslSslEstate(root, (ports[0], ports[1], ports[2]))) as e:
        yield e


@pytest.fixture(scope="module")
def env(estate: SaslSslEstate, tmp_path_factory: pytest.TempPathFactory) -> SaslSslEnv:
    e = SaslSslEnv(tmp_path_factory.mktemp("saslssl-stack"))
    secrets = {f"kafka-dr:clusters[{i}].adminPassword": estate.clusters[n].admin_password for i, n in enumerate("ABC")}
    secrets["kafka-dr:principals.replicatorPassword"] = estate.connect.replicator_password
    init_project(e, STACK, _stack_doc(estate), secrets)
    return e


def _admin(estate: SaslSslEstate, name: str) -> Endpoint:
    b = estate.clusters[name]
    files = TlsFiles(str(estate.team.ca_file))
    return Endpoint(b.bootstrap, "admin", b.admin_password, "SASL_SSL", "SCRAM-SHA-512", files, name)


def _published(env: SaslSslEnv) -> dict[str, Any]:
    conf: dict[str, Any] = json.loads((env.state / "clients" / "orders-app.json").read_text())
    conf.pop("group.id", None)
    return conf


def _write(conf: dict[str, Any], keys: list[str]) -> list[KafkaError]:
    errors: list[KafkaError] = []
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 10000, "log_level": 0})
    for key in keys:
        p.produce("orders", key=key.encode(), value=b"x", on_delivery=lambda e, _m: e and errors.append(e))
    p.flush(30)
    return errors


def _edit_stack(env: SaslSslEnv, cluster: str, **fields: Any) -> None:
    doc = yaml.safe_load(env.stack_file.read_text())
    for c in doc["config"]["kafka-dr:clusters"]:
        if c["name"] == cluster:
            c.update(fields)
    env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_up_from_nothing_writes_accepted_on_A_refused_on_B_status_clean(env: SaslSslEnv, estate: SaslSslEstate) -> None:
    t0 = time.monotonic()
    res = env.drctl("estate", "up", "--stack", STACK, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]
    print(f"\nSASL_SSL external estate up: {time.monotonic() - t0:.1f}s")
    conf = _published(env)
    assert conf["security.protocol"] == "SASL_SSL" and conf["ssl.ca.location"] == str(estate.team.ca_file)
    props = (env.state / "clients" / "orders-app.properties").read_text()
    assert f"ssl.truststore.location={estate.team.ca_file}" in props and "ssl.truststore.type=PEM" in props
    assert conf["bootstrap.servers"] == estate.clusters["A"].bootstrap
    assert _write(conf, [f"a-{i}" for i in range(100)]) == []
    refused = _write({**conf, "bootstrap.servers": estate.clusters["B"].bootstrap}, ["stray"])
    assert refused and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    want = sum(end_offsets(_admin(estate, "A"), ["orders"]).values())
    assert wait_until(lambda: sum(end_offsets(_admin(estate, "B"), ["orders"]).values()) >= want, 60)
    res = env.drctl("status", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_a_wrong_ca_and_a_hostname_mismatch_name_the_cluster_the_endpoint_and_the_cause(
    env: SaslSslEnv, estate: SaslSslEstate
) -> None:
    """B declared with an impostor CA, A dialled as ``localhost`` (its certificate names 127.0.0.1 only):
    ``drctl estate up`` stops with exit 4 before changing anything; the stack file back, all is clean."""
    kept = env.stack_file.read_text()
    impostor = env.root / "impostor-ca.pem"
    impostor.write_bytes(make_ca("an impostor CA").certificate_pem)
    a_local = f"localhost:{estate.clusters['A'].port}"
    _edit_stack(env, "B", tls={"ca_file": str(impostor)})
    _edit_stack(env, "A", bootstrap_servers=a_local)
    try:
        t0 = time.monotonic()
        status = env.drctl("status", "--stack", STACK)
        took = time.monotonic() - t0
        up = env.drctl("estate", "up", "--stack", STACK, timeout=300)
    finally:
        env.stack_file.write_text(kept)
    print(f"\nstatus with two TLS failures: {took:.1f}s")
    for res in (status, up):
        assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-3000:]
    b = estate.clusters["B"].bootstrap
    assert (
        f"cluster 'B' ({b}): TLS to the brokers failed" in status.stderr
        and "certificate verify failed" in status.stderr
    )
    assert f"cluster 'A' ({a_local}): TLS to the brokers failed" in status.stderr, status.stderr[-3000:]
    assert "hostname mismatch" in status.stderr.lower(), status.stderr[-3000:]
    assert "TLS to the brokers failed" in up.stderr and "certificate verify failed" in up.stderr, up.stderr[-3000:]
    preview = env.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def _checkpoint(env: SaslSslEnv) -> list[tuple[str, str, str]]:
    """Every resource of the stack's checkpoint: URN, inputs and outputs (secret values as their marker)."""
    res = env.pulumi("stack", "export", "--stack", STACK)
    assert res.returncode == 0, res.stderr[-2000:]

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            if SECRET_SIG_KEY in value:
                return "<secret>"
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    resources = json.loads(res.stdout)["deployment"]["resources"]
    return [
        (
            r["urn"],
            json.dumps(plain(r.get("inputs")), sort_keys=True),
            json.dumps(plain(r.get("outputs")), sort_keys=True),
        )
        for r in resources
    ]


def test_a_bare_pulumi_up_and_estate_preview_refuse_a_wrong_ca_with_the_checkpoint_unchanged(
    env: SaslSslEnv, estate: SaslSslEstate
) -> None:
    """B declared with an impostor CA. The program's own handshake check stops a bare ``pulumi up`` (the
    repository's ``Pulumi.yaml`` and ``stacks/`` in the project) and ``drctl estate preview`` (exit 4) before
    any resource is declared, naming B, the CA input and the next step: the checkpoint and the link's
    connectors are as they were (before: ``pulumi up`` exited 0 and pointed the connectors at that CA)."""
    from dr.kafka.connect_rest import ConnectRest

    kept, project_file = env.stack_file.read_text(), env.project / "Pulumi.yaml"
    kept_project = project_file.read_text()
    impostor = env.root / "impostor-ca.pem"
    impostor.write_bytes(make_ca("an impostor CA").certificate_pem)
    before = _checkpoint(env)
    assert any("ConnectMirrorLink" in urn for urn, _i, _o in before), [u for u, _i, _o in before]
    shutil.copy(REPO_ROOT / "Pulumi.yaml", project_file)  # the program pulumi runs: stacks/ of the repository
    (env.project / "stacks").symlink_to(REPO_ROOT / "stacks")
    _edit_stack(env, "B", tls={"ca_file": str(impostor)})
    try:
        up = env.pulumi("up", "--stack", STACK, "--yes", "--skip-preview")
        preview = env.drctl("estate", "preview", "--stack", STACK)
        after = _checkpoint(env)
    finally:
        env.stack_file.write_text(kept)
        project_file.write_text(kept_project)
        (env.project / "stacks").unlink()
    b = estate.clusters["B"].bootstrap
    text = up.stdout + up.stderr
    assert up.returncode != 0, text[-3000:]
    assert f"cluster 'B' ({b}): TLS to the brokers failed: certificate verify failed" in text, text[-3000:]
    assert f"tls.ca_file {impostor}" in text and "Nothing was changed" in text and "next step" in text
    assert preview.returncode == 4, preview.stdout[-2000:] + preview.stderr[-3000:]
    assert f"cluster 'B' ({b}): TLS to the brokers failed" in preview.stderr and str(impostor) in preview.stderr
    assert after == before, "the refused runs changed the checkpoint"
    rest = ConnectRest(estate.connect.url)
    for name in rest.connectors():
        assert str(impostor) not in json.dumps(rest.config(name)), f"connector {name} was pointed at the impostor CA"
    clean = env.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]


def test_planned_failover_under_traffic(env: SaslSslEnv, estate: SaslSslEstate) -> None:
    acked: list[str] = []
    on_b: list[str] = []
    stop = threading.Event()

    def traffic() -> None:
        """orders-app on its published file, reloaded when a failover rewrites it; a refused write is retried."""
        settings = {"acks": "all", "linger.ms": 5, "message.timeout.ms": 3000, "log_level": 0}
        conf = _published(env)
        producer = Producer({**conf, **settings})
        pending: list[str] = []
        i = 0
        while not stop.is_set():
            now = _published(env)
            if now["bootstrap.servers"] != conf["bootstrap.servers"]:
                producer.flush(5)
                conf, producer = now, Producer({**now, **settings})
            if not pending:
                pending.append(f"t-{i}")
                i += 1
            key, there = pending[0], conf["bootstrap.servers"] == estate.clusters["B"].bootstrap

            def done(err: Any, _m: Any, key: str = key, there: bool = there) -> None:
                if err is None:
                    acked.append(key)
                    if there:
                        on_b.append(key)

            try:
                producer.produce("orders", key=key, value=b"x", on_delivery=done)
                pending.pop(0)
            except (KafkaException, BufferError):
                time.sleep(0.05)
            producer.poll(0.02)
        producer.flush(10)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: len(acked) > 100, 60)
        res = env.drctl("failover", "--stack", STACK, "--yes", "--json", timeout=600)
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
        assert wait_until(lambda: len(on_b) > 20, 30), "orders-app followed its published file to B"
    finally:
        stop.set()
        thread.join(30)
    summary = json.loads(res.stdout)
    print(f"\nSASL_SSL planned: RTO {summary['rto_s']}s, A→B→C {summary['a_b_c_s']}s")
    assert summary["status"] == "completed" and summary["verdict"]["clean"]
    assert summary["verdict"]["counts"]["missing"] == 0
    keys = read_keys(_admin(estate, "B"), "orders")
    lost = [k for k in acked if k not in keys]
    assert not lost, f"{len(lost)} acknowledged records are not on B: {lost[:10]}"
    preview = env.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_no_password_in_any_output(estate: SaslSslEstate) -> None:
    secrets = [b.admin_password for b in estate.clusters.values()] + [estate.connect.replicator_password]
    assert not [s for s in secrets for out in OUTPUTS if s in out]
