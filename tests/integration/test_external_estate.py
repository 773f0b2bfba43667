"""Existing (``kind: external``) clusters, first-class: an estate started OUTSIDE the product.

The fixture (:mod:`tests.integration.existing_estate`) starts three plain KRaft clusters with SCRAM
and the ACL authorizer (A, B, C: one node each, to fit this 2-core machine) and one plain
distributed Connect worker homed on B, as docs/production/prepare.md tells a platform team. The stack declares
them ``kind: external`` in a project directory of its own (not the repository), its passwords set
with ``pulumi config set --path --secret``, its state in a backend named by ``PULUMI_BACKEND_URL``
with the passphrase in ``PULUMI_CONFIG_PASSPHRASE_FILE`` — no ``<state>/pulumi`` default. One
estate for the module; the tests run in order.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from dr.failover.drill.traffic import read_keys
from dr.kafka.client import Endpoint
from dr.runtime.process import wait_until
from tests import REPO_ROOT, processes
from tests.integration.drill_runner import assert_graded
from tests.integration.existing_estate import ExistingEstate
from tests.integration.failover_crash_driver import CRASH_EXIT
from tests.integration.helpers import ProjectEnv, stop_copying
from tests.integration.ports import windows

STACK = "existing"


PAYMENTS_RETENTION = "259200000"
ORDERS_QUOTA = {"producer_byte_rate": 50_000_000, "consumer_byte_rate": 80_000_000}
"""Generous: a limit the drill's traffic never reaches, declared so that it is carried by every failover."""


def _stack_doc(estate: ExistingEstate) -> dict[str, Any]:
    clusters = [
        {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": estate.clusters[name].bootstrap,
            "sasl_mechanism": "SCRAM-SHA-512",
            "security_protocol": "SASL_PLAINTEXT",
            "admin_username": "admin",
        }
        for name, role in (("A", "active"), ("B", "passive"), ("C", "standby"))
    ]
    return {
        "config": {
            "kafka-dr:profile": "dev",
            "kafka-dr:failoverDone": False,
            "kafka-dr:clusters": clusters,
            "kafka-dr:topics": [
                {"name": "orders", "partitions": 3, "replication_factor": 1, "min_insync_replicas": 1},
                # a topic configuration and a client quota the team declared: parity holds them equal on
                # A and B before the failover and on B and C after it
                {
                    "name": "payments",
                    "partitions": 1,
                    "replication_factor": 1,
                    "min_insync_replicas": 1,
                    "configs": {"retention.ms": PAYMENTS_RETENTION},
                },
            ],
            "kafka-dr:principals": {
                "admin": "admin",
                "replicator": "replicator",
                "applications": [
                    {
                        "name": "orders-app",
                        "produces": ["orders"],
                        "consumes": ["payments"],
                        "consumer_group": "orders-app",
                        "quota": ORDERS_QUOTA,
                    },
                    {"name": "billing", "consumes": ["orders"], "consumer_group": "billing"},
                ],
            },
            "kafka-dr:links": [
                {
                    "name": "A-to-B",
                    "source": "A",
                    "target": "B",
                    "topics": [".*"],
                    "consumer_groups": [".*"],
                    "connect": "platform",
                }
            ],
            # the team's HAProxy in front of the clusters' ENDPOINT listeners (issue 31): its runtime API only
            "kafka-dr:endpoint": {
                "address": "127.0.0.1",
                "bootstrapPort": estate.proxy.port,
                "brokerPorts": [estate.proxy.port + 1],
                "runtimeApi": estate.proxy.api,
            },
            "kafka-dr:connectClusters": [
                {
                    "name": "platform",
                    "cluster": "C",
                    "url": estate.connect.url,
                    "tasks_max": 3,
                    "replicator_credentials": {"provider": "file", "path": str(estate.connect.secrets_file)},
                }
            ],
        }
    }


def _env(root: Path) -> ProjectEnv:
    """An operator's project of this module's stack, its drctl outputs kept in :data:`OUTPUTS`."""
    env = ProjectEnv(root, STACK)
    env.outputs = OUTPUTS
    return env


OUTPUTS: list[str] = []


@pytest.fixture(scope="module")
def existing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExistingEstate]:
    """The platform team's estate, started by hand; stopped at the end (no process left)."""
    root = tmp_path_factory.mktemp("existing-estate")
    with windows(3) as ports:
        estate = ExistingEstate(root, (ports[0], ports[1], ports[2]), endpoint=True)
        try:
            estate.start()
            yield estate
        finally:
            estate.stop()
            assert not estate.pids(), "a process of the existing estate was left running"


