"""The client endpoint's proxy of a local estate as a Pulumi resource (dynamic provider over
:mod:`dr.runtime.endpoint`).

* create = start HAProxy pointing at the active cluster;
* read   = is it running, and where does it point? (a stopped proxy is started again, one pointing away
  from the active cluster switched back, by the next ``up --refresh``);
* update = a changed spec restarts it; a changed target switches it through the runtime API (no restart);
* delete = stop it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from stacks.engine_watch import die_with_engine

die_with_engine()

__all__ = ["EndpointProxy", "endpoint_proxy_args"]


def _runtime(props: dict[str, Any]):  # noqa: ANN202 - dr.runtime.endpoint.LocalEndpoint
    die_with_engine()
    from dr.runtime.endpoint import Backend, EndpointSpec, LocalEndpoint

    spec = EndpointSpec(
        str(props["address"]),
        int(props["bootstrap_port"]),
        tuple(int(p) for p in props["broker_ports"]),
        tuple(Backend(str(b["name"]), tuple(int(p) for p in b["ports"])) for b in props["backends"]),
    )
    return LocalEndpoint(spec, Path(props["state_dir"]))


_SPEC = ("address", "bootstrap_port", "broker_ports", "backends", "state_dir")


class _EndpointProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        _runtime(props).start(str(props["target"]))
        return CreateResult(id_="endpoint", outs={**props, "running": True})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        proxy = _runtime(props)
        outs = {**props, "running": proxy.alive()}
        if outs["running"]:
            try:  # switched by hand (or by an unfinished failover): the next `up` switches it back
                at = proxy.api.pointing(proxy.spec)
            except Exception:  # noqa: BLE001 - a silent runtime API: where it points is unknown, keep the state's
                at = [str(props["target"])]
            if at != [props["target"]]:
                outs["target"] = ",".join(at)
        return ReadResult(id_, outs)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in (*_SPEC, "target") if olds.get(k) != news.get(k)]
        if olds.get("running") is False:
            changed.append("running")
        return DiffResult(changes=bool(changed), replaces=[], stables=[])

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        proxy = _runtime(news)
        if any(olds.get(k) != news.get(k) for k in _SPEC):
            _runtime(olds).stop()
        proxy.start(str(news["target"]))  # running: switches through the runtime API, no restart
        return UpdateResult(outs={**news, "running": True})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _runtime(props).stop()


def endpoint_proxy_args(spec: Any, target: str, state_dir: Path) -> dict[str, Any]:
    """The resource's inputs (plain values) from a :class:`dr.runtime.endpoint.EndpointSpec`."""
    return {
        "address": spec.address,
        "bootstrap_port": spec.bootstrap_port,
        "broker_ports": list(spec.broker_ports),
        "backends": [{"name": b.name, "ports": list(b.ports)} for b in spec.backends],
        "target": target,
        "state_dir": str(state_dir),
    }


class EndpointProxy(Resource):
    """HAProxy in TCP mode giving clients one address that follows the active cluster."""

    running: pulumi.Output[bool]

    def __init__(self, name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_EndpointProvider(), name, {**args, "running": None}, opts)
