"""A named local KRaft cluster of 1 or 3 brokers on 127.0.0.1 with SASL/SCRAM and ACLs.

Port layout from ``base_port`` (P), broker ids 1..N:

* client listener (SASL_PLAINTEXT, SCRAM-SHA-512; SASL_SSL with ``tls``): ``P + id - 1``
* inter-broker listener (SASL_PLAINTEXT, PLAIN as ``broker``): ``P + 20 + id - 1``
* controller listener (SASL_PLAINTEXT, PLAIN): ``P + 40`` (+ node index)
* endpoint listener, only with a client endpoint (SASL_PLAINTEXT, SCRAM-SHA-512): ``P + 60 + id - 1``,
  advertising the endpoint proxy's port of its broker slot, so clients of the proxy only learn
  the proxy's addresses (:mod:`dr.runtime.endpoint`)

A 1-broker cluster runs one combined broker+controller node. A 3-broker cluster runs a dedicated
controller (node 0) and three brokers, so killing brokers never loses the metadata quorum — the
behaviour of a production cluster whose controllers live apart from its brokers.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.base.files import write_atomic
from dr.base.java_properties import properties_text
from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint, admin_client, kafka_errors
from dr.runtime.certificates import Issued
from dr.runtime.credentials import ADMIN_USER, BROKER_USER, REPLICATOR_USER, Credentials
from dr.runtime.local_tls import broker_certificate, local_tls_files
from dr.runtime.process import (
    JvmProcess,
    argfile_text,
    ensure_ports_free,
    java_command,
    port_open,
    private_dir,
    wait_until,
)
from dr.runtime.reserved import ENDPOINT_LISTENER_OFFSET, PORT_WINDOW

CONTROLLER_OFFSET = 40
INTERNAL_OFFSET = 20
#: The broker-side lease fence (``toolchain/lease-authorizer``): Kafka's StandardAuthorizer plus a refusal of
#: application writes while the lease permit has run out.
LEASE_FENCE_AUTHORIZER = "kafkadr.fence.LeaseFenceAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: The lease permit's file name in the cluster's directory (one file: every local broker reads it).
LEASE_PERMIT_FILE = "lease-permit"


@dataclass(frozen=True)
class ClusterSpec:
    """What a local cluster looks like. ``racks`` defaults to ``rack-1..rack-N``."""

    name: str
    brokers: int = 1
    base_port: int = 19100
    racks: tuple[str, ...] = ()
    heap_mb: int = 384
    extra_config: dict[str, str] = field(default_factory=dict)
    tls: bool = False
    """Serve clients SASL_SSL with a certificate of the estate's CA (:mod:`dr.runtime.local_tls`)."""
    endpoint_ports: tuple[int, ...] = ()
    """The client endpoint's port of each broker slot (empty: no endpoint listener)."""
    endpoint_address: str = "127.0.0.1"
    """The client endpoint's address, advertised by the endpoint listener."""
    lease_fence: bool = False
    """Run the broker-side lease fence (:data:`LEASE_FENCE_AUTHORIZER`): application writes need the lease
    permit the site's controller renews (``<cluster dir>/lease-permit``); for stacks whose failover policy is
    automatic."""

    def __post_init__(self) -> None:
        if self.brokers not in (1, 3):
            raise ConfigError(
                f"cluster {self.name!r}: brokers={self.brokers}; local clusters have 1 or 3 brokers.",
                "set brokers to 1 or 3",
            )
        if self.racks and len(self.racks) != self.brokers:
            raise ConfigError(
                f"cluster {self.name!r}: {len(self.racks)} racks for {self.brokers} brokers.",
                "give exactly one rack per broker",
            )
        if not 1024 <= self.base_port <= 65535 - PORT_WINDOW:
            raise ConfigError(
                f"cluster {self.name!r}: base_port {self.base_port} out of range.",
                f"choose a base_port between 1024 and {65535 - PORT_WINDOW}",
            )

    @property
    def rack_names(self) -> tuple[str, ...]:
        """One rack name per broker."""
        return self.racks or tuple(f"rack-{i}" for i in range(1, self.brokers + 1))

    @property
    def dedicated_controller(self) -> bool:
        """True when the controller runs apart from the brokers."""
        return self.brokers > 1

    def broker_ids(self) -> list[int]:
        """Broker node ids (1..N)."""
        return list(range(1, self.brokers + 1))

    def node_ids(self) -> list[int]:
        """Every node id: 0 is the dedicated controller when there is one."""
        return ([0] if self.dedicated_controller else []) + self.broker_ids()

    def client_port(self, broker_id: int) -> int:
        """The SCRAM client listener of a broker."""
        return self.base_port + broker_id - 1

    def internal_port(self, broker_id: int) -> int:
        """The inter-broker listener of a broker."""
        return self.base_port + INTERNAL_OFFSET + broker_id - 1

    def endpoint_listener_port(self, broker_id: int) -> int:
        """The listener of a broker behind the client endpoint's proxy."""
        return self.base_port + ENDPOINT_LISTENER_OFFSET + broker_id - 1

    def controller_port(self) -> int:
        """The (single) controller listener."""
        return self.base_port + CONTROLLER_OFFSET

    def controller_id(self) -> int:
        """Node id of the controller voter."""
        return 0 if self.dedicated_controller else 1

    def ports(self) -> list[int]:
        """Every port the cluster binds."""
        ports = [self.controller_port()]
        for b in self.broker_ids():
            ports += [self.client_port(b), self.internal_port(b)]
            if self.endpoint_ports:
                ports.append(self.endpoint_listener_port(b))
        return ports

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers for clients."""
        return ",".join(f"127.0.0.1:{self.client_port(b)}" for b in self.broker_ids())


def kafka_uuid() -> str:
    """A Kafka cluster id (url-safe base64 of 16 random bytes, never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _plain_jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{BROKER_USER}" password="{password}" user_{BROKER_USER}="{password}";'
    )


