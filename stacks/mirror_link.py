"""A dedicated MirrorMaker 2 process as a Pulumi resource (Python dynamic provider).

* create/update = (re)start the process with the link's configuration and wait until its tasks run;
* read          = is the process running? (``pulumi refresh`` after a restart records ``running: false``,
  and the next ``up`` starts it again);
* delete        = stop the process (its log and offsets stay under ``<state>/links/``).

The replicator's SCRAM user and ACLs are ``pulumi_kafka`` resources of each cluster (see
:mod:`stacks.access`); this resource only runs the process, after them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult
from pydantic import BaseModel, ConfigDict

__all__ = ["MirrorMakerProcess", "MirrorMakerProcessArgs", "MirrorMakerProps"]

_CONFIG = (
    "source",
    "target",
    "source_brokers",
    "target_brokers",
    "source_port",
    "target_port",
    "topics",
    "groups",
    "intervals",
    "state_dir",
)


class MirrorMakerProps(BaseModel):
    """The resource's properties as the engine hands them to the provider: the inputs
    (:class:`MirrorMakerProcessArgs`) and, once created, the output ``running``.

    Numbers arrive as floats (the engine's wire format) and are read as ints. Keys the engine adds
    (its serialised provider) are kept as they came and handed back with the outputs.
    """

    model_config = ConfigDict(extra="allow")

    source: str
    target: str
    source_brokers: int
    target_brokers: int
    source_port: int
    target_port: int
    topics: str
    groups: str
    intervals: dict[str, int] | None = None
    state_dir: str
    running: bool | None = None

    @classmethod
    def of(cls, props: dict[str, Any]) -> MirrorMakerProps:
        """The properties the engine passed, typed."""
        return cls.model_validate(props)

    def outs(self, running: bool) -> dict[str, Any]:
        """The outputs: the inputs as given and whether the process runs."""
        return self.model_copy(update={"running": running}).model_dump()


def _runtime(props: MirrorMakerProps):  # noqa: ANN202 - dr.runtime.mirrormaker.MirrorMaker
    from dr.runtime.cluster import ClusterSpec, LocalCluster
    from dr.runtime.mirrormaker import MirrorMaker

    state = Path(props.state_dir)
    source = LocalCluster(ClusterSpec(props.source, brokers=props.source_brokers, base_port=props.source_port), state)
    target = LocalCluster(ClusterSpec(props.target, brokers=props.target_brokers, base_port=props.target_port), state)
    return MirrorMaker(
        source,
        target,
        state,
        topics=props.topics,
        groups=props.groups,
        intervals=dict(props.intervals or {}),
        grant=False,
    )


def _start(props: MirrorMakerProps) -> dict[str, Any]:
    from dr.base.errors import DRError

    mirror = _runtime(props)
    try:
        mirror.start()
    except Exception as exc:
        mirror.stop()
        reason = str(exc) if isinstance(exc, DRError) else f"{type(exc).__name__}: {exc}"
        raise RuntimeError(f"MirrorMaker 2 {mirror.name} could not start (process stopped): {reason}") from None
    return props.outs(True)


class _MirrorMakerProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        p = MirrorMakerProps.of(props)
        outs = _start(p)
        return CreateResult(id_=_runtime(p).name, outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        p = MirrorMakerProps.of(props)
        return ReadResult(id_, p.outs(_runtime(p).alive()))

    # diff reads the raw properties: during a preview an input may still be unknown (a placeholder
    # string), which the typed properties would refuse; diff only compares values.
    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("source", "target") if olds.get(k) != news.get(k)]
        changed = [k for k in _CONFIG if olds.get(k) != news.get(k)]
        if olds.get("running") is False:
            changed.append("running")
        return DiffResult(
            changes=bool(changed), replaces=replaces, stables=["source", "target"], delete_before_replace=True
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        _runtime(MirrorMakerProps.of(olds)).stop()
        return UpdateResult(outs=_start(MirrorMakerProps.of(news)))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _runtime(MirrorMakerProps.of(props)).stop()


class MirrorMakerProcessArgs(dict):
    """Inputs of :class:`MirrorMakerProcess` (plain values: the dynamic provider serialises them)."""

    def __init__(
        self,
        *,
        source: str,
        target: str,
        source_brokers: int,
        target_brokers: int,
        source_port: int,
        target_port: int,
        topics: str,
        groups: str,
        intervals: dict[str, int],
        state_dir: str,
    ) -> None:
        super().__init__(
            source=source,
            target=target,
            source_brokers=source_brokers,
            target_brokers=target_brokers,
            source_port=source_port,
            target_port=target_port,
            topics=topics,
            groups=groups,
            intervals=intervals,
            state_dir=state_dir,
        )


class MirrorMakerProcess(Resource):
    """MirrorMaker 2 in dedicated mode copying ``source`` → ``target`` with identity topic names."""

    running: pulumi.Output[bool]

    def __init__(self, name: str, args: MirrorMakerProcessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_MirrorMakerProvider(), name, {**args, "running": None}, opts)
