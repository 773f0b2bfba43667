"""The local estate of a stack: its topology's local clusters and links, run on this machine.

This is the foundation runtime driven by the topology (start/stop clusters, SCRAM users, ACLs,
topics, MirrorMaker 2 links). Stack files (``Pulumi.<stack>.yaml``) live in the Pulumi project
directory — the nearest ``Pulumi.yaml`` from the current directory up, or ``$KDR_STACK_DIR``; each
stack keeps its state — data, logs, generated credentials — under ``<project>/.state/<stack>/``
(or ``$KDR_STATE_DIR/<stack>``). See :mod:`dr.base.pulumi_env`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Required, TypedDict

from confluent_kafka.admin import AclBinding, AclOperation, ResourcePatternType, ResourceType

from dr.base.errors import ClusterError, ConfigError, DRError
from dr.base.stackref import StackRef
from dr.base.types import Reporter
from dr.kafka.client import Endpoint, acl
from dr.kafka.connect_rest import ConnectRest
from dr.kafka.copied import furthest, stored_positions, uncopied
from dr.kafka.offsets import Offsets, end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.connect import ConnectSpec, LocalConnectCluster, worker_topics
from dr.runtime.credentials import ADMIN_USER, Credentials
from dr.runtime.links import ConnectorState, LinkRunner
from dr.topology import Link, Placement, Role, Topology, load_stack_file
from dr.topology.access import AclRule, application_rules
from dr.topology.client_endpoint import EndpointStatus, endpoint_pointing, local_endpoint
from dr.topology.external import external_endpoint
from dr.topology.oauth_login import oauth_client, oauth_identity, uses_oauth
from dr.topology.topics import topics_on


class ClusterStatus(TypedDict, total=False):
    """One cluster in :meth:`Estate.status` (``state`` … ``running_nodes`` only for a local one)."""

    name: str
    role: str
    kind: str
    state: str
    bootstrap: str | None
    brokers: int
    running_nodes: list[int]


class LinkStatus(TypedDict, total=False):
    """One link in :meth:`Estate.status`: its runner's state and lag, or the ``error`` reading them."""

    name: str
    source: str
    target: str
    process: str
    connect: str | None
    connectors: dict[str, ConnectorState]
    lag: dict[str, int]
    total_lag: int
    error: str
    failure: str
    """Why its runner does not copy although it was started (a dead task, a failed connector)."""


class EstateStatus(TypedDict, total=False):
    """What ``drctl estate status --json`` prints (``endpoint`` only with a client endpoint)."""

    stack: Required[str]
    clusters: Required[list[ClusterStatus]]
    links: Required[list[LinkStatus]]
    endpoint: EndpointStatus


def load_stack(stack: StackRef) -> Topology:
    """The validated topology of a stack."""
    return load_stack_file(stack.existing_stack_file())


