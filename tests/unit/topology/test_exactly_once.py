"""Exactly-once links (issue 35): the declared delivery, its validation, what it renders (Connect workers
and connectors, the dedicated MirrorMaker 2), the replicator's transactional rights, the positions the drain
reads, and the published client configurations."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import ConfigError, TopologyError
from dr.estate.estate import Estate
from dr.failover.act.clients import _configs, reads_copies
from dr.kafka.client import Endpoint
from dr.kafka.copied import furthest, next_to_copy
from dr.runtime.connect import ConnectSpec, connect_acls, worker_properties
from dr.runtime.mirrormaker import (
    REPLICATOR_CONNECT_TRANSACTION_RIGHTS,
    REPLICATOR_DEDICATED_TRANSACTION_RIGHTS,
    mm2_properties,
    transaction_rights,
)
from dr.topology import Delivery, Topology, dump_stack_config, load_stack_file, load_topology
from dr.topology.access import acl_rules
from dr.topology.model import DEFAULT_DELIVERY
from stacks.links.connect_config import connector_configs
from tests.unit.estate.test_external_clusters import _config as external_config

ROOT = Path(__file__).resolve().parents[3]


def _connect_stack(**link: Any) -> Topology:
    config = dump_stack_config(load_stack_file(ROOT / "Pulumi.local-connect.yaml"))
    config["kafka-dr:links"] = [{**config["kafka-dr:links"][0], **link}]
    return load_topology("local-connect", config)


def _external(link: dict[str, Any], **connect: Any) -> Topology:
    config = external_config(**connect)
    config["kafka-dr:links"] = [{**config["kafka-dr:links"][0], **link}]
    return load_topology("ext", config)


# -- the declaration and its validation ----------------------------------------------------------------


def test_an_undeclared_delivery_is_the_default_where_exactly_once_is_possible_else_at_least_once() -> None:
    t = _connect_stack()
    assert t.links[0].delivery is None and t.delivery_of(t.links[0]) == DEFAULT_DELIVERY
    dedicated = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert dedicated.delivery_of(dedicated.links[0]) == DEFAULT_DELIVERY
    ext = _external({})  # workers not declared exactly-once: at-least-once whatever the default
    assert ext.delivery_of(ext.links[0]) == Delivery.AT_LEAST_ONCE
    ext_eos = _external({}, exactly_once_source=True)
    assert ext_eos.delivery_of(ext_eos.links[0]) == DEFAULT_DELIVERY


def test_exactly_once_on_a_connect_cluster_whose_workers_do_not_enable_it_is_refused_naming_both() -> None:
    with pytest.raises(TopologyError) as info:
        _external({"delivery": "exactly-once"})
    text = str(info.value)
    assert info.value.exit_code == 2
    assert "links[0].delivery" in text and "'A-to-B'" in text and "'dr'" in text, text
    assert "exactly.once.source.support=enabled" in text and "exactly_once_source: true" in text, text
    t = _external({"delivery": "exactly-once"}, exactly_once_source=True)  # declared: accepted
    assert t.delivery_of(t.links[0]) == Delivery.EXACTLY_ONCE


def test_a_delivery_on_a_cluster_link_or_an_unknown_value_is_refused() -> None:
    with pytest.raises(ConfigError, match="delivery"):
        _connect_stack(delivery="twice")
    config = dump_stack_config(load_stack_file(ROOT / "Pulumi.local.yaml"))
    bad = copy.deepcopy(config)
    bad["kafka-dr:links"][0].update({"engine": "cluster-link", "delivery": "at-least-once"})
    with pytest.raises(ConfigError, match=r"links\[0\]"):
        load_topology("local", bad)


def test_a_failover_keeps_the_links_delivery() -> None:
    after = _connect_stack(delivery="exactly-once").after_failover()
    assert after.links[0].name == "B-to-C" and after.delivery_of(after.links[0]) == Delivery.EXACTLY_ONCE


def test_the_default_is_exactly_once_and_a_connect_link_writing_away_from_its_workers_home_keeps_it() -> None:
    t = _connect_stack()  # A-to-B on workers homed on B: writes home
    assert DEFAULT_DELIVERY == Delivery.EXACTLY_ONCE
    assert t.connect_clusters[0].cluster == t.links[0].target and t.delivery_of(t.links[0]) == Delivery.EXACTLY_ONCE
    after = t.after_failover()  # B-to-C on the same workers, still homed on B
    link = after.links[0]
    assert link.name == "B-to-C" and after.link_connect(link) is not None
    assert after.link_connect(link).cluster != link.target  # type: ignore[union-attr]
    assert after.delivery_of(link) == Delivery.EXACTLY_ONCE
    declared = _connect_stack(delivery="at-least-once").after_failover()
    assert declared.delivery_of(declared.links[0]) == Delivery.AT_LEAST_ONCE


# -- rendering -------------------------------------------------------------------------------------------


def test_an_exactly_once_source_connector_requires_it_per_poll_reads_committed_and_fences_on_the_target() -> None:
    t = _connect_stack(delivery="exactly-once")
    configs = connector_configs(t, t.links[0], secrets_file="/s/r.properties")
    source = configs["A-to-B-source"]
    assert source["exactly.once.support"] == "required"
    assert source["transaction.boundary"] == "poll"
    assert source["source.consumer.isolation.level"] == "read_committed"
    assert source["admin.override.bootstrap.servers"] == source["target.cluster.bootstrap.servers"]
    assert "${file:/s/r.properties:password}" in source["admin.override.sasl.jaas.config"]
    for other in ("A-to-B-checkpoint", "A-to-B-heartbeat"):  # they do not declare exactly-once support
        assert "exactly.once.support" not in configs[other]
    alo = _connect_stack(delivery="at-least-once")
    plain = connector_configs(alo, alo.links[0], secrets_file="/s/r.properties")["A-to-B-source"]
    assert not {"exactly.once.support", "transaction.boundary", "source.consumer.isolation.level"} & set(plain)


def test_every_connector_reads_its_offsets_store_on_the_links_target_where_it_writes_it() -> None:
    # B→C on workers homed on B: an exactly-once task's offsets store is on C, read by Connect's consumer
    after = _connect_stack(delivery="exactly-once").after_failover()
    link = after.links[0]
    assert after.link_connect(link).cluster == "B" and link.target == "C"  # type: ignore[union-attr]
    for name, config in connector_configs(after, link, secrets_file="/s/r.properties").items():
        target = config["target.cluster.bootstrap.servers"]
        for client in ("producer", "consumer", "admin"):  # the store's writer, reader and end offsets: one cluster
            assert config[f"{client}.override.bootstrap.servers"] == target, (name, client)
            assert "${file:/s/r.properties:password}" in config[f"{client}.override.sasl.jaas.config"], (name, client)


def test_local_workers_enable_exactly_once_source_support_only_for_an_exactly_once_link() -> None:
    home = Endpoint("127.0.0.1:1", "connect", "pw")
    on = worker_properties(ConnectSpec("mm2", base_port=19900, exactly_once=True), 0, home, 1, Path("/s"))
    off = worker_properties(ConnectSpec("mm2", base_port=19900), 0, home, 1, Path("/s"))
    assert on["exactly.once.source.support"] == "enabled" and "exactly.once.source.support" not in off
    assert _connect_stack(delivery="exactly-once").connect_exactly_once(_connect_stack().connect_clusters[0])
    alo = _connect_stack(delivery="at-least-once")
    assert not alo.connect_exactly_once(alo.connect_clusters[0])
    txn = [b for b in connect_acls(ConnectSpec("mm2", base_port=19900, exactly_once=True)) if "TRANSACTIONAL" in str(b)]
    assert [b.name for b in txn] == ["connect-cluster-connect-mm2"]
    assert not [b for b in connect_acls(ConnectSpec("mm2", base_port=19900)) if "TRANSACTIONAL" in str(b)]


def test_the_dedicated_process_enables_it_on_the_targets_worker_and_reads_the_source_committed() -> None:
    a, b = Endpoint("127.0.0.1:1", "replicator", "pw"), Endpoint("127.0.0.1:2", "replicator", "pw")
    eos = mm2_properties("A", a, "B", b, exactly_once=True)
    assert eos["B.exactly.once.source.support"] == "enabled"
    assert eos["A.consumer.isolation.level"] == "read_committed"
    plain = mm2_properties("A", a, "B", b)
    assert not [k for k in plain if "exactly.once" in k or "isolation" in k]


# -- rights ----------------------------------------------------------------------------------------------


def _replicator_on(t: Topology, cluster: str) -> set[tuple[str, str, str, str]]:
    return {
        (r.resource_type, r.resource_name, r.operation, r.pattern)
        for r in acl_rules(t, t.cluster(cluster))
        if r.principal == t.principals.replicator
    }


def test_the_replicator_gets_transactional_ids_of_its_link_alone_on_the_target_and_nothing_more() -> None:
    eos = _connect_stack(delivery="exactly-once")
    txn_b = {r for r in _replicator_on(eos, "B") if r[0] == "TransactionalID"}
    assert txn_b == {("TransactionalID", "connect-mm2-A-to-B-", "Write", "Prefixed")}
    assert not [r for r in _replicator_on(eos, "A") if r[0] == "TransactionalID"], "nothing on the source"
    alo = _connect_stack(delivery="at-least-once")
    assert _replicator_on(eos, "B") - _replicator_on(alo, "B") == txn_b
    assert transaction_rights("A", "A-to-B", None) == [
        ("TransactionalID", "A-mm2-", "Write", "Prefixed"),
        ("TransactionalID", "connect-cluster-A-mm2", "Write", "Literal"),
    ]
    after = eos.after_failover()  # the new link's own prefix on the new target
    assert {r for r in _replicator_on(after, "C") if r[0] == "TransactionalID"} == {
        ("TransactionalID", "connect-mm2-B-to-C-", "Write", "Prefixed")
    }


def test_the_security_table_documents_the_transactional_rights() -> None:
    doc = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    for kind, name, op, pattern, _why in (
        *REPLICATOR_CONNECT_TRANSACTION_RIGHTS,
        *REPLICATOR_DEDICATED_TRANSACTION_RIGHTS,
    ):
        row = f"| replicator | link target | {kind} `{name}`{' (prefixed)' if pattern == 'Prefixed' else ''} | {op} |"
        assert row in doc, f"docs/security.md lacks {row}"


# -- what the drain reads, and what applications are given ------------------------------------------------


def test_the_copied_position_is_the_offset_after_the_last_stored_one_and_a_reset_forgets_it() -> None:
    part = {"cluster": "A", "topic": "orders", "partition": 2}
    other = {"cluster": "A", "topic": "orders", "partition": 0}
    assert next_to_copy([(part, {"offset": 10}), (part, {"offset": 41}), (other, {"offset": 0})]) == {
        ("orders", 2): 42,
        ("orders", 0): 1,
    }
    assert next_to_copy([(part, {"offset": 41}), (part, None), ("junk", {"offset": 1})]) == {}


def test_a_connectors_positions_in_two_stores_are_the_furthest_of_each_partition() -> None:
    target_store, home_store = {("orders", 0): 40, ("orders", 1): 7}, {("orders", 0): 42, ("orders", 2): 3}
    assert furthest([target_store, home_store]) == {("orders", 0): 42, ("orders", 1): 7, ("orders", 2): 3}
    assert furthest([]) == {}


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_every_link_running_here_is_judged_by_its_committed_positions_whatever_its_delivery(
    delivery: str, tmp_path: Path
) -> None:
    for t in (_connect_stack(delivery=delivery), _connect_stack(delivery=delivery).after_failover()):
        assert Estate(t, tmp_path).copied_positions(t.links[0].name) is not None, (t.links[0].name, delivery)
    dedicated = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert Estate(dedicated, tmp_path).copied_positions(dedicated.links[0].name) is not None


def test_consumers_on_a_cluster_holding_copies_read_committed() -> None:
    t = load_stack_file(ROOT / "Pulumi.local.yaml")
    app = next(a for a in t.principals.applications if a.consumes or a.consumer_group)
    assert reads_copies(t, t.passive().name) and not reads_copies(t, t.active().name)  # type: ignore[union-attr]
    after = t.after_failover()
    assert reads_copies(after, after.active().name), "a promoted cluster holds the link's copies"
    props, conf = _configs(Endpoint("127.0.0.1:1", app.name, "pw"), app, "B", read_committed=True)
    assert "isolation.level=read_committed" in props and conf["isolation.level"] == "read_committed"
    props, conf = _configs(Endpoint("127.0.0.1:1", app.name, "pw"), app, "A")
    assert "isolation.level" not in props and "isolation.level" not in conf
