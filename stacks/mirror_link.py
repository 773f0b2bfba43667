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
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from stacks.engine_watch import die_with_engine

if TYPE_CHECKING:
    from dr.runtime.links import LinkRunner

die_with_engine()  # in the provider process: exit when the engine does

__all__ = ["MirrorMakerProcess", "MirrorMakerProcessArgs"]

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
    "replication_policy",
    "source_tls",
    "target_tls",
    "delivery",
)


def _runtime(props: dict[str, Any]) -> LinkRunner:
    die_with_engine()
    from dr.runtime.cluster import ClusterSpec, LocalCluster
    from dr.runtime.links import dedicated_runner
    from dr.runtime.mirrormaker import DEFAULT_POLICY

    state = Path(props["state_dir"])
    source = LocalCluster(
        ClusterSpec(
            props["source"],
            brokers=int(props["source_brokers"]),
            base_port=int(props["source_port"]),
            tls=bool(props.get("source_tls")),
        ),
        state,
    )
    target = LocalCluster(
        ClusterSpec(
            props["target"],
            brokers=int(props["target_brokers"]),
            base_port=int(props["target_port"]),
            tls=bool(props.get("target_tls")),
        ),
        state,
    )
    return dedicated_runner(
        source,
        target,
        state,
        topics=props["topics"],
        groups=props["groups"],
        intervals={k: int(v) for k, v in (props.get("intervals") or {}).items()},
        grant=False,
        prefixed=props.get("replication_policy") == DEFAULT_POLICY,
        exactly_once=props.get("delivery") == "exactly-once",
    )


def _start(props: dict[str, Any]) -> dict[str, Any]:
    from dr.base.errors import DRError

    mirror = _runtime(props)
    try:
        mirror.resume()  # the stack declares the replicator's user and ACLs: nothing granted here
    except Exception as exc:
        mirror.stop()
        reason = str(exc) if isinstance(exc, DRError) else f"{type(exc).__name__}: {exc}"
        raise RuntimeError(f"MirrorMaker 2 {mirror.name} could not start (process stopped): {reason}") from None
    return {**props, "running": True}


class _MirrorMakerProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = _start(props)
        return CreateResult(id_=_runtime(props).name, outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, {**props, "running": _runtime(props).alive()})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("source", "target") if olds.get(k) != news.get(k)]
        changed = [k for k in _CONFIG if olds.get(k) != news.get(k)]
        if olds.get("running") is False:
            changed.append("running")
        return DiffResult(
            changes=bool(changed), replaces=replaces, stables=["source", "target"], delete_before_replace=True
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        _runtime(olds).stop()
        return UpdateResult(outs=_start(news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _runtime(props).stop()


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
        replication_policy: str | None = None,
        source_tls: bool = False,
        target_tls: bool = False,
        delivery: str = "at-least-once",
    ) -> None:
        # Only a prefixed link carries the policy: identity links keep the inputs (and state) they had.
        policy = {"replication_policy": replication_policy} if replication_policy else {}
        super().__init__(
            **policy,
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
        # Only a prefixed link carries the policy: the links of existing active-passive stacks keep their
        # inputs exactly, so upgrading does not restart their MirrorMaker 2.
        if replication_policy:
            self["replication_policy"] = replication_policy
        # likewise only the TLS end of a link carries its flag
        for key, tls in (("source_tls", source_tls), ("target_tls", target_tls)):
            if tls:
                self[key] = True
        # Likewise only an exactly-once link carries its delivery.
        if delivery == "exactly-once":
            self["delivery"] = delivery


class MirrorMakerProcess(Resource):
    """MirrorMaker 2 in dedicated mode copying ``source`` → ``target`` with identity topic names, or
    ``<source>.<topic>`` when ``replication_policy`` says so (active-active, hub-and-spoke edges)."""

    running: pulumi.Output[bool]

    def __init__(self, name: str, args: MirrorMakerProcessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_MirrorMakerProvider(), name, {**args, "running": None}, opts)
