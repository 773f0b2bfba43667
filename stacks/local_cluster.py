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
from pydantic import BaseModel, ConfigDict

__all__ = ["LocalClusterProps", "LocalKafkaCluster", "LocalKafkaClusterArgs"]

#: Inputs whose change means another cluster (new storage): replace, never update in place.
_IDENTITY = ("name", "brokers", "base_port", "racks", "state_dir")
_KEEP_RUNNING = ("active", "passive")


class LocalClusterProps(BaseModel):
    """The resource's properties as the engine hands them to the provider: the inputs
    (:class:`LocalKafkaClusterArgs`) and, once created, the outputs ``bootstrap_servers`` and ``running``.

    Numbers arrive as floats (the engine's wire format) and are read as ints. Keys the engine adds
    (its serialised provider) are kept as they came and handed back with the outputs.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    role: str
    brokers: int
    base_port: int
    racks: list[str] | None = None
    state_dir: str
    bootstrap_servers: str | None = None
    running: bool | None = None

    @classmethod
    def of(cls, props: dict[str, Any]) -> LocalClusterProps:
        """The properties the engine passed, typed."""
        return cls.model_validate(props)

    def outs(self, running: bool) -> dict[str, Any]:
        """The outputs: the inputs as given, the cluster's bootstrap servers and whether it runs."""
        return self.model_copy(update={"bootstrap_servers": _runtime(self).bootstrap, "running": running}).model_dump()


def _runtime(props: LocalClusterProps):  # noqa: ANN202 - dr.runtime.cluster.LocalCluster
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    spec = ClusterSpec(props.name, brokers=props.brokers, base_port=props.base_port, racks=tuple(props.racks or ()))
    return LocalCluster(spec, Path(props.state_dir))


def _outs(props: dict[str, Any], running: bool) -> dict[str, Any]:
    """The outputs for the engine's properties ``props`` (the create result, without the start)."""
    return LocalClusterProps.of(props).outs(running)


def _start(props: LocalClusterProps, *, fresh: bool) -> None:
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
            raise RuntimeError(f"cluster {props.name} could not start ({left}): {reason}") from None


class _LocalClusterProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        p = LocalClusterProps.of(props)
        existed = _runtime(p).dir.exists()
        _start(p, fresh=not existed)
        return CreateResult(id_=p.name, outs=p.outs(True))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        p = LocalClusterProps.of(props)
        cluster = _runtime(p)
        if not cluster.dir.exists():
            return ReadResult(None, {})  # data gone: the next `up` creates it again
        return ReadResult(id_, p.outs(cluster.state() == "running"))

    # diff reads the raw properties: during a preview an input may still be unknown (a placeholder
    # string), which the typed properties would refuse; diff only compares values.
    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in _IDENTITY if olds.get(k) != news.get(k)]
        changed = replaces + [k for k in ("role",) if olds.get(k) != news.get(k)]
        if news.get("role") in _KEEP_RUNNING and olds.get("running") is False:
            changed.append("running")
        return DiffResult(changes=bool(changed), replaces=replaces, stables=["name"], delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        p = LocalClusterProps.of(news)
        cluster = _runtime(p)
        if p.role in _KEEP_RUNNING:
            if cluster.state() != "running":
                _start(p, fresh=False)
            return UpdateResult(outs=p.outs(True))
        return UpdateResult(outs=p.outs(cluster.state() == "running"))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _runtime(LocalClusterProps.of(props)).destroy()


class LocalKafkaClusterArgs(dict):
    """Inputs of :class:`LocalKafkaCluster` (plain values: the dynamic provider serialises them)."""

    def __init__(self, *, name: str, role: str, brokers: int, base_port: int, racks: list[str], state_dir: str) -> None:
        super().__init__(name=name, role=role, brokers=brokers, base_port=base_port, racks=racks, state_dir=state_dir)


class LocalKafkaCluster(Resource):
    """A KRaft cluster of 1 or 3 brokers on 127.0.0.1 with SASL/SCRAM and ACLs, run by this machine."""

    bootstrap_servers: pulumi.Output[str]
    running: pulumi.Output[bool]

    def __init__(self, name: str, args: LocalKafkaClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_LocalClusterProvider(), name, {**args, "bootstrap_servers": None, "running": None}, opts)
