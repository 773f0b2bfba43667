"""A link on Connect workers whose own TLS settings are those platform teams write (issue 45).

One SASL_SSL estate for the module (:class:`SaslSslEstate`: A, B, C signed by the team's CA) and one Connect
worker homed on C whose own client truststore — for its home cluster and, through ``producer.``,
``consumer.`` and ``admin.``, inherited by every connector's clients — is in turn a PKCS12 file with a
password, a JKS file with a password, and a PEM file. On each, the stack declares the clusters' CA as
``ca_file`` and as ``ca_pem``, and the worker's truststore type as ``worker_tls``; ``drctl estate up`` must
converge at once and the link copy A→B, the store password in no connector config. The cases run in the
listed order (one worker restart per store type), so ``ca_pem`` is also undone on a running link (JKS). PEM file with ``ca_file`` is
:mod:`tests.integration.test_sasl_ssl_estate`'s worker. Last, a planned failover A→B→C on the PEM-file worker with
``ca_pem``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from dr.base.toolchain import toolchain
from dr.failover.drill.traffic import read_keys
from dr.kafka.connect_rest import ConnectRest
from dr.runtime.process import wait_until
from tests.integration.mtls_estate import SaslSslEstate, SaslSslWorker, init_project, running
from tests.integration.ports import windows
from tests.integration.test_sasl_ssl_estate import (
    STACK,
    SaslSslEnv,
    _admin,
    _edit_stack,
    _published,
    _stack_doc,
    _write,
)

pytestmark = pytest.mark.integration

#: (the worker's own truststore type, how the stack declares the CA), in the order they run.
CASES = [("PKCS12", "ca_file"), ("PKCS12", "ca_pem"), ("JKS", "ca_pem"), ("JKS", "ca_file"), ("PEM", "ca_pem")]


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
    """:class:`SaslSslEstate` with :class:`TeamTlsWorker` as its Connect worker."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.connect = TeamTlsWorker(
            "platform", self.ports[2] + 60, self.clusters["C"], self.root, team=self.team, truststore=CASES[0][0]
        )


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamTlsEstate]:
    root = tmp_path_factory.mktemp("worker-tls-estate")
    with windows(3) as ports, running(TeamTlsEstate(root, (ports[0], ports[1], ports[2]))) as e:
        yield e


@pytest.fixture(scope="module")
def env(estate: TeamTlsEstate, tmp_path_factory: pytest.TempPathFactory) -> SaslSslEnv:
    e = SaslSslEnv(tmp_path_factory.mktemp("worker-tls-stack"))
    secrets_ = {f"kafka-dr:clusters[{i}].adminPassword": estate.clusters[n].admin_password for i, n in enumerate("ABC")}
    secrets_["kafka-dr:principals.replicatorPassword"] = estate.connect.replicator_password
    init_project(e, STACK, _stack_doc(estate), secrets_)
    return e


@pytest.mark.parametrize(("store", "ca"), CASES, ids=[f"{s}-worker-{c}" for s, c in CASES])
def test_estate_up_runs_the_link_on_the_worker(store: str, ca: str, env: SaslSslEnv, estate: TeamTlsEstate) -> None:
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


def test_planned_failover_on_the_last_worker(env: SaslSslEnv, estate: TeamTlsEstate) -> None:
    """After the cases, on the PEM-file worker with ``ca_pem`` (issue 45 saw this stop after promote with C
    unlinked): A→B→C completes, the verdict clean, and B→C runs on the worker (``drctl status`` exit 0)."""
    res = env.drctl("failover", "--stack", STACK, "--yes", "--json", timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "completed" and summary["verdict"]["clean"], summary
    status = env.drctl("status", "--stack", STACK)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    assert ConnectRest(estate.connect.url).status("B-to-C-source") is not None
