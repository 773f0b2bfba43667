"""``provisioning: batched`` against real local clusters, through real ``pulumi up``/``refresh``/``preview``.

One stack (A and B of one broker each, the local example's topics and applications plus a topic
``audit`` with a retention, a default user quota and one application's own), provisioned with every
cluster's topics as one ``TopicSet``, its ACLs as one ``AclSet`` and its SCRAM users as one ``UserSet``
(:mod:`stacks.kafka_sets`), the quotas as one ``pulumi_kafka`` Quota each: the topics, ACLs, users (each
logs in with its own password) and quotas are on the clusters (the quotas as Kafka's own
``kafka-configs --describe`` reads them), an ACL, a topic config and a user deleted behind Pulumi's
back are seen by ``refresh`` and restored by the next ``up``, a changed quota replaces the old one on
both clusters, and a topic removed from the stack file stays in Kafka (retained) while the preview is
clean again.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)

from dr.base.stackref import StackRef, stack_dir
from dr.base.toolchain import toolchain
from dr.estate.stack import EstateStack
from dr.failover.act.fencing import _write_filter, write_bindings
from dr.kafka.client import Endpoint, admin_client, delete_acls
from dr.runtime.cluster import write_properties
from dr.runtime.process import java_command
from dr.topology import load_stack_file
from dr.topology.access import acl_rules
from tests.integration.helpers import StackEnv, provisioned, write_local_stack

STACK = "sets"
RETENTION = "3600000"
DEFAULT_QUOTA = {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}
ORDERS_QUOTA = {"producer_byte_rate": 4194304, "request_percentage": 200}


def _stack(root: Path, ports: tuple[int, int, int]) -> StackEnv:
    path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
    doc = yaml.safe_load(path.read_text())
    doc["config"]["kafka-dr:provisioning"] = "batched"
    doc["config"]["kafka-dr:topics"].append(
        {"name": "audit", "partitions": 2, "replication_factor": 1, "configs": {"retention.ms": int(RETENTION)}}
    )
    doc["config"]["kafka-dr:principals"]["defaultQuota"] = DEFAULT_QUOTA
    for app in doc["config"]["kafka-dr:principals"]["applications"]:
        if app["name"] == "orders-app":
            app["quota"] = ORDERS_QUOTA
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return StackEnv(root, STACK)


def _user_quotas(ep: Endpoint) -> dict[str | None, dict[str, int]]:
    """User entity (None: the default) → its quotas, as Kafka's own ``kafka-configs --describe
    --entity-type users`` prints them (``Quota configs for user-principal 'x' are a=1.0, b=2.0``)."""
    tc = toolchain()
    with tempfile.TemporaryDirectory(prefix="kdr-quotas-") as tmp:
        config = Path(tmp) / "admin.properties"
        write_properties(config, ep.java_config())
        args = ["--bootstrap-server", ep.bootstrap, "--command-config", str(config), "--describe"]
        cmd = java_command(
            tc.java, [tc.kafka_lib], "kafka.admin.ConfigCommand", [*args, "--entity-type", "users"], crash_dir=Path(tmp)
        )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    found: dict[str | None, dict[str, int]] = {}
    for line in res.stdout.splitlines():
        head, sep, values = line.partition(" are ")
        if not sep or not head.startswith("Quota configs for"):
            continue
        user = None if "the default user-principal" in head else head.split("'")[1]
        found[user] = {k: int(float(v)) for k, _, v in (kv.partition("=") for kv in values.split(", "))}
    return found


def _topics(ep: Endpoint) -> dict[str, int]:
    md = admin_client(ep).list_topics(timeout=15)
    return {name: len(t.partitions) for name, t in md.topics.items() if name in ("orders", "payments", "audit")}


def _retention(ep: Endpoint, topic: str) -> str | None:
    admin = admin_client(ep)  # kept alive until the result: a collected client ends its requests
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return next(iter(futures.values())).result(timeout=15)["retention.ms"].value


def _acls(ep: Endpoint) -> set[tuple[str, str, str, str, str]]:
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType

    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    admin = admin_client(ep)
    found = admin.describe_acls(everything).result(timeout=15)
    return {(b.principal, b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name) for b in found}


def _logs_in(ep: Endpoint) -> bool:
    """Whether ``ep``'s user logs in (a metadata request answered; a failed SASL login is not)."""
    try:
        admin_client(ep).list_topics(timeout=10)
    except Exception:  # noqa: BLE001 - a refused login is the answer
        return False
    return True


def _expected_acls(topology: Any, cluster: str) -> set[tuple[str, str, str, str, str]]:
    from stacks.kafka_sets import _normal

    return {
        _normal((f"User:{r.principal}", r.resource_type, r.resource_name, r.pattern, r.operation))
        for r in acl_rules(topology, topology.cluster(cluster))
    }


