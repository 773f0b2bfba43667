"""``provisioning: batched`` against real local clusters, through real ``pulumi up``/``refresh``/``preview``.

One stack (A and B of one broker each, the local example's topics and applications plus a topic
``audit`` with a retention), provisioned with every cluster's topics as one ``TopicSet`` and its ACLs
as one ``AclSet`` (:mod:`stacks.kafka_sets`): the topics and ACLs are on the clusters, an ACL and a
topic config changed behind Pulumi's back are seen by ``refresh`` and restored by the next ``up``, and a
topic removed from the stack file stays in Kafka (retained) while the preview is clean again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from dr.base.stackref import StackRef, stack_dir
from dr.estate.stack import EstateStack
from dr.failover.act.fencing import _write_filter, write_bindings
from dr.kafka.client import Endpoint, admin_client, delete_acls
from dr.topology import load_stack_file
from dr.topology.access import acl_rules
from tests.integration.helpers import StackEnv, provisioned, write_local_stack

STACK = "sets"
RETENTION = "3600000"


def _stack(root: Path, ports: tuple[int, int, int]) -> StackEnv:
    path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
    doc = yaml.safe_load(path.read_text())
    doc["config"]["kafka-dr:provisioning"] = "batched"
    doc["config"]["kafka-dr:topics"].append(
        {"name": "audit", "partitions": 2, "replication_factor": 1, "configs": {"retention.ms": int(RETENTION)}}
    )
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return StackEnv(root, STACK)


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
        assert {"A-topics", "A-acls", "B-topics", "B-acls"} <= names, sorted(names)
        assert not any(r["type"] in ("kafka:index/topic:Topic", "kafka:index/acl:Acl") for r in resources)
        for ep, name in ((a, "A"), (b, "B")):
            assert _topics(ep) == {"orders": 6, "payments": 3, "audit": 2}, f"{name}: topics {_topics(ep)}"
            assert _retention(ep, "audit") == RETENTION, f"{name}: audit retention.ms"
            missing = _expected_acls(topology, name) - _acls(ep)
            assert not missing, f"{name}: ACLs not on the cluster: {sorted(missing)}"
        assert stack.preview().clean, "preview after the up is not clean"

        # drift behind Pulumi's back: an application's write ACL on A, a topic config on B
        app = next(x.name for x in topology.principals.applications if x.writes)
        assert delete_acls(a, [_write_filter(app)]) >= 1
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
        assert refreshed.get("update", 0) >= 2, f"refresh did not see both drifts: {refreshed}"
        drift = stack.preview()
        assert drift.changes == {"update": 2}, f"the preview after the refresh: {drift.changes}"
        stack.up(load_stack_file(env.stack_file))
        assert write_bindings(a, [app]), f"the up did not restore {app}'s write ACL on A"
        assert _retention(b, "audit") == RETENTION, "the up did not restore audit's retention.ms on B"
        assert stack.preview().clean, "preview after restoring the drift is not clean"

        # a topic removed from the stack file stays in Kafka, with its records' home
        doc = yaml.safe_load(env.stack_file.read_text())
        doc["config"]["kafka-dr:topics"] = [t for t in doc["config"]["kafka-dr:topics"] if t["name"] != "audit"]
        env.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        stack.up(load_stack_file(env.stack_file))
        for ep, name in ((a, "A"), (b, "B")):
            assert _topics(ep).get("audit") == 2, f"{name}: the removed topic audit was deleted"
        assert stack.preview().clean, "preview after removing a topic is not clean"
