"""The Pulumi program (``stacks/``) under Pulumi's own mocks: what it registers, where, and how.

No engine, no Kafka: :class:`RecordingMocks` stands in for every provider (the dynamic providers of
``stacks.local_cluster`` / ``stacks.mirror_link`` are never called; the mock answers with what the
local-cluster provider's ``create`` would return, computed by its pure ``_outs``), and
:class:`RecordingMonitor` keeps what ``MockResourceArgs`` does not carry: the parent URN, the URN
itself, ``retainOnDelete`` and the dependencies of each registration.

What the mocks of pulumi 3.259 expose (and these tests rely on):

* ``MockResourceArgs`` has ``typ``, ``name``, ``inputs``, ``provider`` (``"<provider urn>::<id>"``),
  ``resource_id`` and ``custom`` — no parent; the monitor's ``RegisterResourceRequest.parent`` has it.
* Secret inputs stay wrapped: ``{SECRET_SIG_KEY: SECRET_SIG, "value": ...}`` (the mock monitor
  declares the ``secrets`` feature), so a plain value is visibly not secret.
* Provider inputs arrive JSON-encoded (``tlsEnabled: "false"``, ``bootstrapServers: '["h:p"]'``).
* The mock URNs use the settings of the monitor's thread (``urn:pulumi:stack::project::...``), so
  only their type chain and name are compared.

Each program run gets fresh mocks and a fresh state directory; the recorded registrations and
resolved outputs are plain data once the run returned, so the assertions run outside the engine.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import importlib
import json
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime import config as pulumi_config
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs
from pulumi.runtime.settings import SETTINGS

from dr.base.errors import DRError
from dr.topology import (
    Application,
    Cluster,
    Link,
    Principals,
    Role,
    Topic,
    Topology,
    load_stack_file,
    load_topology,
)
from dr.topology.access import acl_rules

SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

DYNAMIC = "pulumi-python:dynamic:Resource"
PROVIDER = "pulumi:providers:kafka"
KAFKA_CLUSTER = "kafka-dr:index:KafkaCluster"
CLUSTER_ACCESS = "kafka-dr:index:ClusterAccess"
REPLICATION_LINK = "kafka-dr:index:ReplicationLink"
USER = "kafka:index/userScramCredential:UserScramCredential"
TOPIC = "kafka:index/topic:Topic"
ACL = "kafka:index/acl:Acl"
ACCESS_CHILDREN = (USER, TOPIC, ACL)


@dataclass
class Registration:
    """What the monitor saw of one ``RegisterResource`` call."""

    typ: str
    name: str
    parent: str
    urn: str
    custom: bool
    provider: str
    dependencies: list[str]
    retain_on_delete: bool


@dataclass
class Resource:
    """One registered resource: the mock's arguments joined with the monitor's registration."""

    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    provider: str
    parent: str
    urn: str
    dependencies: list[str]
    retain_on_delete: bool


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every ``new_resource``; answers like the providers would, without starting anything."""

    def __init__(self) -> None:
        self.calls: list[MockResourceArgs] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.calls.append(args)
        outputs = dict(args.inputs)
        if args.typ == DYNAMIC:
            props = {k: v for k, v in outputs.items() if k != "__provider"}
            if "base_port" in props and "role" in props:  # a LocalKafkaCluster: its create result, minus the start
                from stacks.local_cluster import _outs

                outputs = _outs(props, True)
            elif "connector" in props:  # a MirrorConnector on Kafka Connect
                outputs = {**props, "state": "RUNNING", "tasks": 1}
            else:  # a MirrorMakerProcess or LocalConnectWorkers
                outputs = {**props, "running": True}
        return f"{args.name}-id", outputs

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        return {}


