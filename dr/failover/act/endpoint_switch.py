"""The client endpoint follows the failover (issue 31): checked at preflight, switched at promote.

The switch happens at the end of ``promote`` — after A is fenced and B made writable, before the
client configurations are published — so an application that knows only the endpoint's address is
moved at the same instant as the published files say B: HAProxy points every port at B and closes
the sessions still open to A (the client reconnects through the same addresses, to B).
"""

from __future__ import annotations

import time
from pathlib import Path

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.errors import FailoverError
from dr.runtime.endpoint import switch
from dr.topology.client_endpoint import endpoint_api, endpoint_pointing, endpoint_spec
from dr.topology.model import Topology


def check_endpoint(topology: Topology, state: Path, stack: str) -> list[str] | None:
    """Preflight: the endpoint's runtime API answers (else refuse before anything changes)."""
    try:
        return endpoint_pointing(topology, state)
    except FailoverError as exc:
        raise FailoverError(
            f"{exc.problem} — the failover could not move the client endpoint",
            f"start the endpoint's proxy (`drctl estate up --stack {stack}`) or correct "
            "kafka-dr:endpoint.runtimeApi, then rerun; nothing was changed",
        ) from None


class EndpointSwitch(TypedDict):
    """What the promote step's switch of the client endpoint did (journaled as ``endpoint``)."""

    before: list[str]
    """The clusters the endpoint pointed at before."""
    target: str
    switched_at_ms: int
    switch_s: float


def switch_endpoint(topology: Topology, state: Path, target: str) -> EndpointSwitch | None:
    """Point the endpoint at ``target`` and close the sessions to the others; what it did, or None."""
    api = endpoint_api(topology, state)
    spec = endpoint_spec(topology)
    if api is None or spec is None:
        return None
    at_ms = int(time.time() * 1000)
    done = switch(api, spec, target)
    return EndpointSwitch(before=done.before, target=done.target, switched_at_ms=at_ms, switch_s=round(done.seconds, 4))
