"""SCRAM over TLS with a private CA, on an estate started outside the product (:class:`SaslSslEstate`).

A, B, C: ``SASL_SSL`` client listeners whose certificates the platform team's own CA signed (made by the
fixture; no system trust store or JVM ``cacerts`` touched); a Connect worker homed on C trusting that CA
alone. The stack declares them ``kind: external``, ``security_protocol: SASL_SSL``, ``tls.ca_file``. One
estate for the module, the tests are ordered steps on it (file order; a step that needs an earlier one
says so when it did not pass):

1. ``drctl estate up`` from nothing (the worker's own truststore a PEM file, the stack's CA as ``ca_file``);
   writes accepted on A and refused on B through the published client file; ``drctl status`` exit 0;
2. a wrong CA and a hostname mismatch refused with the cluster, the endpoint and the TLS cause, nothing changed;
3. a bare ``pulumi up`` and ``drctl estate preview`` with a wrong CA refused by the program's handshake
   check, the checkpoint unchanged;
4. the link on Connect workers whose own TLS settings are those platform teams write (issue 45): the worker's
   truststore — for its home cluster and, through ``producer.``, ``consumer.`` and ``admin.``, inherited by
   every connector's clients — in turn a PKCS12 file with a password, a JKS file with a password, and a PEM
   file; on each the stack declares the clusters' CA as ``ca_file`` and as ``ca_pem`` and the worker's
   truststore type as ``worker_tls``; ``drctl estate up`` converges at once and the link copies A→B, the
   store password in no connector config (one worker restart per store type, so ``ca_pem`` is also undone
   on a running link: JKS);
5. a planned failover A→B→C under traffic on the last of them, the PEM-file worker with ``ca_pem`` (issue 45
   saw it stop after promote with C unlinked): B→C runs on the worker.

(The unplanned failover, ``drctl verify`` listing what never reached C and recovery over TLS run on the
mutual-TLS estate, tests/integration/test_mtls_estate.py.)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer

from dr.base.toolchain import toolchain
from dr.failover.drill.traffic import read_keys
from dr.kafka.client import Endpoint
from dr.kafka.connect_rest import ConnectRest
from dr.kafka.offsets import end_offsets
from dr.kafka.tls import TlsFiles
from dr.runtime.certificates import make_ca
from dr.runtime.process import wait_until
from tests import REPO_ROOT
from tests.integration.helpers import ProjectEnv
from tests.integration.mtls_estate import SaslSslEstate, SaslSslWorker, orders_stack, running
from tests.integration.ports import windows
from tests.integration.test_external_estate import OUTPUTS

pytestmark = pytest.mark.integration

STACK = "saslssl"
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
"""The key marking a secret value in a Pulumi checkpoint."""


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


#: Step 4: (the worker's own truststore type, how the stack declares the CA), in the order they run: each
#: store type and each CA form once, ``ca_pem`` undone onto a file truststore (issue 45 saw that exit 4) and
#: set again last (the product's connector settings differ by the CA form and by whether the workers keep a
#: truststore of their own, not by its type: stacks/links/connect_config.py).
CASES = [("PKCS12", "ca_pem"), ("JKS", "ca_file"), ("PEM", "ca_pem")]


def truststore(ca_file: Path, kind: str, password: str) -> Path:
    """The team's CA in a ``kind`` (PKCS12 or JKS) truststore beside it, made with keytool (the password
    through the environment, not the command line)."""
    path = ca_file.with_name(f"worker-truststore.{kind.lower()}")
    if not path.exists():
        subprocess.run(
            [
                *("keytool", "-importcert", "-noprompt", "-alias", "team-ca", "-file", str(ca_file)),
                *("-keystore", str(path), "-storetype", kind, "-storepass:env", "KDR_TEST_STOREPASS"),
            ],
            env={**os.environ, "KDR_TEST_STOREPASS": password},
            check=True,
            capture_output=True,
            timeout=60,
        )
    return path


@dataclass
class TeamTlsWorker(SaslSslWorker):
    """The Connect worker with its own truststore of type ``truststore``: PKCS12 or JKS (password set), or PEM."""

    truststore: str = "PEM"
    truststore_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def properties(self) -> dict[str, str]:
        assert self.team is not None
        props = super().properties()
        if self.truststore == "PEM":
            return props
        own = {
            "ssl.truststore.type": self.truststore,
            "ssl.truststore.location": str(truststore(self.team.ca_file, self.truststore, self.truststore_password)),
            "ssl.truststore.password": self.truststore_password,
        }
        for prefix in ("", "producer.", "consumer.", "admin."):
            props.update({prefix + k: v for k, v in own.items()})
        return props

    def restart_with(self, kind: str) -> None:
        """Stop the worker and start it again with a truststore of type ``kind``."""
        if kind == self.truststore and self.proc is not None:
            return
        self.stop()
        self.truststore = kind
        tc = toolchain()
        self.start(tc.java, tc.mm2_lib)


class TeamTlsEstate(SaslSslEstate):
    """:class:`SaslSslEstate` with :class:`TeamTlsWorker` as its Connect worker (a PEM-file truststore first)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.connect = TeamTlsWorker("platform", self.ports[2] + 60, self.clusters["C"], self.root, team=self.team)


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamTlsEstate]:
    root = tmp_path_factory.mktemp("saslssl-estate")
    with windows(3) as ports, running(TeamTlsEstate(root, (ports[0], ports[1], ports[2]))) as e:
        yield e