class RecordingMonitor(MockMonitor):
    """The stock mock monitor, also keeping what ``MockResourceArgs`` leaves out (parent, URN...)."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    typ=request.type,
                    name=request.name,
                    parent=request.parent,
                    urn=response.urn,
                    custom=bool(request.custom),
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    retain_on_delete=bool(request.retainOnDelete),
                )
            )
        return response


ROOT = Path(__file__).resolve().parents[3]


# -- running the program under mocks ------------------------------------------------------------


@dataclass
class Run:
    """Everything one program run registered and exported."""

    topology: Topology
    state_dir: Path
    resources: list[Resource]
    outputs: dict[str, Any]
    secret_outputs: dict[str, bool]

    def of_type(self, typ: str) -> list[Resource]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, typ: str, name: str) -> Resource:
        found = [r for r in self.resources if r.typ == typ and r.name == name]
        assert len(found) == 1, f"expected one {typ} named {name!r}, found {len(found)}"
        return found[0]

    def names(self, typ: str) -> set[str]:
        return {r.name for r in self.of_type(typ)}

    def credentials(self) -> dict[str, str]:
        return json.loads((self.state_dir / "credentials.json").read_text())


def _fresh_mocks(stack: str) -> tuple[RecordingMocks, RecordingMonitor, ModuleType]:
    """New mocks for one program run, then the program (imported only once mocks are set).

    Nothing is set at import time: pytest imports every test module before running any, and a
    module-level ``set_mocks`` here would replace the mocks another test module set at its import.
    """
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="kafka-dr", stack=stack, preview=False, monitor=monitor)
    return mocks, monitor, importlib.import_module("stacks.program")


def _join(mocks: RecordingMocks, monitor: RecordingMonitor) -> list[Resource]:
    seen = Counter((c.typ, c.name) for c in mocks.calls)
    registered = {(r.typ, r.name): r for r in monitor.registrations}
    resources = []
    for call in mocks.calls:
        reg = registered[(call.typ, call.name)]
        resources.append(
            Resource(
                typ=call.typ,
                name=call.name,
                inputs=call.inputs,
                custom=bool(call.custom),
                provider=call.provider or "",
                parent=reg.parent,
                urn=reg.urn,
                dependencies=reg.dependencies,
                retain_on_delete=reg.retain_on_delete,
            )
        )
    assert len(monitor.registrations) == len(mocks.calls) == sum(seen.values())
    return resources


def run_program(topology: Topology, state_dir: Path) -> Run:
    """``stacks.program.build(topology, state_dir)`` under fresh mocks; every output resolved."""
    mocks, monitor, program = _fresh_mocks(topology.name)
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test
    def body() -> pulumi.Output[Any]:
        outputs = program.build(topology, state_dir)

        async def secrecy() -> dict[str, bool]:
            return {key: await pulumi.Output.from_input(value).is_secret() for key, value in outputs.items()}

        def keep(values: list[Any]) -> None:
            resolved["outputs"], resolved["secret"] = values

        return pulumi.Output.all(pulumi.Output.from_input(outputs), asyncio.ensure_future(secrecy())).apply(keep)

    body()  # returns once every registration has been answered (run_pulumi_func waits for the RPCs)
    return Run(
        topology=topology,
        state_dir=state_dir,
        resources=_join(mocks, monitor),
        outputs=resolved["outputs"],
        secret_outputs=resolved["secret"],
    )


@pytest.fixture(scope="module", autouse=True)
def _restore_the_mocks_found() -> Iterator[None]:
    """Leave the runtime settings as found: another module may rely on the mocks it set at import."""
    s = SETTINGS
    found = (s.monitor, s.project, s.stack, s.dry_run, s.organization)
    yield
    monitor, project, stack, dry_run, organization = found
    if isinstance(monitor, MockMonitor):
        pulumi.runtime.set_mocks(
            monitor.mocks, project=project, stack=stack, preview=dry_run, monitor=monitor, organization=organization
        )


@pytest.fixture(autouse=True)
def _no_config_leak() -> Iterator[None]:
    found = dict(pulumi_config.CONFIG.get())
    pulumi.runtime.set_all_config({})
    yield
    pulumi.runtime.set_all_config(found)


# -- value helpers ------------------------------------------------------------------------------


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIG_KEY) == SECRET_SIG


def plain_leaves(value: Any) -> Iterator[Any]:
    """Every scalar of ``value`` that is *not* inside a secret (``__provider`` decoded to text)."""
    if is_secret(value):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "__provider" and isinstance(item, str):
                yield base64.b64decode(item).decode("latin-1")
            else:
                yield from plain_leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from plain_leaves(item)
    else:
        yield value


def all_leaves(value: Any) -> Iterator[Any]:
    """Every scalar of ``value``, secrets included."""
    if is_secret(value):
        yield from all_leaves(value["value"])
    elif isinstance(value, dict):
        for item in value.values():
            yield from all_leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from all_leaves(item)
    else:
        yield value


def provider_input(value: Any) -> Any:
    """A provider input as given to the program (the mocks hand them over JSON-encoded)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def provider_name(ref: str) -> str:
    """``<provider urn>::<id>`` → the provider's resource name."""
    return urn_name(ref.rsplit("::", 1)[0]) if ref else ""


def urn_type_chain(urn: str) -> str:
    return urn.split("::")[2]


def owner_cluster(resource: Resource) -> str:
    """The cluster a user/topic/ACL belongs to, from its name ``<cluster>-user|topic|acl-...``."""
    sep = {USER: "-user-", TOPIC: "-topic-", ACL: "-acl-"}.get(resource.typ, "")
    if sep and sep in resource.name:
        return resource.name.split(sep, 1)[0]
    raise AssertionError(f"{resource.typ} {resource.name!r} is not named after its cluster")


AclKey = tuple[str, str, str, str, str]


def acls(run: Run, cluster: str) -> set[AclKey]:
    """The ACLs registered on ``cluster`` as (principal, resource type, name, operation, pattern)."""
    return {
        (
            r.inputs["aclPrincipal"],
            r.inputs["aclResourceType"],
            r.inputs["aclResourceName"],
            r.inputs["aclOperation"],
            r.inputs["resourcePatternTypeFilter"],
        )
        for r in run.of_type(ACL)
        if owner_cluster(r) == cluster
    }


WRITE_OPS = {"Write", "All", "IdempotentWrite", "Create", "Alter", "AlterConfigs", "Delete"}


