"""A local KRaft cluster as a Pulumi resource (Python dynamic provider over :mod:`dr.runtime`).

* create  = format + start every node, wait until the brokers serve; a cluster that cannot start is
  stopped and its fresh data removed, so nothing is left half-started;
* read    = is it running? (``pulumi refresh`` records ``running: false`` after a machine restart);
* diff    = a stopped cluster whose role needs it running is an update; shape changes replace it;
* update  = start what is not running (data kept) and record the new role;
* delete  = stop every node and remove the cluster's data.

A *decommissioned* cluster is kept (its data holds what may still need recovering) but no longer
started by ``up``; ``drctl failover``'s last step stops it and ``pulumi destroy`` removes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from stacks.engine_watch import die_with_engine

die_with_engine()  # in the provider process: exit when the engine does

__all__ = ["LocalKafkaCluster", "LocalKafkaClusterArgs"]

#: Inputs whose change means another cluster (new storage): replace, never update in place.
_IDENTITY = ("name", "brokers", "base_port", "racks", "state_dir", "tls")
_KEEP_RUNNING = ("active", "passive")


def _runtime(props: dict[str, Any]):  # noqa: ANN202 - dr.runtime.cluster.LocalCluster
    die_with_engine()
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    spec = ClusterSpec(
        str(props["name"]),
        brokers=int(props["brokers"]),
        base_port=int(props["base_port"]),
        racks=tuple(props.get("racks") or ()),
        tls=bool(props.get("tls")),
        **endpoint_settings(props.get("endpoint")),
        lease_fence=bool(props.get("lease_fence")),
    )
    return LocalCluster(spec, Path(props["state_dir"]))


def endpoint_settings(endpoint: dict[str, Any] | None) -> dict[str, Any]:
    """The ``ClusterSpec`` keywords of a recorded ``endpoint`` input (address and broker-slot ports)."""
    if not endpoint:
        return {}
    return {"endpoint_address": str(endpoint["address"]), "endpoint_ports": tuple(int(p) for p in endpoint["ports"])}


def _outs(props: dict[str, Any], running: bool) -> dict[str, Any]:
    cluster = _runtime(props)
    return {**props, "bootstrap_servers": cluster.bootstrap, "running": running}


def _start(props: dict[str, Any], *, fresh: bool) -> None:
    """Start the cluster; on failure stop what started and (when ``fresh``) remove its data."""
    from dr.base.errors import DRError

    cluster = _runtime(props)
    try:
        cluster.start()
    except Exception as exc:  # the engine shows this message on the resource
        try:
            cluster.destroy() if fresh else cluster.stop()
        finally:
            reason = str(exc) if isinstance(exc, DRError) else f"{type(exc).__name__}: {exc}"
            left = "its new data was removed" if fresh else "its data is kept"
            raise RuntimeError(f"cluster {props['name']} could not start ({left}): {reason}") from None


class _LocalClusterProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        cluster = _runtime(props)
        existed = cluster.dir.exists()
        if not existed:
            cluster.kill()  # JVMs still running after their data directory was removed under them
        _start(props, fresh=not existed)
        return CreateResult(id_=str(props["name"]), outs=_outs(props, True))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        cluster = _runtime(props)
        if not cluster.dir.exists():
            return ReadResult(None, {})  # data gone: the next `up` creates it again
        return ReadResult(id_, _outs(props, cluster.state() == "running"))

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in _IDENTITY if olds.get(k) != news.get(k)]
        changed = replaces + [k for k in ("role", "endpoint", "lease_fence") if olds.get(k) != news.get(k)]
        if news.get("role") in _KEEP_RUNNING and olds.get("running") is False:
            changed.append("running")
        return DiffResult(changes=bool(changed), replaces=replaces, stables=["name"], delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        cluster = _runtime(news)
        reconfigured = any(olds.get(k) != news.get(k) for k in ("endpoint", "lease_fence"))
        if reconfigured and cluster.state() in ("running", "degraded"):
            cluster.stop()  # the endpoint listener and the authorizer are in server.properties: restart (data kept)
            _start(news, fresh=False)
        if news.get("role") in _KEEP_RUNNING:
            if cluster.state() != "running":
                _start(news, fresh=False)
            return UpdateResult(outs=_outs(news, True))
        return UpdateResult(outs=_outs(news, cluster.state() == "running"))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _runtime(props).destroy()


class LocalKafkaClusterArgs(dict):
    """Inputs of :class:`LocalKafkaCluster` (plain values: the dynamic provider serialises them)."""

    def __init__(
        self,
        *,
        name: str,
        role: str,
        brokers: int,
        base_port: int,
        racks: list[str],
        state_dir: str,
        tls: bool = False,
        endpoint: dict[str, Any] | None = None,
        lease_fence: bool = False,
    ) -> None:
        super().__init__(name=name, role=role, brokers=brokers, base_port=base_port, racks=racks, state_dir=state_dir)
        if tls:  # only a TLS cluster carries the key: plaintext stacks keep the inputs they had
            self["tls"] = True
        if endpoint is not None:  # only then: the inputs of a stack without an endpoint stay as they were
            self["endpoint"] = endpoint
        if lease_fence:  # only then, as above
            self["lease_fence"] = True


class LocalKafkaCluster(Resource):
    """A KRaft cluster of 1 or 3 brokers on 127.0.0.1 with SASL/SCRAM and ACLs, run by this machine."""

    bootstrap_servers: pulumi.Output[str]
    running: pulumi.Output[bool]

    def __init__(self, name: str, args: LocalKafkaClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_LocalClusterProvider(), name, {**args, "bootstrap_servers": None, "running": None}, opts)
