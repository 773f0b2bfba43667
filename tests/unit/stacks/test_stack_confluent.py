"""Confluent Cloud: the model's confluent settings and link state, and stacks.confluent under Pulumi's mocks."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import SETTINGS

from dr.base.errors import ConfigError, TopologyError
from dr.topology import dump_stack_config, find_violations, load_stack_file, load_topology
from dr.topology.model import Kind, LinkState, Role, Topology

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_FILE = ROOT / "Pulumi.confluent-example.yaml"

_KAFKA_CLUSTER = "confluentcloud:index/kafkaCluster:KafkaCluster"
_CLUSTER_LINK = "confluentcloud:index/clusterLink:ClusterLink"
_MIRROR_TOPIC = "confluentcloud:index/kafkaMirrorTopic:KafkaMirrorTopic"
_KAFKA_PROVIDER = "pulumi:providers:kafka"
_SERVICE_ACCOUNT = "confluentcloud:index/serviceAccount:ServiceAccount"
_ROLE_BINDING = "confluentcloud:index/roleBinding:RoleBinding"
_API_KEY = "confluentcloud:index/apiKey:ApiKey"
_ADMIN_TYPES = (_SERVICE_ACCOUNT, _ROLE_BINDING, _API_KEY)


class Mocks(pulumi.runtime.Mocks):
    """Records every registration; a KafkaCluster gets an id, Confluent-shaped endpoints and RBAC CRN, a
    ServiceAccount an ``sa-`` id, an ApiKey an id and a secret (``generated-secret-<name>``)."""

    def __init__(self) -> None:
        self.created: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.created.append(args)
        state = dict(args.inputs)
        if args.typ == _KAFKA_CLUSTER:
            host = f"pkc-{args.name.lower()}.us-east-1.aws.confluent.cloud"
            lkc = f"lkc-{args.name.split('-')[0].lower()}"
            state.update(
                bootstrapEndpoint=f"SASL_SSL://{host}:9092",
                restEndpoint=f"https://{host}:443",
                rbacCrn=f"crn://confluent.cloud/organization=org-1/environment=env-abc123/cloud-cluster={lkc}",
                apiVersion="cmk/v2",
                kind="Cluster",
            )
            return lkc, state
        if args.typ == _SERVICE_ACCOUNT:
            state.update(apiVersion="iam/v2", kind="ServiceAccount")
            return f"sa-{args.name.split('-')[0].lower()}", state
        if args.typ == _API_KEY:
            state["secret"] = f"generated-secret-{args.name.split('-')[0]}"
            return f"GENKEY{args.name.split('-')[0].upper()}", state
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


MOCKS = Mocks()
pulumi.runtime.set_mocks(MOCKS, project="kafka-dr", stack="cc", preview=False)

from stacks.confluent import (  # noqa: E402  (mocks must be set before the program is imported)
    ConfluentClusterLink,
    ConfluentKafkaCluster,
    cluster_link,
    confluent_cluster,
    mirrored_topics,
    strip_protocol,
)


@pytest.fixture(autouse=True)
def _mocks() -> Iterator[None]:
    """These mocks for each test (pytest imports every module first, and another module may set its
    own), then the runtime settings as they were found."""
    found = (SETTINGS.monitor, SETTINGS.project, SETTINGS.stack, SETTINGS.dry_run, SETTINGS.organization)
    pulumi.runtime.set_mocks(MOCKS, project="kafka-dr", stack="cc", preview=False)
    MOCKS.created.clear()
    yield
    monitor, project, stack, dry_run, organization = found
    if isinstance(monitor, MockMonitor):
        pulumi.runtime.set_mocks(
            monitor.mocks, project=project, stack=stack, preview=dry_run, monitor=monitor, organization=organization
        )


def _confluent(cluster_type: str = "dedicated", **extra: Any) -> dict[str, Any]:
    return {
        "environment_id": "env-abc123",
        "cloud": "AWS",
        "region": "us-east-1",
        "cluster_type": cluster_type,
        **extra,
    }


def _cc(name: str, role: str, cluster_type: str = "dedicated", *, secrets: bool = True) -> dict[str, Any]:
    keys = {"api_key": f"KEY{name}", "api_secret": f"plain-secret-{name}"} if secrets else {}
    return {
        "name": name,
        "role": role,
        "kind": "confluent-cloud",
        "sasl_mechanism": "PLAIN",
        "confluent": _confluent(cluster_type, **keys),
    }


CC: dict[str, Any] = {
    "kafka-dr:profile": "production",
    "kafka-dr:clusters": [_cc("A", "active", "standard"), _cc("B", "passive"), _cc("C", "standby")],
    "kafka-dr:topics": [
        {"name": "orders", "partitions": 12, "replication_factor": 3, "min_insync_replicas": 2},
        {"name": "payments", "partitions": 6, "replication_factor": 3, "min_insync_replicas": 2},
        {"name": "audit", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
    ],
    "kafka-dr:principals": {"applications": [{"name": "orders-app", "produces": ["orders"]}]},
    "kafka-dr:links": [
        {"name": "A-to-B", "source": "A", "target": "B", "engine": "cluster-link", "topics": ["orders", "pay.*"]}
    ],
}


def _load(mutate: Any = None) -> Topology:
    config = copy.deepcopy(CC)
    if mutate is not None:
        mutate(config)
    return load_topology("cc", config)


def _violation(mutate: Any, path: str, *fragments: str) -> str:
    with pytest.raises(TopologyError) as info:
        _load(mutate)
    lines = [line for line in str(info.value).splitlines() if line.strip().startswith(f"- {path}: ")]
    assert lines, f"no violation for {path!r} in:\n{info.value}"
    assert any(all(f in line for f in fragments) and " — " in line for line in lines), lines
    return str(info.value)


# -- model ------------------------------------------------------------------------------------


def test_cc_topology_is_valid_and_has_typed_settings() -> None:
    t = _load()
    assert find_violations(t) == []
    b = t.cluster("B")
    assert b.kind is Kind.CONFLUENT_CLOUD and b.bootstrap_servers is None
    assert b.confluent is not None
    settings = (b.confluent.cloud, b.confluent.availability, b.confluent.cluster_type)
    assert settings == ("AWS", "SINGLE_ZONE", "dedicated")
    assert b.confluent.api_key == "KEYB"
    assert b.confluent.api_secret is not None and b.confluent.api_secret.get_secret_value() == "plain-secret-B"
    assert "plain-secret-B" not in repr(b)
    assert t.links[0].state is LinkState.RUNNING


def test_confluent_settings_accept_camel_case_and_defaults() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0]["confluent"] = {
            "environmentId": "env-1",
            "cloud": "GCP",
            "region": "europe-west1",
            "apiKey": "K",
            "apiSecret": {"secure": "v1:ciphertext"},
        }

    a = _load(mutate).cluster("A")
    assert a.confluent is not None
    assert (a.confluent.environment_id, a.confluent.cluster_type, a.confluent.availability) == (
        "env-1",
        "standard",
        "SINGLE_ZONE",
    )
    assert a.confluent.api_secret is not None and a.confluent.api_secret.is_encrypted


def test_confluent_settings_reject_unknown_cloud_and_type() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0]["confluent"].update(cloud="IBM", cluster_type="enterprise")

    with pytest.raises(ConfigError) as info:
        _load(mutate)
    message = str(info.value)
    assert "clusters[0].confluent.cloud" in message and "clusters[0].confluent.cluster_type" in message
    assert "plain-secret" not in message


def test_confluent_cloud_needs_its_confluent_block() -> None:
    def mutate(config: dict[str, Any]) -> None:
        del config["kafka-dr:clusters"][1]["confluent"]

    _violation(mutate, "clusters[1].confluent", "confluent-cloud cluster 'B' has no confluent settings", "add")


def test_other_kinds_must_not_have_a_confluent_block() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][2] = {
            "name": "C",
            "role": "standby",
            "kind": "external",
            "bootstrap_servers": "c.example.com:9093",
            "confluent": _confluent(),
        }
        config["kafka-dr:links"][0]["engine"] = "cluster-link"

    _violation(mutate, "clusters[2].confluent", "is set on external cluster 'C'", "remove it")


def test_cluster_link_destination_must_be_dedicated() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][1]["confluent"]["cluster_type"] = "standard"

    _violation(
        mutate,
        "clusters[1].confluent.cluster_type",
        "is standard but cluster 'B' is the destination of cluster link 'A-to-B'",
        "set confluent.cluster_type: dedicated",
    )


def test_standby_of_a_cluster_linked_passive_must_be_dedicated() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][2]["confluent"]["cluster_type"] = "basic"

    _violation(mutate, "clusters[2].confluent.cluster_type", "'C' will be the destination of a cluster link")


def test_cluster_link_source_must_be_confluent_cloud() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0] = {
            "name": "A",
            "role": "active",
            "kind": "external",
            "bootstrap_servers": "a.example.com:9093",
        }

    _violation(mutate, "links[0].source", "source 'A' is external", "use engine: mirrormaker2")


def test_confluent_cloud_bootstrap_servers_is_optional_but_not_blank() -> None:
    assert _load().cluster("A").bootstrap_servers is None

    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0]["bootstrap_servers"] = " "

    _violation(mutate, "clusters[0].bootstrap_servers", "confluent-cloud cluster 'A'")


def test_link_state_only_on_cluster_links_into_the_active_cluster() -> None:
    def mm2(config: dict[str, Any]) -> None:
        config["kafka-dr:links"][0].update(engine="mirrormaker2", state="promoted")

    _violation(mm2, "links[0].state", "mirrormaker2 link 'A-to-B'", "set state: running")

    def into_passive(config: dict[str, Any]) -> None:
        config["kafka-dr:links"][0]["state"] = "failed-over"

    message = _violation(into_passive, "links[0].state", "target 'B'", "is passive")
    # a link that does not run does not feed the passive cluster
    assert "clusters[1].role: passive cluster 'B' has no incoming link" in message


def test_unknown_link_state_is_a_config_error() -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:links"][0]["state"] = "paused"

    with pytest.raises(ConfigError, match=r"links\[0\]\.state"):
        _load(mutate)


@pytest.mark.parametrize(("mode", "state"), [("planned", LinkState.PROMOTED), ("unplanned", LinkState.FAILED_OVER)])
def test_after_failover_keeps_the_cluster_link_into_the_promoted_cluster(mode: str, state: LinkState) -> None:
    t = _load()
    after = t.after_failover(mode=mode)
    assert [(c.name, c.role) for c in after.clusters] == [
        ("A", Role.DECOMMISSIONED),
        ("B", Role.ACTIVE),
        ("C", Role.PASSIVE),
    ]
    kept, new = after.links
    assert (kept.name, kept.source, kept.target, kept.state) == ("A-to-B", "A", "B", state)
    assert kept.topics == t.links[0].topics
    assert (new.name, new.source, new.target, new.state, new.engine) == (
        "B-to-C",
        "B",
        "C",
        LinkState.RUNNING,
        t.links[0].engine,
    )
    assert find_violations(after) == []
    # a second failover keeps only the link into C, and drops A-to-B
    twice = after.after_failover(mode=mode)
    assert [(lk.name, lk.state) for lk in twice.links] == [("B-to-C", state)]
    assert t.links[0].state is LinkState.RUNNING  # pure


def test_after_failover_default_mode_is_planned_and_unknown_modes_are_refused() -> None:
    assert _load().after_failover().links[0].state is LinkState.PROMOTED
    with pytest.raises(ConfigError, match="unknown failover mode"):
        _load().after_failover(mode="sideways")


def test_after_failover_still_drops_mirrormaker2_links() -> None:
    def mutate(config: dict[str, Any]) -> None:
        for c in config["kafka-dr:clusters"]:
            c.update(kind="external", bootstrap_servers=f"{c['name'].lower()}.example.com:9093")
            del c["confluent"]
        config["kafka-dr:links"][0]["engine"] = "mirrormaker2"

    after = _load(mutate).after_failover(mode="unplanned")
    assert [(lk.name, lk.state) for lk in after.links] == [("B-to-C", LinkState.RUNNING)]


# -- the example stack file and dump round trip -----------------------------------------------


def test_example_stack_file_loads_without_secrets() -> None:
    t = load_stack_file(EXAMPLE_FILE)
    assert [(c.name, c.role, c.kind) for c in t.clusters] == [
        ("A", Role.ACTIVE, Kind.CONFLUENT_CLOUD),
        ("B", Role.PASSIVE, Kind.CONFLUENT_CLOUD),
        ("C", Role.STANDBY, Kind.CONFLUENT_CLOUD),
    ]
    assert [c.confluent.cluster_type for c in t.clusters if c.confluent] == ["standard", "dedicated", "dedicated"]
    assert all(c.confluent and c.confluent.api_secret is None for c in t.clusters)
    assert find_violations(t) == []
    text = EXAMPLE_FILE.read_text(encoding="utf-8")
    assert "pulumi config set --path --secret 'kafka-dr:clusters[0].confluent.apiSecret'" in text
    assert "secure:" not in text


@pytest.mark.parametrize("mode", ["planned", "unplanned"])
def test_dump_round_trips_confluent_settings_and_link_state(mode: str) -> None:
    config = yaml.safe_load(EXAMPLE_FILE.read_text(encoding="utf-8"))["config"]
    config["kafka-dr:clusters"][1]["confluent"].update(apiKey="KEYB", apiSecret={"secure": "v1:cipher-B"})
    t = load_topology("confluent-example", config)
    for state in (t, t.after_failover(mode=mode)):
        dumped = dump_stack_config(state)
        reloaded = load_topology(state.name, yaml.safe_load(yaml.safe_dump(dumped)))
        assert reloaded == state
    dumped = dump_stack_config(t.after_failover(mode=mode))
    b = dumped["kafka-dr:clusters"][1]
    assert b["confluent"] == {
        "environment_id": "env-example",
        "cloud": "AWS",
        "region": "us-west-2",
        "availability": "MULTI_ZONE",
        "cluster_type": "dedicated",
        "api_key": "KEYB",
        "api_secret": {"secure": "v1:cipher-B"},
    }
    assert "availability" not in dumped["kafka-dr:clusters"][2]["confluent"]  # default left out
    assert [(lk["name"], lk.get("state")) for lk in dumped["kafka-dr:links"]] == [
        ("A-to-B", "promoted" if mode == "planned" else "failed-over"),
        ("B-to-C", None),
    ]


# -- stacks.confluent -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "servers"),
    [
        ("SASL_SSL://pkc-1.us-east-1.aws.confluent.cloud:9092", "pkc-1.us-east-1.aws.confluent.cloud:9092"),
        ("pkc-1.confluent.cloud:9092", "pkc-1.confluent.cloud:9092"),
        ("SASL_SSL://a:9092, SASL_SSL://b:9092", "a:9092,b:9092"),
    ],
)
def test_strip_protocol(endpoint: str, servers: str) -> None:
    assert strip_protocol(endpoint) == servers


def test_mirrored_topics_are_the_topics_cluster_links_bring_in() -> None:
    t = _load()
    assert mirrored_topics(t, "B") == {"orders", "payments"}
    assert mirrored_topics(t, "A") == set()
    assert mirrored_topics(t.after_failover(), "B") == {"orders", "payments"}  # promoted, still link-owned
    assert mirrored_topics(t.after_failover(), "C") == {"orders", "payments"}


def test_program_refuses_half_a_declared_api_key() -> None:
    def no_secret(config: dict[str, Any]) -> None:
        del config["kafka-dr:clusters"][0]["confluent"]["api_secret"]

    with pytest.raises(ConfigError) as info:
        confluent_cluster(_load(no_secret).cluster("A"))
    assert "confluent.api_secret is missing" in str(info.value)
    assert "pulumi config set --path --secret" in info.value.fix and ".confluent.apiSecret" in info.value.fix

    def encrypted(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][0]["confluent"]["api_secret"] = {"secure": "v1:x"}

    with pytest.raises(ConfigError, match="still encrypted"):
        confluent_cluster(_load(encrypted).cluster("A"))

    def no_key(config: dict[str, Any]) -> None:
        del config["kafka-dr:clusters"][0]["confluent"]["api_key"]

    with pytest.raises(ConfigError, match=r"has confluent\.api_secret but no confluent\.api_key") as info:
        confluent_cluster(_load(no_key).cluster("A"))
    assert "plain-secret" not in str(info.value)
    # neither declared is not an error: the component creates the key (test_created_admin_api_key)


def _secret(value: Any) -> Any:
    """The plaintext of a secret input as the mock monitor presents it; fails when not secret."""
    from pulumi.runtime import rpc

    assert rpc.is_rpc_secret(value), f"not a secret: {value!r}"
    return rpc.unwrap_rpc_secret(value)


def _plain_strings(value: Any) -> list[str]:
    """Every string of a resource's inputs that is NOT inside a secret (what the state would show)."""
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return []
    if isinstance(value, dict):
        return [s for item in value.values() for s in _plain_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _plain_strings(item)]
    return [value] if isinstance(value, str) else []