@pytest.fixture(scope="module")
def env(existing: ExistingEstate, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """The stack, declared in its own project directory with ``pulumi config set --secret``."""
    e = _env(tmp_path_factory.mktemp("existing-stack"))
    e.create(_stack_doc(existing))
    for i, name in enumerate("ABC"):
        e.secret(f"kafka-dr:clusters[{i}].adminPassword", existing.clusters[name].admin_password)
    e.secret("kafka-dr:principals.replicatorPassword", existing.connect.replicator_password)
    text = (e.project / f"Pulumi.{STACK}.yaml").read_text()
    assert existing.clusters["A"].admin_password not in text and "secure:" in text
    return e


@pytest.fixture(scope="module")
def second(env: ProjectEnv, tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """A second operator: a fresh clone of the project (no state), the same backend and passphrase."""
    import shutil

    other = _env(tmp_path_factory.mktemp("second-operator"))
    shutil.copytree(env.project, other.project)
    other.vars["PULUMI_BACKEND_URL"] = env.vars["PULUMI_BACKEND_URL"]
    other.vars["PULUMI_CONFIG_PASSPHRASE_FILE"] = env.vars["PULUMI_CONFIG_PASSPHRASE_FILE"]
    return other


def _app(estate: ExistingEstate, cluster: str, user: str, password: str) -> Endpoint:
    return Endpoint(estate.clusters[cluster].bootstrap, user, password, "SASL_PLAINTEXT", "SCRAM-SHA-512")


def wipe_and_stand_by(env: Any, existing: ExistingEstate, cluster: str) -> None:
    """What a team does before a drill cycle comes back to its old active: delete its topics, declare it standby."""
    admin = AdminClient(_admin(existing, cluster).config())
    for future in admin.delete_topics(["orders", "payments"]).values():
        future.result(30)
    assert wait_until(lambda: not {"orders", "payments"} & set(admin.list_topics(timeout=10).topics), 30)
    stack_file = env.project / f"Pulumi.{STACK}.yaml"
    doc = yaml.safe_load(stack_file.read_text())
    for c in doc["config"]["kafka-dr:clusters"]:
        if c["name"] == cluster:
            c["role"] = "standby"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _admin(estate: ExistingEstate, cluster: str) -> Endpoint:
    return _app(estate, cluster, "admin", estate.clusters[cluster].admin_password)


def test_first_pulumi_up_of_the_existing_estate_succeeds(env: ProjectEnv, existing: ExistingEstate) -> None:
    t0 = time.monotonic()
    res = env.drctl("estate", "up", "--stack", STACK)
    print(f"\nfirst up of the external estate: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stderr[-4000:]
    connectors = json.loads(
        processes.run(
            ["curl", "-s", f"{existing.connect.url}/connectors?expand=status"], capture_output=True, text=True
        ).stdout
    )
    assert sorted(connectors) == ["A-to-B-checkpoint", "A-to-B-heartbeat", "A-to-B-source"]
    assert all(c["status"]["connector"]["state"] == "RUNNING" for c in connectors.values())
    # the internal topics follow B's size (1 broker), not 3
    md = AdminClient(_admin(existing, "B").config()).list_topics(timeout=10)
    assert "heartbeats" in md.topics or wait_until(
        lambda: "heartbeats" in AdminClient(_admin(existing, "B").config()).list_topics(timeout=10).topics, 30
    )


def test_status_reads_the_credentials_from_the_stack(env: ProjectEnv) -> None:
    res = env.drctl("status", "--stack", STACK, "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert {c["name"]: c["role"] for c in report["clusters"]} == {"A": "active", "B": "passive", "C": "standby"}


def test_parity_names_a_drift_made_on_b_behind_the_products_back_and_up_restores_it(
    env: ProjectEnv, existing: ExistingEstate
) -> None:
    """`drctl status --parity` compares A and B (the link A→B joins them): clean after the first up; then the
    team changes B by hand — a topic config, a SCRAM user deleted, a write granted to a reader on the passive
    cluster — and each is listed with its repair; `drctl estate up --refresh` restores what the stack declares
    (the user), the commands named repair the rest, and the status is clean again."""
    from confluent_kafka.admin import (
        AclOperation,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
        ScramMechanism,
        UserScramCredentialDeletion,
    )

    from dr.kafka.client import acl

    res = env.drctl("status", "--stack", STACK, "--parity", "--json")
    assert res.returncode == 0, json.loads(res.stdout)["problems"] if res.stdout else res.stderr[-3000:]
    admin_b = AdminClient(_admin(existing, "B").config())
    retention = [ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)]
    for future in admin_b.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=retention)]
    ).values():
        future.result(30)
    gone = [UserScramCredentialDeletion("billing", ScramMechanism.SCRAM_SHA_512)]
    for future in admin_b.alter_user_scram_credentials(gone).values():
        future.result(30)
    write = acl("billing", ResourceType.TOPIC, "orders", AclOperation.WRITE)
    for future in admin_b.create_acls([write]).values():
        future.result(30)
    res = env.drctl("status", "--stack", STACK, "--parity", "--json")
    assert res.returncode == 4, res.stderr[-3000:]
    problems = [p for p in json.loads(res.stdout)["problems"] if p.startswith("parity:")]
    b = existing.clusters["B"].bootstrap
    assert sorted(problems) == sorted(
        [
            "parity: cluster B: ACL Allow User:billing Write on Topic 'orders' (Literal) is beyond its passive role — "
            f"repair: `kafka-acls.sh --bootstrap-server {b} --command-config admin.properties --remove --force "
            "--allow-principal User:billing --operation Write --topic orders --resource-pattern-type literal`",
            f"parity: cluster B: SCRAM user 'billing' (declared) is missing — repair: `drctl estate up --stack {STACK} --refresh`",
            "parity: cluster B: topic 'orders' retention.ms: 86400000 on B, (broker default) on A — repair: "
            f"`kafka-configs.sh --bootstrap-server {b} --command-config admin.properties --alter --entity-type topics "
            "--entity-name orders --delete-config retention.ms`",
        ]
    ), problems
    up = env.drctl("estate", "up", "--stack", STACK, "--refresh")
    assert up.returncode == 0, up.stderr[-4000:]
    # the two repairs that are Kafka's tools, done through the admin API (the same requests)
    retention = [ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)]
    for future in admin_b.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=retention)]
    ).values():
        future.result(30)
    from confluent_kafka.admin import AclBindingFilter, AclPermissionType, ResourcePatternType

    from dr.kafka.client import delete_acls

    granted = AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:billing", "*", AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    assert delete_acls(_admin(existing, "B"), [granted]) == 1
    res = env.drctl("status", "--stack", STACK, "--parity", "--json")
    assert res.returncode == 0, json.loads(res.stdout)["problems"] if res.stdout else res.stderr[-3000:]


