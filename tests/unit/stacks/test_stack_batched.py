"""``provisioning: batched`` under Pulumi's mocks: a cluster's topics are one ``TopicSet``, its ACLs
one ``AclSet`` and its SCRAM users one ``UserSet`` (:mod:`stacks.kafka_sets`), the admin password and the
users' passwords reach the sets only as secrets, and the link and the failover's shape work with the sets.
The individual mode is :mod:`tests.unit.stacks.test_stack_program`'s (its fixtures run the stack files as shipped)."""

from __future__ import annotations

import pytest

from dr.base.errors import TopologyError
from dr.topology import Topology, dump_stack_config, load_topology
from dr.topology.access import acl_rules
from stacks.access import password_version
from stacks.kafka_sets import _native, _normal, _rtype, _snake, _user_outs, changed_users
from tests.unit.stacks.test_stack_program import (
    ACL,
    CLUSTER_ACCESS,
    DYNAMIC,
    REPLICATION_LINK,
    TOPIC,
    USER,
    Run,
    _no_config_leak,  # noqa: F401 - autouse fixture
    _restore_the_mocks_found,  # noqa: F401 - autouse fixture
    is_secret,
    local_topology,
    plain_leaves,
    production_config,
    run_program,
)


def batched(topology: Topology) -> Topology:
    return topology.model_copy(update={"provisioning": "batched"})


