"""A local Kafka Connect cluster in distributed mode: N workers on 127.0.0.1 around one home cluster.

The workers store their configs, offsets and statuses in the home cluster as their own principal
(:data:`CONNECT_USER`, least privilege: its group and its three internal topics). Connectors bring
their own clients: the MirrorMaker 2 connectors of :func:`stacks.links.connect_config.connector_configs`
read and write as the replicator, whose credentials the workers resolve from a 0600 secrets file
through Connect's ``FileConfigProvider`` — the connector configs only reference it.

The REST API listens on 127.0.0.1 and asks for HTTP basic auth (Connect's
``BasicAuthSecurityRestExtension``, user :data:`CONNECT_REST_USER`, password in the estate's
credentials).

Layout under ``<state_dir>/connect/<name>/``: ``worker-<i>/`` (properties, log, pid),
``secrets/replicator.properties`` and ``rest/`` (JAAS file and the REST password file).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, ResourceType

from dr.base.errors import ClusterError, ConfigError, DRError
from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint, acl, create_acls, upsert_scram_users
from dr.kafka.connect_rest import ConnectRest
from dr.runtime.cluster import LocalCluster, write_properties
from dr.runtime.credentials import REPLICATOR_USER, Credentials
from dr.runtime.process import (
    JvmProcess,
    ensure_ports_free,
    fatal_cause,
    java_command,
    last_exception,
    private_dir,
    wait_until,
)
from dr.runtime.reserved import CONNECT_USER

#: The workers' own Kafka principal on their home cluster.
#: The user of the workers' REST API (HTTP basic auth; not a Kafka principal).
CONNECT_REST_USER = "connect-rest"
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
_LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
_BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class ConnectSpec:
    """A Connect cluster: its name, how many workers, and the REST port of worker 0 (``base_port``,
    keyword only; worker ``i`` listens on ``base_port + i``)."""

    name: str
    workers: int = 2
    base_port: int = field(kw_only=True)
    heap_mb: int = field(default=768, kw_only=True)
    exactly_once: bool = field(default=False, kw_only=True)
    """The workers run with ``exactly.once.source.support=enabled``: every source task then writes in
    transactions (KIP-618), and a connector may require it."""
    """JVM heap per worker. Each MirrorSourceConnector task holds a consumer's fetch buffers and a
    producer's buffer: 384 MB ran out of heap with 6 tasks copying a 1M-record backlog."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"Connect cluster name {self.name!r} is not valid (it names a group and topics).",
                "use 1-64 characters from [A-Za-z0-9._-]",
            )
        if not isinstance(self.workers, int) or not 1 <= self.workers <= 16:
            raise ConfigError(f"Connect cluster {self.name!r}: workers={self.workers!r}.", "use 1 to 16 workers")
        if not isinstance(self.base_port, int) or not 1024 <= self.base_port <= 65535 - self.workers:
            raise ConfigError(
                f"Connect cluster {self.name!r}: base_port {self.base_port!r} is missing or out of range.",
                f"choose a base_port between 1024 and {65535 - self.workers}",
            )

    @property
    def group_id(self) -> str:
        """The workers' group: ``connect-<name>``."""
        return f"connect-{self.name}"

    @property
    def topics(self) -> dict[str, str]:
        """The internal topics by role: ``configs``, ``offsets``, ``status``."""
        return worker_topics(self.name)

    def port(self, i: int) -> int:
        """The REST port of worker ``i``."""
        return self.base_port + i

    def ports(self) -> list[int]:
        """Every REST port of the cluster."""
        return [self.port(i) for i in range(self.workers)]


#: What :data:`CONNECT_USER` may do on its three internal topics (literal names), on its group, and on the
#: cluster — and nothing else (no Delete, no other topic): the Pulumi program grants the same
#: (:func:`dr.topology.access.connect_rules`).
WORKER_TOPIC_OPERATIONS = ("Create", "Read", "Write", "Describe", "DescribeConfigs")
WORKER_GROUP_OPERATIONS = ("Read", "Describe")
WORKER_CLUSTER_OPERATIONS = ("Describe",)
_OPERATION = {
    "Create": AclOperation.CREATE,
    "Read": AclOperation.READ,
    "Write": AclOperation.WRITE,
    "Describe": AclOperation.DESCRIBE,
    "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
}