def _without_keys(config: dict[str, Any]) -> None:
    config["kafka-dr:clusters"] = [
        _cc(c["name"], c["role"], c["confluent"]["cluster_type"], secrets=False) for c in config["kafka-dr:clusters"]
    ]


def _registered(typ: str, name: str) -> pulumi.runtime.MockResourceArgs:
    found = [args for args in MOCKS.created if args.typ == typ and args.name == name]
    assert len(found) == 1, f"{typ} {name}: {len(found)} registrations"
    return found[-1]


def _urn_type(resource: pulumi.Resource) -> pulumi.Output[str]:
    return resource.urn.apply(lambda urn: urn.split("::")[2])


def _urns(link: ConfluentClusterLink) -> list[pulumi.Output[str]]:
    """Every URN of the link's resources: resolved only once all of them are registered."""
    return [link.urn, link.cluster_link.urn, *(m.urn for m in link.mirror_topics.values())]


def _build(t: Topology, prefix: str) -> tuple[dict[str, ConfluentKafkaCluster], ConfluentClusterLink]:
    """The clusters (all but the standby) and the link ``A-to-B`` of ``t``, names prefixed (unique URNs)."""
    renamed = t.model_copy(
        update={
            "clusters": [c.model_copy(update={"name": f"{prefix}{c.name}"}) for c in t.clusters],
            "links": [
                lk.model_copy(
                    update={
                        "name": f"{prefix}{lk.name}",
                        "source": f"{prefix}{lk.source}",
                        "target": f"{prefix}{lk.target}",
                    }
                )
                for lk in t.links
            ],
        }
    )
    clusters = {c.name: confluent_cluster(c) for c in renamed.clusters if c.role is not Role.STANDBY}
    kept = next(lk for lk in renamed.links if lk.name == f"{prefix}A-to-B")
    return clusters, cluster_link(renamed, kept, clusters)