@pytest.fixture(scope="module")
def local_batched(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(batched(local_topology()), tmp_path_factory.mktemp("batched-state"))


@pytest.fixture(scope="module")
def failed_over_batched(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(batched(local_topology()).after_failover(), tmp_path_factory.mktemp("batched-failover-state"))


def sets(run: Run, cluster: str) -> tuple:
    return (
        run.named(DYNAMIC, f"{cluster}-topics"),
        run.named(DYNAMIC, f"{cluster}-acls"),
        run.named(DYNAMIC, f"{cluster}-users"),
    )


def test_batched_registers_one_topic_set_one_acl_set_and_one_user_set_per_cluster_and_no_item(
    local_batched: Run,
) -> None:
    assert local_batched.of_type(TOPIC) == [], "batched: no pulumi_kafka Topic"
    assert local_batched.of_type(ACL) == [], "batched: no pulumi_kafka Acl"
    assert local_batched.of_type(USER) == [], "batched: no pulumi_kafka UserScramCredential"
    assert local_batched.names(DYNAMIC) == {
        "A-brokers",
        "B-brokers",
        "A-topics",
        "A-acls",
        "A-users",
        "B-topics",
        "B-acls",
        "B-users",
        "A-to-B-mirrormaker2",
    }
    t = local_batched.topology
    for name in ("A", "B"):
        topic_set, acl_set, user_set = sets(local_batched, name)
        access = local_batched.named(CLUSTER_ACCESS, f"{name}-access").urn
        assert topic_set.parent == access and acl_set.parent == access, (
            f"{name}: the sets are children of {name}-access"
        )
        assert topic_set.inputs["cluster"] == name and acl_set.inputs["cluster"] == name
        declared = {
            tp.name: (
                tp.partitions,
                tp.replication_factor,
                {"min.insync.replicas": str(tp.min_insync_replicas), **tp.configs},
            )
            for tp in t.topics
        }
        got = {
            x["name"]: (int(x["partitions"]), int(x["replication_factor"]), x["config"])
            for x in topic_set.inputs["topics"]
        }
        assert got == declared, f"{name}-topics holds {got}"
        expected = {
            (f"User:{r.principal}", r.resource_type, r.resource_name, r.operation, r.pattern)
            for r in acl_rules(t, t.cluster(name))
        }
        bindings = acl_set.inputs["acls"]
        got_acls = {
            (b["principal"], b["resource_type"], b["resource_name"], b["operation"], b["pattern"]) for b in bindings
        }
        assert got_acls == expected and len(bindings) == len(expected), f"{name}-acls differ from acl_rules"
        assert user_set.parent == access and user_set.inputs["cluster"] == name
        users = set(user_set.inputs["users"])
        assert users == {t.principals.replicator, *(a.name for a in t.principals.applications)}, f"{name} users"


def test_the_sets_get_the_admin_password_only_as_a_secret(local_batched: Run) -> None:
    """Also the user set's passwords and their fingerprints: secret inputs, each the stack's password."""
    admin = local_batched.credentials()["admin"]
    for name in ("A", "B"):
        for s in sets(local_batched, name):
            assert is_secret(s.inputs["password"]), f"{s.name}: password is not secret"
            assert s.inputs["password"]["value"] == admin, f"{s.name}: not the admin password"
            assert s.inputs["username"] == "admin" and s.inputs["security_protocol"] == "SASL_PLAINTEXT"
            assert s.inputs["mechanism"] == "SCRAM-SHA-512"
            assert s.inputs["bootstrap"].startswith("127.0.0.1:"), f"{s.name}: bootstrap {s.inputs['bootstrap']!r}"
        user_set = sets(local_batched, name)[2]
        assert is_secret(user_set.inputs["passwords"]) and is_secret(user_set.inputs["versions"])
        generated = local_batched.credentials()
        given = user_set.inputs["passwords"]["value"]
        for user in user_set.inputs["users"]:
            if user in generated:
                assert given[user] == generated[user], f"{name}-users: {user}'s password is not the stack's"
            assert user_set.inputs["versions"]["value"][user] == password_version(name, user, given[user])
    passwords = set(local_batched.credentials().values())
    for r in local_batched.resources:
        for leaf in plain_leaves(r.inputs):
            assert not any(pw in str(leaf) for pw in passwords), f"{r.typ} {r.name!r} carries a password in plain"


def test_the_link_waits_for_the_three_sets_of_both_clusters(local_batched: Run) -> None:
    """The replicator's user is in its cluster's user set (one request for every user, so waiting for
    it costs what waiting for the replicator's own user did)."""
    process = local_batched.named(DYNAMIC, "A-to-B-mirrormaker2")
    assert process.parent == local_batched.named(REPLICATION_LINK, "A-to-B").urn
    deps = set(process.dependencies)
    for name in ("A", "B"):
        needed = {s.urn for s in sets(local_batched, name)}
        assert needed <= deps, f"A-to-B-mirrormaker2 does not wait for {sorted(needed - deps)}"


def test_after_a_failover_C_gets_its_sets_B_becomes_writable_and_A_has_none(failed_over_batched: Run) -> None:
    run = failed_over_batched
    assert run.topology.provisioning == "batched", "after_failover keeps the provisioning"
    assert {r.name for r in run.of_type(DYNAMIC)} == {
        "A-brokers",
        "B-brokers",
        "C-brokers",
        "B-topics",
        "B-acls",
        "B-users",
        "C-topics",
        "C-acls",
        "C-users",
        "B-to-C-mirrormaker2",
    }
    b_acls = {(x["principal"], x["resource_name"], x["operation"]) for x in sets(run, "B")[1].inputs["acls"]}
    assert ("User:orders-app", "orders", "Write") in b_acls, "B (active) lets orders-app write orders"
    c_acls = sets(run, "C")[1].inputs["acls"]
    writes = [x for x in c_acls if x["principal"] != "User:replicator" and x["operation"] == "Write"]
    assert writes == [], f"C (passive) lets applications write: {writes}"


def test_batched_is_written_back_to_the_stack_file_and_individual_is_left_out() -> None:
    t = local_topology()
    assert "kafka-dr:provisioning" not in dump_stack_config(t), "an existing stack file stays as it was"
    assert dump_stack_config(batched(t))["kafka-dr:provisioning"] == "batched"


def test_batched_is_refused_on_a_confluent_cloud_cluster() -> None:
    config = production_config()
    config["kafka-dr:provisioning"] = "batched"
    config["kafka-dr:clusters"] = [
        *config["kafka-dr:clusters"][:2],
        {
            "name": "CC",
            "role": "standby",
            "kind": "confluent-cloud",
            "confluent": {"environment_id": "env-1", "cloud": "AWS", "region": "us-east-1"},
        },
    ]
    with pytest.raises(TopologyError) as caught:
        load_topology("production-example", config)
    text = str(caught.value)
    assert "clusters[2].kind" in text and "cannot be provisioned batched" in text and "provisioning" in text


def test_an_unknown_provisioning_value_is_a_clear_config_error() -> None:
    config = production_config()
    config["kafka-dr:provisioning"] = "bulk"
    with pytest.raises(Exception, match="provisioning") as caught:
        load_topology("production-example", config)
    assert "individual" in str(caught.value) and "batched" in str(caught.value)


def test_binding_names_map_to_confluent_kafkas_enums() -> None:
    assert _snake("DescribeConfigs") == "DESCRIBE_CONFIGS" and _snake("IdempotentWrite") == "IDEMPOTENT_WRITE"
    assert _rtype("Cluster") == "BROKER" and _rtype("Topic") == "TOPIC" and _rtype("Group") == "GROUP"
    assert _normal(("User:a", "Topic", "d001.", "Prefixed", "Write")) == (
        "User:a",
        "TOPIC",
        "d001.",
        "PREFIXED",
        "WRITE",
    )


def test_switching_to_batched_forgets_only_the_per_item_topics_acls_and_users_in_one_edit() -> None:
    from dr.estate.stack import forget_individual

    access = "urn:pulumi:s::kafka-dr::kafka-dr:index:ClusterAccess::B-access"
    link = "urn:pulumi:s::kafka-dr::kafka-dr:index:ReplicationLink$pulumi-python:dynamic:Resource::A-to-B-mm2"
    topic = f"{access}$kafka:index/topic:Topic::B-topic-orders"
    acl = f"{access}$kafka:index/acl:Acl::B-acl-x"
    user = f"{access}$kafka:index/userScramCredential:UserScramCredential::B-user-app"
    other_acl = "urn:pulumi:s::kafka-dr::kafka:index/acl:Acl::standalone"  # not under a ClusterAccess: kept
    deployment = {
        "resources": [
            {"urn": access, "type": CLUSTER_ACCESS},
            {"urn": topic, "type": TOPIC, "parent": access},
            {"urn": acl, "type": ACL, "parent": access},
            {"urn": user, "type": USER, "parent": access},
            {"urn": other_acl, "type": ACL},
            {"urn": link, "type": DYNAMIC, "dependencies": [user, acl, topic], "propertyDependencies": {"x": [acl]}},
        ]
    }
    kept, dropped = forget_individual(deployment)
    assert dropped == 3
    assert [r["urn"] for r in kept["resources"]] == [access, other_acl, link]
    mm2 = kept["resources"][-1]
    assert mm2["dependencies"] == [] and mm2["propertyDependencies"] == {"x": []}
    assert forget_individual(kept) == (kept, 0), "a second run changes nothing"


def test_a_removed_binding_is_deleted_through_an_exact_filter() -> None:
    binding = {
        "principal": "User:a",
        "operation": "DescribeConfigs",
        "resource_type": "Cluster",
        "resource_name": "kafka-cluster",
        "pattern": "Literal",
    }
    exact = _native(binding, as_filter=True)
    assert type(exact).__name__ == "AclBindingFilter", "DeleteAcls takes filters, not bindings"
    assert (exact.restype.name, exact.operation.name, exact.principal, exact.host) == (
        "BROKER",
        "DESCRIBE_CONFIGS",
        "User:a",
        "*",
    )
    assert type(_native(binding)).__name__ == "AclBinding"


def test_a_user_set_update_upserts_the_added_rotated_and_refreshed_away_users_and_deletes_the_removed() -> None:
    olds = {"users": ["a", "b", "c"], "versions": {"a": "1", "b": "2", "c": "3"}}
    news = {"users": ["a", "b", "d"], "versions": {"a": "1", "b": "9", "d": "4"}}
    assert changed_users(olds, news) == (["b", "d"], ["c"])
    assert changed_users(news, news) == ([], []), "nothing changed: nothing sent"
    refreshed = {"users": ["a"], "versions": {"a": "1"}}  # a refresh found b and d gone from the cluster
    assert changed_users(refreshed, news) == (["b", "d"], [])


def test_a_user_sets_outputs_hold_no_password() -> None:
    props = {"cluster": "C", "users": ["a"], "versions": {"a": "1"}, "passwords": {"a": "s3cret-pw"}}
    outs = _user_outs(props)
    assert "passwords" not in outs and "s3cret-pw" not in str(outs)
    assert outs["count"] == 1 and outs["versions"] == {"a": "1"}


def test_an_up_forgets_a_decommissioned_clusters_subtree_and_individual_items_in_one_edit() -> None:
    """What the failover's ``up`` drops before it runs (A decommissioned, batched): A's whole ``ClusterAccess``
    subtree and B's per-item users left by individual provisioning — one pure edit of one export."""
    from dr.estate.stack import forgettable

    topology = batched(local_topology()).after_failover()
    a_access = "urn:pulumi:s::kafka-dr::kafka-dr:index:ClusterAccess::A-access"
    b_access = "urn:pulumi:s::kafka-dr::kafka-dr:index:ClusterAccess::B-access"
    a_set = f"{a_access}$pulumi-python:dynamic:Resource::A-acls"
    b_user = f"{b_access}$kafka:index/userScramCredential:UserScramCredential::B-user-app"
    b_set = f"{b_access}$pulumi-python:dynamic:Resource::B-acls"
    deployment = {
        "resources": [
            {"urn": a_access, "type": CLUSTER_ACCESS},
            {"urn": a_set, "type": DYNAMIC, "parent": a_access},
            {"urn": b_access, "type": CLUSTER_ACCESS},
            {"urn": b_user, "type": USER, "parent": b_access},
            {"urn": b_set, "type": DYNAMIC, "parent": b_access, "dependencies": [b_user]},
        ]
    }
    kept, dropped = forgettable(deployment, topology)
    assert dropped == 3 and [r["urn"] for r in kept["resources"]] == [b_access, b_set]
    assert kept["resources"][-1]["dependencies"] == []
    assert forgettable(kept, topology) == (kept, 0), "a second up forgets nothing"


@pytest.mark.parametrize(
    ("previous", "refused"),
    [
        ({}, None),
        ({"clusters": {"A": {}}}, "individual topics and ACLs and SCRAM users"),
        ({"clusters": {"A": {}}, "provisioning": "batched"}, "individual SCRAM users"),
        ({"clusters": {"A": {}}, "provisioning": "batched", "batched_sets": ["topics", "acls", "users"]}, None),
    ],
)
def test_a_bare_pulumi_up_refuses_to_switch_items_to_sets_and_names_drctl_estate_up(
    monkeypatch: pytest.MonkeyPatch, previous: dict, refused: str | None
) -> None:
    """A stack deployed before its users were a set (or with no set at all) would lose its users and ACLs:
    the new sets create them, then the engine deletes the old per-item resources."""
    from dr.base.errors import ConfigError
    from stacks import kept_passwords, program

    monkeypatch.setattr(kept_passwords, "_previous_outputs", lambda _stack: previous)
    topology = batched(local_topology())
    if refused is None:
        program._refuse_switch_to_batched(topology)
        return
    with pytest.raises(ConfigError) as caught:
        program._refuse_switch_to_batched(topology)
    assert refused in str(caught.value) and f"drctl estate up --stack {topology.name}" in str(caught.value.fix)