def server_properties(
    spec: ClusterSpec,
    node_id: int,
    data_dir: Path,
    broker_password: str,
    certificate: Issued | None = None,
    permit_file: Path | None = None,
) -> dict[str, str]:
    """The broker/controller configuration of one node (pure; tested without a JVM). ``certificate``: the
    brokers' TLS certificate and key when ``spec.tls`` (the client listener is then SASL_SSL; inter-broker
    and controller traffic stays SASL_PLAINTEXT on 127.0.0.1). ``permit_file``: the lease permit the
    broker-side fence reads when ``spec.lease_fence``."""
    is_broker = node_id in spec.broker_ids()
    is_controller = node_id == spec.controller_id()
    roles = [r for r, yes in (("broker", is_broker), ("controller", is_controller)) if yes]
    n = spec.brokers
    listeners, advertised = [], []
    if is_broker:
        listeners += [
            f"CLIENT://127.0.0.1:{spec.client_port(node_id)}",
            f"INTERNAL://127.0.0.1:{spec.internal_port(node_id)}",
        ]
        advertised = list(listeners)
        if spec.endpoint_ports:
            listeners.append(f"ENDPOINT://127.0.0.1:{spec.endpoint_listener_port(node_id)}")
            advertised.append(f"ENDPOINT://{spec.endpoint_address}:{spec.endpoint_ports[node_id - 1]}")
    if is_controller:
        listeners.append(f"CONTROLLER://127.0.0.1:{spec.controller_port()}")
    jaas = _plain_jaas(broker_password)
    props = {
        "process.roles": ",".join(roles),
        "node.id": str(node_id),
        "controller.quorum.voters": f"{spec.controller_id()}@127.0.0.1:{spec.controller_port()}",
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": f"CLIENT:{'SASL_SSL' if spec.tls else 'SASL_PLAINTEXT'},"
        "INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
        + (",ENDPOINT:SASL_PLAINTEXT" if spec.endpoint_ports else ""),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        "allow.everyone.if.no.acl.found": "false",
        "log.dirs": str(data_dir),
        "auto.create.topics.enable": "false",
        "unclean.leader.election.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.replica.fetchers": "1",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        "replica.lag.time.max.ms": "5000",
        # Fence a dead broker after 6 s (default 9 s): faster ISR shrink and leader moves.
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "offsets.topic.replication.factor": str(min(3, n)),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(min(3, n)),
        "transaction.state.log.min.isr": str(min(2, n)),
        "transaction.state.log.num.partitions": "5",
        "default.replication.factor": str(min(3, n)),
        "min.insync.replicas": "1",
        "share.coordinator.state.topic.replication.factor": str(min(3, n)),
        "share.coordinator.state.topic.min.isr": str(min(2, n)),
    }
    if is_broker:
        props.update(
            {
                "advertised.listeners": ",".join(advertised),
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.client.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "listener.name.endpoint.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.endpoint.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": jaas,
                "broker.rack": spec.rack_names[node_id - 1],
            }
        )
        if spec.tls:
            if certificate is None:
                raise ConfigError(f"cluster {spec.name!r} runs TLS but no certificate was made for it.", "report this")
            # Inline PEM (this file is 0600 and holds passwords already): a PEM keystore *file* would need
            # an encrypted key and its password.
            props.update(
                {
                    "listener.name.client.ssl.keystore.type": "PEM",
                    "listener.name.client.ssl.keystore.certificate.chain": certificate.certificate_pem.decode(),
                    "listener.name.client.ssl.keystore.key": certificate.key_pem.decode(),
                }
            )
    if spec.lease_fence:
        if permit_file is None:
            raise ConfigError(f"cluster {spec.name!r} runs the lease fence but has no permit file.", "report this")
        props.update(
            {
                "authorizer.class.name": LEASE_FENCE_AUTHORIZER,
                "kdr.lease.permit.file": str(permit_file),
                # MirrorMaker 2 keeps writing (its offset syncs and heartbeats) whatever the lease
                "kdr.lease.exempt.principals": f"User:{REPLICATOR_USER}",
            }
        )
    props.update(spec.extra_config)
    return props