@pulumi.runtime.test
def test_confluent_cluster_resources() -> Any:
    MOCKS.created.clear()
    t = _load()
    a = confluent_cluster(t.cluster("A"))
    b = confluent_cluster(t.cluster("B"))
    assert isinstance(a, ConfluentKafkaCluster)

    def check(values: list[Any]) -> None:
        (a_type, a_cluster_type, a_provider_type, b_servers, b_id, b_rest) = values
        assert a_type == "pulumi:pulumi:Stack$kafka-dr:index:ConfluentKafkaCluster"
        assert a_cluster_type == f"kafka-dr:index:ConfluentKafkaCluster${_KAFKA_CLUSTER}"  # parent = component
        assert a_provider_type == f"kafka-dr:index:ConfluentKafkaCluster${_KAFKA_PROVIDER}"
        assert b_servers == "pkc-b-kafka-cluster.us-east-1.aws.confluent.cloud:9092"
        assert b_id == "lkc-b"
        assert b_rest == "https://pkc-b-kafka-cluster.us-east-1.aws.confluent.cloud:443"

        ka = _registered(_KAFKA_CLUSTER, "A-kafka-cluster").inputs
        assert (ka["displayName"], ka["availability"], ka["cloud"], ka["region"]) == (
            "A",
            "SINGLE_ZONE",
            "AWS",
            "us-east-1",
        )
        assert ka["environment"] == {"id": "env-abc123"}
        assert "standard" in ka and "dedicated" not in ka and "basic" not in ka
        kb = _registered(_KAFKA_CLUSTER, "B-kafka-cluster").inputs
        assert kb["dedicated"] == {"cku": 1} and "standard" not in kb

        pb = _registered(_KAFKA_PROVIDER, "B-kafka").inputs
        assert pb["saslUsername"] == "KEYB" and pb["saslMechanism"] == "plain"
        # provider inputs travel as strings; the secret one is the api secret, never in plain text
        assert pb["tlsEnabled"] in (True, "true")
        assert "pkc-b-kafka-cluster.us-east-1.aws.confluent.cloud:9092" in str(pb["bootstrapServers"])
        assert _secret(pb["saslPassword"]) == "plain-secret-B"
        assert not any("plain-secret" in text for text in _plain_strings(pb))
        # a declared key wins: no service account, role binding or API key is created
        assert not [r for r in MOCKS.created if r.typ in _ADMIN_TYPES]
        assert a.service_account is None and a.role_binding is None and a.admin_api_key is None

    return pulumi.Output.all(
        _urn_type(a),
        _urn_type(a.kafka_cluster),
        _urn_type(a.provider),
        b.bootstrap_servers,
        b.cluster_id,
        b.rest_endpoint,
        b.provider.urn,
    ).apply(lambda v: check(v[:6]))


