"""An existing Kafka estate, started OUTSIDE the product, as a platform team runs one.

Plain ``java -cp ... kafka.Kafka`` KRaft nodes and one plain ``ConnectDistributed`` worker from the
cached Maven jars, configured as the docs' "What the platform team prepares" (docs/production/prepare.md)
tells a platform team: a SCRAM
client listener with the standard ACL authorizer and an ``admin`` super-user whose password the
team chose, and a Connect worker with ``connector.client.config.override.policy=All`` and a
``FileConfigProvider`` whose file holds the replicator's credentials. Nothing of ``dr.runtime`` is
used: the product only ever sees bootstrap servers, a Connect URL and secrets.

Kept small for a 2-core machine: A, B and C have one combined broker+controller node each; the
Connect worker is homed on C.

The client endpoint (issue 31), as "A client endpoint that follows the active cluster" (docs/production/endpoint.md)
tells the team: each broker has an ``ENDPOINT`` listener (port + 50) advertising the proxy's port of its slot, and
:class:`TeamProxy` is an HAProxy the team configured by hand, its runtime API on a TCP port.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dr.base.toolchain import toolchain
from dr.runtime.process import pid_alive, wait_until
from tests import processes

_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _write(path: Path, props: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())


def stop_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM ``proc``'s process group, then SIGKILL after 20 s; None, for the caller's handle."""
    stop_groups([proc])


