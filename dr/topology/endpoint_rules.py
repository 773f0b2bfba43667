"""The rules of the stable client endpoint (``endpoint:``, issue 31), as ``(path, problem, fix)``.

Every port the proxy binds must be its own: not a port of a local broker, controller or Connect worker,
not twice in the endpoint, inside the range the local estate uses. There is one broker slot for each
broker of the largest cluster that may become active, and a local estate's proxy listens on loopback.
The proxy's runtime API (unauthenticated) is a unix socket others cannot open or a loopback port, unless
a remote one is declared (``insecure_remote_runtime_api``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dr.base.hosts import is_loopback
from dr.runtime.reserved import ENDPOINT_LISTENER_OFFSET
from dr.topology.kinds import Role

if TYPE_CHECKING:
    from dr.topology.model import Cluster, Topology

_FIRST_PORT, _LAST_PORT = 1024, 32767
_MAY_BE_ACTIVE = (Role.ACTIVE, Role.PASSIVE, Role.STANDBY)


def _named_ports(c: Cluster) -> dict[int, str]:
    """The ports a local cluster binds, each with what binds it (mirrors dr.runtime.cluster's layout)."""
    base = c.base_port or 0
    named = {base + 40: f"the controller port of cluster {c.name!r}"}
    for b in range(1, c.brokers + 1):
        named[base + b - 1] = f"broker {b}'s client port of cluster {c.name!r}"
        named[base + 20 + b - 1] = f"broker {b}'s inter-broker port of cluster {c.name!r}"
        named[base + ENDPOINT_LISTENER_OFFSET + b - 1] = f"broker {b}'s endpoint listener of cluster {c.name!r}"
    return named


def _owner(t: Topology, port: int) -> str | None:
    """What else on the estate holds ``port``, or None."""
    for c in t.clusters:
        window = c.port_window
        if window is None or port not in window:
            continue
        return _named_ports(c).get(port, f"the port window {window.start}..{window.stop - 1} of cluster {c.name!r}")
    for cc in t.connect_clusters:
        rest = cc.rest_ports
        if rest is not None and port in rest:
            return f"a REST port of Connect cluster {cc.name!r}"
    return None


def endpoint_problems(t: Topology) -> Iterator[tuple[str, str, str]]:
    """Every broken rule of ``t.endpoint`` (nothing when no endpoint is declared)."""
    e = t.endpoint
    if e is None:
        return
    if not t.shape().client_endpoint:
        yield (
            "endpoint",
            f"a client endpoint follows the one active cluster of an active-passive estate; this one is {t.architecture}",
            "remove endpoint, or use architecture: active-passive",
        )
    for c in t.clusters:
        if c.is_local and c.local_tls:
            yield (
                f"clusters[{c.name}].local_tls",
                "the client endpoint's listener serves SASL_PLAINTEXT; a local TLS cluster behind it is not built yet",
                "remove endpoint or local_tls from this stack",
            )
    fields = [("endpoint.bootstrap_port", e.bootstrap_port)] + [
        (f"endpoint.broker_ports[{i}]", p) for i, p in enumerate(e.broker_ports)
    ]
    seen: dict[int, str] = {}
    for path, port in fields:
        if not _FIRST_PORT <= port <= _LAST_PORT:
            yield path, f"port {port} is outside {_FIRST_PORT}..{_LAST_PORT}", "choose a free port in that range"
        elif port in seen:
            yield (
                path,
                f"port {port} is already {seen[port]}",
                "give the bootstrap port and each broker slot its own port",
            )
        elif (owner := _owner(t, port)) is not None:
            yield (
                path,
                f"port {port} collides with {owner}",
                "choose a port outside every local cluster's window and Connect REST ports",
            )
        seen.setdefault(port, path)
    candidates = [c for c in t.clusters if c.role in _MAY_BE_ACTIVE]
    widest = max(candidates, key=lambda c: c.brokers, default=None)
    if widest is not None and widest.is_local and len(e.broker_ports) < widest.brokers:
        yield (
            "endpoint.broker_ports",
            f"{len(e.broker_ports)} broker slot(s) for cluster {widest.name!r} of {widest.brokers} brokers",
            f"list {widest.brokers} ports, one per broker",
        )
    local = any(c.is_local for c in t.clusters)
    if local:
        try:
            loopback = ipaddress.ip_address(e.address).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            yield (
                "endpoint.address",
                f"{e.address!r} is not a loopback address; a local estate's proxy listens on this machine only",
                "use 127.0.0.1",
            )
        if e.runtime_api is not None:
            yield (
                "endpoint.runtime_api",
                "is set on a local estate, whose proxy's runtime API is a socket in the state directory",
                "remove it (set it only for a proxy the platform team runs in front of external clusters)",
            )
    elif e.runtime_api is None:
        yield (
            "endpoint.runtime_api",
            "is missing: the proxy of external clusters is run by the platform team, and failover needs its runtime API",
            "set it to the path of the runtime API's unix socket (mode 600) or 127.0.0.1:<port>",
        )
    else:
        yield from _runtime_api_problems(e.runtime_api, e.insecure_remote_runtime_api)
    if e.insecure_remote_runtime_api and (local or e.runtime_api is None):
        yield (
            "endpoint.insecure_remote_runtime_api",
            "is set without a runtime_api of a proxy the platform team runs",
            "remove it",
        )


def _runtime_api_problems(where: str, remote_declared: bool) -> Iterator[tuple[str, str, str]]:
    """HAProxy's runtime API has no authentication: whoever reaches it can point every client at a cluster
    of their choosing. So it is a unix socket others cannot open, or a loopback port; anything else only
    when declared (``insecure_remote_runtime_api``)."""
    at = "endpoint.runtime_api"
    tunnel = (
        "reach a remote proxy's socket through an authenticated tunnel instead, e.g. "
        "`ssh -N -L 127.0.0.1:9999:/run/haproxy/kdr-admin.sock <proxy host>` and runtime_api: 127.0.0.1:9999"
    )
    if where.startswith("/"):
        path = Path(where)
        try:
            mode = path.stat().st_mode & 0o777 if path.exists() else None
        except OSError:
            mode = None
        if mode is not None and mode & 0o006 and not remote_declared:
            yield (
                at,
                f"the runtime API socket {where} is open to every local user (mode {mode:04o}): any of them "
                "could redirect every client of the endpoint",
                f"declare it `stats socket {where} mode 600 level admin` (owned by the user running drctl) "
                "in the proxy's configuration and reload it",
            )
        return
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        yield (
            at,
            f"{where!r} is neither the absolute path of a unix socket nor host:port",
            "give the socket's path (e.g. /run/haproxy/kdr-admin.sock) or 127.0.0.1:<port>",
        )
        return
    if is_loopback(host.strip("[]")) or remote_declared:
        return
    yield (
        at,
        f"{where} is not a loopback address: HAProxy's runtime API has no authentication, so whoever reaches "
        "it can point every client of the endpoint at a cluster of their choosing",
        f"use the proxy's unix socket (mode 600) or 127.0.0.1:<port> on the proxy's machine; {tunnel}; "
        "only if the network path is otherwise protected, declare endpoint.insecure_remote_runtime_api: true",
    )