def worker_transactional_id(name: str) -> str:
    """The transactional id with which the leader of Connect cluster ``name`` writes its config topic under
    exactly-once source support: ``connect-cluster-<group>`` (Connect's naming)."""
    return f"connect-cluster-connect-{name}"


def worker_topics(name: str) -> dict[str, str]:
    """The internal topics of Connect cluster ``name`` by role: ``connect-<name>-configs|offsets|status``."""
    return {kind: f"connect-{name}-{kind}" for kind in ("configs", "offsets", "status")}


def connect_acls(spec: ConnectSpec) -> list[AclBinding]:
    """What :data:`CONNECT_USER` may do on the home cluster: its group, its internal topics, describe, and
    with exactly-once source support, its leader's transactional id (:func:`worker_transactional_id`)."""
    u = CONNECT_USER
    bindings = [acl(u, ResourceType.GROUP, spec.group_id, _OPERATION[op]) for op in WORKER_GROUP_OPERATIONS]
    for topic in spec.topics.values():
        bindings += [acl(u, ResourceType.TOPIC, topic, _OPERATION[op]) for op in WORKER_TOPIC_OPERATIONS]
    bindings += [acl(u, ResourceType.BROKER, "kafka-cluster", _OPERATION[op]) for op in WORKER_CLUSTER_OPERATIONS]
    if spec.exactly_once:
        bindings.append(acl(u, ResourceType.TRANSACTIONAL_ID, worker_transactional_id(spec.name), AclOperation.WRITE))
    return bindings


def worker_properties(
    spec: ConnectSpec, i: int, home: Endpoint, home_brokers: int, secrets_dir: Path, rest_auth: bool = True
) -> dict[str, str]:
    """The configuration of worker ``i`` (pure; holds the worker's password)."""
    rf = str(min(3, home_brokers))
    client = home.java_config()
    props = {
        **client,
        "group.id": spec.group_id,
        "config.storage.topic": spec.topics["configs"],
        "offset.storage.topic": spec.topics["offsets"],
        "status.storage.topic": spec.topics["status"],
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "offset.storage.partitions": "5",
        "status.storage.partitions": "3",
        "key.converter": _BYTES,
        "value.converter": _BYTES,
        "header.converter": _BYTES,
        "listeners": f"http://127.0.0.1:{spec.port(i)}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(spec.port(i)),
        "rest.advertised.listener": "http",
        # Tasks of a lost worker move after the session times out plus this delay.
        "scheduled.rebalance.max.delay.ms": "5000",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1500",
        "offset.flush.interval.ms": "1000",
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets_dir),
        # Connectors send their records with producer.override.* as the replicator to their target.
        "connector.client.config.override.policy": "All",
        "topic.creation.enable": "false",
        # Plugins come from the classpath and all carry ServiceLoader manifests: no slow class scan.
        "plugin.discovery": "service_load",
    }
    for prefix in ("producer.", "consumer.", "admin."):
        props.update({prefix + k: v for k, v in client.items()})
    if spec.exactly_once:
        # Source tasks commit their records and source offsets in one transaction (KIP-618): a link that
        # asks for exactly-once (exactly.once.support=required) runs here.
        props["exactly.once.source.support"] = "enabled"
    if rest_auth:
        props["rest.extension.classes"] = BASIC_AUTH_EXTENSION
    return props


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


