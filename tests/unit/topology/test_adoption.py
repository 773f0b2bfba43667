"""``drctl estate adopt``'s derivation (:mod:`dr.topology.adoption`): a live-cluster description in, a stack
file proposal and the list of what it cannot express out — pure, no cluster. Also the parsing of Kafka's
``ConfigCommand`` quota lines and the command's refusals that come before any cluster is read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dr.kafka.live import LiveAcl, LiveCluster, LiveQuota, LiveTopic
from dr.runtime.quota_reader import parse_quotas
from dr.topology import load_stack_file, load_topology
from dr.topology.adoption import Adoption, adopted_topology, derive
from dr.topology.stackfile import render_stack_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "Pulumi.production-example.yaml"
OWN = {"admin": "the stack's admin", "replicator": "the stack's replicator"}


def allow(user: str, kind: str, name: str, op: str, pattern: str = "Literal", **kw: str) -> LiveAcl:
    return LiveAcl(f"User:{user}", kind, name, pattern, op, **kw)


def live(acls: list[LiveAcl], **kw: object) -> LiveCluster:
    topics = [
        LiveTopic("orders", 12, 3, 2, {"retention.ms": "604800000", "cleanup.policy": "delete"}),
        LiveTopic("payments", 6, 3, 2),
        LiveTopic("shop.carts", 3, 3, 2),
        LiveTopic("shop.items", 3, 3, 2),
    ]
    return LiveCluster(topics=topics, acls=acls, **kw)  # type: ignore[arg-type]


def unexpressed(adoption: Adoption) -> dict[str, str]:
    return {u.item: u.reason for u in adoption.unexpressed}


def test_topics_keep_partitions_replication_min_insync_and_only_their_overrides() -> None:
    adoption = derive(live([]), own=OWN)
    orders = next(t for t in adoption.topics if t.name == "orders")
    assert (orders.partitions, orders.replication_factor, orders.min_insync_replicas) == (12, 3, 2)
    assert orders.configs == {"cleanup.policy": "delete", "retention.ms": "604800000"}
    assert next(t for t in adoption.topics if t.name == "payments").configs == {}
    assert [t.name for t in adoption.topics] == ["orders", "payments", "shop.carts", "shop.items"]


def test_an_application_comes_from_its_acls_prefixes_kept_as_prefixes() -> None:
    acls = [
        allow("orders-app", "Topic", "orders", "Write"),
        allow("orders-app", "Topic", "orders", "Describe"),
        allow("orders-app", "Topic", "payments", "Read"),
        allow("orders-app", "Topic", "payments", "Describe"),
        allow("orders-app", "Group", "orders-app", "Read"),
        allow("orders-app", "Group", "orders-app", "Describe"),
        allow("shop", "Topic", "shop.", "Write", "Prefixed"),
        allow("shop", "Topic", "shop.", "Describe", "Prefixed"),
        allow("shop", "Topic", "shop.", "Read", "Prefixed"),
    ]
    adoption = derive(live(acls), own=OWN)
    apps = {a.name: a for a in adoption.applications}
    assert set(apps) == {"orders-app", "shop"}
    o = apps["orders-app"]
    assert (o.produces, o.consumes, o.consumer_group) == (["orders"], ["payments"], "orders-app")
    s = apps["shop"]
    assert (s.produces_prefix, s.consumes_prefix, s.produces, s.consumes) == ("shop.", "shop.", [], [])
    assert adoption.unexpressed == [], "the Describe rights Kafka implies beside Read/Write are covered"


def test_what_a_stack_cannot_express_is_listed_with_its_reason() -> None:
    acls = [
        LiveAcl("User:mallory", "Topic", "orders", "Literal", "Read", permission="Deny"),
        allow("billing", "Topic", "orders", "Read", host="10.0.0.7"),
        LiveAcl("User:*", "Topic", "payments", "Literal", "Read"),
        LiveAcl("Group:ops", "Topic", "payments", "Literal", "Read"),
        allow("billing", "Topic", "orders", "Create"),
        allow("billing", "Topic", "orders", "All"),
        allow("billing", "Cluster", "kafka-cluster", "IdempotentWrite"),
        allow("billing", "TransactionalID", "billing-tx", "Write"),
        allow("billing", "Topic", "payments", "Describe"),  # alone: no Read or Write beside it
        allow("billing", "Group", "billing-", "Read", "Prefixed"),
        allow("billing", "Topic", "*", "Read"),
        allow("billing", "Topic", "gone", "Read"),
        allow("billing", "Group", "billing", "Read"),
        allow("billing", "Group", "billing-2", "Read"),
        allow("shop", "Topic", "shop.", "Write", "Prefixed"),
        allow("shop", "Topic", "shop.c", "Write", "Prefixed"),
        allow("replicator", "Topic", "orders", "Write"),
        allow("ops", "Topic", "orders", "AlterConfigs"),
    ]
    adoption = derive(live(acls), own=OWN)
    found = unexpressed(adoption)
    assert len(found) == 16, sorted(found)
    assert "ops" not in {a.name for a in adoption.applications}, "no application from bindings that are all listed"

    def reason_of(fragment: str) -> str:
        (hit,) = [r for item, r in found.items() if fragment in item]
        return hit

    assert "DENY" in reason_of("Deny User:mallory")
    assert "host 10.0.0.7" in reason_of("from host 10.0.0.7")
    assert "wildcard principal" in reason_of("User:* Read")
    assert "not a User principal" in reason_of("Group:ops")
    assert "beyond an application's role" in reason_of("billing Create")
    assert "beyond an application's role" in reason_of("billing All")
    assert "beyond an application's role" in reason_of("IdempotentWrite on Cluster")
    assert "beyond an application's role" in reason_of("Write on TransactionalID")
    assert "beyond an application's role" in reason_of("billing Describe on Topic 'payments'")
    assert "beyond an application's role" in reason_of("Read on Group 'billing-' (Prefixed)")
    assert "wildcard resource" in reason_of("Read on Topic '*'")
    assert "does not hold" in reason_of("Topic 'gone'")
    assert "second consumer group" in reason_of("Group 'billing-2'")
    assert "second produces_prefix" in reason_of("'shop.c' (Prefixed)")
    assert "stack's replicator" in reason_of("User:replicator")
    billing = next(a for a in adoption.applications if a.name == "billing")
    assert billing.consumer_group == "billing" and billing.consumes == []


def test_nothing_is_dropped_in_silence_every_binding_is_placed_implied_or_listed() -> None:
    kinds = [("Topic", "orders"), ("Topic", "shop."), ("Group", "g"), ("Cluster", "kafka-cluster")]
    ops = ["Read", "Write", "Describe", "Create", "Alter", "All"]
    acls = [
        LiveAcl(f"User:{user}", kind, name, pattern, op, permission, host)
        for user in ("u1", "u2", "*")
        for kind, name in kinds
        for pattern in ("Literal", "Prefixed")
        for op in ops
        for permission in ("Allow", "Deny")
        for host in ("*", "10.1.1.1")
    ]
    adoption = derive(live(acls), own=OWN)
    listed = {u.item for u in adoption.unexpressed}
    apps = {a.name: a for a in adoption.applications}
    for acl in acls:
        if f"ACL {acl.text()}" in listed:
            continue
        user = acl.principal.removeprefix("User:")
        app = apps[user]
        placed = {
            ("Topic", "Literal", "Write"): acl.resource_name in app.produces,
            ("Topic", "Literal", "Read"): acl.resource_name in app.consumes,
            ("Topic", "Prefixed", "Write"): app.produces_prefix == acl.resource_name,
            ("Topic", "Prefixed", "Read"): app.consumes_prefix == acl.resource_name,
            ("Group", "Literal", "Read"): app.consumer_group == acl.resource_name,
        }.get((acl.resource_type, acl.pattern, acl.operation))
        implied = acl.operation == "Describe" and any(
            LiveAcl(acl.principal, acl.resource_type, acl.resource_name, acl.pattern, op) in acls
            for op in ("Read", "Write")
        )
        assert placed or implied, f"{acl.text()} is neither declared nor listed"


def test_scram_users_become_applications_and_other_mechanisms_are_listed() -> None:
    users = {"orders-app": ["SCRAM-SHA-512"], "legacy": ["SCRAM-SHA-256"], "admin": ["SCRAM-SHA-512"]}
    adoption = derive(live([], scram_users=users), own=OWN)
    assert [a.name for a in adoption.applications] == ["legacy", "orders-app"]
    assert "SCRAM-SHA-512 credentials only" in unexpressed(adoption)["SCRAM credential SCRAM-SHA-256 of user 'legacy'"]


def test_user_quotas_go_on_their_application_the_default_user_on_default_quota() -> None:
    quotas = [
        LiveQuota({"user": "orders-app"}, {"producer_byte_rate": 1048576.0, "request_percentage": 200.0}),
        LiveQuota({"user": None}, {"consumer_byte_rate": 2097152.0}),
        LiveQuota({"client-id": "batch"}, {"producer_byte_rate": 1024.0}),
        LiveQuota({"user": "billing", "client-id": "x"}, {"producer_byte_rate": 1024.0}),
        LiveQuota({"ip": "10.0.0.1"}, {"connection_creation_rate": 10.0}),
        LiveQuota({"user": "replicator"}, {"producer_byte_rate": 99999999.0}),
        LiveQuota({"user": "billing"}, {"consumer_byte_rate": 1500.5, "controller_mutation_rate": 5.0}),
    ]
    adoption = derive(live([], quotas=quotas), own=OWN)
    apps = {a.name: a for a in adoption.applications}
    orders_quota = apps["orders-app"].quota
    assert orders_quota is not None and orders_quota.configs() == {
        "producer_byte_rate": "1048576",
        "request_percentage": "200",
    }
    assert adoption.default_quota is not None and adoption.default_quota.configs() == {"consumer_byte_rate": "2097152"}
    assert "billing" not in apps, "its only limits cannot be declared: no application for it"
    found = unexpressed(adoption)
    assert "per user" in found["quota on client-id 'batch'"]
    assert "per user" in found["quota on client-id 'x' with user 'billing'"]
    assert "per user" in found["quota on ip '10.0.0.1'"]
    assert "stack's replicator" in found["quota on user 'replicator'"]
    assert "whole numbers" in found["quota consumer_byte_rate=1500.5 on user 'billing'"]
    assert "declares only" in found["quota controller_mutation_rate=5 on user 'billing'"]


def test_the_proposal_validates_keeps_the_stack_file_and_names_the_passwords_to_set(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.prod.yaml"
    shutil.copy(EXAMPLE, stack)
    base = load_stack_file(stack)
    acls = [
        allow("orders-app", "Topic", "orders", "Write"),
        allow("orders-app", "Group", "orders-app", "Read"),
        allow("newcomer", "Topic", "payments", "Read"),
    ]
    cluster = live(acls)
    cluster.topics.append(LiveTopic("unsafe", 3, 3, 1))  # the production profile refuses min.insync 1 at RF 3
    proposed, adoption = adopted_topology(base, derive(cluster, own=OWN))
    assert "unsafe" not in {t.name for t in proposed.topics}
    assert "refused by the stack's rules" in unexpressed(adoption)["topic 'unsafe'"]
    assert "min" in unexpressed(adoption)["topic 'unsafe'"]
    text = render_stack_config(stack, proposed)
    again = load_topology("prod", yaml.safe_load(text)["config"])  # the product's own validation
    assert {a.name for a in again.principals.applications} == {"orders-app", "newcomer"}
    assert again.principals.application("orders-app").password is not None, "a declared password is kept"
    assert "secure: v1:PLACEHOLDER0ordersapp" in text and [c.name for c in again.clusters] == ["dc1", "dc2", "dc3"]
    assert len(adoption.notes) == 1 and "'newcomer'" in adoption.notes[0]
    rendered = yaml.safe_load(text)["config"]["kafka-dr:principals"]["applications"]
    assert rendered[0]["name"] == "newcomer" and "applications[0].password" in adoption.notes[0], (
        "the note's index is the application's place in the written file"
    )


def test_an_application_a_rule_refuses_is_listed_not_dropped(tmp_path: Path) -> None:
    base = load_stack_file(shutil.copy(EXAMPLE, tmp_path / "Pulumi.prod.yaml"))
    acls = [allow("bad name!", "Topic", "orders", "Read"), allow("mm", "Group", "connect-mm", "Read")]
    proposed, adoption = adopted_topology(base, derive(live(acls), own=OWN))
    assert [a.name for a in proposed.principals.applications] == []
    found = unexpressed(adoption)
    assert "not a valid principal name" in found["application 'bad name!'"]
    assert "connect-" in found["application 'mm'"]


def test_parse_quotas_reads_kafkas_config_command_lines() -> None:
    text = "\n".join(
        [
            "Quota configs for user-principal 'orders-app' are producer_byte_rate=1048576.0, request_percentage=200.0",
            "Quota configs for the default user-principal are consumer_byte_rate=2097152.0",
            "Quota configs for client-id 'batch' are producer_byte_rate=1024.0",
            "Quota configs for user-principal 'billing', client-id 'x' are consumer_byte_rate=10.0",
            "Quota configs for ip '10.0.0.1' are connection_creation_rate=10.0",
            "some warning line",
        ]
    )
    found = {tuple(sorted(q.entity.items(), key=str)): q.configs for q in parse_quotas(text)}
    assert found == {
        (("user", "orders-app"),): {"producer_byte_rate": 1048576.0, "request_percentage": 200.0},
        (("user", None),): {"consumer_byte_rate": 2097152.0},
        (("client-id", "batch"),): {"producer_byte_rate": 1024.0},
        (("client-id", "x"), ("user", "billing")): {"consumer_byte_rate": 10.0},
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 10.0},
    }


def test_adopt_refuses_an_existing_out_file_before_reading_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dr.cli.drctl import cli

    shutil.copy(EXAMPLE, tmp_path / "Pulumi.prod.yaml")
    out = tmp_path / "proposal.yaml"
    out.write_text("mine\n")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    res = CliRunner().invoke(cli, ["estate", "adopt", "--stack", "prod", "--from", "dc1", "--out", str(out)])
    assert res.exit_code != 0 and "exists" in str(res.exception) and "--force" in str(res.exception)
    assert out.read_text() == "mine\n"
    res = CliRunner().invoke(cli, ["estate", "adopt", "--stack", "prod", "--from", "nowhere"])
    assert "no cluster named 'nowhere'" in str(res.exception)


def test_a_principal_that_may_not_describe_is_refused_naming_the_request() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from dr.base.errors import AuthError, ClusterError
    from dr.kafka.client import Endpoint
    from dr.kafka.live import _answer

    endpoint = Endpoint("127.0.0.1:1", "reader", "secret-pw", cluster="A")

    def refused() -> None:
        raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))

    with pytest.raises(AuthError) as exc:
        _answer(endpoint, "describe ACLs", refused)
    assert "user 'reader' may not describe ACLs" in str(exc.value) and "nothing was written" in str(exc.value)
    assert "secret-pw" not in str(exc.value)

    def broken() -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    with pytest.raises(ClusterError):
        _answer(endpoint, "describe ACLs", broken)


def test_an_unreachable_cluster_is_a_cluster_error() -> None:
    from dr.base.errors import ClusterError
    from dr.kafka.client import Endpoint
    from dr.kafka.live import read_live

    with pytest.raises(ClusterError) as exc:  # nothing listens on port 1: the connection is refused
        read_live(Endpoint("127.0.0.1:1", "admin", "pw"), timeout=2)
    assert "cannot reach" in str(exc.value)


def test_the_admin_apis_enum_names_read_as_the_stacks_acl_vocabulary() -> None:
    """Kafka's ``TRANSACTIONAL_ID`` is the stack's ``TransactionalID`` (read as ``TransactionalId`` before, every
    transactional-id ACL looked missing to the parity check, and a controller at a link's target was never
    ready); the other names read in the stack's own words."""
    from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

    from dr.kafka.live import _names
    from dr.topology.access import acl_rules

    assert _names(ResourceType.TRANSACTIONAL_ID) == "TransactionalID"
    assert _names(ResourcePatternType.PREFIXED) == "Prefixed"
    assert _names(AclOperation.DESCRIBE_CONFIGS) == "DescribeConfigs"
    assert _names(AclOperation.IDEMPOTENT_WRITE) == "IdempotentWrite"
    from dr.topology import load_stack_file
    from tests import REPO_ROOT

    local = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")  # exactly-once A→B: transactional ids on B
    declared = {r.resource_type for c in local.clusters for r in acl_rules(local, c)}
    assert "TransactionalID" in declared
    assert declared <= {_names(t) for t in ResourceType} | {"Cluster"}, declared  # the admin API's BROKER
