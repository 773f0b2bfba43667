"""MirrorMaker 2 on Kafka Connect, declared in the stack: schema, rules, ACLs, failover and the program.

Pure checks and Pulumi's own mocks (no engine, no Kafka, no Connect worker started).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.topology import Placement, Role, load_stack_file, load_topology
from dr.topology.access import CONNECT_USER, acl_rules
from dr.topology.stackconfig import dump_stack_config
from tests.unit.stacks.test_stack_program import DYNAMIC, run_program

ROOT = Path(__file__).resolve().parents[3]
CONNECT_LINK = "kafka-dr:index:ConnectMirrorLink"


def connect_stack() -> Any:
    return load_stack_file(ROOT / "Pulumi.local-connect.yaml")


def config_with(**changes: Any) -> dict[str, Any]:
    """The local-connect stack's config with some ``kafka-dr:`` values replaced."""
    config = dump_stack_config(connect_stack())
    config.update({f"kafka-dr:{k}": v for k, v in changes.items()})
    return config


def connect_entry(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": "mm2", "cluster": "B", "workers": 2, "base_port": 19900, **fields}]


def violations(config: dict[str, Any]) -> str:
    with pytest.raises((TopologyError, ConfigError)) as info:
        load_topology("local-connect", config)
    return str(info.value)


# -- schema and rules ---------------------------------------------------------------------------


def test_the_connect_variant_declares_its_link_on_a_two_worker_connect_cluster() -> None:
    t = connect_stack()
    (cc,) = t.connect_clusters
    assert (cc.name, cc.cluster, cc.workers, cc.is_local, list(cc.rest_ports or [])) == (
        "mm2",
        "B",
        2,
        True,
        [19900, 19901],
    )
    (link,) = t.links
    assert t.link_connect(link) == cc and t.placement(link) is Placement.CONNECT


def test_round_trip_keeps_connect_clusters_and_stacks_without_them_unchanged() -> None:
    t = connect_stack()
    assert load_topology("local-connect", dump_stack_config(t)) == t
    plain = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert "kafka-dr:connectClusters" not in dump_stack_config(plain)


@pytest.mark.parametrize(
    "links_connect, expected",
    [
        ("nope", "names no declared Connect cluster"),
    ],
)
def test_a_link_naming_an_unknown_connect_cluster_is_refused(links_connect: str, expected: str) -> None:
    config = config_with()
    config["kafka-dr:links"][0]["connect"] = links_connect
    assert expected in violations(config)


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"cluster": "Z"}, "names no declared cluster"),
        ({"cluster": "C"}, "standby cluster 'C'"),
        ({"base_port": None}, "has no base_port"),
        ({"base_port": 19650}, "overlap the ports of a local cluster"),
        ({"base_port": 65535}, "leave the range"),
        ({"name": "mm2/../x"}, "not a valid Connect cluster name"),
        ({"username": "u"}, "is set on local Connect cluster"),
        ({"workers": 0}, "workers"),
    ],
)
def test_bad_local_connect_clusters_are_refused_with_the_field_named(fields: dict[str, Any], expected: str) -> None:
    entry = connect_entry(**fields)
    if fields.get("name"):
        config = config_with(connectClusters=entry)
        config["kafka-dr:links"][0]["connect"] = fields["name"]
    else:
        config = config_with(connectClusters=entry)
    assert expected in violations(config)


def test_an_external_connect_url_with_credentials_or_a_query_is_refused() -> None:
    entry = [{"name": "far", "cluster": "B", "url": "http://user:s3cret-pw@connect:8083"}]
    text = violations(config_with(connectClusters=[*connect_entry(), *entry]))
    assert "holds credentials" in text and "s3cret" not in text
    entry = [{"name": "far", "cluster": "B", "url": "http://connect:8083/?x=1"}]
    assert "is not an http(s) URL" in violations(config_with(connectClusters=[*connect_entry(), *entry]))


def test_an_external_connect_cluster_cannot_run_a_link_between_local_clusters() -> None:
    config = config_with(connectClusters=[{"name": "far", "cluster": "B", "url": "https://connect.example:8083"}])
    config["kafka-dr:links"][0]["connect"] = "far"
    assert "cannot reach local cluster" in violations(config)


def test_two_connect_clusters_may_not_share_rest_ports() -> None:
    config = config_with(connectClusters=[*connect_entry(), *connect_entry(name="other", base_port=19901)])
    assert "another Connect cluster" in violations(config)


# -- access and failover ------------------------------------------------------------------------


def test_the_connect_principal_gets_its_group_and_internal_topics_on_its_home_cluster_only() -> None:
    t = connect_stack()
    on_b = {r for r in acl_rules(t, t.cluster("B")) if r.principal == CONNECT_USER}
    eos = int(t.connect_exactly_once(t.connect_cluster("mm2")))
    topic_ops = ("Create", "Read", "Write", "Describe", "DescribeConfigs")
    assert {(r.resource_type, r.resource_name, r.operation, r.pattern) for r in on_b} == {
        ("Group", "connect-mm2", "Read", "Literal"),
        ("Group", "connect-mm2", "Describe", "Literal"),
        *(
            ("Topic", f"connect-mm2-{kind}", op, "Literal")
            for kind in ("configs", "offsets", "status")
            for op in topic_ops
        ),
        ("Cluster", "kafka-cluster", "Describe", "Literal"),
        # exactly-once source support (an exactly-once link on it): its leader's config-topic producer
        *([("TransactionalID", "connect-cluster-connect-mm2", "Write", "Literal")] * eos),
    }, "the Connect workers hold exactly their group and three topics (no Delete, no other connect- topic)"
    assert not [r for r in acl_rules(t, t.cluster("A")) if r.principal == CONNECT_USER]


