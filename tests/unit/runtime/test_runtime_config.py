"""Pure configuration of brokers, MirrorMaker 2, ACLs and credentials (no JVM)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation

from dr.base.errors import ClusterError, ConfigError
from dr.base.stackref import stack_file
from dr.estate.estate import application_acls
from dr.kafka.client import Endpoint, cluster_metadata
from dr.runtime.cluster import ClusterSpec, server_properties
from dr.runtime.credentials import Credentials
from dr.runtime.mirrormaker import IDENTITY_POLICY, mm2_properties
from dr.topology import Role, load_stack_file
from tests import REPO_ROOT


def test_three_broker_cluster_has_a_dedicated_controller_and_loopback_listeners() -> None:
    spec = ClusterSpec("A", brokers=3, base_port=19100, racks=("r1", "r2", "r3"))
    assert spec.node_ids() == [0, 1, 2, 3]
    controller = server_properties(spec, 0, Path("/d"), "pw")
    broker2 = server_properties(spec, 2, Path("/d"), "pw")
    assert controller["process.roles"] == "controller"
    assert broker2["process.roles"] == "broker"
    assert broker2["broker.rack"] == "r2"
    assert broker2["listeners"] == "CLIENT://127.0.0.1:19101,INTERNAL://127.0.0.1:19121"
    assert controller["listeners"] == "CONTROLLER://127.0.0.1:19140"
    for props in (controller, broker2):
        assert all("127.0.0.1" in line for line in props["listeners"].split(","))
        assert props["allow.everyone.if.no.acl.found"] == "false"
        protocols = {m.split(":")[1] for m in props["listener.security.protocol.map"].split(",")}
        assert protocols == {"SASL_PLAINTEXT"}, "every listener authenticates"
    assert broker2["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert broker2["offsets.topic.replication.factor"] == "3"


def test_single_broker_cluster_is_combined_and_sizes_internal_topics_to_one() -> None:
    spec = ClusterSpec("B", brokers=1, base_port=19200)
    props = server_properties(spec, 1, Path("/d"), "pw")
    assert spec.node_ids() == [1]
    assert props["process.roles"] == "broker,controller"
    assert props["offsets.topic.replication.factor"] == "1"
    assert spec.bootstrap == "127.0.0.1:19200"


@pytest.mark.parametrize("kwargs", [{"brokers": 2}, {"brokers": 3, "racks": ("a",)}, {"base_port": 80}])
def test_bad_cluster_specs_are_refused_with_a_fix(kwargs: dict) -> None:
    with pytest.raises(ConfigError) as info:
        ClusterSpec("X", **{"base_port": 20000, **kwargs})
    assert "next step" in str(info.value)


def test_mm2_properties_identity_naming_offset_sync_and_no_reverse_flow() -> None:
    a = Endpoint("127.0.0.1:1", "replicator", "s3cret")
    props = mm2_properties("A", a, "B", a.with_user("replicator", "s3cret"), topics="orders|payments")
    assert props["replication.policy.class"] == IDENTITY_POLICY
    assert props["A->B.enabled"] == "true" and props["B->A.enabled"] == "false"
    assert props["A->B.topics"] == "orders|payments"
    assert props["sync.group.offsets.enabled"] == "true"
    assert int(props["emit.checkpoints.interval.seconds"]) <= 5
    assert props["A.security.protocol"] == "SASL_PLAINTEXT"
    assert props["checkpoints.topic.replication.factor"] == "1"
    # no reflection scan of the classpath at each start: neither the process's nor the flow's worker's
    assert props["plugin.discovery"] == props["B.plugin.discovery"] == "service_load"


def test_mm2_extra_properties_are_laid_over_but_cannot_change_the_flow() -> None:
    a = Endpoint("127.0.0.1:1", "replicator", "s3cret")
    props = mm2_properties("A", a, "B", a, extra={"transforms": "drop", "tasks.max": "4"})
    assert props["transforms"] == "drop" and props["tasks.max"] == "4"
    with pytest.raises(ConfigError) as info:
        mm2_properties("A", a, "B", a, extra={"replication.policy.class": "x.Default"})
    assert "replication.policy.class" in str(info.value)


def test_metadata_of_a_closed_port_fails_within_its_timeout_naming_the_address() -> None:
    with pytest.raises(ClusterError) as info:
        cluster_metadata(Endpoint("127.0.0.1:1", "admin", "hunter2-very-secret"), timeout=1.5, attempt=0.5)
    assert "cannot reach 127.0.0.1:1" in str(info.value) and "next step" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_endpoint_repr_never_shows_the_password() -> None:
    ep = Endpoint("127.0.0.1:1", "admin", "hunter2-very-secret")
    assert "hunter2" not in repr(ep)
    assert ep.config()["sasl.password"] == "hunter2-very-secret"


def test_credentials_file_is_private_and_refused_when_readable_by_others(tmp_path: Path) -> None:
    creds = Credentials(tmp_path / "estate")
    pw = creds.password("admin")
    assert creds.password("admin") == pw and len(pw) >= 24
    mode = stat.S_IMODE(os.stat(creds.path).st_mode)
    assert mode == 0o600
    assert pw not in repr(creds)
    os.chmod(creds.path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        creds.password("admin")


def test_applications_write_only_on_the_active_cluster() -> None:
    topo = load_stack_file(REPO_ROOT / "Pulumi.local.yaml")
    active = application_acls(topo, Role.ACTIVE)
    passive = application_acls(topo, Role.PASSIVE)
    assert any(b.operation == AclOperation.WRITE for b in active)
    assert not any(b.operation == AclOperation.WRITE for b in passive)
    assert {(b.principal, b.name) for b in passive if b.operation == AclOperation.READ} >= {
        ("User:billing", "orders"),
        ("User:orders-app", "payments"),
    }


def test_unknown_stack_names_the_stacks_that_exist() -> None:
    with pytest.raises(ConfigError) as info:
        stack_file("nope")
    assert "local" in str(info.value) and "Pulumi.nope.yaml" in str(info.value)


def test_property_values_read_back_as_written_by_java_rules(tmp_path: Path) -> None:
    """Java's Properties.load drops a lone backslash: a pattern `orders\\.v1` must be written doubled."""
    from dr.base.java_properties import escape_value
    from dr.runtime.cluster import write_properties

    assert escape_value(r"orders\.v1|pay\d+") == r"orders\\.v1|pay\\d+"
    assert escape_value('user="a\\"b"') == 'user="a\\\\"b"'
    assert escape_value("a\nb") == "a\\nb"
    path = tmp_path / "x.properties"
    write_properties(path, {"A->B.topics": r"(?:orders\.v1)"})
    assert path.read_text() == "A->B.topics=(?:orders\\\\.v1)\n"


