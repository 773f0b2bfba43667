"""Parity (:mod:`dr.topology.parity`): what the two clusters of a link hold differently — topic configurations,
SCRAM users, ACLs against each one's role, quotas — each with the command that repairs it. Pure: the clusters'
holdings are built here as ``drctl status --parity`` would read them."""

from __future__ import annotations

import copy
from dataclasses import replace

from dr.kafka.live import LiveAcl, LiveCluster, LiveQuota, LiveTopic
from dr.topology import Topology, load_topology
from dr.topology.access import acl_rules
from dr.topology.parity import parity_drifts
from dr.topology.quotas import user_quotas
from tests.unit.stacks.test_stack_program import production_config

UP = "drctl estate up --stack production-example --refresh"


def topology() -> Topology:
    config = production_config()
    config["kafka-dr:principals"]["default_quota"] = {"producer_byte_rate": 1048576}
    return load_topology("production-example", config)


def holding(t: Topology, cluster: str) -> LiveCluster:
    """Exactly what the stack declares on ``cluster``."""
    c = t.cluster(cluster)
    users = {t.principals.replicator: ["SCRAM-SHA-512"], "admin": ["SCRAM-SHA-512"]}
    users |= {app.name: ["SCRAM-SHA-512"] for app in t.principals.applications}
    return LiveCluster(
        topics=[
            LiveTopic(x.name, x.partitions, x.replication_factor, x.min_insync_replicas, dict(x.configs))
            for x in t.topics
        ],
        acls=[
            LiveAcl(f"User:{r.principal}", r.resource_type, r.resource_name, r.pattern, r.operation)
            for r in acl_rules(t, c)
        ],
        scram_users=users,
        quotas=[LiveQuota({"user": q.user}, {k: float(v) for k, v in q.configs.items()}) for q in user_quotas(t)],
    )


def estate(t: Topology) -> dict[str, LiveCluster]:
    return {"dc1": holding(t, "dc1"), "dc2": holding(t, "dc2")}


def test_clusters_that_hold_what_the_stack_declares_have_no_drift() -> None:
    t = topology()
    assert parity_drifts(t, estate(t)) == []


def test_a_config_changed_on_b_behind_the_products_back_is_named_with_pulumi_up_as_repair() -> None:
    t = topology()
    live = estate(t)
    orders = next(x for x in live["dc2"].topics if x.name == "orders")
    live["dc2"].topics[live["dc2"].topics.index(orders)] = replace(
        orders, configs={**orders.configs, "retention.ms": "1000"}, min_insync_replicas=1
    )
    drifts = parity_drifts(t, live)
    assert [(d.cluster, d.repair) for d in drifts] == [("dc2", UP), ("dc2", UP)]
    texts = [d.text() for d in drifts]
    assert any("topic 'orders' retention.ms: 1000 on dc2, 604800000 on dc1 (declared 604800000)" in x for x in texts)
    assert any("min.insync.replicas: 1 on dc2, 2 on dc1 (declared 2)" in x for x in texts)


def test_an_undeclared_config_on_the_source_only_is_copied_with_kafka_configs() -> None:
    t = topology()
    live = estate(t)
    payments = next(x for x in live["dc1"].topics if x.name == "payments")
    payments.configs["max.message.bytes"] = "2097152"
    (drift,) = parity_drifts(t, live)
    assert drift.cluster == "dc2" and "max.message.bytes: (broker default) on dc2, 2097152 on dc1" in drift.what
    assert drift.repair.startswith("kafka-configs.sh --bootstrap-server broker-1.dc2.example.com:9093")
    assert drift.repair.endswith("--entity-name payments --add-config max.message.bytes=2097152")


def test_a_repair_names_where_the_cluster_was_read_when_the_stack_declares_no_bootstrap() -> None:
    """A local cluster declares no bootstrap servers: the repair's ``--bootstrap-server`` is where ``drctl
    status --parity`` read it, not the cluster's name."""
    t = topology()
    live = estate(t)
    live["dc2"].bootstrap = "127.0.0.1:19092"
    t = t.model_copy(update={"clusters": [c.model_copy(update={"bootstrap_servers": None}) for c in t.clusters]})
    payments = next(x for x in live["dc1"].topics if x.name == "payments")
    payments.configs["max.message.bytes"] = "2097152"
    (drift,) = parity_drifts(t, live)
    assert drift.repair.startswith("kafka-configs.sh --bootstrap-server 127.0.0.1:19092 --command-config"), drift.repair


def test_users_acls_and_quotas_that_differ_are_each_named() -> None:
    t = topology()
    live = estate(t)
    del live["dc2"].scram_users["billing"]
    live["dc2"].scram_users["intruder"] = ["SCRAM-SHA-512"]
    live["dc2"].acls.append(LiveAcl("User:billing", "Topic", "orders", "Literal", "Write"))  # a passive never grants it
    live["dc2"].acls.append(LiveAcl("User:team-tool", "Topic", "orders", "Literal", "Write"))  # not the stack's
    removed = next(a for a in live["dc1"].acls if a.principal == "User:orders-app" and a.operation == "Write")
    live["dc1"].acls.remove(removed)
    live["dc2"].quotas = []
    found = {(d.cluster, d.what): d.repair for d in parity_drifts(t, copy.deepcopy(live))}
    assert found[("dc2", "SCRAM user 'billing' (declared) is missing")] == UP
    intruder = found[("dc2", "SCRAM user 'intruder' is on dc2, not on dc1, and the stack does not declare it")]
    assert "--entity-name intruder --delete-config SCRAM-SHA-512" in intruder
    beyond = found[("dc2", "ACL Allow User:billing Write on Topic 'orders' (Literal) is beyond its passive role")]
    assert (
        "kafka-acls.sh" in beyond
        and "--remove --force --allow-principal User:billing --operation Write --topic orders" in beyond
    )
    assert (
        found[("dc1", "ACL Allow User:orders-app Write on Topic 'orders' (Literal) of its active role is missing")]
        == UP
    )
    assert found[("dc2", "quota of the default user is not set, declared {'producer_byte_rate': '1048576'}")] == UP
    assert not [w for _c, w in found if "team-tool" in w], "the platform team's own rules are not judged"
    assert len(found) == 5, sorted(found)


def test_a_cluster_that_could_not_be_read_is_no_pair() -> None:
    t = topology()
    live = estate(t)
    live["dc2"].topics = []
    assert parity_drifts(t, {"dc1": live["dc1"]}) == []
    missing = parity_drifts(t, live)
    assert {d.what for d in missing} == {"declared topic 'orders' is missing", "declared topic 'payments' is missing"}


def test_oauthbearer_clusters_hold_no_scram_users_and_miss_none() -> None:
    """The identity provider holds every client of an OAUTHBEARER cluster: no SCRAM user is declared missing
    there (the repair offered, `drctl estate up`, would create none)."""
    from tests.unit.stacks.test_stack_program import _oauth_topology

    t = _oauth_topology()
    live = {name: replace(holding(t, name), scram_users={}) for name in ("A", "B")}
    assert parity_drifts(t, live) == []