STORAGE_TOOL = "kafka.tools.StorageTool"


def format_argfile(cluster_id: str, config: Path, admin_password: str) -> str:
    """The storage format's main class and arguments as a Java argument file (pure; holds the admin
    password: written 0600, never put on a command line)."""
    return argfile_text(
        [
            STORAGE_TOOL,
            "format",
            "-t",
            cluster_id,
            "-c",
            str(config),
            "--ignore-formatted",
            "--add-scram",
            f"SCRAM-SHA-512=[name={ADMIN_USER},password={admin_password}]",
        ]
    )


def format_command(java: str, kafka_lib: Path, args_file: Path, *, crash_dir: Path) -> list[str]:
    """The storage format's command line: its arguments come from ``args_file`` (:func:`format_argfile`),
    its crash log goes to ``crash_dir`` (pure)."""
    return java_command(java, [kafka_lib], STORAGE_TOOL, [], heap_mb=256, crash_dir=crash_dir, argfile=args_file)


def write_properties(path: Path, props: dict[str, str]) -> None:
    """Write a Java properties file readable only by its owner (it holds the broker password)."""
    write_atomic(path, properties_text({key: str(value) for key, value in props.items()}))


class LocalCluster:
    """Start, stop, restart, inspect one local cluster; its data lives under ``state_dir``.

    ``state_dir`` is the estate's directory; this cluster keeps ``<state_dir>/clusters/<name>``.
    """

    def __init__(self, spec: ClusterSpec, state_dir: Path, credentials: Credentials | None = None) -> None:
        self.spec = spec
        self.state_dir = Path(state_dir)
        self.dir = self.state_dir / "clusters" / spec.name
        self.credentials = credentials or Credentials(self.state_dir)
        self._procs: dict[int, JvmProcess] = {}

    def __repr__(self) -> str:
        return f"LocalCluster({self.spec.name!r}, brokers={self.spec.brokers}, bootstrap={self.bootstrap!r})"

    # ----------------------------------------------------------------- addressing
    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.spec.name

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers (client listeners)."""
        return self.spec.bootstrap

    def endpoint(self, user: str = ADMIN_USER) -> Endpoint:
        """How to reach this cluster as ``user`` (its password from the estate credentials)."""
        return self.endpoint_as(user, self.credentials.password(user))

    def endpoint_as(self, user: str, password: str) -> Endpoint:
        """How to reach this cluster as ``user`` with ``password`` (or a reference to it): its client
        listener's protocol, and with ``tls`` the estate's CA."""
        if self.spec.tls:
            return Endpoint(
                self.bootstrap, user, password, "SASL_SSL", tls=local_tls_files(self.state_dir), cluster=self.name
            )
        return Endpoint(self.bootstrap, user, password, cluster=self.name)

    @property
    def lease_permit_file(self) -> Path:
        """The lease permit the site's controller writes and the brokers' lease fence reads."""
        return self.dir / LEASE_PERMIT_FILE

    def node_dir(self, node_id: int) -> Path:
        """Directory of one node: config, data, pid and log."""
        return self.dir / f"node-{node_id}"

    def process(self, node_id: int) -> JvmProcess:
        """The JVM of one node."""
        if node_id not in self._procs:
            d = self.node_dir(node_id)
            self._procs[node_id] = JvmProcess(f"kafka-{self.name}-{node_id}", d / "pid", d / "server.log")
        return self._procs[node_id]

    # ----------------------------------------------------------------- lifecycle
    def _cluster_id(self) -> str:
        meta = self.dir / "cluster.json"
        if meta.exists():
            return str(json.loads(meta.read_text())["cluster_id"])
        private_dir(self.dir)
        cid = kafka_uuid()
        meta.write_text(
            json.dumps({"cluster_id": cid, "brokers": self.spec.brokers, "base_port": self.spec.base_port}, indent=2)
        )
        return cid

    def _check_shape(self) -> None:
        meta = self.dir / "cluster.json"
        if meta.exists():
            stored = json.loads(meta.read_text())
            if stored.get("brokers") != self.spec.brokers:
                raise ClusterError(
                    f"cluster {self.name!r} was created with {stored.get('brokers')} brokers; "
                    f"{self.spec.brokers} requested.",
                    "destroy it first (`drctl estate destroy`) or keep its broker count",
                )

    def _format(self, node_id: int, cluster_id: str, config: Path) -> None:
        data = self.node_dir(node_id) / "data"
        if (data / "meta.properties").exists():
            return
        tc = toolchain()
        admin_pw = self.credentials.password(ADMIN_USER)
        # The SCRAM credential is an argument of the storage tool: it goes to a 0600 argument file in
        # the cluster's 0700 directory (``ps`` shows only ``@<file>``), deleted once the format ran.
        args_file = private_dir(self.dir) / f".format-{node_id}.args"
        write_atomic(args_file, format_argfile(cluster_id, config, admin_pw))
        try:
            cmd = format_command(tc.java, tc.kafka_lib, args_file, crash_dir=self.dir)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        finally:
            args_file.unlink(missing_ok=True)
        if res.returncode != 0:
            out = (res.stdout + res.stderr).replace(admin_pw, "***")
            raise ClusterError(
                f"formatting storage of {self.name} node {node_id} failed:\n{out[-2000:]}",
                f"delete {data} if it is a half-written directory, then start again",
            )

    def _prepare_node(self, node_id: int, cluster_id: str) -> Path:
        d = self.node_dir(node_id)
        config = d / "server.properties"
        certificate = broker_certificate(self.state_dir, self.name) if self.spec.tls else None
        props = server_properties(
            self.spec, node_id, d / "data", self.credentials.password(BROKER_USER), certificate, self.lease_permit_file
        )
        write_properties(config, props)
        self._format(node_id, cluster_id, config)
        return config

    def start_node(self, node_id: int) -> None:
        """Start one node (format its storage on first start)."""
        proc = self.process(node_id)
        if proc.alive():
            return
        ports = (
            [self.spec.client_port(node_id), self.spec.internal_port(node_id)]
            if node_id in self.spec.broker_ids()
            else []
        )
        if node_id in self.spec.broker_ids() and self.spec.endpoint_ports:
            ports.append(self.spec.endpoint_listener_port(node_id))
        if node_id == self.spec.controller_id():
            ports.append(self.spec.controller_port())
        ensure_ports_free(ports, f"cluster {self.name} node {node_id}")
        config = self._prepare_node(node_id, self._cluster_id())
        tc = toolchain()
        libs = [tc.kafka_lib, *([tc.require_lease_authorizer()] if self.spec.lease_fence else [])]
        cmd = java_command(
            tc.java,
            libs,
            "kafka.Kafka",
            [str(config)],
            heap_mb=self.spec.heap_mb if node_id else 256,
            crash_dir=self.node_dir(node_id),
            extra_jvm=[
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dlog4j2.level=warn",
            ],
        )
        proc.start(cmd)

    def start(self, timeout: float = 120.0) -> float:
        """Start every node that is not running and wait until all brokers serve; return seconds."""
        t0 = time.monotonic()
        self._check_shape()
        private_dir(self.dir)
        self.credentials.password(ADMIN_USER)
        self.credentials.password(BROKER_USER)
        for node in self.spec.node_ids():
            self.start_node(node)
        self.wait_ready(timeout)
        return time.monotonic() - t0

    def wait_ready(self, timeout: float = 120.0, brokers: list[int] | None = None) -> None:
        """Wait until ``brokers`` (default all) listen and the cluster reports them; never sleeps blindly."""
        brokers = brokers or self.spec.broker_ids()
        deadline = time.monotonic() + timeout

        def all_listening() -> bool:
            for b in brokers:
                if not self.process(b).alive():
                    raise ClusterError(
                        f"{self.name} broker {b} exited during start-up:\n{self.process(b).log_tail()}",
                        f"read {self.process(b).log_file} and fix the cause, then start again",
                    )
                if not port_open(self.spec.client_port(b)):
                    return False
            return True

        if not wait_until(all_listening, timeout):
            raise ClusterError(
                f"{self.name}: brokers {brokers} did not open their ports in {timeout:.0f}s.",
                f"see the logs under {self.dir}",
            )
        endpoint = self.endpoint()
        admin = admin_client(endpoint)

        def registered() -> bool:
            try:
                with kafka_errors(f"reading the brokers of {self.name}", endpoint):
                    md = admin.list_topics(timeout=5)
            except (ClusterError, AuthError):  # still starting: a broker may refuse logins until it caught up
                return False
            return set(brokers) <= set(md.brokers)

        if not wait_until(registered, max(1.0, deadline - time.monotonic()), interval=0.2):
            raise ClusterError(
                f"{self.name}: brokers {brokers} did not register with the controller in {timeout:.0f}s.",
                f"see the logs under {self.dir}",
            )

    def stop(self, timeout: float = 60.0) -> None:
        """Controlled shutdown of brokers first, then the controller; no JVM stays behind."""
        for node in sorted(self.spec.node_ids(), key=lambda n: (n == self.spec.controller_id(), -n)):
            self.process(node).stop(timeout)

    def restart(self, timeout: float = 120.0) -> float:
        """Stop then start, keeping every message; return the start time in seconds."""
        self.stop()
        return self.start(timeout)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL one broker (a crash)."""
        self.process(broker_id).kill()

    def start_broker(self, broker_id: int, timeout: float = 120.0) -> None:
        """Bring one broker back and wait until it is registered."""
        self.start_node(broker_id)
        self.wait_ready(timeout, brokers=[broker_id])

    def kill(self) -> None:
        """SIGKILL every node (an unplanned loss of the whole cluster)."""
        for node in self.spec.node_ids():
            self.process(node).kill()

    def destroy(self) -> None:
        """Stop and delete all data of this cluster."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ----------------------------------------------------------------- inspection
    def running_nodes(self) -> list[int]:
        """Node ids whose JVM is alive."""
        return [n for n in self.spec.node_ids() if self.process(n).alive()]

    def is_running(self) -> bool:
        """True when every node is alive."""
        return len(self.running_nodes()) == len(self.spec.node_ids())

    def state(self) -> str:
        """``running``, ``degraded`` (some nodes down), ``stopped`` or ``absent`` (never created)."""
        if not self.dir.exists():
            return "absent"
        alive = self.running_nodes()
        if not alive:
            return "stopped"
        return "running" if len(alive) == len(self.spec.node_ids()) else "degraded"

    def pids(self) -> dict[int, int]:
        """node id → pid of every live node."""
        return {n: p for n in self.spec.node_ids() if (p := self.process(n).pid) is not None}
