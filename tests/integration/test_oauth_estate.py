"""OAUTHBEARER end to end (issue 49): a real OpenID Connect server started by the test (``tests/oidc_server.py``)
in front of an estate started OUTSIDE the product (:mod:`tests.integration.oauth_estate`) whose brokers accept
only OAUTHBEARER tokens, validated by Kafka's JWT validator against the server's JWKS.

One estate for the module (the identity provider, A active, B passive and C standby, one node each); the stack
declares them ``kind: external`` with ``sasl_mechanism: OAUTHBEARER`` in a project directory of its own, its client
secrets set with ``pulumi config set --path --secret``. The tests run in order: ``drctl estate up`` from nothing
(the Pulumi engine and the built Kafka provider, logging in with the admin's client), ``drctl status``, writes
by the application's own client accepted on A and refused on B, MirrorMaker 2 on a Connect worker (homed on B,
started by hand, logging in with its own client) copying it to B as the replicator's client, refused
logins with messages that name the cluster, the token endpoint and the next step, ``drctl verify --stack`` and
``drctl recover`` on their own (records written on A while the link is stopped listed missing, replayed, clean
again), a planned drill A→B→C over OAuth (``drctl drill``: its own traffic as orders-app's client; C built by
the failover and linked from B with the replicator's client) while orders-app also writes as the team's
application through its published file, and last an unplanned failover of a second stack on A and B (a topic,
an application and a link of its own) with A's broker killed, finished once A is back.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from dr.base.errors import AuthError
from dr.base.toolchain import toolchain
from dr.failover.drill.traffic import read_keys
from dr.kafka.client import Endpoint, cluster_metadata
from dr.kafka.oauth import OAuthSettings
from dr.kafka.offsets import end_offsets
from dr.runtime.process import wait_until
from tests.integration.drill_runner import assert_graded
from tests.integration.helpers import ProjectEnv
from tests.integration.oauth_estate import ADMIN_CLIENT, AUDIENCE, OAuthBroker, OAuthWorker
from tests.integration.ports import windows
from tests.oidc_server import OidcServer, oidc_server

STACK = "oauth"
ADMIN_SECRET = "admin-client-secret-4f1c"
APP_SECRET = "team-secret"
"""orders-app's client secret (the mock identity provider accepts any; its team holds it)."""
APP_IDENTITY = "applications.orders-app"


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@dataclass
class Estate:
    """The identity provider and the three clusters."""

    idp: OidcServer
    clusters: dict[str, OAuthBroker]
    connect: OAuthWorker
    standby_started: Future[None]
    """C's start, under way while the first tests run on A and B (nothing reaches the standby before them)."""

    def standby(self) -> OAuthBroker:
        """C, once it answers."""
        self.standby_started.result(180)
        return self.clusters["C"]


def _format_and_start(broker: OAuthBroker, java: str, lib: Path) -> None:
    broker.format(java, lib)
    broker.start(java, lib)


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    """The identity provider and A, B, C, started by hand as a platform team would; stopped at the end."""
    root = tmp_path_factory.mktemp("oauth-estate")
    tc = toolchain()
    with oidc_server() as idp, windows(3) as ports:
        clusters = {n: OAuthBroker(n, p, root, idp=idp) for n, p in zip("ABC", ports, strict=True)}
        worker = OAuthWorker("platform", ports[1] + 60, clusters["B"], root, idp=idp)
        pool = ThreadPoolExecutor(3)  # the nodes start at once: each start waits on its port
        started = {name: pool.submit(_format_and_start, b, tc.java, tc.kafka_lib) for name, b in clusters.items()}
        try:
            started["A"].result()
            started["B"].result()
            worker.write_secrets()
            worker.start(tc.java, tc.mm2_lib)
            yield Estate(idp, clusters, worker, started["C"])
        finally:
            pool.shutdown(wait=True)  # C's start ends before it is stopped
            worker.stop()
            for b in clusters.values():
                b.stop()
    procs = [worker.proc, *(b.proc for b in clusters.values())]
    pids = [idp.pid, *(p.pid for p in procs if p is not None)]
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")], "a process of the OAuth estate was left running"