def stop_groups(procs: list[subprocess.Popen[bytes] | None]) -> None:
    """SIGTERM every live process group of ``procs`` at once, then wait for each (SIGKILL after 20 s):
    independent clusters shut down side by side, not one after the other."""
    live = [p for p in procs if p is not None and p.poll() is None]
    for proc in live:
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for proc in live:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@dataclass
class Broker:
    """One cluster of the estate: a single KRaft node (broker + controller)."""

    name: str
    port: int
    root: Path
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    broker_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    proc: subprocess.Popen[bytes] | None = None
    advertised: str | None = None
    """``host:port`` the ``ENDPOINT`` listener advertises (the proxy's slot 1), or no such listener."""
    jvm_options: list[str] = field(default_factory=list)
    """More JVM options of the node (e.g. a system property the team sets)."""

    @property
    def bootstrap(self) -> str:
        """The client listener (SASL_PLAINTEXT, SCRAM-SHA-512)."""
        return f"127.0.0.1:{self.port}"

    @property
    def dir(self) -> Path:
        """Config, data and log of the node."""
        return self.root / self.name

    def properties(self) -> dict[str, str]:
        """server.properties as the platform team writes it."""
        p = self.port
        plain = f'{_PLAIN} required username="broker" password="{self.broker_password}" user_broker="{self.broker_password}";'
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{p + 40}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"CLIENT://127.0.0.1:{p},INTERNAL://127.0.0.1:{p + 20},CONTROLLER://127.0.0.1:{p + 40}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{p},INTERNAL://127.0.0.1:{p + 20}",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.client.scram-sha-512.sasl.jaas.config": f"{_SCRAM} required;",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": plain,
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
            "allow.everyone.if.no.acl.found": "false",
            "log.dirs": str(self.dir / "data"),
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        }
        if self.advertised is not None:
            props["listeners"] += f",ENDPOINT://127.0.0.1:{p + 50}"
            props["advertised.listeners"] += f",ENDPOINT://{self.advertised}"
            props["listener.security.protocol.map"] += ",ENDPOINT:SASL_PLAINTEXT"
            props["listener.name.endpoint.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            props["listener.name.endpoint.scram-sha-512.sasl.jaas.config"] = f"{_SCRAM} required;"
        return props

    def format(self, java: str, lib: Path) -> None:
        """``kafka-storage format`` with the admin's SCRAM credential (once)."""
        config = self.dir / "server.properties"
        _write(config, self.properties())
        if (self.dir / "data" / "meta.properties").exists():
            return
        cid = processes.run(
            [java, "-cp", f"{lib}/*", "kafka.tools.StorageTool", "random-uuid"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        processes.run(
            [
                java,
                "-Xmx256m",
                "-cp",
                f"{lib}/*",
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cid,
                "-c",
                str(config),
                "--add-scram",
                f"SCRAM-SHA-512=[name=admin,password={self.admin_password}]",
            ],
            capture_output=True,
            check=True,
            timeout=120,
        )

    def start(self, java: str, lib: Path) -> None:
        """``java -cp 'lib/*' kafka.Kafka server.properties``, until the client port answers."""
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                java,
                "-Xms128m",
                "-Xmx320m",
                *self.jvm_options,
                "-cp",
                f"{lib}/*",
                "kafka.Kafka",
                str(self.dir / "server.properties"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        # a bound on a hang, not an aim: three JVMs starting side by side on a loaded 2-core machine take minutes
        deadline = time.monotonic() + 300
        while not _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker {self.name} did not start; see {self.dir / 'server.log'}")
            time.sleep(0.3)

    def restart(self) -> None:
        """Start the node again with its data (after :meth:`kill`)."""
        tc = toolchain()
        self.start(tc.java, tc.kafka_lib)

    def kill(self) -> None:
        """SIGKILL the node (the data stays)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        self.proc = stop_group(self.proc)


@dataclass
class Worker:
    """One plain distributed Connect worker, its group and internal topics on ``home``."""

    name: str
    port: int
    home: Broker
    root: Path
    replicator_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    proc: subprocess.Popen[bytes] | None = None
    jvm_options: list[str] = field(default_factory=list)
    """More JVM options of the worker (e.g. a system property the team sets)."""

    @property
    def url(self) -> str:
        """The REST API."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def secrets_file(self) -> Path:
        """Where the platform team put the replicator's credentials (the stack declares this path)."""
        return self.root / "connect-secrets" / "replicator.properties"

    def properties(self) -> dict[str, str]:
        """connect-distributed.properties as docs/production/prepare.md tells a platform team."""
        jaas = f'{_SCRAM} required username="admin" password="{self.home.admin_password}";'
        client = {
            "bootstrap.servers": self.home.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
        }
        props = {
            **client,
            "group.id": f"connect-{self.name}",
            "config.storage.topic": f"connect-{self.name}-configs",
            "offset.storage.topic": f"connect-{self.name}-offsets",
            "status.storage.topic": f"connect-{self.name}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "3",
            "status.storage.partitions": "1",
            "key.converter": _BYTES,
            "value.converter": _BYTES,
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "offset.flush.interval.ms": "1000",
            "scheduled.rebalance.max.delay.ms": "5000",
            # docs/production/prepare.md: what the product needs from a Connect worker
            "config.providers": "file",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "config.providers.file.param.allowed.paths": str(self.secrets_file.parent),
            "connector.client.config.override.policy": "All",
            "plugin.discovery": "service_load",
        }
        for prefix in ("producer.", "consumer.", "admin."):
            props.update({prefix + k: v for k, v in client.items()})
        return props

    def write_secrets(self, username: str = "replicator") -> None:
        """The replicator's credentials file (0600 in a 0700 directory)."""
        self.secrets_file.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.secrets_file.parent, 0o700)
        _write(self.secrets_file, {"username": username, "password": self.replicator_password})

    def start(self, java: str, lib: Path) -> None:
        """``java -cp 'mm2/*' org.apache.kafka.connect.cli.ConnectDistributed worker.properties``."""
        d = self.root / f"connect-{self.name}"
        _write(d / "worker.properties", self.properties())
        log = open(d / "worker.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                java,
                "-Xms128m",
                "-Xmx512m",
                *self.jvm_options,
                "-cp",
                f"{lib}/*",
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(d / "worker.properties"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        import urllib.request

        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/connectors", timeout=2) as r:  # noqa: S310 - 127.0.0.1
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Connect worker did not start; see {d / 'worker.log'}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        self.proc = stop_group(self.proc)


@dataclass
class TeamProxy:
    """The platform team's HAProxy in front of the clusters' ENDPOINT listeners: frontends
    ``kdr_bootstrap`` and ``kdr_slot1``, one server per cluster in each backend (``<cluster>_1`` and
    ``<cluster>``), only ``active``'s enabled; the runtime API on ``127.0.0.1:<api>``."""

    port: int
    """The bootstrap port; slot 1 is ``port + 1``, the runtime API ``port + 2``."""
    root: Path
    pid_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.pid_file = self.root / "team-haproxy" / "haproxy.pid"

    @property
    def api(self) -> str:
        """Where the runtime API answers (the stack's ``runtimeApi``)."""
        return f"127.0.0.1:{self.port + 2}"

    def start(self, clusters: dict[str, Broker], active: str) -> None:
        """Write the configuration and start HAProxy (daemon), pointing at ``active``."""
        from dr.base.toolchain import haproxy

        def server(name: str, b: Broker) -> str:
            return f"127.0.0.1:{b.port + 50}" + ("" if b.name == active else " disabled")

        lines = ["global", f"    stats socket ipv4@{self.api} level admin", "defaults", "    mode tcp"]
        lines += ["    timeout connect 3s", "    timeout client 1h", "    timeout server 1h"]
        for front, port, fmt in (("kdr_bootstrap", self.port, "{}_1"), ("kdr_slot1", self.port + 1, "{}")):
            lines += [f"frontend {front}", f"    bind 127.0.0.1:{port}", f"    default_backend {front}"]
            lines += [f"backend {front}"] + [f"    server {fmt.format(n)} {server(n, b)}" for n, b in clusters.items()]
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        config = self.pid_file.parent / "haproxy.cfg"
        config.write_text("\n".join(lines) + "\n")
        tool = haproxy()
        cmd = [str(tool.binary), "-D", "-p", str(self.pid_file), "-f", str(config)]
        processes.run(cmd, env=tool.env(), check=True, timeout=15, capture_output=True)
        deadline = time.monotonic() + 15
        while not _listening(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the team's HAProxy did not start ({config})")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM the proxy (it is gone when its pid file names no live process). A zombie counts as gone: the
        daemon's parent exited, so it is re-parented to the pytest process (a child subreaper, tests/processes.py),
        which reaps it later — ``kill(pid, 0)`` alone kept answering for it and waited out the whole 10 s."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        try:
            os.kill(pid, signal.SIGTERM)
            if not wait_until(lambda: not pid_alive(pid), 10):
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.pid_file.unlink(missing_ok=True)


@dataclass
class ExistingEstate:
    """A, B, C (one node each) and a Connect worker homed on C, started by hand.

    The worker keeps its group and internal topics on C, the cluster that survives both failovers
    the tests run (A→B→C planned, then B→C unplanned with B killed)."""

    root: Path
    ports: tuple[int, int, int]
    endpoint: bool = False
    """Also the client endpoint: ENDPOINT listeners and the team's proxy (:class:`TeamProxy`)."""
    clusters: dict[str, Broker] = field(init=False)
    connect: Worker = field(init=False)
    proxy: TeamProxy = field(init=False)

    def __post_init__(self) -> None:
        self.proxy = TeamProxy(self.ports[0] + 70, self.root)
        endpoint = f"127.0.0.1:{self.proxy.port + 1}" if self.endpoint else None
        self.clusters = {
            n: Broker(n, p, self.root, advertised=endpoint) for n, p in zip("ABC", self.ports, strict=True)
        }
        self.connect = Worker("platform", self.ports[2] + 60, self.clusters["C"], self.root)

    def start(self) -> None:
        """Format and start the three clusters, then the Connect worker."""
        tc = toolchain()
        # the three clusters are independent: formatted and started side by side, each until it answers
        with ThreadPoolExecutor(len(self.clusters)) as pool:
            for done in [pool.submit(self._start_cluster, b, tc.java, tc.kafka_lib) for b in self.clusters.values()]:
                done.result()
        self.connect.write_secrets()
        self.connect.start(tc.java, tc.mm2_lib)
        if self.endpoint:
            self.proxy.start(self.clusters, "A")

    @staticmethod
    def _start_cluster(broker: Broker, java: str, lib: Path) -> None:
        broker.format(java, lib)
        broker.start(java, lib)

    def stop(self) -> None:
        """Stop everything this estate started (no process left behind)."""
        if self.endpoint:  # subclasses (mtls_estate) build no proxy
            self.proxy.stop()
        self.connect.stop()  # first: the worker's group and offsets live on C
        stop_groups([b.proc for b in self.clusters.values()])
        for b in self.clusters.values():
            b.proc = None

    def pids(self) -> list[int]:
        """Processes still running."""
        procs = [self.connect.proc, *(b.proc for b in self.clusters.values())]
        return [p.pid for p in procs if p is not None and p.poll() is None]