def test_after_failover_the_new_link_runs_on_the_same_connect_cluster() -> None:
    after = connect_stack().after_failover()
    (link,) = after.links
    assert (link.name, link.source, link.target, link.connect) == ("B-to-C", "B", "C", "mm2")
    assert after.connect_cluster("mm2").cluster == "B"


def test_a_connect_cluster_on_the_decommissioned_cluster_moves_to_the_new_passive() -> None:
    once = connect_stack().after_failover()  # B active, C passive, link B→C on mm2 (home B)
    a = once.cluster("A").model_copy(update={"role": Role.STANDBY})
    rebuilt = once.model_copy(update={"clusters": [a if c.name == "A" else c for c in once.clusters]})
    twice = load_topology("local-connect", dump_stack_config(rebuilt)).after_failover()
    assert twice.cluster("B").role is Role.DECOMMISSIONED and twice.connect_cluster("mm2").cluster == "A"
    assert [(lk.source, lk.target, lk.connect) for lk in twice.links] == [("C", "A", "mm2")]


# -- the program under Pulumi's mocks -----------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return run_program(connect_stack(), tmp_path_factory.mktemp("connect-state"))


def test_the_program_registers_the_workers_and_three_connectors_instead_of_a_process(run: Any) -> None:
    dynamic = run.names(DYNAMIC)
    assert {"mm2-connect", "A-to-B-source", "A-to-B-checkpoint", "A-to-B-heartbeat"} <= dynamic
    assert "A-to-B-mirrormaker2" not in dynamic
    assert {r.name for r in run.resources if r.typ == CONNECT_LINK} == {"A-to-B"}


def test_connectors_wait_for_the_workers_and_the_source_connector_validates_all_three_first(run: Any) -> None:
    workers = run.named(DYNAMIC, "mm2-connect")
    source = run.named(DYNAMIC, "A-to-B-source")
    assert workers.urn in source.dependencies
    assert set(source.inputs["validate_first"]) == {"A-to-B-checkpoint", "A-to-B-heartbeat"}
    for other in ("A-to-B-checkpoint", "A-to-B-heartbeat"):
        assert source.urn in run.named(DYNAMIC, other).dependencies
    assert workers.inputs["home"] == "B" and int(workers.inputs["base_port"]) == 19900


def test_connector_configs_carry_no_password_and_send_records_as_the_replicator(run: Any) -> None:
    passwords = set(run.credentials().values())
    assert passwords, "the program generated no local passwords"
    for name in ("A-to-B-source", "A-to-B-checkpoint", "A-to-B-heartbeat"):
        config = run.named(DYNAMIC, name).inputs["config"]
        text = repr(config)
        assert not any(pw in text for pw in passwords), f"{name} holds a password"
        assert "${file:" in config["producer.override.sasl.jaas.config"]
        assert config["producer.override.bootstrap.servers"].endswith(":19700")


def test_the_connect_principal_is_a_user_on_the_home_cluster(run: Any) -> None:
    assert CONNECT_USER in run.credentials()


def test_the_program_reads_the_connect_clusters_from_the_engine_config(tmp_path: Path, run: Any) -> None:
    import pulumi
    import yaml

    from tests.unit.stacks.test_stack_program import _engine_config, _fresh_mocks

    raw = yaml.safe_load((ROOT / "Pulumi.local-connect.yaml").read_text(encoding="utf-8"))["config"]
    mocks, _monitor, program = _fresh_mocks("local-connect")
    pulumi.runtime.set_all_config(_engine_config(raw))

    @pulumi.runtime.test
    def whole_program() -> None:
        program.run(tmp_path)

    try:
        whole_program()
    finally:
        pulumi.runtime.set_all_config({})
    assert sorted((c.typ, c.name) for c in mocks.calls) == sorted((r.typ, r.name) for r in run.resources)


def test_no_link_copies_a_connect_clusters_internal_topics() -> None:
    import re

    from stacks.links.connect_config import connector_configs

    t = connect_stack().after_failover()  # B→C reads B, where mm2 keeps its internal topics
    config = connector_configs(t, t.links[0], secrets_file="/s/replicator.properties")["B-to-C-source"]
    excluded = config["topics.exclude"].split(",")
    for name in ("connect-mm2-configs", "connect-mm2-offsets", "connect-mm2-status", "mm2-offset-syncs.C.internal"):
        assert any(re.fullmatch(p, name) for p in excluded), name
    assert not any(re.fullmatch(p, name) for p in excluded for name in ("orders", "payments", "connect-mm2-x"))