def _stack_doc(e: Estate) -> dict[str, Any]:
    def cluster(name: str, role: str) -> dict[str, Any]:
        return {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": e.clusters[name].bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": {
                "token_endpoint": e.idp.token_endpoint,
                "scope": AUDIENCE,
                "audience": AUDIENCE,
                "admin": {"client_id": ADMIN_CLIENT},
                "replicator": {"client_id": "replicator"},
                "applications": {"orders-app": {"client_id": "orders-app"}},
            },
        }

    return {
        "config": {
            "kafka-dr:profile": "dev",
            "kafka-dr:clusters": [cluster("A", "active"), cluster("B", "passive"), cluster("C", "standby")],
            "kafka-dr:topics": [{"name": "orders", "partitions": 2, "replication_factor": 1}],
            "kafka-dr:principals": {
                "applications": [{"name": "orders-app", "produces": ["orders"], "consumes": ["orders"]}]
            },
            "kafka-dr:links": [
                {"name": "A-to-B", "source": "A", "target": "B", "topics": ["orders"], "connect": "platform"}
            ],
            "kafka-dr:connectClusters": [
                {
                    "name": "platform",
                    "cluster": "B",
                    "url": e.connect.url,
                    "tasks_max": 1,
                    "replicator_credentials": {"provider": "file", "path": str(e.connect.secrets_file)},
                }
            ],
        }
    }


