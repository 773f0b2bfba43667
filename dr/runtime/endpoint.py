"""The client endpoint's proxy: Debian's HAProxy in TCP mode in front of each cluster's endpoint listener.

One frontend per port: ``kdr_bootstrap`` (the bootstrap port: any broker of the active cluster) and
``kdr_slot<i>`` (broker slot ``i``: broker id ``i`` of the active cluster). Each backend of the same
name holds one server per cluster, named after it; only the active cluster's server is ``ready``, the
others are in ``maint``. A switch goes through HAProxy's runtime API (a unix socket, or ``host:port``
for a proxy the platform team runs), without a restart: the old cluster's servers to ``maint``, the
new one's to ``ready``, then ``shutdown sessions`` on the old ones, so a connected client is cut off
from the old cluster at once and reconnects through the same addresses to the new one.

TCP mode passes SASL through: the brokers authenticate the clients, the proxy sees bytes only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dr.base.errors import ClusterError, ConfigError, FailoverError
from dr.base.files import write_atomic
from dr.base.toolchain import haproxy
from dr.runtime.process import ensure_ports_free, pid_alive, port_open, private_dir, wait_until

BOOTSTRAP = "kdr_bootstrap"
"""The bootstrap backend and frontend."""


def slot(i: int) -> str:
    """The backend (and frontend) of broker slot ``i`` (1-based: broker id ``i``)."""
    return f"kdr_slot{i}"


@dataclass(frozen=True)
class Backend:
    """One cluster behind the endpoint: its name and the endpoint listener of each broker (id order)."""

    name: str
    ports: tuple[int, ...]
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class EndpointSpec:
    """What the proxy listens on and which clusters it can point at."""

    address: str
    bootstrap_port: int
    broker_ports: tuple[int, ...]
    backends: tuple[Backend, ...]

    def backend(self, name: str) -> Backend:
        """The cluster called ``name``; ConfigError naming the known ones."""
        for b in self.backends:
            if b.name == name:
                return b
        known = ", ".join(b.name for b in self.backends)
        raise ConfigError(f"the endpoint has no cluster {name!r} behind it", f"use one of: {known}")

    @property
    def ports(self) -> list[int]:
        """Every port the proxy binds."""
        return [self.bootstrap_port, *self.broker_ports]


def haproxy_config(spec: EndpointSpec, target: str, api_socket: Path) -> str:
    """The HAProxy configuration pointing at cluster ``target`` (pure)."""
    spec.backend(target)
    lines = [
        "global",
        f"    stats socket {api_socket} mode 600 level admin",
        "    maxconn 2000",
        "",
        "defaults",
        "    mode tcp",
        "    timeout connect 3s",
        # Kafka clients hold their connections for hours; the broker's idle timeout decides, not the proxy.
        "    timeout client 1h",
        "    timeout server 1h",
        "",
    ]

    def state(b: Backend) -> str:
        return "" if b.name == target else " disabled"

    lines += [
        f"frontend {BOOTSTRAP}",
        f"    bind {spec.address}:{spec.bootstrap_port}",
        f"    default_backend {BOOTSTRAP}",
    ]
    lines += [f"backend {BOOTSTRAP}", "    balance roundrobin"]
    for b in spec.backends:
        for i, port in enumerate(b.ports, start=1):
            lines.append(f"    server {b.name}_{i} {b.host}:{port}{state(b)}")
    lines.append("")
    for i, port in enumerate(spec.broker_ports, start=1):
        lines += [f"frontend {slot(i)}", f"    bind {spec.address}:{port}", f"    default_backend {slot(i)}"]
        lines.append(f"backend {slot(i)}")
        for b in spec.backends:
            if i <= len(b.ports):
                lines.append(f"    server {b.name} {b.host}:{b.ports[i - 1]}{state(b)}")
        lines.append("")
    return "\n".join(lines)


def _servers(spec: EndpointSpec, cluster: str) -> list[str]:
    """``backend/server`` of every server of ``cluster`` in the proxy."""
    b = spec.backend(cluster)
    out = [f"{BOOTSTRAP}/{b.name}_{i}" for i in range(1, len(b.ports) + 1)]
    out += [f"{slot(i)}/{b.name}" for i in range(1, min(len(b.ports), len(spec.broker_ports)) + 1)]
    return out


def switch_commands(spec: EndpointSpec, target: str) -> list[str]:
    """The runtime API commands that point the endpoint at ``target`` and cut every other cluster's
    sessions (pure): others to maint first, so no new connection reaches them, then ``target`` ready."""
    spec.backend(target)
    others = [s for b in spec.backends if b.name != target for s in _servers(spec, b.name)]
    return (
        [f"set server {s} state maint" for s in others]
        + [f"set server {s} state ready" for s in _servers(spec, target)]
        + [f"shutdown sessions server {s}" for s in others]
    )


class RuntimeApi:
    """HAProxy's runtime API at a unix socket path or ``host:port``."""

    def __init__(self, where: str, timeout: float = 5.0) -> None:
        self.where = where
        self.timeout = timeout

    def _connect(self) -> socket.socket:
        if self.where.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            address: str | tuple[str, int] = self.where
        else:
            host, _, port = self.where.rpartition(":")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            address = (host, int(port))
        s.settimeout(self.timeout)
        try:
            s.connect(address)
        except OSError as exc:
            s.close()
            raise FailoverError(
                f"the endpoint proxy's runtime API at {self.where} does not answer ({exc.strerror or exc})",
                "start the proxy (`drctl estate up` for a local estate) or correct endpoint.runtime_api",
            ) from None
        return s

    def send(self, commands: list[str]) -> str:
        """Run ``commands`` in one connection (``;``-separated, as the API allows); return the replies."""
        with self._connect() as s:
            s.sendall(("; ".join(commands) + "\n").encode())
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def pointing(self, spec: EndpointSpec) -> list[str]:
        """The clusters whose slot-1 server is not in maintenance (one when the endpoint is healthy)."""
        stat = self.send(["show stat"])
        live: list[str] = []
        for line in stat.splitlines():
            cells = line.split(",")
            server = len(cells) > 17 and cells[0] == slot(1) and cells[1] not in ("FRONTEND", "BACKEND")
            if server and "MAINT" not in cells[17]:
                live.append(cells[1])
        return live