def test_created_admin_api_key() -> None:
    """Without a declared key: a service account, its CloudClusterAdmin role binding on the cluster,
    and an API key it owns for the cluster (after the role binding) — all children of the component —
    and the Kafka provider logs in with that key."""
    captured: dict[str, pulumi.ResourceOptions] = {}
    real = pulumi.CustomResource.__init__

    def spy(
        self: Any,
        t: str,
        name: str,
        props: Any = None,
        opts: pulumi.ResourceOptions | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if t in _ADMIN_TYPES:
            captured[t] = opts or pulumi.ResourceOptions()
        real(self, t, name, props, opts, *args, **kwargs)

    built: list[ConfluentKafkaCluster] = []

    @pulumi.runtime.test
    def run() -> Any:
        MOCKS.created.clear()
        a = confluent_cluster(_load(_without_keys).cluster("A"))
        built.append(a)
        assert a.service_account is not None and a.role_binding is not None and a.admin_api_key is not None

        def check(values: list[Any]) -> None:
            sa_type, rb_type, key_type, key_id = values[:4]
            for typ, urn_type in ((_SERVICE_ACCOUNT, sa_type), (_ROLE_BINDING, rb_type), (_API_KEY, key_type)):
                assert urn_type == f"kafka-dr:index:ConfluentKafkaCluster${typ}"  # parent = component
            assert key_id == "GENKEYA"

            sa = _registered(_SERVICE_ACCOUNT, "A-admin-service-account").inputs
            assert sa["displayName"] == "kafka-dr-A-admin"
            rb = _registered(_ROLE_BINDING, "A-admin-cluster-admin").inputs
            assert (rb["principal"], rb["roleName"]) == ("User:sa-a", "CloudClusterAdmin")
            assert rb["crnPattern"] == (
                "crn://confluent.cloud/organization=org-1/environment=env-abc123/cloud-cluster=lkc-a"
            )
            key = _registered(_API_KEY, "A-admin-api-key").inputs
            assert key["owner"] == {"id": "sa-a", "apiVersion": "iam/v2", "kind": "ServiceAccount"}
            assert key["managedResource"] == {
                "id": "lkc-a",
                "apiVersion": "cmk/v2",
                "kind": "Cluster",
                "environment": {"id": "env-abc123"},
            }
            order = [r.typ for r in MOCKS.created if r.typ in _ADMIN_TYPES]
            assert order == [_SERVICE_ACCOUNT, _ROLE_BINDING, _API_KEY]

            pa = _registered(_KAFKA_PROVIDER, "A-kafka").inputs
            assert pa["saslUsername"] == "GENKEYA" and pa["saslMechanism"] == "plain"
            assert _secret(pa["saslPassword"]) == "generated-secret-A"
            assert not any("generated-secret" in text for text in _plain_strings(pa))

        return pulumi.Output.all(
            _urn_type(a.service_account),
            _urn_type(a.role_binding),
            _urn_type(a.admin_api_key),
            a.api_key,
            a.provider.urn,
        ).apply(check)

    pulumi.CustomResource.__init__ = spy  # type: ignore[method-assign]
    try:
        run()
    finally:
        pulumi.CustomResource.__init__ = real  # type: ignore[method-assign]
    a = built[0]
    assert captured[_API_KEY].depends_on == [a.role_binding]  # the role binding precedes the key
    assert all(captured[t].parent is a for t in _ADMIN_TYPES)


@pulumi.runtime.test
def test_cluster_link_uses_the_created_api_keys() -> Any:
    MOCKS.created.clear()
    clusters, link = _build(_load(_without_keys), "g")
    assert len([r for r in clusters.values() if r.admin_api_key is not None]) == 2

    def check(_: Any) -> None:
        cl = _registered(_CLUSTER_LINK, "gA-to-B-cluster-link").inputs
        src, dst = _secret(cl["sourceKafkaCluster"]), _secret(cl["destinationKafkaCluster"])
        assert src["credentials"] == {"key": "GENKEYGA", "secret": "generated-secret-gA"}
        assert dst["credentials"] == {"key": "GENKEYGB", "secret": "generated-secret-gB"}
        for inputs in [cl, *(a.inputs for a in MOCKS.created if a.typ == _MIRROR_TOPIC)]:
            assert not any("generated-secret" in text for text in _plain_strings(inputs))
        mirror = _registered(_MIRROR_TOPIC, "gA-to-B-mirror-orders").inputs
        assert _secret(mirror["kafkaCluster"])["credentials"] == {"key": "GENKEYGB", "secret": "generated-secret-gB"}

    return pulumi.Output.all(*_urns(link)).apply(check)


@pulumi.runtime.test
def test_cluster_link_resources_while_running() -> Any:
    MOCKS.created.clear()
    _clusters, link = _build(_load(), "r")

    def check(values: list[Any]) -> None:
        link_type, cl_type, mt_type = values
        assert link_type == "pulumi:pulumi:Stack$kafka-dr:index:ConfluentClusterLink"
        assert cl_type == f"kafka-dr:index:ConfluentClusterLink${_CLUSTER_LINK}"
        assert mt_type == f"kafka-dr:index:ConfluentClusterLink${_MIRROR_TOPIC}"

        cl = _registered(_CLUSTER_LINK, "rA-to-B-cluster-link").inputs
        assert (cl["link"], cl["linkMode"], cl["connectionMode"]) == ("rA-to-B", "DESTINATION", "OUTBOUND")
        # the Python SDK marks the whole block secret when a value inside it is secret
        src, dst = _secret(cl["sourceKafkaCluster"]), _secret(cl["destinationKafkaCluster"])
        assert src["id"] == "lkc-ra" and src["bootstrapEndpoint"].startswith("SASL_SSL://pkc-ra-")
        assert src["credentials"] == {"key": "KEYA", "secret": "plain-secret-A"}
        assert dst["id"] == "lkc-rb" and dst["restEndpoint"].startswith("https://pkc-rb-")
        assert dst["credentials"] == {"key": "KEYB", "secret": "plain-secret-B"}
        assert not any("plain-secret" in text for text in _plain_strings(cl))

        mirrors = sorted((a.name, a.inputs) for a in MOCKS.created if a.typ == _MIRROR_TOPIC)
        assert [name for name, _ in mirrors] == ["rA-to-B-mirror-orders", "rA-to-B-mirror-payments"]  # not audit
        for name, inputs in mirrors:
            assert inputs["status"] == "ACTIVE"
            assert inputs["sourceKafkaTopic"] == {"topicName": name.rsplit("-", 1)[1]}
            assert inputs["clusterLink"] == {"linkName": "rA-to-B"}
            destination = _secret(inputs["kafkaCluster"])
            assert destination["id"] == "lkc-rb" and destination["credentials"]["secret"] == "plain-secret-B"
            assert not any("plain-secret" in text for text in _plain_strings(inputs))

    assert sorted(link.mirror_topics) == ["orders", "payments"]
    return pulumi.Output.all(
        _urn_type(link), _urn_type(link.cluster_link), _urn_type(link.mirror_topics["orders"]), *_urns(link)
    ).apply(lambda v: check(v[:3]))


@pytest.mark.parametrize(("mode", "status"), [("planned", "PROMOTED"), ("unplanned", "FAILED_OVER")])
def test_cluster_link_after_failover(mode: str, status: str) -> None:
    prefix = "p" if mode == "planned" else "u"

    @pulumi.runtime.test
    def run() -> Any:
        MOCKS.created.clear()
        after = _load().after_failover(mode=mode)
        clusters, link = _build(after, prefix)
        assert f"{prefix}A" in clusters  # the decommissioned source is still built: the kept link needs it

        def check(_: Any) -> None:
            mirrors = [a for a in MOCKS.created if a.typ == _MIRROR_TOPIC]
            assert sorted(a.name for a in mirrors) == [f"{prefix}A-to-B-mirror-{n}" for n in ("orders", "payments")]
            assert {a.inputs["status"] for a in mirrors} == {status}
            assert _registered(_CLUSTER_LINK, f"{prefix}A-to-B-cluster-link").inputs["link"] == f"{prefix}A-to-B"

        return pulumi.Output.all(*_urns(link)).apply(check)

    run()


def test_mirror_topics_are_retained_on_delete() -> None:
    captured: list[pulumi.ResourceOptions] = []
    real = pulumi.CustomResource.__init__

    def spy(
        self: Any,
        t: str,
        name: str,
        props: Any = None,
        opts: pulumi.ResourceOptions | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if t == _MIRROR_TOPIC:
            captured.append(opts or pulumi.ResourceOptions())
        real(self, t, name, props, opts, *args, **kwargs)

    @pulumi.runtime.test
    def run() -> Any:
        _clusters, link = _build(_load(), "k")
        return pulumi.Output.all(*_urns(link))

    pulumi.CustomResource.__init__ = spy  # type: ignore[method-assign]
    try:
        run()
    finally:
        pulumi.CustomResource.__init__ = real  # type: ignore[method-assign]
    assert len(captured) == 2 and all(o.retain_on_delete for o in captured)


def test_cluster_link_needs_both_clusters_built() -> None:
    after = _load().after_failover()
    with pytest.raises(ConfigError, match="cluster 'A' is not built by the program"):
        cluster_link(after, after.links[0], {})
