"""OAUTHBEARER against Keycloak, an identity provider that checks client secrets and disables clients (issue 49):
a client refused by the provider itself — a wrong secret, a client disabled mid run — gives a clear error naming
the cluster, the token endpoint, the client and the next step, and loses nothing.

Keycloak (:mod:`tests.keycloak_server`) and one broker started OUTSIDE the product
(:class:`~tests.integration.oauth_estate.OAuthBroker`) whose client listener accepts only OAUTHBEARER tokens,
validated against Keycloak's JWKS (issuer ``/realms/kafka``, audience ``kafka``, the principal from ``azp``: the
client id). The broker asks every client to log in again at least every :data:`REAUTH_MS` (``connections.max.
reauth.ms``, KIP-368), as a platform team sets it so that a session opened before a client was disabled is checked
again (a run without it saw the same for librdkafka's producer, which stopped once its token expired). The stack
declares the cluster ``kind: external`` with the admin's, the replicator's and orders-app's Keycloak clients, their
secrets set with ``pulumi config set --secret``; ``drctl estate up`` creates the topic and ACLs and publishes
orders-app's client file. The tests run in order: ``drctl status`` with the admin's client; a wrong secret refused
by Keycloak; orders-app writing through its published file (the drill's producer, with its delivery ledger) while
its client and the admin's are disabled in Keycloak and enabled again.
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import AuthError
from dr.base.toolchain import toolchain
from dr.failover.drill.traffic import ConfigSource, ProducerLoop, read_keys
from dr.kafka.client import Endpoint, cluster_metadata
from dr.kafka.oauth import OAuthSettings
from dr.runtime.process import wait_until
from tests.integration.helpers import ProjectEnv
from tests.integration.oauth_estate import ADMIN_CLIENT, AUDIENCE, OAuthBroker
from tests.integration.ports import windows
from tests.keycloak_server import PRINCIPAL_CLAIM, SCOPE, Keycloak, KeycloakUrls, keycloak_server

STACK = "keycloak"
APP = "orders-app"
REAUTH_MS = 5000
"""How long a broker keeps a client's session before it must log in again (the token's expiry, if sooner)."""
TOKEN_LIFESPAN_S = 10
"""Access tokens of orders-app and the admin: short, so a disabled client's refusal shows within the test."""


@dataclass
class Estate:
    """Keycloak, the broker and the three clients' secrets."""

    kc: Keycloak
    broker: OAuthBroker
    secrets: dict[str, str]

    def endpoint(self, client_id: str, secret: str | None = None) -> Endpoint:
        settings = OAuthSettings(self.kc.token_endpoint, SCOPE, AUDIENCE)
        return Endpoint(
            self.broker.bootstrap, client_id, self.secrets[client_id] if secret is None else secret,
            "SASL_PLAINTEXT", "OAUTHBEARER", None, "A", settings,
        )  # fmt: skip

    def leaked(self, text: str) -> list[str]:
        return [c for c, s in self.secrets.items() if s in text]


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    """Keycloak with the three clients, and the broker (its storage formatted while Keycloak starts; it starts once
    the realm's JWKS answers: a broker whose JWKS cannot be read does not start); stopped at the end, nothing left."""
    root = tmp_path_factory.mktemp("keycloak-estate")
    tc = toolchain()
    client_secrets = {c: secrets.token_urlsafe(18) for c in (ADMIN_CLIENT, "replicator", APP)}
    with windows(1) as ports, ThreadPoolExecutor(1) as pool:
        kc_port = ports[0] + 60  # the broker's window: 0, +20, +40
        extra = {
            "sasl.oauthbearer.sub.claim.name": PRINCIPAL_CLAIM,
            "listener.name.client.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
        }
        broker = OAuthBroker("A", ports[0], root, idp=KeycloakUrls(f"http://127.0.0.1:{kc_port}"), extra=extra)
        formatted = pool.submit(broker.format, tc.java, tc.kafka_lib)
        try:
            with keycloak_server(kc_port) as kc:
                formatted.result()
                started = pool.submit(broker.start, tc.java, tc.kafka_lib)
                for client_id, secret in client_secrets.items():
                    kc.add_client(client_id, secret, TOKEN_LIFESPAN_S)
                started.result()
                yield Estate(kc, broker, client_secrets)
        finally:
            formatted.exception()  # the format is over before the broker is stopped
            broker.stop()
    pids = [kc.pid, *([broker.proc.pid] if broker.proc else [])]
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")], "a process of the Keycloak estate was left running"