def application_writes(run: Run, cluster: str) -> set[AclKey]:
    replicator = f"User:{run.topology.principals.replicator}"
    return {a for a in acls(run, cluster) if a[0] != replicator and a[3] in WRITE_OPS}


def ports(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for server in bootstrap.split(","):
        host, _, port = server.rpartition(":")
        out.append((host, int(port)))
    return out


# -- topologies ---------------------------------------------------------------------------------


def local_topology() -> Topology:
    return load_stack_file(ROOT / "Pulumi.local.yaml")


def _decrypted(value: Any, plain: Callable[[str], str]) -> Any:
    """The stack config as the engine hands it to the program: every ``secure:`` value decrypted."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return plain(value["secure"])
        return {k: _decrypted(v, plain) for k, v in value.items()}
    if isinstance(value, list):
        return [_decrypted(v, plain) for v in value]
    return value


def production_config() -> dict[str, Any]:
    raw = yaml.safe_load((ROOT / "Pulumi.production-example.yaml").read_text(encoding="utf-8"))["config"]
    return _decrypted(raw, lambda ciphertext: "pw-" + ciphertext.split("PLACEHOLDER0", 1)[1].rstrip("A"))


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(local_topology(), tmp_path_factory.mktemp("local-state"))


@pytest.fixture(scope="module")
def failed_over(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(local_topology().after_failover(), tmp_path_factory.mktemp("failover-state"))


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Run:
    topology = load_topology("production-example", production_config())
    return run_program(topology, tmp_path_factory.mktemp("external-state"))


# -- the local stack: components ----------------------------------------------------------------


def test_local_stack_registers_a_cluster_and_its_access_per_running_cluster(local: Run) -> None:
    components = {(r.typ, r.name) for r in local.resources if not r.custom}
    assert components == {
        (KAFKA_CLUSTER, "A"),
        (KAFKA_CLUSTER, "B"),
        (CLUSTER_ACCESS, "A-access"),
        (CLUSTER_ACCESS, "B-access"),
        (REPLICATION_LINK, "A-to-B"),
    }, f"components registered: {sorted(components)}"
    assert local.names(DYNAMIC) == {"A-brokers", "B-brokers", "A-to-B-mirrormaker2"}
    assert local.names(PROVIDER) == {"A-kafka", "B-kafka"}
    for name in ("A-brokers", "B-brokers"):
        brokers = local.named(DYNAMIC, name)
        cluster = local.topology.cluster(name.removesuffix("-brokers"))
        assert brokers.parent == local.named(KAFKA_CLUSTER, cluster.name).urn, f"{name} is not a child of its cluster"
        assert brokers.inputs["role"] == cluster.role.value, f"{name} role"
        assert int(brokers.inputs["base_port"]) == cluster.base_port, f"{name} base_port"
        assert int(brokers.inputs["brokers"]) == cluster.brokers, f"{name} brokers"
        assert brokers.inputs["state_dir"] == str(local.state_dir), f"{name} state_dir"


def test_standby_cluster_C_gets_nothing(local: Run) -> None:
    c = local.topology.cluster("C")
    assert c.role is Role.STANDBY
    window = c.port_window
    assert window is not None
    for r in local.resources:
        assert r.name != "C" and not r.name.startswith("C-") and "-to-C" not in r.name, (
            f"{r.typ} {r.name!r} is registered for standby C"
        )
        for leaf in all_leaves(r.inputs):
            if isinstance(leaf, str):
                assert leaf != "C" and "/clusters/C" not in leaf, f"{r.typ} {r.name!r} mentions C: {leaf!r}"
                assert not any(f"127.0.0.1:{p}" in leaf for p in (window.start, window.start + 1)), (
                    f"{r.typ} {r.name!r} points at C's ports: {leaf!r}"
                )
            elif isinstance(leaf, int | float) and not isinstance(leaf, bool):
                assert int(leaf) not in window, f"{r.typ} {r.name!r} uses a port of C's window: {leaf}"
    assert "C" not in local.outputs["clusters"]


def test_each_cluster_has_its_own_explicit_provider(local: Run) -> None:
    for name in ("A", "B"):
        cluster = local.topology.cluster(name)
        provider = local.named(PROVIDER, f"{name}-kafka")
        inputs = {k: provider_input(v) for k, v in provider.inputs.items() if not is_secret(v)}
        assert provider.custom, f"{name}-kafka must be a custom resource"
        assert provider.parent == local.named(KAFKA_CLUSTER, name).urn, f"{name}-kafka is not a child of cluster {name}"
        assert inputs["tlsEnabled"] is False, f"{name}-kafka tlsEnabled={inputs['tlsEnabled']!r}"
        assert inputs["saslMechanism"] == "scram-sha512", f"{name}-kafka saslMechanism={inputs['saslMechanism']!r}"
        assert inputs["saslUsername"] == "admin", f"{name}-kafka saslUsername"
        servers = inputs["bootstrapServers"]
        assert isinstance(servers, list) and len(servers) == cluster.brokers, (
            f"{name}-kafka bootstrapServers={servers!r}"
        )
        for host, port in ports(",".join(servers)):
            assert host == "127.0.0.1", f"{name}-kafka bootstrap host {host!r}"
            assert port in cluster.port_window, f"{name}-kafka bootstrap port {port} outside {cluster.port_window}"


def test_users_topics_and_acls_are_children_of_their_clusters_access(local: Run) -> None:
    access_urn = {r.name.removesuffix("-access"): r.urn for r in local.of_type(CLUSTER_ACCESS)}
    children = [r for r in local.resources if r.typ in ACCESS_CHILDREN]
    assert children, "no users, topics or ACLs registered"
    for r in children:
        cluster = owner_cluster(r)
        assert r.parent == access_urn[cluster], f"{r.typ} {r.name!r}: parent {r.parent!r}, not {cluster}-access"
        assert urn_type_chain(r.urn) == f"{CLUSTER_ACCESS}${r.typ}", f"{r.name!r}: URN type chain {r.urn!r}"
        assert provider_name(r.provider) == f"{cluster}-kafka", (
            f"{r.typ} {r.name!r} goes through provider {r.provider!r}, not {cluster}-kafka"
        )
        assert r.custom, f"{r.name!r} must be a custom resource"


def test_each_access_declares_every_user_topic_and_rule(local: Run) -> None:
    t = local.topology
    principals = sorted([t.principals.replicator, *(a.name for a in t.principals.applications)])
    for name in ("A", "B"):
        users = {r.inputs["username"] for r in local.of_type(USER) if owner_cluster(r) == name}
        assert sorted(users) == principals, f"{name}-access users {sorted(users)}"
        topics = [r for r in local.of_type(TOPIC) if owner_cluster(r) == name]
        assert sorted(r.inputs["name"] for r in topics) == sorted(tp.name for tp in t.topics), f"{name}-access topics"
        for r in topics:
            assert r.retain_on_delete, f"{r.name!r} must be retained on delete"
            declared = next(tp for tp in t.topics if tp.name == r.inputs["name"])
            assert int(r.inputs["partitions"]) == declared.partitions, f"{r.name!r} partitions"
            assert int(r.inputs["replicationFactor"]) == declared.replication_factor, f"{r.name!r} replicationFactor"
            assert r.inputs["config"]["min.insync.replicas"] == str(declared.min_insync_replicas), f"{r.name!r} config"
        expected = {
            (f"User:{a.principal}", a.resource_type, a.resource_name, a.operation, a.pattern)
            for a in acl_rules(t, t.cluster(name))
        }
        assert acls(local, name) == expected, f"{name}-access ACLs differ from acl_rules"
        assert len([r for r in local.of_type(ACL) if owner_cluster(r) == name]) == len(expected), f"{name} ACL count"


# -- ACLs per role ------------------------------------------------------------------------------


def test_active_cluster_lets_applications_write(local: Run) -> None:
    assert ("User:orders-app", "Topic", "orders", "Write", "Literal") in acls(local, "A"), (
        "A-access lacks orders-app Write on orders"
    )


def test_passive_cluster_lets_no_application_write(local: Run) -> None:
    assert application_writes(local, "B") == set(), "B-access lets an application write"
    assert ("User:orders-app", "Topic", "payments", "Read", "Literal") in acls(local, "B"), (
        "B-access lacks orders-app Read on payments (consumers read everywhere)"
    )


def test_replicator_reads_on_the_source_and_writes_on_the_target(local: Run) -> None:
    assert ("User:replicator", "Topic", "*", "Write", "Literal") in acls(local, "B"), (
        "B-access: replicator Write on Topic *"
    )
    assert not [a for a in acls(local, "B") if a[0] == "User:replicator" and a[3] in ("All", "Delete")], (
        "B-access: the replicator must not delete, nor hold All, on the target"
    )
    assert ("User:replicator", "Topic", "*", "Read", "Literal") in acls(local, "A"), (
        "A-access: replicator Read on Topic *"
    )
    assert ("User:replicator", "Topic", "*", "All", "Literal") not in acls(local, "A"), (
        "A-access: the replicator must not have All on every topic of the source"
    )


def test_link_starts_after_the_replicators_access_of_both_ends_only(local: Run) -> None:
    """MirrorMaker 2 waits for the replicator's user and ACLs and the topics on both sides, not for the
    applications' users and ACLs (created while it starts: the failover builds C's in parallel with B→C)."""
    process = local.named(DYNAMIC, "A-to-B-mirrormaker2")
    assert process.parent == local.named(REPLICATION_LINK, "A-to-B").urn, "A-to-B-mirrormaker2 parent"
    assert (process.inputs["source"], process.inputs["target"]) == ("A", "B"), "A-to-B-mirrormaker2 ends"
    assert (int(process.inputs["source_port"]), int(process.inputs["target_port"])) == (19100, 19200)
    replicator = local.topology.principals.replicator
    deps = set(process.dependencies)
    for name in ("A", "B"):
        mine = [
            r for r in (*local.of_type(USER), *local.of_type(ACL), *local.of_type(TOPIC)) if owner_cluster(r) == name
        ]
        needed = {
            r.urn
            for r in mine
            if r.typ == TOPIC
            or r.inputs.get("username") == replicator
            or r.inputs.get("aclPrincipal") == f"User:{replicator}"
        }
        apps = {r.urn for r in mine} - needed
        assert needed and needed <= deps, f"A-to-B-mirrormaker2 does not wait for {sorted(needed - deps)}"
        assert apps and not apps & deps, f"A-to-B-mirrormaker2 waits for the applications': {sorted(apps & deps)}"


# -- after a failover ---------------------------------------------------------------------------


def test_after_failover_B_is_active_C_passive_and_A_keeps_only_its_cluster(failed_over: Run) -> None:
    t = failed_over.topology
    assert (t.cluster("A").role, t.cluster("B").role, t.cluster("C").role) == (
        Role.DECOMMISSIONED,
        Role.ACTIVE,
        Role.PASSIVE,
    )
    assert ("User:orders-app", "Topic", "orders", "Write", "Literal") in acls(failed_over, "B"), (
        "B-access (active) lacks orders-app Write on orders"
    )
    assert application_writes(failed_over, "C") == set(), "C-access (passive) lets an application write"
    assert ("User:replicator", "Topic", "*", "Write", "Literal") in acls(failed_over, "C"), (
        "C-access (target of B-to-C) lacks replicator Write on Topic *"
    )
    assert ("User:replicator", "Topic", "*", "Read", "Literal") in acls(failed_over, "B"), (
        "B-access (source of B-to-C) lacks replicator Read on Topic *"
    )
    a_resources = {(r.typ, r.name) for r in failed_over.resources if r.name == "A" or r.name.startswith("A-")}
    assert a_resources == {(KAFKA_CLUSTER, "A"), (DYNAMIC, "A-brokers"), (PROVIDER, "A-kafka")}, (
        f"decommissioned A registers {sorted(a_resources)}"
    )
    assert failed_over.named(DYNAMIC, "A-brokers").inputs["role"] == "decommissioned"
    assert failed_over.names(CLUSTER_ACCESS) == {"B-access", "C-access"}
    assert failed_over.names(REPLICATION_LINK) == {"B-to-C"}
    assert failed_over.names(DYNAMIC) == {"A-brokers", "B-brokers", "C-brokers", "B-to-C-mirrormaker2"}
    assert [lk["name"] for lk in failed_over.outputs["links"]] == ["B-to-C"]
    assert failed_over.outputs["clusters"]["B"]["role"] == "active"
    assert failed_over.outputs["clusters"]["A"]["role"] == "decommissioned"
    bootstrap_b = failed_over.outputs["clusters"]["B"]["bootstrapServers"]
    assert {cfg["bootstrap.servers"] for cfg in failed_over.outputs["clientConfigs"].values()} == {bootstrap_b}


# -- no duplicate resource names ----------------------------------------------------------------


def test_an_application_producing_and_consuming_one_topic_gets_each_acl_once(tmp_path: Path) -> None:
    topology = Topology(
        name="local",
        clusters=[
            Cluster(name="A", role="active", base_port=19100),
            Cluster(name="B", role="passive", base_port=19200),
        ],
        topics=[Topic(name="events", partitions=1, replication_factor=1)],
        principals=Principals(
            applications=[Application(name="echo", produces=["events"], consumes=["events"], consumer_group="echo")]
        ),
        links=[Link(name="A-to-B", source="A", target="B")],
    )
    run = run_program(topology, tmp_path)
    counts = Counter((r.typ, r.name) for r in run.resources)
    duplicates = {key: n for key, n in counts.items() if n > 1}
    assert not duplicates, f"resources registered more than once: {duplicates}"
    on_a = [r for r in run.of_type(ACL) if owner_cluster(r) == "A" and r.inputs["aclPrincipal"] == "User:echo"]
    describe = [
        r.name for r in on_a if (r.inputs["aclResourceName"], r.inputs["aclOperation"]) == ("events", "Describe")
    ]
    assert len(describe) == 1, f"echo Describe on events on A: {describe}"
    ops = sorted(r.inputs["aclOperation"] for r in on_a if r.inputs["aclResourceType"] == "Topic")
    assert ops == ["Describe", "Read", "Write"], f"echo's topic ACLs on A: {ops}"


def test_an_application_owning_a_prefix_gets_one_acl_per_operation_whatever_the_topic_count(tmp_path: Path) -> None:
    def estate(topics: int) -> Topology:
        return Topology(
            name="local",
            clusters=[
                Cluster(name="A", role="active", base_port=19100),
                Cluster(name="B", role="passive", base_port=19200),
            ],
            topics=[Topic(name=f"sales.t{i}", partitions=1, replication_factor=1) for i in range(topics)],
            principals=Principals(
                applications=[
                    Application(name="sales", produces_prefix="sales.", consumes_prefix="sales.", consumer_group="s")
                ]
            ),
            links=[Link(name="A-to-B", source="A", target="B")],
        )

    small, large = estate(2), estate(50)
    for name, role_ops in (("A", ["Read", "Write"]), ("B", ["Read"])):
        rules = [
            r for r in acl_rules(large, large.cluster(name)) if r.principal == "sales" and r.resource_type == "Topic"
        ]
        assert sorted(r.operation for r in rules) == role_ops, f"sales on {name}: {rules}"
        assert {(r.resource_name, r.pattern) for r in rules} == {("sales.", "Prefixed")}, rules
        assert acl_rules(small, small.cluster(name)) == acl_rules(large, large.cluster(name))
    run = run_program(large, tmp_path)
    on_a = [r for r in run.of_type(ACL) if owner_cluster(r) == "A" and r.inputs["aclPrincipal"] == "User:sales"]
    prefixed = sorted(r.inputs["aclOperation"] for r in on_a if r.inputs["resourcePatternTypeFilter"] == "Prefixed")
    assert prefixed == ["Read", "Write"], f"sales' prefixed ACL resources on A: {prefixed}"


def test_named_topics_keep_their_literal_acls(local: Run) -> None:
    """Stack files without prefixes get exactly the per-topic ACLs they always had."""
    rules = acl_rules(local.topology, local.topology.cluster("A"))
    apps = [r for r in rules if r.principal in ("orders-app", "billing")]
    assert apps and all(r.pattern == "Literal" for r in apps), apps
    assert ("orders-app", "orders", "Write") in {(r.principal, r.resource_name, r.operation) for r in apps}


# -- secrets ------------------------------------------------------------------------------------


def test_credentials_file_is_private_and_no_cluster_was_started(local: Run) -> None:
    path = local.state_dir / "credentials.json"
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, f"{path} has mode {oct(mode)}"
    assert not (local.state_dir / "clusters").exists(), "a dynamic provider ran: clusters/ was created"
    assert not (local.state_dir / "links").exists(), "a dynamic provider ran: links/ was created"
    assert sorted(p.name for p in local.state_dir.iterdir()) == ["credentials.json", "credentials.lock"]
    lock = local.state_dir / "credentials.lock"
    assert lock.stat().st_size == 0 and stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_passwords_reach_resources_only_as_secrets(local: Run) -> None:
    creds = local.credentials()
    users = local.of_type(USER)
    assert users
    for r in users:
        pw = r.inputs["passwordWo"]
        assert is_secret(pw), f"{r.name!r} passwordWo is not secret: {type(pw).__name__}"
        assert pw["value"] == creds[r.inputs["username"]], f"{r.name!r} passwordWo is not the stored password"
        assert is_secret(r.inputs["passwordWoVersion"]), f"{r.name!r} passwordWoVersion is not secret"
        assert r.inputs["scramMechanism"] == "SCRAM-SHA-512", f"{r.name!r} scramMechanism"
    for r in local.of_type(PROVIDER):
        pw = r.inputs["saslPassword"]
        assert is_secret(pw), f"{r.name!r} saslPassword is not secret"
        assert pw["value"] == creds["admin"], f"{r.name!r} saslPassword is not the admin password"


def test_no_password_in_any_plain_input_or_plain_output(local: Run) -> None:
    passwords = set(local.credentials().values())
    assert len(passwords) >= 4, "expected admin, replicator and two application passwords"
    for r in local.resources:
        for leaf in plain_leaves(r.inputs):
            text = str(leaf)
            leaked = [pw for pw in passwords if pw in text]
            assert not leaked, f"{r.typ} {r.name!r} carries a password in a non-secret input"
    for key, value in local.outputs.items():
        if local.secret_outputs[key]:
            continue
        text = json.dumps(value)
        assert not any(pw in text for pw in passwords), f"stack output {key!r} is not secret but holds a password"
    assert local.secret_outputs["clientConfigs"] is True, "clientConfigs must be a secret output"
    assert local.secret_outputs["clusters"] is False and local.secret_outputs["links"] is False


# -- stack outputs ------------------------------------------------------------------------------


def test_outputs_describe_clusters_links_and_client_configs(local: Run) -> None:
    out = local.outputs
    assert set(out["clusters"]) == {"A", "B"}, f"clusters output: {sorted(out['clusters'])}"
    for name in ("A", "B"):
        cluster = local.topology.cluster(name)
        entry = out["clusters"][name]
        assert entry["role"] == cluster.role.value, f"clusters[{name}].role"
        servers = ports(entry["bootstrapServers"])
        assert len(servers) == cluster.brokers, f"clusters[{name}].bootstrapServers={entry['bootstrapServers']!r}"
        assert all(host == "127.0.0.1" and port in cluster.port_window for host, port in servers), (
            f"clusters[{name}].bootstrapServers={entry['bootstrapServers']!r}"
        )
    assert out["links"] == [{"name": "A-to-B", "source": "A", "target": "B", "engine": "mirrormaker2"}]
    creds = local.credentials()
    configs = out["clientConfigs"]
    assert set(configs) == {"orders-app", "billing"}, f"clientConfigs: {sorted(configs)}"
    for app, cfg in configs.items():
        assert cfg["sasl.username"] == app, f"clientConfigs[{app}].sasl.username"
        assert cfg["bootstrap.servers"] == out["clusters"]["A"]["bootstrapServers"], f"clientConfigs[{app}] bootstrap"
        assert cfg["security.protocol"] == "SASL_PLAINTEXT", f"clientConfigs[{app}].security.protocol"
        assert cfg["sasl.mechanism"] == "SCRAM-SHA-512", f"clientConfigs[{app}].sasl.mechanism"
        assert cfg["sasl.password"] == creds[app], f"clientConfigs[{app}].sasl.password"


def test_generated_passwords_are_kept_as_one_secret_output(local: Run) -> None:
    """A second operator (fresh clone, same backend) restores them instead of generating new ones."""
    creds = local.credentials()
    assert local.secret_outputs["credentials"] is True, "the generated passwords must be a secret output"
    assert local.outputs["credentials"] == {u: creds[u] for u in ("billing", "orders-app", "replicator")}


# -- external clusters --------------------------------------------------------------------------


def test_external_clusters_have_no_local_cluster_and_use_tls(external: Run) -> None:
    t = external.topology
    assert not [r.name for r in external.of_type(DYNAMIC) if "base_port" in r.inputs], (
        "an external cluster got a LocalKafkaCluster"
    )
    assert not [r for r in external.resources if r.name.endswith("-brokers")]
    assert external.names(KAFKA_CLUSTER) == {"dc1", "dc2"}
    assert external.names(CLUSTER_ACCESS) == {"dc1-access", "dc2-access"}
    for name in ("dc1", "dc2"):
        cluster = t.cluster(name)
        provider = external.named(PROVIDER, f"{name}-kafka")
        assert provider_input(provider.inputs["tlsEnabled"]) is True, f"{name}-kafka must enable TLS for SASL_SSL"
        assert provider_input(provider.inputs["bootstrapServers"]) == cluster.bootstrap_servers.split(","), (
            f"{name}-kafka bootstrapServers"
        )
        assert provider.inputs["saslUsername"] == cluster.admin_username, f"{name}-kafka saslUsername"
        assert is_secret(provider.inputs["saslPassword"]), f"{name}-kafka saslPassword is not secret"
        assert provider.inputs["saslPassword"]["value"] == cluster.admin_password.get_secret_value(), (
            f"{name}-kafka saslPassword is not the configured admin password"
        )
    assert not any(r.name.startswith("dc3") for r in external.resources), "standby dc3 got resources"
    assert external.outputs["clusters"]["dc1"]["bootstrapServers"] == t.cluster("dc1").bootstrap_servers
    for app, cfg in external.outputs["clientConfigs"].items():
        assert cfg["security.protocol"] == "SASL_SSL", f"clientConfigs[{app}].security.protocol"
        assert cfg["bootstrap.servers"] == t.cluster("dc1").bootstrap_servers, f"clientConfigs[{app}] bootstrap"


def test_external_declared_application_passwords_are_used(external: Run) -> None:
    declared = {a.name: a.password.get_secret_value() for a in external.topology.principals.applications}
    for r in external.of_type(USER):
        user = r.inputs["username"]
        if user in declared:
            assert r.inputs["passwordWo"]["value"] == declared[user], f"{r.name!r} ignores the declared password"
    stored = json.loads((external.state_dir / "credentials.json").read_text())
    assert not set(declared) & set(stored), "declared application passwords must not be generated locally"


def test_external_mirrormaker_link_starts_no_local_process(external: Run) -> None:
    """MirrorMaker 2 between external clusters runs on Kafka Connect, never as a local process."""
    assert not [r for r in external.of_type(DYNAMIC) if r.name.endswith("-mirrormaker2")], (
        "dc1-to-dc2 was started as a local MirrorMaker 2 process against 127.0.0.1"
    )


# -- config → topology --------------------------------------------------------------------------


def _engine_config(config: dict[str, Any]) -> dict[str, str]:
    """Config values as the engine hands them over: structured values as JSON text."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def test_invalid_config_stops_before_any_resource(tmp_path: Path) -> None:
    raw = yaml.safe_load((ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))["config"]
    broken = copy.deepcopy(raw)
    broken["kafka-dr:clusters"][1]["role"] = "active"  # two active clusters
    config = _engine_config(broken)
    with pytest.raises(DRError) as expected:
        load_topology("local", config)

    mocks, monitor, program = _fresh_mocks("local")
    pulumi.runtime.set_all_config(config)
    with pytest.raises(pulumi.RunError) as raised:
        program.load()
    assert str(raised.value) == f"error: {expected.value}"

    @pulumi.runtime.test
    def whole_program() -> None:
        program.run(tmp_path)

    with pytest.raises(pulumi.RunError) as raised_by_run:
        whole_program()
    assert str(raised_by_run.value) == f"error: {expected.value}"
    assert mocks.calls == [] and monitor.registrations == [], (
        f"resources registered despite the invalid topology: {[c.name for c in mocks.calls]}"
    )
    assert list(tmp_path.iterdir()) == [], "state written despite the invalid topology"