def test_batched_sets_provision_see_drift_restore_it_and_retain_removed_topics(
    tmp_path: Path, stack_ports: tuple[int, int, int]
) -> None:
    env = _stack(tmp_path, stack_ports)
    with provisioned(env):
        topology = load_stack_file(env.stack_file)
        estate = env.estate()
        a, b = estate.endpoint("A"), estate.endpoint("B")
        stack = EstateStack(StackRef(STACK, stack_dir(), env.state))
        resources = stack._stack().export_stack().deployment["resources"]
        names = {r["urn"].rsplit("::", 1)[-1] for r in resources}
        assert {"A-topics", "A-acls", "A-users", "B-topics", "B-acls", "B-users"} <= names, sorted(names)
        items = (
            "kafka:index/topic:Topic",
            "kafka:index/acl:Acl",
            "kafka:index/userScramCredential:UserScramCredential",
        )
        assert not any(r["type"] in items for r in resources)
        users = [topology.principals.replicator, *(x.name for x in topology.principals.applications)]
        for ep, name in ((a, "A"), (b, "B")):
            for user in users:
                assert _logs_in(estate.endpoint(name, user)), f"{name}: {user} does not log in with its password"
            assert _topics(ep) == {"orders": 6, "payments": 3, "audit": 2}, f"{name}: topics {_topics(ep)}"
            assert _retention(ep, "audit") == RETENTION, f"{name}: audit retention.ms"
            missing = _expected_acls(topology, name) - _acls(ep)
            assert not missing, f"{name}: ACLs not on the cluster: {sorted(missing)}"
            quotas = _user_quotas(ep)
            assert quotas == {None: DEFAULT_QUOTA, "orders-app": ORDERS_QUOTA}, f"{name}: quotas {quotas}"
        quota_resources = [r for r in resources if r["type"] == "kafka:index/quota:Quota"]
        assert len(quota_resources) == 4, "one Quota per entity and cluster, beside the batched sets"
        assert stack.preview().clean, "preview after the up is not clean"

        # drift behind Pulumi's back: an application's write ACL on A, a topic config on B, a user on B
        app = next(x.name for x in topology.principals.applications if x.writes)
        assert delete_acls(a, [_write_filter(app)]) >= 1
        gone = users[-1]
        admin_b = admin_client(b)  # held until the answer is in: a collected client cancels its requests
        deletion = [UserScramCredentialDeletion(gone, ScramMechanism.SCRAM_SHA_512)]
        for fut in admin_b.alter_user_scram_credentials(deletion).values():
            fut.result(timeout=15)
        assert not _logs_in(estate.endpoint("B", gone)), f"{gone} still logs in on B after its deletion"
        assert not write_bindings(a, [app]), "the write ACL was not deleted"
        alter = ConfigResource(
            ResourceType.TOPIC,
            "audit",
            incremental_configs=[ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)],
        )
        admin_b = admin_client(b)
        for fut in admin_b.incremental_alter_configs([alter]).values():
            fut.result(timeout=15)
        refreshed = stack.refresh()
        assert refreshed.get("update", 0) >= 3, f"refresh did not see the three drifts: {refreshed}"
        drift = stack.preview()
        assert drift.changes == {"update": 3}, f"the preview after the refresh: {drift.changes}"
        stack.up(load_stack_file(env.stack_file))
        assert write_bindings(a, [app]), f"the up did not restore {app}'s write ACL on A"
        assert _logs_in(estate.endpoint("B", gone)), f"the up did not restore {gone}'s user on B"
        assert _retention(b, "audit") == RETENTION, "the up did not restore audit's retention.ms on B"
        assert stack.preview().clean, "preview after restoring the drift is not clean"

        # a changed quota (every Quota input replaces): the new limits on both clusters, none left unset
        doc = yaml.safe_load(env.stack_file.read_text())
        changed = {"producer_byte_rate": 8388608, "consumer_byte_rate": 524288}
        for declared in doc["config"]["kafka-dr:principals"]["applications"]:
            if declared["name"] == "orders-app":
                declared["quota"] = changed
        env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        stack.up(load_stack_file(env.stack_file))
        for ep, name in ((a, "A"), (b, "B")):
            quotas = _user_quotas(ep)
            assert quotas == {None: DEFAULT_QUOTA, "orders-app": changed}, f"{name}: quotas after the change {quotas}"
        assert stack.preview().clean, "preview after changing a quota is not clean"

        # a topic removed from the stack file stays in Kafka, with its records' home
        doc = yaml.safe_load(env.stack_file.read_text())
        doc["config"]["kafka-dr:topics"] = [t for t in doc["config"]["kafka-dr:topics"] if t["name"] != "audit"]
        env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        stack.up(load_stack_file(env.stack_file))
        for ep, name in ((a, "A"), (b, "B")):
            assert _topics(ep).get("audit") == 2, f"{name}: the removed topic audit was deleted"
        assert stack.preview().clean, "preview after removing a topic is not clean"
