"""The estate's client endpoint (issue 31): its proxy's spec from the topology, its runtime API, where it points.

Every local cluster stands behind the proxy (a decommissioned one stays in maintenance), so the proxy's
configuration does not change across failovers: only which cluster is ``ready``.
"""

from __future__ import annotations

from pathlib import Path

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.runtime.endpoint import Backend, EndpointSpec, LocalEndpoint, RuntimeApi
from dr.runtime.reserved import ENDPOINT_LISTENER_OFFSET
from dr.topology.model import Topology


def endpoint_spec(topology: Topology) -> EndpointSpec | None:
    """The proxy's ports and the clusters behind it; None when the stack declares no endpoint."""
    e = topology.endpoint
    if e is None:
        return None
    backends = tuple(
        Backend(c.name, tuple((c.base_port or 0) + ENDPOINT_LISTENER_OFFSET + b - 1 for b in range(1, c.brokers + 1)))
        if c.is_local
        # a proxy the platform team runs: one server per broker slot, named after the cluster; where each
        # server points is the team's (only the names are switched), so the ports here are never used
        else Backend(c.name, tuple(0 for _ in e.broker_ports), host="")
        for c in topology.clusters
    )
    return EndpointSpec(e.address, e.bootstrap_port, tuple(e.broker_ports), backends)


def local_endpoint(topology: Topology, state: Path) -> LocalEndpoint | None:
    """The proxy this machine runs for a local estate; None without an endpoint or local clusters."""
    spec = endpoint_spec(topology)
    if spec is None or not any(c.is_local for c in topology.clusters):
        return None
    return LocalEndpoint(spec, state)


def endpoint_api(topology: Topology, state: Path) -> RuntimeApi | None:
    """The runtime API that switches the endpoint: the local proxy's socket, or the declared one."""
    e = topology.endpoint
    if e is None:
        return None
    if e.runtime_api is not None:
        return RuntimeApi(e.runtime_api)
    local = local_endpoint(topology, state)
    return local.api if local is not None else None


def endpoint_pointing(topology: Topology, state: Path) -> list[str] | None:
    """The clusters the endpoint points at now (None without an endpoint); FailoverError when its
    runtime API does not answer."""
    api = endpoint_api(topology, state)
    spec = endpoint_spec(topology)
    if api is None or spec is None:
        return None
    return api.pointing(spec)


class EndpointStatus(TypedDict, total=False):
    """The client endpoint as ``drctl status`` and ``drctl estate status`` show it: its ``bootstrap``, its
    local ``proxy`` (``running``/``stopped``), where it ``points_at`` (or the ``error`` reading it), and the
    ``active`` cluster it should point at. Empty without an endpoint."""

    bootstrap: str
    proxy: str
    points_at: list[str] | None
    error: str
    active: str


def endpoint_drift(ep: EndpointStatus, stack: str, failover_unfinished: bool = False) -> str | None:
    """The problem line when the endpoint (an ``endpoint_status`` entry: ``points_at``, ``active``,
    ``proxy`` when local) points away from the active cluster, with the next step; None when it does not
    (or where it points is unknown: that entry's ``error`` says why)."""
    active, at = ep.get("active"), ep.get("points_at")
    if active is None or at is None or at == [active]:
        return None
    where = ", ".join(at) or "nothing"
    problem = (
        f"client endpoint {ep.get('bootstrap')} points at {where}, not at the active cluster {active}: "
        "applications on it reach the wrong cluster or none"
    )
    if failover_unfinished:
        return f"{problem} — the last failover is unfinished: `drctl failover --stack {stack}` resumes it"
    if ep.get("proxy") is not None:
        return f"{problem} — `drctl estate up --stack {stack} --refresh` points it back at {active}"
    return (
        f"{problem} — on the proxy's runtime API set {active}'s servers of backends kdr_bootstrap and "
        "kdr_slot<i> ready and the others maint (docs/production/endpoint.md)"
    )