@pytest.fixture(scope="module")
def env(estate: Estate, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """The stack in its own project directory, the client secrets set with ``pulumi config set --secret``."""
    e = ProjectEnv(tmp_path_factory.mktemp("oauth-stack"), STACK)
    e.create(_stack_doc(estate))
    # the workers' file holds the replicator's client secret (the team put it there); the stack holds it as the
    # replicator's client secret only (no principals.replicatorPassword): estate up checks the workers against it
    replicator_secret = estate.connect.replicator_password
    for i in range(3):
        # the application's secret too, so the failover's RTO probe and the drill's traffic log in as orders-app's
        # own client
        for who, secret in (("admin", ADMIN_SECRET), ("replicator", replicator_secret), (APP_IDENTITY, APP_SECRET)):
            e.secret(f"kafka-dr:clusters[{i}].oauth.{who}.clientSecret", secret)
    text = (e.project / f"Pulumi.{STACK}.yaml").read_text()
    assert ADMIN_SECRET not in text and "secure:" in text
    return e


def _app(e: Estate, cluster: str, client_id: str = "orders-app", scope: str = AUDIENCE) -> Endpoint:
    settings = OAuthSettings(e.idp.token_endpoint, scope, AUDIENCE)
    return Endpoint(
        e.clusters[cluster].bootstrap, client_id, APP_SECRET, "SASL_PLAINTEXT", "OAUTHBEARER", None, cluster,
        settings,
    )  # fmt: skip


def _produce(ep: Endpoint) -> list[str]:
    """Write one record to ``orders``; the delivery errors (empty when it was accepted)."""
    errors: list[str] = []
    p = Producer(ep.config(**{"log_level": 0, "message.timeout.ms": 15000}))
    p.produce("orders", b"value", b"key", on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    left = p.flush(30)
    assert left == 0, "the record was neither delivered nor refused"
    return errors


def test_the_identity_provider_grants_the_application_its_own_principal(estate: Estate) -> None:
    claims = _claims(estate.idp.token("orders-app", APP_SECRET, AUDIENCE)["access_token"])
    assert (claims["sub"], claims["aud"], claims["iss"]) == ("orders-app", AUDIENCE, estate.idp.issuer)


def test_pulumi_up_from_nothing_provisions_topics_and_acls_over_oauth(env: ProjectEnv, estate: Estate) -> None:
    res = env.drctl("estate", "up", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    replicator_secret = estate.connect.replicator_password
    assert ADMIN_SECRET not in res.stdout + res.stderr and replicator_secret not in res.stdout + res.stderr
    for name in "AB":
        admin = AdminClient(_app(estate, name, ADMIN_CLIENT).config())
        assert "orders" in admin.list_topics(timeout=15).topics, f"orders was not created on {name}"
        everyone = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
        principals = {b.principal for b in admin.describe_acls(everyone).result(30)}
        assert {"User:orders-app", "User:replicator"} <= principals, (name, principals)
    estate.standby()
    standby = AdminClient(_app(estate, "C", ADMIN_CLIENT).config()).list_topics(timeout=15).topics
    assert "orders" not in standby, "the standby C was provisioned before a failover links it"
    res = env.drctl("estate", "preview", "--stack", STACK, "--refresh", "--expect-no-changes")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_status_logs_in_with_the_admin_client_from_the_stack(env: ProjectEnv) -> None:
    res = env.drctl("status", "--stack", STACK, "--json")
    report = json.loads(res.stdout)
    roles = {c["name"]: c["role"] for c in report["clusters"]}
    assert roles == {"A": "active", "B": "passive", "C": "standby"}, roles
    for c in report["clusters"]:
        assert c["health"]["reachable"], c  # the standby too: the admin's client logs in there
        if c["role"] != "standby":  # C holds nothing before its failover
            assert c["health"]["healthy"] and c["health"]["missing_topics"] == [], c
    assert ADMIN_SECRET not in res.stdout + res.stderr


def test_a_planned_failover_plans_over_oauth(env: ProjectEnv) -> None:
    """``drctl failover --dry-run``: the preflight reads both clusters and the link over OAuth, and Pulumi's
    preview of the failed-over stack logs in with the admin clients; nothing changes."""
    res = env.drctl("failover", "--stack", STACK, "--dry-run", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    plan = json.loads(res.stdout)
    assert "error" not in (plan["pulumi_preview"] or {}), plan["pulumi_preview"]
    assert plan["steps"], "the plan names no step"
    assert ADMIN_SECRET not in res.stdout + res.stderr


def test_the_application_writes_on_a_with_its_own_client_and_is_refused_on_b(estate: Estate) -> None:
    assert _produce(_app(estate, "A")) == []
    refused = _produce(_app(estate, "B"))
    assert refused and "TOPIC_AUTHORIZATION_FAILED" in refused[0], refused


def test_mirrormaker2_on_connect_copies_the_write_to_b_over_oauth_with_no_secret_in_its_configs(
    estate: Estate,
) -> None:
    """The connectors log in to A and B as the replicator's client, through the workers' config provider."""
    rest = estate.connect.url
    with urllib.request.urlopen(f"{rest}/connectors?expand=status", timeout=10) as r:  # noqa: S310 - loopback
        connectors = json.loads(r.read().decode())
    assert sorted(connectors) == ["A-to-B-checkpoint", "A-to-B-heartbeat", "A-to-B-source"]
    admin_b = _app(estate, "B", ADMIN_CLIENT)
    assert wait_until(lambda: sum(end_offsets(admin_b, ["orders"]).values()) >= 1, 120), (
        "the record written on A never reached B"
    )
    with urllib.request.urlopen(f"{rest}/connectors/A-to-B-source/config", timeout=10) as r:  # noqa: S310
        config = r.read().decode()
    assert "OAuthBearerLoginCallbackHandler" in config and "${file:" in config
    assert estate.connect.replicator_password not in config and ADMIN_SECRET not in config


def test_a_token_for_another_audience_is_refused_naming_cluster_endpoint_and_next_step(estate: Estate) -> None:
    with pytest.raises(AuthError) as info:
        cluster_metadata(_app(estate, "A", scope="another-api"), timeout=20)
    err = info.value
    assert err.exit_code == 5
    assert "cluster 'A'" in err.problem and estate.idp.token_endpoint in err.problem
    assert "the brokers refused the token of client 'orders-app'" in err.problem
    assert err.fix is not None and f"aud is the declared audience {AUDIENCE!r}" in err.fix


def test_an_unreachable_identity_provider_is_named_with_the_next_step(estate: Estate) -> None:
    from tests.integration.ports import free_window, release_window

    port = free_window(1)  # reserved and free: nothing answers there
    try:
        gone = replace(_app(estate, "A"), oauth=OAuthSettings(f"http://127.0.0.1:{port}/kafka/token", AUDIENCE))
        with pytest.raises(AuthError) as info:
            cluster_metadata(gone, timeout=20)
    finally:
        release_window(port)
    assert f"http://127.0.0.1:{port}/kafka/token" in info.value.problem
    assert "cannot be reached" in info.value.problem and "cluster 'A'" in info.value.problem
    assert info.value.fix is not None and "identity provider is up" in info.value.fix


def test_status_names_a_refused_token_with_the_cluster_and_the_endpoint(env: ProjectEnv, estate: Estate) -> None:
    """The admin of B asks for another audience (a scope the brokers do not expect): status says so for B."""
    stack_file = env.project / f"Pulumi.{STACK}.yaml"
    kept = stack_file.read_text()
    doc = yaml.safe_load(kept)
    doc["config"]["kafka-dr:clusters"][1]["oauth"]["scope"] = "another-api"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        res = env.drctl("status", "--stack", STACK, "--json")
    finally:
        stack_file.write_text(kept)
    assert res.returncode != 0, "status must fail when a cluster refuses the admin's token"
    health = {c["name"]: c["health"] for c in json.loads(res.stdout)["clusters"]}
    assert health["A"]["healthy"], health["A"]
    error = health["B"]["error"] or ""
    assert "cluster 'B'" in error and "the brokers refused the token of client 'kdr-admin'" in error, error
    assert estate.idp.token_endpoint in error
    assert ADMIN_SECRET not in res.stdout + res.stderr


def _secrets(e: Estate) -> tuple[str, ...]:
    return (ADMIN_SECRET, APP_SECRET, e.connect.replicator_password)


def _no_secret_in(e: Estate, text: str, report_dirs: list[Path]) -> None:
    """No client secret in ``text`` (a command's output) nor in any file of ``report_dirs``."""
    for secret in _secrets(e):
        assert secret not in text, "a client secret reached drctl's output"
        leaked = [p for d in report_dirs for p in d.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert not leaked, f"a client secret is in {leaked}"


def test_verify_and_recover_on_their_own_over_oauth(env: ProjectEnv, estate: Estate) -> None:
    """``drctl verify --stack`` (Spark over OAuth, the admin's client) and ``drctl recover`` (its scan, its read
    of A and its writes on B as the admin's client) outside a failover. The link copies everything: clean.
    Stopped, orders-app's writes on A never reach B: the verification lists exactly them missing, recovery
    replays them (run again from a credentials file naming the identity provider, it writes nothing), the
    verification is clean again. The link then resumes past them (its stored offsets moved to
    the last replayed record, as an operator does after a recovery) and copies a later write, once."""
    from dr.kafka.connect_rest import ConnectRest
    from tests.integration.helpers import stop_copying

    admin_a, admin_b = _app(estate, "A", ADMIN_CLIENT), _app(estate, "B", ADMIN_CLIENT)

    def ends(ep: Endpoint) -> int:
        return sum(end_offsets(ep, ["orders"]).values())

    assert wait_until(lambda: ends(admin_b) == ends(admin_a) > 0, 120), "B never caught up with A"

    def verify(out: Path, expect: int) -> dict[str, Any]:
        res = env.drctl("verify", "--stack", STACK, "--source", "A", "--target", "B", "--topics", "orders",
                        "--out", str(out), "--json")  # fmt: skip
        assert res.returncode == expect, res.stdout[-3000:] + res.stderr[-3000:]
        _no_secret_in(estate, res.stdout + res.stderr, [out])
        summary: dict[str, Any] = json.loads(res.stdout)
        assert summary["source"]["username"] == summary["target"]["username"] == ADMIN_CLIENT, summary["source"]
        return summary

    assert verify(env.root / "verify-clean", 0)["totals"]["missing"] == 0
    rest = ConnectRest(estate.connect.url)
    stop_copying(rest, "A-to-B-source")
    gap = [f"gap-{i}" for i in range(5)]
    producer = Producer(_app(estate, "A").config(**{"acks": "all", "log_level": 0}))
    for key in gap:
        producer.produce("orders", key=key, value=b"never copied")
    assert producer.flush(30) == 0
    report = env.root / "verify-gap"
    assert verify(report, 1)["totals"]["missing"] == len(gap)
    res = env.drctl("recover", "--report", str(report), "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads(res.stdout)["written"] == len(gap), res.stdout
    _no_secret_in(estate, res.stdout + res.stderr, [report])
    # without the stack: the admin's client from a 0600 credentials file naming the identity provider; a
    # second run finds every replayed record already on B and writes nothing
    creds = env.root / "admin-oauth.json"
    with os.fdopen(os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(
            {"username": ADMIN_CLIENT, "password": ADMIN_SECRET, "oauth_token_endpoint": estate.idp.token_endpoint,
             "oauth_scope": AUDIENCE},
            f,
        )  # fmt: skip
    res = env.drctl("recover", "--report", str(report), "--credentials", str(creds), "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    again = json.loads(res.stdout)
    assert (again["already_present"], again["written"]) == (len(gap), 0), again
    _no_secret_in(estate, res.stdout + res.stderr, [report])
    assert verify(env.root / "verify-recovered", 0)["totals"]["missing"] == 0
    # the link resumes after the replayed records: its stored source offset of each partition of orders with
    # records on A moved to the last one (MirrorMaker 2 reads on from the next; a partition it has no offset for
    # yet would be read from its beginning)
    moved = [
        {"partition": {"cluster": "A", "partition": p, "topic": t}, "offset": {"offset": n - 1}}
        for (t, p), n in end_offsets(admin_a, ["orders"]).items()
        if n
    ]
    # KIP-875; the product never moves a connector's offsets, so ConnectRest has no method for it
    rest._call("PATCH", "/connectors/A-to-B-source/offsets", {"offsets": moved})
    rest.resume("A-to-B-source")
    assert _produce(_app(estate, "A")) == []
    assert wait_until(lambda: ends(admin_b) == ends(admin_a), 120), "the resumed link did not copy the next write"
    on_b = read_keys(admin_b, "orders")
    assert all(on_b[k] == 1 for k in gap), {k: on_b[k] for k in gap}


def _bindings(admin: AdminClient) -> list[Any]:
    everyone = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return list(admin.describe_acls(everyone).result(30))


def test_a_planned_drill_over_oauth_fails_a_over_to_b_and_builds_c_each_component_its_own_client(
    env: ProjectEnv, estate: Estate
) -> None:
    """``drctl drill``: one planned game day A→B→C on the stack itself. Its traffic writes as orders-app's own
    client (its published file and the secret the stack holds for it); the failover fences A, drains and stops
    the link on Connect, promotes B, builds C from the stack (its topics and the OAuth principals' ACLs, as the
    admin's client) and links it from B on the same Connect worker as the replicator's client, publishes
    orders-app's file for B, probes the RTO as orders-app and verifies A vs B in Spark over OAuth: clean, A
    decommissioned. Beside the drill, orders-app writes as the team's application that reloads its published
    file (its team adds its client secret): refused on A after the fence, accepted on B, nothing it saw
    acknowledged lost; a write on B through that file reaches C."""
    published = env.root / "state" / STACK / "clients" / "orders-app.json"
    b_bootstrap = estate.clusters["B"].bootstrap
    acked: list[str] = []
    acked_on_b: list[str] = []
    refused_on_a: list[str] = []
    stop = threading.Event()

    def producer_for(conf: dict[str, Any]) -> Producer:
        settings = {"acks": "all", "linger.ms": 5, "message.timeout.ms": 3000, "log_level": 0}
        return Producer({**conf, "sasl.oauthbearer.client.secret": APP_SECRET, **settings})

    def traffic() -> None:
        """orders-app: A until its published file names B, then B. A write the fence refuses is retried."""
        producer = producer_for(json.loads(published.read_text()))
        on_b = False
        pending: list[str] = []
        i = 0
        while not stop.is_set():
            if not on_b and json.loads(published.read_text())["bootstrap.servers"] == b_bootstrap:
                producer.flush(5)
                producer = producer_for(json.loads(published.read_text()))
                on_b = True
            if not pending:
                pending.append(f"t-{i}")
                i += 1
            key = pending[0]

            def done(err: Any, _msg: Any, key: str = key, on_b: bool = on_b) -> None:
                if err is None:
                    acked.append(key)
                    if on_b:
                        acked_on_b.append(key)
                    return
                if not on_b:
                    refused_on_a.append(f"{key}: {err}")
                pending.append(key)  # retried, never dropped

            try:
                producer.produce("orders", key=key, value=b"x", on_delivery=done)
                pending.pop(0)
            except KafkaException as exc:  # the fence, cached: retried until the file names B
                if not on_b:
                    refused_on_a.append(f"{key}: {exc}")
                time.sleep(0.05)
            except BufferError:
                time.sleep(0.05)
            producer.poll(0.02)
            time.sleep(0.02)
        producer.flush(15)

    assert json.loads(published.read_text())["bootstrap.servers"] == estate.clusters["A"].bootstrap
    out = env.root / "drill"
    t0 = time.monotonic()
    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: len(acked) > 20, 120), "orders-app's writes on A were not acknowledged"
        res = env.drctl("drill", "--stack", STACK, "--out", str(out), "--warmup", "1", "--rate", "50", "--json")
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-6000:]
        result = json.loads(res.stdout)
        assert wait_until(lambda: len(acked_on_b) > 20, 120), "orders-app wrote nothing on B with its published file"
    finally:
        stop.set()
        thread.join(30)
    took = time.monotonic() - t0
    (cycle,) = result["cycles"]
    summary = cycle["failover"]
    print(
        f"\noauth planned drill: {took:.0f}s in the test, grade {result['grade']}, {len(acked)} acknowledged beside "
        f"it ({len(acked_on_b)} on B), drill producer {cycle['producer']}, RTO {summary['rto_s']}s, "
        f"A→B→C {summary['a_b_c_s']}s, " + ", ".join(f"{st['name']} {st['seconds']}s" for st in summary["steps"])
    )
    assert cycle["chain"] == "A→B→C" and result["grade"].startswith("PASS"), cycle["checks"]
    assert_graded(cycle["checks"])
    assert summary["status"] == "completed" and summary["standby"] == "C", summary
    # the drill's own application logged in as orders-app's client (the published file has no secret: without
    # the stack's, it writes nothing): acknowledged on A, refused by the fence as orders-app (never the admin,
    # a super user), acknowledged on B
    drill_producer = cycle["producer"]
    assert drill_producer["acked_on_source"] > 0 and drill_producer["acked_on_target"] > 0, drill_producer
    assert drill_producer["not_acknowledged"] > 0, f"the fence refused none of the drill's writes: {drill_producer}"
    assert cycle["lost_after_recovery"] == 0 and cycle["never_reached_target"] == 0, cycle
    assert [r for r in refused_on_a if "AUTHORIZATION" in r], f"the fence refused nothing: {refused_on_a[:5]}"
    probe = summary["rto_probe"]
    assert probe is not None and probe["application"] == "orders-app", probe  # its own client, not the admin's
    verdict = summary["verdict"]
    assert verdict is not None and verdict["clean"] and verdict["counts"]["missing"] == 0, verdict
    # parity: B and C, which the link B→C joins now, hold the same topic and each the ACLs of its role (Kafka's
    # ConfigCommand reads their quotas over OAuth too: its JVM allows the token endpoint)
    parity = env.drctl("status", "--stack", STACK, "--parity", "--json")
    status = json.loads(parity.stdout)
    assert parity.returncode == 0, status["problems"]
    roles = {c["name"]: c["role"] for c in status["clusters"]}
    assert roles == {"A": "decommissioned", "B": "active", "C": "passive"}, roles
    conf = json.loads(published.read_text())
    assert conf["bootstrap.servers"] == b_bootstrap and conf["sasl.oauthbearer.client.id"] == "orders-app"
    assert "sasl.oauthbearer.client.secret" not in conf and (published.stat().st_mode & 0o777) == 0o600
    # after the fence A refuses orders-app; B, promoted, accepts it
    refused = _produce(_app(estate, "A"))
    assert refused and "TOPIC_AUTHORIZATION_FAILED" in refused[0], refused
    assert _produce(_app(estate, "B")) == []
    admin_b = _app(estate, "B", ADMIN_CLIENT)
    on_b = read_keys(admin_b, "orders")
    lost = [k for k in acked if k not in on_b]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records are not on B: {lost[:10]}"

    # C, built by the failover as the admin's client: the stack's topic, the OAuth principals' ACLs — the
    # replicator may write there (it is no super user), orders-app may read only (C is passive)
    admin_c = _app(estate, "C", ADMIN_CLIENT)
    assert "orders" in AdminClient(admin_c.config()).list_topics(timeout=15).topics, "the failover did not build C"
    on_c = [(b.principal, b.operation, b.restype) for b in _bindings(AdminClient(admin_c.config()))
            if b.permission_type == AclPermissionType.ALLOW]  # fmt: skip
    assert ("User:replicator", AclOperation.WRITE, ResourceType.TOPIC) in on_c, on_c
    assert any(p == "User:orders-app" for p, _o, _t in on_c), on_c
    assert ("User:orders-app", AclOperation.WRITE, ResourceType.TOPIC) not in on_c, on_c
    # the link B→C on the worker homed on B: logging in as the replicator's client through the workers' config
    # provider — no secret in its configs, and not the admin's client
    rest = estate.connect.url
    with urllib.request.urlopen(f"{rest}/connectors", timeout=10) as r:  # noqa: S310 - loopback
        assert sorted(json.loads(r.read().decode())) == ["B-to-C-checkpoint", "B-to-C-heartbeat", "B-to-C-source"]
    with urllib.request.urlopen(f"{rest}/connectors/B-to-C-source/config", timeout=10) as r:  # noqa: S310
        config = r.read().decode()
    assert "OAuthBearerLoginCallbackHandler" in config and f"${{file:{estate.connect.secrets_file}:username}}" in config
    assert ADMIN_CLIENT not in config and all(secret not in config for secret in _secrets(estate)), config
    # orders-app writes on B through its published file; the replicator's link copies it to C
    key = f"after-failover-{time.time()}"
    errors: list[str] = []
    p = Producer({**conf, "sasl.oauthbearer.client.secret": APP_SECRET, "acks": "all", "log_level": 0})
    p.produce("orders", key=key, value=b"x", on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
    assert p.flush(30) == 0 and errors == [], errors
    assert wait_until(lambda: end_offsets(admin_c, ["orders"]) == end_offsets(admin_b, ["orders"]), 120), (
        "B→C did not copy B's records to C"
    )
    assert read_keys(admin_c, "orders")[key] == 1, "orders-app's write on B did not reach C once"
    _no_secret_in(estate, res.stdout + res.stderr + parity.stdout + parity.stderr, [out, Path(verdict["report_dir"])])
    assert all(secret not in Path(summary["journal"]).read_text() for secret in _secrets(estate))


UNPLANNED = "oauth-unplanned"


def test_an_unplanned_failover_over_oauth_with_a_killed(env: ProjectEnv, estate: Estate) -> None:
    """A second stack on A and B (its config copied from the first, secrets included, C left out, with a
    topic, an application and a link of its own on the same Connect worker): ``drctl estate up``, MirrorMaker 2
    copies payments-app's writes to B, A's broker is killed, and ``drctl failover --mode unplanned`` promotes B
    over OAuth — the link stopped on Connect, payments-app's file rewritten for B (no secret), its RTO probe as
    its own client, the integrity check deferred while A is gone; payments-app then writes on B with its own
    client, every record it wrote on A is there once. A comes back and the failover, run again, resumes
    (runbooks/unplanned-failover.md §4): the verification A vs B over OAuth is clean and A is decommissioned.
    No client secret is in drctl's output or journal."""
    res = env.pulumi("stack", "init", UNPLANNED, "--copy-config-from", STACK)
    assert res.returncode == 0, res.stderr
    stack_file = env.project / f"Pulumi.{UNPLANNED}.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    config = doc["config"]
    config["kafka-dr:clusters"] = [c for c in config["kafka-dr:clusters"] if c["name"] != "C"]
    for c, role in zip(config["kafka-dr:clusters"], ("active", "passive"), strict=True):
        c["role"] = role
        apps = c["oauth"]["applications"]
        apps["payments-app"] = {**apps.pop("orders-app"), "client_id": "payments-app"}  # its (encrypted) secret kept
    config.pop("kafka-dr:failoverDone", None)  # the first stack's file says its failover is done
    config["kafka-dr:topics"] = [{"name": "payments", "partitions": 2, "replication_factor": 1}]
    config["kafka-dr:principals"]["applications"] = [
        {"name": "payments-app", "produces": ["payments"], "consumes": ["payments"]}
    ]
    config["kafka-dr:links"] = [
        {"name": "A-to-B-pay", "source": "A", "target": "B", "topics": ["payments"], "connect": "platform"}
    ]
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = env.drctl("estate", "up", "--stack", UNPLANNED)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    outputs = [res.stdout + res.stderr]

    def payments_app(cluster: str) -> Producer:
        ep = replace(_app(estate, cluster), username="payments-app")
        return Producer(ep.config(**{"acks": "all", "message.timeout.ms": 15000, "log_level": 0}))

    keys = [f"pay-{i}" for i in range(20)]
    producer = payments_app("A")
    for key in keys:
        producer.produce("payments", key=key, value=b"x")
    assert producer.flush(30) == 0
    admin_b = _app(estate, "B", ADMIN_CLIENT)
    assert wait_until(lambda: sum(end_offsets(admin_b, ["payments"]).values()) >= len(keys), 120), (
        "MirrorMaker 2 did not copy payments-app's writes to B"
    )
    estate.clusters["A"].kill()
    res = env.drctl("failover", "--stack", UNPLANNED, "--mode", "unplanned", "--yes", "--json", timeout=600)
    outputs.append(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-6000:]
    summary = json.loads(res.stdout)
    steps = {st["name"]: st["status"] for st in summary["steps"]}
    print(f"\noauth unplanned failover: {summary['status']}, RTO {summary['rto_s']}s, steps {steps}")
    assert steps.get("integrity") == "deferred", steps
    probe = summary["rto_probe"]
    assert probe is not None and probe["application"] == "payments-app", probe
    published = env.root / "state" / UNPLANNED / "clients" / "payments-app.json"
    conf = json.loads(published.read_text())
    assert conf["bootstrap.servers"] == estate.clusters["B"].bootstrap, conf["bootstrap.servers"]
    assert conf["sasl.oauthbearer.client.id"] == "payments-app" and "sasl.oauthbearer.client.secret" not in conf
    errors: list[str] = []
    p = Producer({**conf, "sasl.oauthbearer.client.secret": APP_SECRET, "message.timeout.ms": 15000, "log_level": 0})
    p.produce("payments", key=b"on-B", value=b"x", on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
    assert p.flush(30) == 0 and errors == [], errors
    on_b = read_keys(admin_b, "payments")
    assert all(on_b[k] == 1 for k in keys) and on_b["on-B"] == 1, on_b
    # A comes back (the platform team restarts its broker): the failover resumes, verifies and decommissions it
    estate.clusters["A"].restart()
    res = env.drctl("failover", "--stack", UNPLANNED, "--yes", "--json", timeout=600)
    outputs.append(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-6000:]
    done = json.loads(res.stdout)
    assert done["status"] == "completed" and done["runs"] == 2, done
    verdict = done["verdict"]
    assert verdict is not None and verdict["clean"] and verdict["counts"]["missing"] == 0, verdict
    steps = {st["name"]: st["status"] for st in done["steps"]}
    assert steps.get("integrity") == "done" and steps.get("decommission") == "done", steps
    assert done["pending"] == [], done["pending"]
    journal = Path(summary["journal"]).read_text()
    for secret in _secrets(estate):
        assert all(secret not in out for out in outputs) and secret not in journal, "a client secret leaked"
    _no_secret_in(estate, "", [Path(verdict["report_dir"])])
