"""No right beyond a role, by construction (issue 32): one definition of an internal topic shared by
validation, grants and verification; prefixes that reach internal topics or another application's
topics are refused; applications only read on a passive cluster; the replicator holds what MirrorMaker 2
needs and nothing more. Ends with a property-based test over generated topologies."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dr.base.errors import ConfigError, TopologyError
from dr.kafka.internal_topics import FAMILIES, InternalTopics, is_internal
from dr.runtime.mirrormaker import REPLICATOR_SOURCE_RIGHTS, REPLICATOR_TARGET_RIGHTS, replicator_acls
from dr.topology import Topology, load_topology
from dr.topology.access import AclRule, acl_rules, application_rules
from dr.topology.kinds import Role
from tests.unit.failover.kinds.active_active.test_active_active import AA
from tests.unit.topology.test_topology_validation import LOCAL
from verification.cluster import is_internal_topic

REPO = Path(__file__).resolve().parents[3]
Mutation = Callable[[dict[str, Any]], None]


def _load(mutate: Mutation | None = None) -> Topology:
    config = copy.deepcopy(LOCAL)
    if mutate is not None:
        mutate(config)
    return load_topology("test", config)


def _refused(mutate: Mutation) -> str:
    with pytest.raises(TopologyError) as info:
        _load(mutate)
    return str(info.value)


def _line(message: str, path: str, *fragments: str) -> None:
    lines = [line for line in message.splitlines() if line.strip().startswith(f"- {path}:")]
    assert lines, f"no violation for {path} in:\n{message}"
    for fragment in fragments:
        assert any(fragment in line for line in lines), f"{fragment!r} not in {lines}"


def _topic(name: str) -> dict[str, Any]:
    return {"name": name, "partitions": 1, "replication_factor": 1}


def _with(topic: str, **app: Any) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"].append(_topic(topic))
        config["kafka-dr:principals"]["applications"][1].update(app)

    return mutate


# -- findings: prefixes that reach internal topics --------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "field", "prefix", "reached"),
    [
        # the critical one: `m` reads mm2-configs.<source>.internal (the replicator's password) on the passive
        ("metrics", "consumes_prefix", "m", "'mm2-*'"),
        ("_ledger", "consumes_prefix", "_", "'__*'"),  # __consumer_offsets on B and C
        ("carts", "produces_prefix", "c", "'connect-*'"),  # a Connect cluster's config topic
        ("carts", "consumes_prefix", "co", "'connect-*'"),
        ("hot", "consumes_prefix", "h", "'heartbeats'"),
        ("A-orders", "consumes_prefix", "A", "'A.checkpoints.internal'"),  # a cluster alias
        ("B.audit", "consumes_prefix", "B.", "'B.heartbeats'"),
    ],
)
def test_a_prefix_reaching_an_internal_topic_is_refused(topic: str, field: str, prefix: str, reached: str) -> None:
    message = _refused(_with(topic, **{field: prefix}))
    _line(message, f"principals.applications[1].{field}", f"{prefix!r}", "internal topics", reached, "longer prefix")


def test_a_prefix_of_the_applications_own_topics_is_accepted() -> None:
    t = _load(_with("_ledger", consumes_prefix="_l", produces_prefix="_led"))
    assert t.consumed_by(t.principals.applications[1]) == ["orders", "_ledger"]


def test_a_declared_connect_internal_topic_name_is_refused() -> None:
    message = _refused(lambda config: config["kafka-dr:topics"].append(_topic("connect-mm2-configs")))
    _line(message, "topics[2].name", "'connect-mm2-configs'", "Kafka Connect internal topic", "another topic name")


def test_a_write_prefix_over_another_applications_topic_is_refused_unless_named_as_shared() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"].append(_topic("orders-eu"))
        config["kafka-dr:principals"]["applications"][1].update(produces_prefix="orders-")
        config["kafka-dr:principals"]["applications"][0]["produces"].append("orders-eu")

    _line(
        _refused(mutate),
        "principals.applications[1].produces_prefix",
        "'orders-eu'",
        "produced by application 'orders-app' (principals.applications[0])",
        "shared topic is declared by name",
    )

    def shared(config: dict[str, Any]) -> None:
        mutate(config)
        config["kafka-dr:principals"]["applications"][1]["produces"] = ["orders-eu"]

    assert _load(shared).principals.applications[1].produces_prefix == "orders-"


# -- one definition: validation, grants and verification agree -----------------------------------


def test_a_declared_underscore_topic_is_compared_by_the_verification() -> None:
    t = _load(_with("_ledger", consumes=["_ledger"]))
    assert [topic.name for topic in t.topics][-1] == "_ledger"
    assert not is_internal_topic("_ledger"), "the verification would skip a declared topic"


def test_every_internal_topic_of_an_estate_is_refused_as_a_topic_and_skipped_by_the_verification() -> None:
    t = _load()
    names = t.internal_topics().names()
    assert "mm2-configs.A.internal" in names and "__consumer_offsets" in names and "C.heartbeats" in names
    for name in names:
        assert is_internal(name) and is_internal_topic(name), name
        with pytest.raises(TopologyError, match=re.escape(f"topics[2].name: {name!r}")):
            _load(lambda config, n=name: config["kafka-dr:topics"].append(_topic(n)))


def test_a_prefix_grant_that_would_reach_an_internal_topic_is_never_computed() -> None:
    """Validation refuses it; were it bypassed (``model_construct``), the grant code refuses too."""
    t = _load()
    app = t.principals.applications[1].model_copy(update={"consumes_prefix": "m"})
    bypassed = t.model_copy(update={"principals": t.principals.model_copy(update={"applications": [app]})})
    with pytest.raises(Exception, match="reaches internal topics 'mm2-\\*'"):
        application_rules(bypassed, Role.PASSIVE, "B")


# -- applications on a passive cluster ----------------------------------------------------------------


def test_applications_only_read_what_they_consume_on_a_passive_cluster() -> None:
    t = _load()
    on_b = {r for r in acl_rules(t, t.cluster("B")) if r.principal != t.principals.replicator}
    assert on_b, "no application rule on B"
    assert {r.operation for r in on_b} <= {"Read", "Describe"}
    assert {r.resource_type for r in on_b} == {"Topic"}, "an application holds a group right on the passive"
    on_a = acl_rules(t, t.cluster("A"))
    assert AclRule("billing", "Group", "billing", "Read") in on_a, "the active keeps the group"


# -- the replicator --------------------------------------------------------------------------------------


def _replicator(t: Topology, cluster: str) -> set[tuple[str, str, str, str]]:
    return {
        (r.resource_type, r.resource_name, r.operation, r.pattern)
        for r in acl_rules(t, t.cluster(cluster))
        if r.principal == t.principals.replicator
    }


def test_the_replicator_cannot_move_offsets_on_the_source() -> None:
    on_a = _replicator(_load(), "A")
    assert ("Group", "*", "Describe", "Literal") in on_a
    assert not [r for r in on_a if r[0] == "Group" and r[2] != "Describe"], on_a
    assert not [r for r in on_a if r[2] in ("All", "Delete", "Alter", "AlterConfigs")], on_a


def test_the_replicator_cannot_delete_nor_configure_brokers_on_the_target() -> None:
    on_b = _replicator(_load(), "B")
    assert ("Topic", "*", "Write", "Literal") in on_b and ("Group", "*", "Read", "Literal") in on_b
    assert not [r for r in on_b if r[2] in ("All", "Delete")], on_b
    assert not [r for r in on_b if r[0] == "Cluster" and r[2] not in ("Describe", "IdempotentWrite")], on_b


def test_the_dedicated_runtime_and_the_program_grant_the_replicator_the_same_rights() -> None:
    for source, rights in ((True, REPLICATOR_SOURCE_RIGHTS), (False, REPLICATOR_TARGET_RIGHTS)):
        bindings = {(b.name, b.operation.name, b.resource_pattern_type.name) for b in replicator_acls(source)}
        wanted = {(name, re.sub(r"(?<!^)(?=[A-Z])", "_", op).upper(), p.upper()) for _, name, op, p, _ in rights}
        assert bindings == wanted


def test_the_security_table_documents_every_right_of_the_replicator() -> None:
    doc = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    for role, rights in (("source", REPLICATOR_SOURCE_RIGHTS), ("target", REPLICATOR_TARGET_RIGHTS)):
        for kind, name, op, pattern, _why in rights:
            row = (
                f"| replicator | link {role} | {kind} `{name}`{' (prefixed)' if pattern == 'Prefixed' else ''} | {op} |"
            )
            assert row in doc, f"docs/security.md lacks {row}"


# -- the property: no grant beyond a role, for every topology validation accepts ----------------------

_CHARS = "abcm_.-Ac"
_names = st.text(alphabet=_CHARS, min_size=1, max_size=6)


@st.composite
def _stacks(draw: st.DrawFn) -> dict[str, Any]:
    clusters = draw(
        st.lists(st.sampled_from(["A", "B", "C", "a", "m", "_x", "c-1"]), min_size=3, max_size=3, unique=True)
    )
    topics = draw(st.lists(_names, min_size=1, max_size=5, unique=True))
    apps = []
    for i in range(draw(st.integers(1, 3))):
        prefix = st.one_of(
            st.none(), st.sampled_from(topics).flatmap(lambda t: st.integers(1, len(t)).map(lambda n, t=t: t[:n]))
        )
        apps.append(
            {
                "name": f"app{i}",
                "produces": draw(st.lists(st.sampled_from(topics), max_size=2, unique=True)),
                "consumes": draw(st.lists(st.sampled_from(topics), max_size=2, unique=True)),
                "produces_prefix": draw(prefix),
                "consumes_prefix": draw(prefix),
                "consumer_group": f"g{i}",
            }
        )
    config: dict[str, Any] = {
        "kafka-dr:clusters": [
            {"name": clusters[0], "role": "active", "base_port": 19100},
            {"name": clusters[1], "role": "passive", "base_port": 19200},
            {"name": clusters[2], "role": "standby", "base_port": 19300},
        ],
        "kafka-dr:topics": [_topic(name) for name in topics],
        "kafka-dr:principals": {"applications": apps},
        "kafka-dr:links": [{"name": "link", "source": clusters[0], "target": clusters[1]}],
    }
    if draw(st.booleans()):
        config["kafka-dr:connectClusters"] = [
            {"name": draw(st.sampled_from(["mm2", "c", "x"])), "cluster": clusters[1], "base_port": 19900}
        ]
        config["kafka-dr:links"][0]["connect"] = config["kafka-dr:connectClusters"][0]["name"]
    return config


def _reaches_internal(rule: AclRule, internal: InternalTopics) -> bool:
    if rule.resource_type != "Topic":
        return False
    if rule.pattern == "Literal":
        return is_internal(rule.resource_name)
    prefix = rule.resource_name
    return any(n.startswith(prefix) for n in internal.names()) or any(
        f.startswith(prefix) or prefix.startswith(f) for f in FAMILIES
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_stacks(), st.booleans())
def test_no_grant_of_an_accepted_topology_reaches_beyond_its_role(config: dict[str, Any], failed_over: bool) -> None:
    try:
        t = load_topology("prop", config)
        if failed_over:
            t = t.after_failover()
    except (TopologyError, ConfigError):
        assume(False)
        return
    _assert_within_roles(t)


def _assert_within_roles(t: Topology) -> None:
    """No application grant reaches an internal topic, another application's writes, or beyond Read on a
    passive; no replicator grant deletes, holds All, configures brokers or reads a source's groups."""
    internal = t.internal_topics()
    apps = {app.name: app for app in t.principals.applications}
    for cluster in t.clusters:
        if not cluster.holds_topics:
            continue
        for rule in acl_rules(t, cluster):
            if rule.principal in apps:
                assert not _reaches_internal(rule, internal), (cluster.name, rule)
                if rule.operation == "Write":
                    me = apps[rule.principal]
                    others = {n for a in apps.values() if a is not me for n in t.produced_by(a)} - set(me.produces)
                    reached = (
                        {n for n in others if n.startswith(rule.resource_name)} if rule.pattern == "Prefixed" else set()
                    )
                    assert not reached, (cluster.name, rule, reached)
                if cluster.role is Role.PASSIVE:
                    assert rule.operation in ("Read", "Describe") and rule.resource_type == "Topic", rule
            elif rule.principal == t.principals.replicator:
                assert rule.operation not in ("All", "Delete"), rule
                assert not (
                    rule.resource_type == "Cluster" and rule.operation not in ("Describe", "IdempotentWrite")
                ), rule
                if rule.resource_type == "Group" and not t.links_into(cluster.name):
                    assert rule.operation == "Describe", rule
            else:
                assert rule.operation != "All" and rule.pattern == "Literal", rule


@pytest.mark.parametrize("stack_file", sorted(p.name for p in REPO.glob("Pulumi.*.yaml")))
def test_every_example_stack_grants_nothing_beyond_a_role_before_and_after_a_failover(stack_file: str) -> None:
    config = yaml.safe_load((REPO / stack_file).read_text(encoding="utf-8"))["config"]
    t = load_topology(stack_file.split(".")[1], config)
    _assert_within_roles(t)
    if t.passive() is not None and t.architecture.value != "active-active":
        _assert_within_roles(t.after_failover())


def test_applications_writing_on_different_peers_may_share_a_topic_name_under_a_prefix() -> None:
    """Active-active: each peer's application writes its home's local ``orders``; a prefix there collides
    with nothing on another peer."""
    config = copy.deepcopy(AA)
    apps = config["kafka-dr:principals"]["applications"]
    apps[0].update(produces=[], produces_prefix="ord")
    t = load_topology("aa", config)
    assert t.principals.applications[0].produces_prefix == "ord"
    apps[1].update(home="A")  # now both write on A: shop-a's prefix would write shop-b's orders
    with pytest.raises(TopologyError) as info:
        load_topology("aa", config)
    _line(str(info.value), "principals.applications[0].produces_prefix", "produced by application 'shop-b'")