def test_run_reads_the_engine_config_and_builds_the_same_estate(tmp_path: Path, local: Run) -> None:
    raw = yaml.safe_load((ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))["config"]
    mocks, _monitor, program = _fresh_mocks("local")
    pulumi.runtime.set_all_config(_engine_config(raw))

    @pulumi.runtime.test
    def whole_program() -> None:
        program.run(tmp_path)

    whole_program()
    registered = sorted((c.typ, c.name) for c in mocks.calls)
    assert registered == sorted((r.typ, r.name) for r in local.resources)
    assert not (tmp_path / "clusters").exists()


@pytest.mark.parametrize("secret", [False, True], ids=["plaintext-in-file", "secure-in-file"])
def test_a_password_written_in_plain_text_stops_the_program(secret: bool) -> None:
    """The engine marks a key secret when a value inside it is `secure:`; a plain one is refused."""
    raw = yaml.safe_load((ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))["config"]
    raw = copy.deepcopy(raw)
    raw["kafka-dr:principals"]["applications"][0]["password"] = "hunter2-plain"
    _mocks, _monitor, program = _fresh_mocks("local")
    pulumi.runtime.set_all_config(_engine_config(raw), ["kafka-dr:principals"] if secret else [])
    try:
        if secret:
            assert program.load().principals.applications[0].password is not None
        else:
            with pytest.raises(pulumi.RunError) as raised:
                program.load()
            message = str(raised.value)
            assert "principals.applications[0].password" in message and "--secret" in message
            assert "hunter2-plain" not in message
    finally:
        pulumi.runtime.set_all_config({}, [])


