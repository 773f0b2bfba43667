"""The estate's client endpoint (issue 31): its proxy's spec from the topology, its runtime API, where it points.

Every local cluster stands behind the proxy (a decommissioned one stays in maintenance), so the proxy's
configuration does not change across failovers: only which cluster is ``ready``.
"""

from __future__ import annotations

from pathlib import Path

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
        for c in topology.clusters
        if c.is_local
    )
    return EndpointSpec(e.address, e.bootstrap_port, tuple(e.broker_ports), backends)


def local_endpoint(topology: Topology, state: Path) -> LocalEndpoint | None:
    """The proxy this machine runs for a local estate; None without an endpoint or local clusters."""
    spec = endpoint_spec(topology)
    if spec is None or not spec.backends:
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