@dataclass
class Estate:
    """The clusters and links of one stack that run on this machine."""

    topology: Topology
    state: Path
    credentials: Credentials = field(init=False)

    def __post_init__(self) -> None:
        self.credentials = Credentials(self.state)

    @classmethod
    def for_stack(cls, stack: StackRef) -> Estate:
        """The estate of ``Pulumi.<stack>.yaml``."""
        return cls(load_stack(stack), stack.made_state_dir())

    # ---------------------------------------------------------------- lookups
    def local_cluster(self, name: str) -> LocalCluster:
        """The runtime handle of a local cluster of the topology."""
        c = self.topology.cluster(name)
        if not c.is_local:
            raise ConfigError(
                f"cluster {name!r} is {c.kind.value}, not local.",
                "manage external clusters with their own tooling; only local ones run here",
            )
        e = self.topology.endpoint
        return LocalCluster(
            ClusterSpec(
                c.name,
                brokers=c.brokers,
                base_port=c.base_port or 0,
                racks=tuple(c.racks),
                tls=c.local_tls,
                endpoint_ports=tuple(e.broker_ports) if e is not None else (),
                endpoint_address=e.address if e is not None else "127.0.0.1",
                lease_fence=self.topology.failover_policy.broker_fence,
            ),
            self.state,
            self.credentials,
        )

    def endpoint(self, name: str, user: str = ADMIN_USER) -> Endpoint:
        """How to reach cluster ``name`` as ``user`` (local: generated password; external: stack secret — the
        admin's; on an OAUTHBEARER cluster the client identity of ``user``'s role, :func:`oauth_identity`:
        the admin's, the replicator's or the application's, with its secret from the stack's secrets)."""
        c = self.topology.cluster(name)
        if c.is_local:
            return self.local_cluster(name).endpoint(user)
        from dr.estate.stack_secrets import reveal_admin, reveal_oauth_secret, reveal_tls_key

        password = None
        if uses_oauth(c):
            who = oauth_identity(user, admin=ADMIN_USER, replicator=self.topology.principals.replicator)
            declared = oauth_client(c, who).client_secret
            if declared is not None and declared.is_encrypted:
                password = reveal_oauth_secret(self.topology, c.name, who)
            return external_endpoint(c, password, self.state, identity=who)
        if c.admin_password is not None and c.bootstrap_servers and c.admin_username:
            password = reveal_admin(self.topology, c.name)
        return external_endpoint(c, password, self.state, reveal_tls_key(self.topology, c.name))

    def mirror(self, link_name: str) -> LinkRunner:
        """The dedicated MirrorMaker 2 process of a link between two local clusters (:meth:`link_runner`
        picks it for a link placed ``dedicated``)."""
        from stacks.links import dedicated

        return dedicated.runner(self, self._link(link_name))

    def connect(self, name: str) -> LocalConnectCluster:
        """The runtime handle of a local Connect cluster of the topology."""

        cc = self.topology.connect_cluster(name)
        if not cc.is_local:
            raise ConfigError(
                f"Connect cluster {name!r} is external ({cc.url}); it is not run on this machine.",
                "manage its workers with their own tooling",
            )
        return LocalConnectCluster(
            ConnectSpec(
                cc.name,
                workers=cc.workers,
                base_port=cc.base_port or 0,
                heap_mb=cc.heap_mb,
                exactly_once=self.topology.connect_exactly_once(cc),
            ),
            self.local_cluster(cc.cluster),
            self.state,
            self.credentials,
        )

    def connect_rest(self, name: str) -> ConnectRest:
        """A REST client for a declared Connect cluster (local: generated credentials; external: the
        stack's ``url`` and, when set, its decrypted basic-auth password)."""
        from dr.estate.stack_secrets import reveal_connect

        cc = self.topology.connect_cluster(name)
        if cc.is_local:
            return self.connect(name).rest()
        return ConnectRest(cc.url or "", username=cc.username, password=reveal_connect(self.topology, name))

    def link_runner(self, link_name: str) -> LinkRunner:
        """What runs a link here (the one door to a runner), picked by its placement from
        :data:`stacks.links.LINK_RUNNERS`: its connectors on a Connect cluster, else its dedicated
        MirrorMaker 2 process."""
        from stacks.links import link_runner

        return link_runner(self, self._link(link_name))

    def copied_positions(self, link_name: str) -> Callable[[], Offsets] | None:
        """How far a MirrorMaker 2 link that runs here has copied: per source partition, the next offset to
        copy, from the source offsets it committed with its copies (:mod:`dr.kafka.copied`). None for a
        link that does not run here. Every link is judged by these, whatever its delivery: a target's end
        offsets count an exactly-once link's commit markers, and a source that was such a target holds
        markers its downstream link never copies (B→C behind A→B), so end offsets never compare.

        A link on a local Connect cluster: read from the offsets topic on the link's target, where its tasks
        commit them with the copies (a connector writing to another cluster than the workers' keeps its own
        there, KIP-618), and from the workers' own offsets topic on their home when that is another cluster
        (an at-least-once task there commits to the workers' store); a partition's furthest position wins —
        Connect's offsets API did not answer within 90 s for a connector writing away from its workers' home
        (B→C on workers homed on B) under Kafka 4.3.1. An external Connect cluster: its offsets API."""
        link = self._link(link_name)
        if not self.runs_here(link_name):
            return None
        connect = self.topology.link_connect(link)
        if connect is not None and connect.is_local:
            topic, connector = worker_topics(connect.name)["offsets"], f"{link.name}-source"
            homes = dict.fromkeys([link.target, connect.cluster])
            stores = [self.endpoint(c) for c in homes]
            return lambda: furthest([stored_positions(ep, topic, connector) for ep in stores])
        return self.link_runner(link_name).copied

    def runs_here(self, link_name: str) -> bool:
        """True when this drctl can stop and watch the link (dedicated local process or Connect connectors)."""
        return self.topology.placement(self._link(link_name)) in (Placement.CONNECT, Placement.DEDICATED)

    def _link(self, link_name: str) -> Link:
        link = next((lk for lk in self.topology.links if lk.name == link_name), None)
        if link is None:
            raise ConfigError(
                f"unknown link {link_name!r}.",
                f"use one of: {', '.join(lk.name for lk in self.topology.links) or '(none)'}",
            )
        return link

    def app_password(self, app: str) -> str:
        """An application's password: the stack's secret if set (decrypted as ``pulumi`` does), else
        the one the stack generated — restored from its secret ``credentials`` output when this
        clone has no copy yet (a second operator), generated only for a stack never provisioned."""
        from dr.estate.stack_secrets import reveal_application

        declared = reveal_application(self.topology, app)
        if declared is not None:
            return declared
        if app not in self.credentials.users():
            self.restore_credentials()
        return self.credentials.password(app)

    def restore_credentials(self) -> list[str]:
        """Copy the stack's generated passwords (secret output ``credentials``) into this clone's
        state where missing; the principals restored (no password)."""
        from dr.estate.stack import EstateStack

        try:
            es = EstateStack(replace(StackRef.resolve(self.topology.name), state_dir=self.state))
        except ConfigError:  # no stack file here (a topology built in memory)
            return []
        return es.restore_credentials(self.credentials)

    def stop(self, progress: Reporter = lambda _m: None) -> None:
        """Stop every local link and cluster of the topology, data kept (no JVM left behind).

        Provisioning and deleting are the stack's (:class:`dr.estate.stack.EstateStack`); this only stops
        processes, as a machine shutdown would: ``up --refresh`` starts them again.
        """
        proxy = local_endpoint(self.topology, self.state)
        if proxy is not None:
            progress("client endpoint stopping")
            proxy.stop()
        for link in self.topology.links:
            if self.topology.placement(link) is Placement.DEDICATED:
                self.mirror(link.name).stop()
        for cc in self.topology.connect_clusters:
            if cc.is_local:
                progress(f"Connect cluster {cc.name} stopping")
                self.connect(cc.name).stop()
        for c in self.topology.clusters:
            if c.is_local:
                progress(f"cluster {c.name} stopping")
                self.local_cluster(c.name).stop()

    def status(self) -> EstateStatus:
        """Roles, process state and link lag — what ``drctl estate status`` prints."""
        clusters: list[ClusterStatus] = []
        for c in self.topology.clusters:
            cluster: ClusterStatus = {"name": c.name, "role": c.role.value, "kind": c.kind.value}
            if c.is_local:
                lc = self.local_cluster(c.name)
                cluster |= {
                    "state": lc.state(),
                    "bootstrap": lc.bootstrap,
                    "brokers": c.brokers,
                    "running_nodes": lc.running_nodes(),
                }
            else:
                cluster["bootstrap"] = c.bootstrap_servers
            clusters.append(cluster)
        links: list[LinkStatus] = []
        declared = [t.name for t in self.topology.topics]
        for link in self.topology.links:
            topics = [t.name for t in topics_on(self.topology, self.topology.cluster(link.source))] or declared
            entry: LinkStatus = {"name": link.name, "source": link.source, "target": link.target}
            try:
                runner = self.link_runner(link.name)
                failure = runner.failure()
                entry["process"] = "task dead" if failure else ("running" if runner.alive() else "stopped")
                if failure:
                    entry["failure"] = failure
                if self.topology.placement(link) is Placement.CONNECT:
                    entry["connect"] = link.connect
                    entry["connectors"] = runner.states()
                if (stored := self.copied_positions(link.name)) is not None:  # ends count commit markers
                    source = self.endpoint(link.source)
                    lag = uncopied(source, end_offsets(source, topics), stored())
                else:  # a dedicated runner knows its topic naming (<source>.<topic> over a prefixed link)
                    lag = runner.lag(topics)
                entry["lag"] = {f"{t}-{p}": v for (t, p), v in sorted(lag.items())}
                entry["total_lag"] = sum(lag.values())
            except (ClusterError, ConfigError) as exc:
                entry["error"] = str(exc).splitlines()[0]
            links.append(entry)
        out: EstateStatus = {"stack": self.topology.name, "clusters": clusters, "links": links}
        if self.topology.endpoint is not None:  # only then: the status of estates without one is unchanged
            out["endpoint"] = self.endpoint_status()
        return out

    def endpoint_status(self) -> EndpointStatus:
        """The client endpoint: its bootstrap address, whether its proxy runs, where it points, the active
        cluster (where it should point)."""
        e = self.topology.endpoint
        if e is None:
            return {}
        out: EndpointStatus = {"bootstrap": e.bootstrap}
        proxy = local_endpoint(self.topology, self.state)
        if proxy is not None:
            out["proxy"] = "running" if proxy.alive() else "stopped"
        try:
            out["points_at"] = endpoint_pointing(self.topology, self.state)
        except DRError as exc:
            out["error"] = exc.problem
        out["active"] = self.topology.active().name
        return out