@pytest.fixture(scope="module")
def env(estate: Estate, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """The stack in a project directory of its own, its client secrets set with ``pulumi config set --secret``,
    provisioned by ``drctl estate up`` (topic, ACLs, orders-app's published client file)."""
    e = ProjectEnv(tmp_path_factory.mktemp("keycloak-stack"), STACK)
    cluster = {
        "name": "A", "role": "active", "kind": "external", "bootstrap_servers": estate.broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
        "oauth": {
            "token_endpoint": estate.kc.token_endpoint, "scope": SCOPE, "audience": AUDIENCE,
            "admin": {"client_id": ADMIN_CLIENT}, "replicator": {"client_id": "replicator"},
            "applications": {APP: {"client_id": APP}},
        },
    }  # fmt: skip
    config = {
        "kafka-dr:profile": "dev",
        "kafka-dr:clusters": [cluster],
        "kafka-dr:topics": [{"name": "orders", "partitions": 2, "replication_factor": 1}],
        "kafka-dr:principals": {"applications": [{"name": APP, "produces": ["orders"], "consumes": ["orders"]}]},
    }
    e.create({"config": config}, passphrase=secrets.token_urlsafe(24))
    for who, client_id in (("admin", ADMIN_CLIENT), ("replicator", "replicator"), (f"applications.{APP}", APP)):
        e.secret(f"kafka-dr:clusters[0].oauth.{who}.clientSecret", estate.secrets[client_id])
    assert not estate.leaked((e.project / f"Pulumi.{STACK}.yaml").read_text())
    res = e.drctl("estate", "up", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not estate.leaked(res.stdout + res.stderr)
    return e


def _status(env: ProjectEnv) -> tuple[int, dict[str, Any], str]:
    res = env.drctl("status", "--stack", STACK, "--json")
    return res.returncode, json.loads(res.stdout), res.stdout + res.stderr


def test_status_logs_in_with_the_admins_keycloak_client(env: ProjectEnv, estate: Estate) -> None:
    code, report, out = _status(env)
    assert code == 0, out[-3000:]
    (a,) = report["clusters"]
    assert a["health"]["reachable"] and a["health"]["healthy"] and a["health"]["missing_topics"] == [], a
    assert not estate.leaked(out)


def test_a_wrong_secret_is_refused_by_keycloak_naming_cluster_endpoint_client_and_next_step(
    env: ProjectEnv, estate: Estate
) -> None:
    """Keycloak itself refuses orders-app's client with a wrong secret; a login as it (every command's) and
    ``drctl verify`` from a credentials file holding the wrong secret exit 5 naming what to fix."""
    wrong = "not-" + estate.secrets[APP]
    with pytest.raises(urllib.error.HTTPError) as refused:
        estate.kc.token(APP, wrong)
    assert refused.value.code == 401
    with pytest.raises(AuthError) as info:
        cluster_metadata(estate.endpoint(APP, wrong), timeout=20)
    err = info.value
    text = f"{err.problem} {err.fix}"
    assert err.exit_code == 5, text
    assert "cluster 'A'" in err.problem and estate.kc.token_endpoint in err.problem, err.problem
    assert f"client {APP!r} got no token" in err.problem and "refused the request" in err.problem, err.problem
    assert err.fix is not None and "enabled at the identity provider" in err.fix and "client_secret" in err.fix
    assert wrong not in text
    creds = env.root / "wrong-secret.json"
    with os.fdopen(os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(
            {"username": APP, "password": wrong, "sasl_mechanism": "OAUTHBEARER",
             "oauth_token_endpoint": estate.kc.token_endpoint, "oauth_scope": SCOPE},
            f,
        )  # fmt: skip
    bootstrap = estate.broker.bootstrap
    res = env.drctl("verify", "--source-bootstrap", bootstrap, "--target-bootstrap", bootstrap, "--credentials",
                    str(creds), "--topics", "orders", "--out", str(env.root / "verify-refused"), "--json")  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 5, out[-3000:]
    assert bootstrap in out and estate.kc.token_endpoint in out and f"client {APP!r}" in out, out[-3000:]
    assert "refused the request" in out and "enabled at the identity provider" in out, out[-3000:]
    assert wrong not in out and not estate.leaked(out)


def test_a_client_disabled_mid_run_is_named_loses_nothing_and_converges_once_enabled(
    env: ProjectEnv, estate: Estate
) -> None:
    """orders-app writes through its published client file (the drill's producer: ``acks=all``, a delivery
    ledger, its team's secret added to the file) while Keycloak disables its client and the admin's: its
    writes stop being acknowledged once its token must be renewed, ``drctl status`` and a login as orders-app name
    the refusal, every write the ledger holds acknowledged is on the broker; enabled again, both converge."""
    published = env.root / "state" / STACK / "clients" / f"{APP}.json"
    conf = json.loads(published.read_text())
    assert "sasl.oauthbearer.client.secret" not in conf and conf["sasl.oauthbearer.client.id"] == APP
    conf["sasl.oauthbearer.client.secret"] = estate.secrets[APP]  # what its team adds
    source = ConfigSource(env.root / "state" / STACK, APP, {estate.broker.bootstrap: "A"})
    producer = ProducerLoop(conf, "A", "orders", 20, source, key_prefix="kc")
    producer.start()
    try:
        assert wait_until(lambda: len(producer.acked_on("A")) >= 20, 60), f"no write acknowledged: {producer.failed}"
        estate.kc.set_enabled(APP, False)
        estate.kc.set_enabled(ADMIN_CLIENT, False)
        acked_before = len(producer.acked_on("A"))
        # the operator's command, as the admin's client: refused by Keycloak, named
        code, report, out = _status(env)
        assert code == 4, f"status must exit 4 (a cluster needs a person) when the admin's client is refused: {out}"
        error = report["clusters"][0]["health"]["error"] or ""
        assert "cluster 'A'" in error and estate.kc.token_endpoint in error, error
        assert f"client {ADMIN_CLIENT!r} got no token" in error and "refused the request" in error, error
        assert not estate.leaked(out)
        # a login as orders-app, as every command that logs in as the application does
        with pytest.raises(AuthError) as info:
            cluster_metadata(estate.endpoint(APP), timeout=20)
        assert info.value.exit_code == 5 and f"client {APP!r} got no token" in info.value.problem
        # orders-app's open connections must log in again within REAUTH_MS, with a token it can no longer get
        assert wait_until(lambda: len(producer.failed) > 0, 90), "the disabled client's writes kept being acknowledged"
        refused_at = len(producer.acked_on("A"))
        estate.kc.set_enabled(APP, True)
        estate.kc.set_enabled(ADMIN_CLIENT, True)
        assert wait_until(lambda: len(producer.acked_on("A")) >= refused_at + 20, 90), (
            f"orders-app did not write again once its client was enabled: {list(producer.failed.values())[-3:]}"
        )
        code, _report, out = _status(env)
        assert code == 0, out[-3000:]
    finally:
        producer.stop()
    acked = producer.acked_on("A")
    on_broker = read_keys(estate.endpoint(ADMIN_CLIENT), "orders")
    lost = sorted(k for k in acked if k not in on_broker)
    reasons = sorted(set(producer.failed.values()))
    print(
        f"\nkeycloak mid-run refusal: {len(acked)} acknowledged ({acked_before} before the client was disabled, "
        f"{refused_at - acked_before} more on the session it had, {len(acked) - refused_at} once refused and enabled "
        f"again), {len(producer.failed)} not acknowledged: {reasons}"
    )
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes are not on the broker: {lost[:10]}"
    assert not (set(producer.failed) & acked), "a write is both acknowledged and failed in the ledger"
    assert not estate.leaked(Path(published).read_text())