class LocalConnectCluster:
    """Start, stop, kill and inspect the workers of one local Connect cluster whose home is ``home``."""

    def __init__(
        self, spec: ConnectSpec, home: LocalCluster, state_dir: Path, credentials: Credentials | None = None
    ) -> None:
        self.spec = spec
        self.home = home
        self.state_dir = Path(state_dir)
        self.dir = self.state_dir / "connect" / spec.name
        self.credentials = credentials or home.credentials
        self._procs = [
            JvmProcess(f"connect-{spec.name}-{i}", self.worker_dir(i) / "pid", self.worker_dir(i) / "worker.log")
            for i in range(spec.workers)
        ]

    def __repr__(self) -> str:
        return f"LocalConnectCluster({self.spec.name!r}, workers={self.spec.workers}, home={self.home.name!r})"

    # ----------------------------------------------------------------- addressing
    @property
    def name(self) -> str:
        """The Connect cluster's name."""
        return self.spec.name

    @property
    def urls(self) -> list[str]:
        """The REST URL of every worker."""
        return [f"http://127.0.0.1:{p}" for p in self.spec.ports()]

    @property
    def url(self) -> str:
        """The REST URL of worker 0."""
        return self.urls[0]

    def worker_dir(self, i: int) -> Path:
        """Directory of worker ``i``: properties, log and pid."""
        return self.dir / f"worker-{i}"

    def process(self, i: int) -> JvmProcess:
        """The JVM of worker ``i``."""
        if not 0 <= i < self.spec.workers:
            raise ConfigError(f"Connect cluster {self.name!r} has no worker {i}.", f"use 0..{self.spec.workers - 1}")
        return self._procs[i]

    def rest(self, timeout: float = 10.0) -> ConnectRest:
        """A REST client that tries the live workers first (then the others)."""
        alive = self.alive_workers()
        order = alive + [i for i in range(self.spec.workers) if i not in alive]
        urls = [self.urls[i] for i in order]
        return ConnectRest(
            urls[0],
            username=CONNECT_REST_USER,
            password=self.credentials.password(CONNECT_REST_USER),
            timeout=timeout,
            fallback_urls=urls[1:],
        )

    # ----------------------------------------------------------------- access
    def grant(self) -> None:
        """Create :data:`CONNECT_USER` on the home cluster with its ACLs (idempotent)."""
        admin = self.home.endpoint()
        upsert_scram_users(admin, {CONNECT_USER: self.credentials.password(CONNECT_USER)})
        create_acls(admin, connect_acls(self.spec))

    def secrets_file(self) -> Path:
        """The replicator's credentials the connector configs reference (``${file:<path>:password}``)."""
        return self.dir / "secrets" / "replicator.properties"

    def write_secrets(self) -> Path:
        """Write :meth:`secrets_file` (0600 in a 0700 directory) from the estate's credentials."""
        path = self.secrets_file()
        write_properties(path, {"username": REPLICATOR_USER, "password": self.credentials.password(REPLICATOR_USER)})
        os.chmod(path.parent, 0o700)
        return path

    def _write_rest_auth(self) -> Path:
        """The JAAS file of the REST basic-auth extension and the password file it names."""
        rest = self.dir / "rest"
        users = rest / "users.properties"
        write_properties(users, {CONNECT_REST_USER: self.credentials.password(CONNECT_REST_USER)})
        jaas = rest / "jaas.conf"
        quoted = str(users).replace("\\", "\\\\").replace('"', '\\"')
        _write_private(jaas, f'KafkaConnect {{\n  {_LOGIN_MODULE} required\n  file="{quoted}";\n}};\n')
        return jaas

    # ----------------------------------------------------------------- lifecycle
    def _launch(self, i: int, jaas: Path) -> None:
        proc = self.process(i)
        if proc.alive():
            return
        ensure_ports_free([self.spec.port(i)], f"Connect cluster {self.name} worker {i}")
        config = self.worker_dir(i) / "worker.properties"
        home = self.home.endpoint(CONNECT_USER)
        write_properties(
            config, worker_properties(self.spec, i, home, self.home.spec.brokers, self.secrets_file().parent)
        )
        tc = toolchain()
        cmd = java_command(
            tc.java,
            [tc.mm2_lib, tc.require_connect_auth()],
            "org.apache.kafka.connect.cli.ConnectDistributed",
            [str(config)],
            heap_mb=self.spec.heap_mb,
            crash_dir=self.worker_dir(i),
            extra_jvm=[
                f"-Djava.security.auth.login.config={jaas}",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients=warn",
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common=warn",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dlog4j2.level=warn",
            ],
        )
        proc.start(cmd)

    def _prepare(self) -> Path:
        private_dir(self.dir)
        self.write_secrets()
        return self._write_rest_auth()

    def start(self, timeout: float = 120.0) -> float:
        """Start every worker that is not running; wait until each answers REST and has joined
        the group. Returns seconds. Ports are checked first (:class:`PortInUse`)."""
        t0 = time.monotonic()
        down = [i for i in range(self.spec.workers) if not self.process(i).alive()]
        ensure_ports_free([self.spec.port(i) for i in down], f"Connect cluster {self.name}")
        jaas = self._prepare()
        log_starts = {i: self.process(i).log_size() for i in down}
        for i in down:
            self._launch(i, jaas)
        self._wait_members(list(range(self.spec.workers)), timeout, log_starts)
        return time.monotonic() - t0

    def start_worker(self, i: int, timeout: float = 120.0) -> float:
        """Start worker ``i`` (if down) and wait until it has joined the group; return seconds."""
        t0 = time.monotonic()
        log_starts = {i: self.process(i).log_size()}
        self._launch(i, self._prepare())
        self._wait_members([i], timeout, log_starts)
        return time.monotonic() - t0

    def _wait_members(self, workers: list[int], timeout: float, log_starts: dict[int, int] | None = None) -> None:
        log_starts = log_starts or {}
        password = self.credentials.password(CONNECT_REST_USER)
        clients = {
            i: ConnectRest(self.urls[i], username=CONNECT_REST_USER, password=password, timeout=5) for i in workers
        }
        last: dict[int, str] = {}

        def joined() -> bool:
            for i in workers:
                proc = self.process(i)
                text = proc.log_since(log_starts.get(i, 0))
                cause = fatal_cause(text, connectors=False)
                if cause is None and not proc.alive():
                    text = proc.log_since(log_starts.get(i, 0))
                    cause = fatal_cause(text, connectors=False) or last_exception(text) or "no exception in its log"
                    raise ClusterError(
                        f"Connect cluster {self.name} worker {i} exited during start-up: {cause}",
                        f"fix the cause; the whole log is {proc.log_file}",
                    )
                if cause is not None:
                    raise ClusterError(
                        f"Connect cluster {self.name} worker {i} failed to start: {cause}",
                        f"fix the cause; the whole log is {proc.log_file}",
                    )
                try:
                    clients[i].info()
                    # Served only once the worker holds an assignment, i.e. the group has formed.
                    clients[i].connectors()
                except DRError as exc:
                    if "HTTP 401" in str(exc) or "HTTP 403" in str(exc):
                        raise
                    last[i] = exc.problem
                    return False
            return True

        if not wait_until(joined, timeout, interval=0.25):
            why = "; ".join(f"worker {i}: {p}" for i, p in last.items())
            raise ClusterError(
                f"Connect cluster {self.name}: workers {workers} did not join group "
                f"{self.spec.group_id} in {timeout:.0f}s ({why}).",
                f"read the worker logs under {self.dir}",
            )

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` (a crash: it does not leave the group)."""
        self.process(i).kill()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every worker (in parallel); no JVM is left."""
        threads = [threading.Thread(target=self.process(i).stop, args=(timeout,)) for i in range(self.spec.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        left = self.alive_workers()
        if left:
            raise ClusterError(
                f"Connect cluster {self.name}: workers {left} are still running.", "check the machine's process table"
            )

    def destroy(self) -> None:
        """Stop the workers and delete the cluster's state directory (its topics stay on the home cluster)."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ----------------------------------------------------------------- inspection
    def alive_workers(self) -> list[int]:
        """Indexes of the workers whose JVM runs."""
        return [i for i in range(self.spec.workers) if self.process(i).alive()]

    def alive(self) -> bool:
        """True when every worker runs."""
        return len(self.alive_workers()) == self.spec.workers

    def worker_id(self, i: int) -> str:
        """How Connect's status names worker ``i`` (``127.0.0.1:<port>``)."""
        return f"127.0.0.1:{self.spec.port(i)}"