@pytest.fixture(scope="module")
def env(estate: TeamTlsEstate, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    e = ProjectEnv(tmp_path_factory.mktemp("saslssl-stack"), STACK)
    e.outputs = OUTPUTS  # the external estate's record of drctl's outputs, scanned for passwords
    e.create(_stack_doc(estate))
    for i, n in enumerate("ABC"):
        e.secret(f"kafka-dr:clusters[{i}].adminPassword", estate.clusters[n].admin_password)
    e.secret("kafka-dr:principals.replicatorPassword", estate.connect.replicator_password)
    return e


#: The ordered steps that passed (file order), for a later step to name the earlier one it needs.
PASSED: set[str] = set()


def _needs(step: str) -> None:
    """Fail at once, naming ``step``, when that earlier step of the module did not pass."""
    if step not in PASSED:
        pytest.fail(f"this step runs on the estate step {step!r} leaves, and that step did not pass (see above)")


def _admin(estate: SaslSslEstate, name: str) -> Endpoint:
    b = estate.clusters[name]
    files = TlsFiles(str(estate.team.ca_file))
    return Endpoint(b.bootstrap, "admin", b.admin_password, "SASL_SSL", "SCRAM-SHA-512", files, name)


def _published(env: ProjectEnv) -> dict[str, Any]:
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


def _edit_stack(env: ProjectEnv, cluster: str, **fields: Any) -> None:
    doc = yaml.safe_load(env.stack_file.read_text())
    for c in doc["config"]["kafka-dr:clusters"]:
        if c["name"] == cluster:
            c.update(fields)
    env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_up_from_nothing_writes_accepted_on_A_refused_on_B_status_clean(env: ProjectEnv, estate: SaslSslEstate) -> None:
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
    PASSED.add("up")


def test_a_wrong_ca_and_a_hostname_mismatch_name_the_cluster_the_endpoint_and_the_cause(
    env: ProjectEnv, estate: SaslSslEstate
) -> None:
    """B declared with an impostor CA, A dialled as ``localhost`` (its certificate names 127.0.0.1 only):
    ``drctl estate up`` stops with exit 4 before changing anything; the stack file back, all is clean."""
    _needs("up")
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


def _checkpoint(env: ProjectEnv) -> list[tuple[str, str, str]]:
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
    env: ProjectEnv, estate: SaslSslEstate
) -> None:
    """B declared with an impostor CA. The program's own handshake check stops a bare ``pulumi up`` (the
    repository's ``Pulumi.yaml`` and ``stacks/`` in the project) and ``drctl estate preview`` (exit 4) before
    any resource is declared, naming B, the CA input and the next step: the checkpoint and the link's
    connectors are as they were (before: ``pulumi up`` exited 0 and pointed the connectors at that CA)."""
    _needs("up")
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


@pytest.mark.parametrize(("store", "ca"), CASES, ids=[f"{s}-worker-{c}" for s, c in CASES])
def test_estate_up_runs_the_link_on_the_worker(store: str, ca: str, env: ProjectEnv, estate: TeamTlsEstate) -> None:
    _needs("up")
    worker = estate.connect
    assert isinstance(worker, TeamTlsWorker)
    worker.restart_with(store)
    declared = {"ca_file": str(estate.team.ca_file)} if ca == "ca_file" else {"ca_pem": estate.team.ca_file.read_text()}
    for name in "ABC":
        _edit_stack(env, name, tls=declared)
    doc = yaml.safe_load(env.stack_file.read_text())
    doc["config"]["kafka-dr:connectClusters"][0]["worker_tls"] = {"truststore": store}
    env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = env.drctl("estate", "up", "--stack", STACK, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]

    keys = [f"{store}-{ca}-{i}" for i in range(30)]
    assert _write(_published(env), keys) == []
    b = _admin(estate, "B")
    assert wait_until(lambda: set(keys) <= set(read_keys(b, "orders")), 120), "the link copied A's new records to B"

    rest = ConnectRest(worker.url)
    for connector in ("A-to-B-source", "A-to-B-checkpoint", "A-to-B-heartbeat"):
        config = rest.config(connector)
        assert config is not None, connector
        text = json.dumps(config)
        assert worker.truststore_password not in text and worker.replicator_password not in text
        # the clients Connect builds keep the worker's own truststore whole; MirrorMaker 2's take the stack's CA
        assert not [k for k in config if k.split(".ssl.")[0].endswith(".override") and ".ssl.truststore." in k]
        assert config["source.cluster.ssl.truststore.type"] == "PEM"
    status = env.drctl("status", "--stack", STACK)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    PASSED.add(f"{store}-worker-{ca}")


def test_planned_failover_under_traffic_on_the_last_worker(env: ProjectEnv, estate: TeamTlsEstate) -> None:
    """After the worker cases, on the PEM-file worker with ``ca_pem`` (issue 45 saw this stop after promote
    with C unlinked): orders-app writes on its published file and follows it to B; A→B→C completes, the
    verdict clean, nothing acknowledged lost; B→C runs on the worker (``drctl status`` exit 0) and the
    stack converged (``estate preview --expect-no-changes``)."""
    last = "-worker-".join(CASES[-1])
    _needs(last)
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
    status = env.drctl("status", "--stack", STACK)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    assert ConnectRest(estate.connect.url).status("B-to-C-source") is not None
    preview = env.drctl("estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_no_password_in_any_output(estate: TeamTlsEstate) -> None:
    secrets_ = [b.admin_password for b in estate.clusters.values()] + [estate.connect.replicator_password]
    secrets_.append(estate.connect.truststore_password)
    assert OUTPUTS and all(secrets_), "nothing to scan: the module's commands recorded no output"
    assert not [s for s in secrets_ for out in OUTPUTS if s in out]