def resolve_endpoint(stack: StackRef, cluster_name: str, user: str = ADMIN_USER) -> Endpoint:
    """Bootstrap and credentials of ``cluster_name`` in ``stack`` (used by ``drctl verify``)."""
    return Estate.for_stack(stack).endpoint(cluster_name, user)


def application_acls(topology: Topology, role: Role) -> list[AclBinding]:
    """The application principals' ACL bindings on a cluster of ``role`` (the rules of
    :func:`dr.topology.access.application_rules`, as admin-API bindings)."""
    return acl_bindings(application_rules(topology, role))


def acl_bindings(rules: Iterable[AclRule]) -> list[AclBinding]:
    """ACL rules of :mod:`dr.topology.access` as admin-API bindings (sorted)."""
    kinds = {
        "Topic": ResourceType.TOPIC,
        "Group": ResourceType.GROUP,
        "Cluster": ResourceType.BROKER,
        "TransactionalID": ResourceType.TRANSACTIONAL_ID,
    }
    return [
        acl(
            r.principal,
            kinds[r.resource_type],
            r.resource_name,
            AclOperation[_snake(r.operation)],
            ResourcePatternType[r.pattern.upper()],
        )
        for r in sorted(rules)
    ]


def _snake(name: str) -> str:
    return "".join(f"_{ch}" if ch.isupper() and i else ch for i, ch in enumerate(name)).upper()