# -- OAUTHBEARER clusters (issue 49) ---------------------------------------------------------------


def _oauth_topology() -> Topology:
    def cluster(name: str, role: str) -> dict[str, Any]:
        return {
            "name": name,
            "role": role,
            "kind": "external",
            "bootstrap_servers": f"{name.lower()}.example:9092",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "oauth": {
                "token_endpoint": "http://127.0.0.1:8080/kafka/token",
                "scope": "kafka extra",
                "admin": {"client_id": f"admin-{name}", "client_secret": f"admin-secret-{name}"},
                "replicator": {"client_id": "replicator", "client_secret": "repl-secret"},
                "applications": {"orders": {"client_id": "orders"}},
            },
        }

    return load_topology(
        "oauth",
        {
            "kafka-dr:clusters": [cluster("A", "active"), cluster("B", "passive")],
            "kafka-dr:topics": [{"name": "orders", "partitions": 1, "replication_factor": 1}],
            "kafka-dr:principals": {"applications": [{"name": "orders", "produces": ["orders"]}]},
            "kafka-dr:links": [{"name": "A-to-B", "source": "A", "target": "B"}],
        },
    )


def test_oauthbearer_clusters_log_the_provider_in_with_the_admin_client_and_make_no_scram_user(
    tmp_path: Path,
) -> None:
    run = run_program(_oauth_topology(), tmp_path)
    for name in ("A", "B"):
        provider = run.named(PROVIDER, f"{name}-kafka")
        assert provider.inputs["saslMechanism"] == "oauthbearer", f"{name}-kafka saslMechanism"
        assert provider.inputs["saslTokenUrl"] == "http://127.0.0.1:8080/kafka/token", f"{name}-kafka saslTokenUrl"
        assert provider_input(provider.inputs["saslOauthScopes"]) == ["kafka", "extra"], f"{name}-kafka scopes"
        assert provider.inputs["saslUsername"] == f"admin-{name}", f"{name}-kafka saslUsername (the client id)"
        assert is_secret(provider.inputs["saslPassword"]), f"{name}-kafka saslPassword is not secret"
        assert provider.inputs["saslPassword"]["value"] == f"admin-secret-{name}", f"{name}-kafka client secret"
    assert not run.of_type(USER), "an OAUTHBEARER cluster got SCRAM users"
    assert {r.inputs["aclPrincipal"] for r in run.of_type(ACL)} >= {"User:orders", "User:replicator"}
    published = run.outputs["clientConfigs"]["orders"]
    assert published["sasl.mechanism"] == "OAUTHBEARER"
    assert published["sasl.oauthbearer.client.id"] == "orders"
    assert published["sasl.oauthbearer.token.endpoint.url"] == "http://127.0.0.1:8080/kafka/token"
    assert not any("secret" in key or "password" in key for key in published), published


def test_with_oauthbearer_links_only_no_replicator_password_is_generated(tmp_path: Path) -> None:
    """The replicator logs in with its client id and secret on every end: a generated password would be a
    secret nothing uses (kept in the state and the stack's ``credentials`` output all the same)."""
    from stacks.kept_passwords import generated_users, replicator_password_used

    topology = _oauth_topology()
    assert not replicator_password_used(topology)
    assert "replicator" not in generated_users(topology)
    run = run_program(topology, tmp_path)
    assert "replicator" not in run.outputs["credentials"], "a replicator password was generated for OAuth links"
    assert "replicator" not in run.credentials()
    # one cluster that is not OAUTHBEARER (here a SCRAM one) logs the replicator in with a password again
    doc = topology.model_dump(mode="json", by_alias=False)
    scram = {**doc["clusters"][1], "sasl_mechanism": "SCRAM-SHA-512", "oauth": None, "admin_username": "admin"}
    mixed = topology.model_copy(
        update={"clusters": [topology.clusters[0], type(topology.clusters[1]).model_validate(scram)]}
    )
    assert replicator_password_used(mixed) and "replicator" in generated_users(mixed)