@dataclass(frozen=True)
class Switch:
    """What a switch did: where the endpoint pointed before, where it points now, how long it took."""

    before: list[str]
    target: str
    seconds: float


def switch(api: RuntimeApi, spec: EndpointSpec, target: str) -> Switch:
    """Point the endpoint at ``target`` and close the sessions to the other clusters; verify it took."""
    t0 = time.monotonic()
    before = api.pointing(spec)
    reply = api.send(switch_commands(spec, target)).strip()
    # Each successful command answers with nothing or an informational line; errors name the server.
    bad = [line for line in reply.splitlines() if "No such" in line or "Unknown" in line or "Require" in line]
    after = api.pointing(spec)
    if bad or after != [target]:
        raise FailoverError(
            f"the endpoint did not switch to {target!r}: it points at {after or 'nothing'}; proxy said: {'; '.join(bad) or reply[:300]}",
            "check the proxy's configuration (backend kdr_bootstrap and kdr_slot<i>, one server per cluster) and retry",
        )
    return Switch(before=before, target=target, seconds=time.monotonic() - t0)


SOCKET_PATH_MAX = 97
"""The longest unix socket path HAProxy's ``stats socket`` accepts (``sun_path`` less its own suffix)."""


def api_socket_path(endpoint_dir: Path) -> Path:
    """Where a local proxy's runtime API socket lives: ``<endpoint_dir>/api.sock``, or, when that path is
    longer than HAProxy accepts (a clone or state directory deep in the file system), ``api.sock`` in a
    directory of this user's own under the temporary directory, named by a digest of ``endpoint_dir``
    (created 0700 by :func:`socket_dir`)."""
    path = Path(endpoint_dir) / "api.sock"
    if len(str(path)) <= SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(Path(endpoint_dir).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kdr-{os.getuid()}-{digest}" / "api.sock"


def socket_dir(path: Path) -> None:
    """Create the directory of socket ``path`` 0700, or check that an existing one is this user's and
    private: a directory under /tmp another user made could let them reach the proxy's admin socket."""
    d = path.parent
    try:
        d.mkdir(mode=0o700, parents=False, exist_ok=False)
        return
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(
            f"the client endpoint's socket directory {d} is not a private directory of this user",
            f"remove {d} (or set TMPDIR to a directory of your own) and run the command again",
        )


class LocalEndpoint:
    """The proxy of a local estate: files under ``<state_dir>/endpoint`` (0700), config 0600; its runtime
    API socket there too unless that path is too long for HAProxy (:func:`api_socket_path`)."""

    def __init__(self, spec: EndpointSpec, state_dir: Path) -> None:
        self.spec = spec
        self.dir = Path(state_dir) / "endpoint"
        self.config = self.dir / "haproxy.cfg"
        self.socket = api_socket_path(self.dir)
        self.pid_file = self.dir / "haproxy.pid"
        self.log = self.dir / "haproxy.log"

    @property
    def api(self) -> RuntimeApi:
        """The runtime API of this proxy."""
        return RuntimeApi(str(self.socket))

    @property
    def pid(self) -> int | None:
        """The proxy's pid while it runs (its command line names our config file), else None."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if pid_alive(pid) and str(self.config).encode() in cmdline else None

    def alive(self) -> bool:
        """True while the proxy runs."""
        return self.pid is not None

    def start(self, target: str, timeout: float = 15.0) -> None:
        """Start the proxy pointing at ``target`` (already running: switch it there instead)."""
        if self.alive():
            switch(self.api, self.spec, target)
            return
        ensure_ports_free(self.spec.ports, "the client endpoint")
        private_dir(self.dir)
        if self.socket.parent != self.dir:
            socket_dir(self.socket)
        write_atomic(self.config, haproxy_config(self.spec, target, self.socket))
        self.socket.unlink(missing_ok=True)
        tool = haproxy()
        cmd = [str(tool.binary), "-D", "-p", str(self.pid_file), "-f", str(self.config)]
        with open(self.log, "ab") as log:
            res = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=tool.env(), timeout=timeout)
        ready = res.returncode == 0 and wait_until(
            lambda: self.alive() and self.socket.exists() and port_open(self.spec.bootstrap_port, self.spec.address),
            timeout,
        )
        if not ready:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
            raise ClusterError(
                f"the client endpoint's HAProxy did not start (exit {res.returncode}):\n{tail}",
                f"read {self.log}; free the endpoint's ports {self.spec.ports}",
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the proxy (SIGTERM: it closes every client connection); wait until it is gone."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not wait_until(lambda: not pid_alive(pid), timeout):
                os.kill(pid, signal.SIGKILL)
                wait_until(lambda: not pid_alive(pid), timeout)
        self.pid_file.unlink(missing_ok=True)
        if self.socket.parent != self.dir:  # nothing of ours left under the temporary directory
            self.socket.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.socket.parent.rmdir()

    def kill(self) -> None:
        """SIGKILL the proxy (a crash, for tests)."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not pid_alive(pid), 10)
        self.pid_file.unlink(missing_ok=True)