def test_published_client_properties_carry_any_password_exactly(tmp_path) -> None:
    """A password with a backslash and a quote reaches a Java client unchanged: escaped once for
    JAAS (StreamTokenizer) and once for the properties format."""
    import re

    from dr.base.java_properties import escape_value
    from dr.kafka.client import Endpoint

    password = 'p\\a"b\\\\c'
    jaas = Endpoint("127.0.0.1:1", "app", password).java_config()["sasl.jaas.config"]
    line = escape_value(jaas)
    value = re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), line)  # Properties.load
    assert value == jaas
    quoted = re.search(r'password="((?:[^"\\]|\\.)*)"', value).group(1)
    assert re.sub(r"\\(.)", r"\1", quoted) == password  # StreamTokenizer's reading of the quoted string


def test_the_dedicated_worker_commits_every_second_under_the_target_prefix() -> None:
    """A top-level offset.flush.interval.ms never reaches MirrorMaker 2's dedicated worker (it read 60000 in
    its log): the setting goes under the target cluster's prefix, so the last offset sync is promoted in a second."""
    from dr.runtime.mirrormaker import OFFSET_FLUSH_S, mm2_properties

    props = mm2_properties("A", Endpoint("127.0.0.1:1", "admin", "x"), "B", Endpoint("127.0.0.1:2", "admin", "y"))
    assert props["B.offset.flush.interval.ms"] == str(OFFSET_FLUSH_S * 1000)
    assert "offset.flush.interval.ms" not in props


def test_a_restarted_dedicated_process_waits_seconds_not_a_minute_for_its_group_and_a_dead_transaction() -> None:
    """Its worker's group settings and its producers' transaction timeout go under the target's prefix (the
    only place a dedicated worker reads them); the timeout only where there are transactions."""
    from dr.runtime.mirrormaker import TRANSACTION_TIMEOUT_S, mm2_properties

    a, b = Endpoint("127.0.0.1:1", "admin", "x"), Endpoint("127.0.0.1:2", "admin", "y")
    eos = mm2_properties("A", a, "B", b, exactly_once=True)
    assert eos["B.producer.transaction.timeout.ms"] == str(TRANSACTION_TIMEOUT_S * 1000)
    assert {k: eos[k] for k in eos if k.endswith(("rebalance.timeout.ms", "session.timeout.ms"))} == {
        "B.rebalance.timeout.ms": "10000",
        "B.session.timeout.ms": "6000",
    }
    assert "B.producer.transaction.timeout.ms" not in mm2_properties("A", a, "B", b)


def test_the_group_translation_bound_follows_the_link_intervals() -> None:
    from dr.runtime.mirrormaker import group_offsets_translated_within

    fast = group_offsets_translated_within()
    slow = group_offsets_translated_within({"refresh_groups_s": 60, "sync_group_offsets_s": 60})
    assert fast < slow
    assert slow - fast == 2 * ((60 - 5) + (60 - 1)), "two rounds of the longer intervals"