def test_a_second_operator_with_a_fresh_clone_reads_status(env: ProjectEnv, second: ProjectEnv) -> None:
    """Same backend and passphrase, a fresh project copy, no state: the generated passwords come back
    from the stack's secret output, identical to the first operator's."""
    res = second.drctl("status", "--stack", STACK, "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = second.drctl("failover", "--stack", STACK, "--dry-run", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "error" not in (json.loads(res.stdout)["pulumi_preview"] or {})
    mine = json.loads((env.state / "credentials.json").read_text())
    from dr.estate.estate import Estate
    from dr.topology import load_stack_file

    with pytest.MonkeyPatch.context() as mp:
        for k, v in second.vars.items():
            mp.setenv(k, v)
        estate = Estate(load_stack_file(second.project / f"Pulumi.{STACK}.yaml"), second.state)
        same = estate.app_password("orders-app") == mine["orders-app"]  # never let pytest print a password
        assert same, "the second operator got another orders-app password than the clusters have"
    theirs = json.loads((second.state / "credentials.json").read_text())
    same = all(theirs[u] == mine[u] for u in ("orders-app", "billing", "replicator") if u in mine)
    assert same, "the restored passwords differ from the first operator's"
    assert (second.state / "credentials.json").stat().st_mode & 0o777 == 0o600


def test_dry_run_shows_pulumi_preview_and_a_plan_for_external_clusters(env: ProjectEnv) -> None:
    res = env.drctl("failover", "--stack", STACK, "--dry-run", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    plan = json.loads(res.stdout)
    assert "error" not in (plan["pulumi_preview"] or {}), plan["pulumi_preview"]
    assert plan["pulumi_preview"]["changes"], "the preview proposes C's users, topics, ACLs and the link B→C"
    actions = " ".join(step["action"] for step in plan["steps"])
    assert "broker(s)" not in actions and "start C" not in actions
    assert "already running" in actions and "forget A's users" in actions
    assert not (env.home / "failover" / "journal.json").exists(), "a dry run writes no journal"


class PublishedConfigApp:
    """orders-app as an application that watches its published configuration (``<state>/clients/orders-app.json``):
    the stack's ``clientConfigs`` output for A until a failover publishes B's, then B. A write refused by the
    fence is retried, never dropped."""

    def __init__(self, client: dict[str, Any], published: Path) -> None:
        self.client, self.published = client, published
        self.acked: list[str] = []
        self.acked_on_b: list[str] = []
        self.refused: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        settings = {"acks": "all", "linger.ms": 5, "message.timeout.ms": 3000, "log_level": 0}
        producer = Producer({**self.client, **settings})
        on_b = False
        pending: list[str] = []
        i = 0
        while not self._stop.is_set():
            if not on_b and self.published.exists():
                producer.flush(5)
                producer = Producer({**json.loads(self.published.read_text()), **settings})
                on_b = True
            if not pending:
                pending.append(f"t-{i}")
                i += 1
            key = pending[0]

            def done(err: Any, msg: Any, key: str = key, on_b: bool = on_b) -> None:
                if err is None:
                    self.acked.append(key)
                    if on_b:
                        self.acked_on_b.append(key)
                else:
                    self.refused.append(key)

            try:
                producer.produce("orders", key=key, value=b"x", on_delivery=done)
                pending.pop(0)
            except KafkaException:  # the fence: retried until B's configuration is published
                self.refused.append(key)
                time.sleep(0.05)
            except BufferError:
                time.sleep(0.05)
            producer.poll(0.01)
            time.sleep(0.01)
        producer.flush(10)


def test_the_drill_runs_on_the_external_stack_under_traffic_through_published_configs(
    env: ProjectEnv, existing: ExistingEstate, tmp_path: Path
) -> None:
    """The estate's first failover is `drctl drill`: one planned, graded game day A→B→C on the stack itself,
    its applications on their published client configurations, no broker stopped, nothing torn down. An
    unplanned drill is refused first, before anything changes. Beside the drill, orders-app runs as an
    application of the team (:class:`PublishedConfigApp`): fenced on A, it moves to B when the failover
    publishes B's configuration and writes there; nothing it had acknowledged is lost."""
    journal = env.home / "failover" / "journal.json"
    assert not journal.exists(), "no failover ran on this stack before"
    res = env.drctl("drill", "--stack", STACK, "--unplanned", "--out", str(tmp_path / "refused"))
    assert res.returncode == 2 and "make A unreachable yourself" in res.stderr, res.stderr[-2000:]
    assert not journal.exists() and not (tmp_path / "refused").exists()

    # the application's published configuration before the failover: the stack's secret output
    res = env.pulumi("stack", "output", "clientConfigs", "--show-secrets", "--json", "--stack", STACK)
    assert res.returncode == 0, res.stderr
    client = json.loads(res.stdout)["orders-app"]
    assert client["bootstrap.servers"] == existing.clusters["A"].bootstrap
    published = env.state / "clients" / "orders-app.json"
    app = PublishedConfigApp(client, published)
    app.start()
    try:
        assert wait_until(lambda: len(app.acked) > 200, 60)
        pids = existing.pids()
        t0 = time.monotonic()
        res = env.drctl(
            "drill", "--stack", STACK, "--out", str(tmp_path / "drill"), "--warmup", "1", "--rate", "100", "--json"
        )
        took = time.monotonic() - t0
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
        # orders-app moved to B through its published configuration and writes there (the thread's event)
        wait_until(lambda: len(app.acked_on_b) > 20, 60)
    finally:
        app.stop()
    result = json.loads(res.stdout)
    (cycle,) = result["cycles"]
    rto = {f"{r['application']} ({r['kind']})": r["rto_s"] for r in cycle["application_rto"]}
    print(
        f"\nexternal drill ({took:.0f}s): {cycle['chain']} application RTO {rto}, "
        f"A→B→C {cycle['failover']['a_b_c_s']}s, grade {cycle['grade']}"
    )
    assert cycle["chain"] == "A→B→C" and result["grade"].startswith("PASS"), cycle["checks"]
    assert_graded(cycle["checks"])
    assert cycle["producer"]["acked_on_target"] > 0 and cycle["lost_after_recovery"] == 0
    e = cycle["endpoint_clients"]  # a producer on the team's endpoint only, never restarted: graded above
    print(f"unmodified client on the endpoint: {e}")
    assert e["target"] == "B" and e["acked_after_switch"] > 0 and e["acknowledged_lost"] == 0, e
    assert not cycle["preview_after_failover"], "the stack holds no change after the failover"
    assert existing.pids() == pids, "the drill stopped or started none of the platform team's processes"
    status = json.loads(env.drctl("status", "--stack", STACK, "--json").stdout)
    roles = {c["name"]: c["role"] for c in status["clusters"]}
    assert roles == {"A": "decommissioned", "B": "active", "C": "passive"}
    _holds_what_a_held(env, existing)

    assert len(app.acked_on_b) > 20, "orders-app moved to B through its published configuration and wrote there"
    assert app.refused, "the fence refused orders-app's writes on A until it moved"
    assert (published.stat().st_mode & 0o777) == 0o600
    conf = json.loads(published.read_text())
    assert conf["bootstrap.servers"] == existing.clusters["B"].bootstrap and conf["sasl.password"]
    props = (env.state / "clients" / "orders-app.properties").read_text()
    assert "${" not in props and 'username="orders-app"' in props
    on_b = read_keys(_admin(existing, "B"), "orders")
    lost = [k for k in app.acked if k not in on_b]
    assert not lost, f"{len(lost)} acknowledged records are not on B: {lost[:10]}"
    # B→C runs on the same Connect cluster; A keeps its topics (never deleted on a cluster not owned)
    assert "orders" in AdminClient(_admin(existing, "A").config()).list_topics(timeout=10).topics
    _endpoint_reaches(env, existing, "B")


def _holds_what_a_held(env: ProjectEnv, existing: ExistingEstate) -> None:
    """After the failover B holds what A held — the declared topics' configurations, the SCRAM users, the
    client quotas — and `drctl status --parity` finds B and C (the link B→C joins them now) equal, ACLs
    each by its own role."""
    from dr.kafka.live import read_live
    from dr.runtime.quota_reader import read_quotas

    res = env.drctl("status", "--stack", STACK, "--parity", "--json")
    assert res.returncode == 0, json.loads(res.stdout)["problems"] if res.stdout else res.stderr[-3000:]

    def held(name: str) -> tuple[dict[str, dict[str, str]], set[str], dict[str, dict[str, float]]]:
        ep = _admin(existing, name)
        live = read_live(ep)
        configs = {t.name: t.configs for t in live.topics if t.name in ("orders", "payments")}
        quotas = {str(q.entity.get("user")): q.configs for q in read_quotas(ep, kinds=(("users",),))}
        return configs, set(live.scram_users) & {"orders-app", "billing", "replicator"}, quotas

    on_a, on_b, on_c = held("A"), held("B"), held("C")
    assert on_b == on_a == on_c, f"A {on_a}\nB {on_b}\nC {on_c}"
    configs, users, quotas = on_b
    assert configs["payments"].get("retention.ms") == PAYMENTS_RETENTION and users == {
        "orders-app",
        "billing",
        "replicator",
    }
    assert quotas.get("orders-app") == {k: float(v) for k, v in ORDERS_QUOTA.items()}, quotas


def _endpoint_reaches(env: ProjectEnv, existing: ExistingEstate, cluster: str) -> None:
    """The team's proxy points at ``cluster`` only (the failover switched it through the declared runtime
    API), and a client that knows only the endpoint's address writes there."""
    from dr.topology import load_stack_file
    from dr.topology.client_endpoint import endpoint_pointing

    topology = load_stack_file(env.project / f"Pulumi.{STACK}.yaml")
    assert endpoint_pointing(topology, env.state) == [cluster]
    conf = json.loads((env.state / "clients" / "orders-app.json").read_text())
    producer = Producer({**conf, "bootstrap.servers": f"127.0.0.1:{existing.proxy.port}", "acks": "all"})
    key = f"through-the-endpoint-{time.time()}"
    producer.produce("orders", key=key, value=b"x")
    assert producer.flush(30) == 0
    assert read_keys(_admin(existing, cluster), "orders")[key] == 1


def test_a_bare_pulumi_preview_from_a_fresh_clone_keeps_the_generated_passwords(
    env: ProjectEnv, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A third operator clones the repository (its `Pulumi.yaml`, `main: stacks/`) with the stack file,
    the same backend and passphrase, no state, and runs `pulumi preview` itself — no `drctl` first.
    The program reads the passwords it generated back from the stack's last `credentials` output, so
    nothing changes (new ones would change every SCRAM credential and client configuration)."""
    import shutil

    clone = _env(tmp_path_factory.mktemp("bare-clone"))
    clone.project.mkdir()
    shutil.copy(REPO_ROOT / "Pulumi.yaml", clone.project / "Pulumi.yaml")
    (clone.project / "stacks").symlink_to(REPO_ROOT / "stacks")
    shutil.copy(env.project / f"Pulumi.{STACK}.yaml", clone.project / f"Pulumi.{STACK}.yaml")
    clone.vars["PULUMI_BACKEND_URL"] = env.vars["PULUMI_BACKEND_URL"]
    clone.vars["PULUMI_CONFIG_PASSPHRASE_FILE"] = env.vars["PULUMI_CONFIG_PASSPHRASE_FILE"]
    assert not (clone.state / "credentials.json").exists()
    res = clone.pulumi("preview", "--stack", STACK, "--expect-no-changes", "--diff")
    OUTPUTS.append(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-3000:]
    kept = json.loads((clone.state / "credentials.json").read_text())
    mine = json.loads((env.state / "credentials.json").read_text())
    same = all(kept[u] == mine[u] for u in ("orders-app", "billing", "replicator") if u in kept)
    assert same and "orders-app" in kept, "the fresh clone holds other passwords than the stack generated"
    assert (clone.state / "credentials.json").stat().st_mode & 0o777 == 0o600


def test_unplanned_failover_with_b_killed_lists_exactly_what_never_reached_c(
    env: ProjectEnv, second: ProjectEnv, existing: ExistingEstate
) -> None:
    """B is active now, C passive fed by B→C. The platform team wipes A (its topics) and the operator
    declares it the next standby. Records B acknowledged while the link was stopped never reach C;
    B's broker is killed; the unplanned failover promotes C and builds A as the new passive (link
    C→A) without touching B. The first operator's run dies (SIGKILL-like, after its consumer-groups
    step: clients already moved); the second operator's clone shows it interrupted and resumes it to
    completion — the journal and its lock live with the stack in the shared file backend, not in either
    clone's state. Once B is back the verification lists exactly those records, recovery replays them,
    B is decommissioned."""
    from dr.kafka.connect_rest import ConnectRest
    from dr.kafka.offsets import end_offsets

    def copied() -> bool:
        topics = ["orders", "payments"]
        return end_offsets(_admin(existing, "B"), topics) == end_offsets(_admin(existing, "C"), topics)

    assert wait_until(copied, 60), "the link B→C copies what B holds before it is stopped"
    wipe_and_stand_by(env, existing, "A")
    stop_copying(ConnectRest(existing.connect.url), "B-to-C-source")
    conf = json.loads((env.state / "clients" / "orders-app.json").read_text())
    assert conf["bootstrap.servers"] == existing.clusters["B"].bootstrap
    producer = Producer({**conf, "acks": "all"})
    lost = [f"u-{i}" for i in range(50)]
    for key in lost:
        producer.produce("orders", key=key, value=b"never-replicated")
    assert producer.flush(30) == 0
    existing.clusters["B"].kill()
    # the second operator pulls the stack file this failover starts from
    (second.project / f"Pulumi.{STACK}.yaml").write_bytes((env.project / f"Pulumi.{STACK}.yaml").read_bytes())
    try:
        crash = processes.run(
            [sys.executable, "-m", "tests.integration.failover_crash_driver", "--stack", STACK,
             "--mode", "unplanned", "--crash-after", "consumer-groups"],
            capture_output=True, text=True, env={**os.environ, **env.vars}, timeout=600, cwd=REPO_ROOT,
        )  # fmt: skip
        OUTPUTS.append(crash.stdout + crash.stderr)
        assert crash.returncode == CRASH_EXIT, crash.stderr[-4000:]
        journal = env.home / "failover" / "journal.json"
        assert journal.stat().st_mode & 0o777 == 0o600 and not (env.state / "failover" / "journal.json").exists()
        status = second.drctl("status", "--stack", STACK, "--json")
        last = json.loads(status.stdout)["last_failover"]
        assert last["status"] == "running" and not last["lock_held"], last
        assert {s["name"]: s["status"] for s in last["steps"]}["consumer-groups"] == "done"
        assert json.loads(status.stdout)["journal_shared"] is True
        res = second.drctl("failover", "--stack", STACK, "--mode", "unplanned", "--yes", "--json")
        assert res.returncode == 0, res.stderr[-5000:]
        assert "consumer-groups: done earlier — skipped" in res.stderr
        first = json.loads(res.stdout)
        assert first["runs"] == 2, "the second clone resumed the first's failover, not a new one"
        steps = {st["name"]: st["status"] for st in first["steps"]}
        assert steps["integrity"] == "deferred" and steps["desired-state"] == "done", steps
        # the first operator takes the stack file the failover rewrote, as `git pull` would
        (env.project / f"Pulumi.{STACK}.yaml").write_bytes((second.project / f"Pulumi.{STACK}.yaml").read_bytes())
        status = env.drctl("status", "--stack", STACK, "--json")
        roles = {c["name"]: c["role"] for c in json.loads(status.stdout)["clusters"]}
        assert roles == {"A": "passive", "B": "decommissioned", "C": "active"}
    finally:
        existing.clusters["B"].restart()
    res = env.drctl("failover", "--stack", STACK, "--yes", "--json")
    assert res.returncode == 6, res.stdout[-3000:] + res.stderr[-3000:]
    from dr.failover.frame.journal import Journal

    journal = Journal.load(env.home)
    verdict = journal.verdict() if journal is not None else None
    assert verdict is not None and verdict.counts["missing"] == len(lost), verdict and verdict.counts
    report_dir = verdict.report_dir
    assert f"drctl recover --report {report_dir}" in res.stderr
    res = env.drctl("recover", "--report", report_dir)
    assert res.returncode == 0, res.stderr[-3000:]
    res = env.drctl("failover", "--stack", STACK, "--yes", "--json")
    assert res.returncode == 0, res.stderr[-5000:]
    done = json.loads(res.stdout)
    assert done["status"] == "completed" and done["verdict"]["clean"]
    _endpoint_reaches(env, existing, "C")
    on_c = read_keys(_admin(existing, "C"), "orders")
    assert all(on_c[k] == 1 for k in lost), "each never-replicated record is on C exactly once after recovery"
    assert wait_until(lambda: _each_once(read_keys(_admin(existing, "A"), "orders"), lost), 60), (
        "C→A copies the recovered records to the new passive A"
    )
    assert "orders" in AdminClient(_admin(existing, "B").config()).list_topics(timeout=10).topics


def _each_once(on: Counter[str], keys: list[str]) -> bool:
    """Every key of ``keys`` once in ``on`` (one read of the topic per poll, not one per key)."""
    return all(on[k] == 1 for k in keys)


def test_adopt_proposes_the_stack_file_of_what_the_team_made_by_hand(
    env: ProjectEnv, existing: ExistingEstate, tmp_path: Path
) -> None:
    """The team made 300 topics, ACLs, SCRAM users and quotas by hand on C (:mod:`tests.integration.hand_made`);
    `drctl estate adopt` reads them through the stack's credentials and proposes a stack file that declares
    them — the product's own validation reads it back — and lists, with the reason, what it cannot express."""
    from dr.topology import load_stack_file
    from tests.integration import hand_made

    ADOPTED.clear()
    t0 = time.monotonic()
    hand_made.make_by_hand(_admin(existing, "C"))
    made = time.monotonic() - t0
    out = tmp_path / "Pulumi.adopted.yaml"
    t1 = time.monotonic()
    res = env.drctl("estate", "adopt", "--stack", STACK, "--from", "C", "--out", str(out))
    took = time.monotonic() - t1
    print(f"\nadopt: {len(hand_made.TOPICS) + 1} topics made by hand in {made:.1f}s, adopted in {took:.1f}s")
    assert res.returncode == 0, res.stderr[-4000:]
    text = out.read_text()
    proposal = load_stack_file(out)  # the product's validation, again, on the file as written
    topics = {t.name: t for t in proposal.topics}
    assert {*hand_made.TOPICS, hand_made.LEDGER} <= set(topics)
    ledger = topics[hand_made.LEDGER]
    assert (ledger.partitions, ledger.replication_factor) == (4, 1)
    assert ledger.configs == {"cleanup.policy": "compact", "retention.ms": "3600000"}
    assert topics[hand_made.EVENTS[0]].configs == {}, "only the topic-level overrides are declared"
    assert not [name for name in topics if name.startswith(("__", "mm2-", "connect-"))]
    apps = {a.name: a for a in proposal.principals.applications}
    producer, consumer, events = apps["adopt-producer"], apps["adopt-consumer"], apps["adopt-events"]
    assert producer.produces == sorted(hand_made.PRODUCED) and not producer.consumes
    assert producer.quota is not None and producer.quota.configs() == {
        k: str(v) for k, v in hand_made.PRODUCER_QUOTA.items()
    }
    assert consumer.consumes == sorted(hand_made.CONSUMED) and consumer.consumer_group == "adopt-consumers"
    assert events.produces_prefix == "adopt.events." and not events.produces
    assert "adopt-legacy" in apps and "adopt-mallory" not in apps and "adopt-ops" not in apps
    default = proposal.principals.default_quota
    assert default is not None and default.configs() == {k: str(v) for k, v in hand_made.DEFAULT_QUOTA.items()}
    header = text.split("\nconfig:", 1)[0]
    for listed in (
        f"Deny User:adopt-mallory Read on Topic '{hand_made.PRODUCED[0]}' (Literal): a DENY rule",
        f"Allow User:* Read on Topic '{hand_made.OTHERS[0]}' (Literal): a wildcard principal",
        f"Allow User:adopt-ops AlterConfigs on Topic '{hand_made.OTHERS[1]}' (Literal): AlterConfigs on a literal "
        "Topic is beyond an application's role",
        "from host 10.0.0.7: limited to host 10.0.0.7",
        "quota on client-id 'adopt-batch': a stack declares quotas per user",
        "SCRAM credential SCRAM-SHA-256 of user 'adopt-legacy'",
    ):
        assert listed in header, f"not listed: {listed}"
    for app in ("adopt-producer", "adopt-consumer", "adopt-events", "adopt-legacy"):
        assert f"application {app!r}: set its current password" in header
    assert "not expressed: ACL Deny User:adopt-mallory" in res.stderr
    again = env.drctl("estate", "adopt", "--stack", STACK, "--from", "C", "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr and out.read_text() == text
    ADOPTED["proposal"] = proposal


ADOPTED: dict[str, Any] = {}
"""The proposal of the adoption test, for the test that brings it under Pulumi."""


def test_adopting_as_a_principal_that_may_not_describe_acls_exits_5_and_writes_nothing(
    existing: ExistingEstate, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A team member declares their own SCRAM user as A's admin — a real user of A with no ACL, not a super
    user: the brokers refuse what adoption must read. `drctl estate adopt` exits 5 naming the cluster, the user and
    what it may not do, with the next step; no proposal is written."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    password = "auditor-" + os.urandom(8).hex()
    upsert = UserScramCredentialUpsertion(
        "auditor", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    admin = AdminClient(
        _admin(existing, "A").config()
    )  # kept alive until the result: a collected client ends its requests
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    e = _env(tmp_path_factory.mktemp("auditor-stack"))
    doc = _stack_doc(existing)
    for cluster in doc["config"]["kafka-dr:clusters"]:
        cluster["admin_username"] = "auditor"
    e.create(doc, passphrase="another passphrase")
    for i in range(3):
        e.secret(f"kafka-dr:clusters[{i}].adminPassword", password)
    e.secret("kafka-dr:principals.replicatorPassword", existing.connect.replicator_password)
    out = e.root / "Pulumi.adopted.yaml"
    res = e.drctl("estate", "adopt", "--stack", STACK, "--from", "A", "--out", str(out))
    assert res.returncode == 5, res.stdout[-2000:] + res.stderr[-3000:]
    # Kafka answers this user's DescribeAcls (nothing it may see) and refuses its DescribeUserScramCredentials
    assert "user 'auditor' may not describe SCRAM users" in res.stderr and "cluster 'A'" in res.stderr, res.stderr[
        -3000:
    ]
    assert "super user" in res.stderr, "the message names the next step"
    assert not out.exists(), "nothing was written"
    assert password not in res.stdout + res.stderr


@pytest.mark.parametrize("provisioning", ["individual", "batched"])
def test_pulumi_up_of_the_adopted_stack_imports_and_then_previews_no_change(
    existing: ExistingEstate, tmp_path: Path, provisioning: str
) -> None:
    """The adopted declaration, as the only (active) cluster C of a stack of its own with the applications'
    passwords set (as the proposal's notes say): `drctl estate up` takes over the topics, ACLs, users and quotas
    that exist — per-resource mode imports each topic (Pulumi's `import_`), batched mode's TopicSet adopts
    them — and `drctl estate preview --expect-no-changes` then exits 0. A part of the proposal, to stay small:
    the topic made with kafka-topics.sh (configs of its own) and 5 of the produced topics with their ACLs (the
    engine's time grows with each resource; 5 import the same kinds as 20 would)."""
    from tests.integration import hand_made

    proposal = ADOPTED.get("proposal")
    assert proposal is not None, "the adoption test before this one did not produce a proposal"
    produced = hand_made.PRODUCED[:5]
    wanted = {hand_made.LEDGER, *produced}
    topics = [t.model_dump(mode="json", exclude_defaults=True) for t in proposal.topics if t.name in wanted]
    apps = []
    for app in proposal.principals.applications:
        if app.name == "adopt-producer":
            apps.append({**app.model_dump(mode="json", exclude_none=True, exclude_defaults=True), "produces": produced})
        if app.name == "adopt-consumer":
            consumes = [t for t in app.consumes if t in produced[:3]]
            apps.append({**app.model_dump(mode="json", exclude_none=True, exclude_defaults=True), "consumes": consumes})
    assert len(topics) == 6 and len(apps) == 2
    stack = f"adopted-{provisioning}"
    e = ProjectEnv(tmp_path, stack)
    e.outputs = OUTPUTS
    cluster = {
        "name": "C",
        "role": "active",
        "kind": "external",
        "bootstrap_servers": existing.clusters["C"].bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "admin_username": "admin",
    }
    doc = {
        "config": {
            "kafka-dr:provisioning": provisioning,
            "kafka-dr:clusters": [cluster],
            "kafka-dr:topics": topics,
            "kafka-dr:principals": {
                "applications": apps,
                "default_quota": proposal.principals.default_quota.model_dump(exclude_none=True),
            },
        }
    }
    e.create(doc, passphrase="adopted")
    e.secret("kafka-dr:clusters[0].adminPassword", existing.clusters["C"].admin_password)
    for i, a in enumerate(apps):
        e.secret(f"kafka-dr:principals.applications[{i}].password", f"{a['name']}-password")
    t0 = time.monotonic()
    up = e.drctl("estate", "up", "--stack", stack)
    took = time.monotonic() - t0
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-4000:]
    t1 = time.monotonic()
    preview = e.drctl("estate", "preview", "--stack", stack, "--expect-no-changes")
    print(f"\nadopted stack ({provisioning}): up {took:.1f}s, preview {time.monotonic() - t1:.1f}s")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-3000:]
    # the applications' credentials still work: the declared passwords were the ones they had
    producer = Producer({**_app(existing, "C", "adopt-producer", "adopt-producer-password").config(), "acks": "all"})
    errors: list[Any] = []
    producer.produce(produced[0], key="after-adoption", value=b"x", on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None], errors


def test_no_password_in_any_output(existing: ExistingEstate) -> None:
    secrets = [b.admin_password for b in existing.clusters.values()] + [existing.connect.replicator_password]
    assert OUTPUTS and all(secrets), "nothing to scan: the module's commands recorded no output"
    for out in OUTPUTS:
        for s in secrets:
            assert s not in out
