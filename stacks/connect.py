"""MirrorMaker 2 on a Kafka Connect cluster, as Pulumi resources (Python dynamic providers).

* :class:`LocalConnectWorkers` — a local Connect distributed cluster (:mod:`dr.runtime.connect`):
  create/update start its workers, ``read`` sees a stopped one (``running: false``; the next ``up``
  starts it), delete stops them. Its principal's user and ACLs are ``pulumi_kafka`` resources of
  its home cluster (:mod:`stacks.access`).
* :class:`MirrorConnector` — one connector of a link, managed through the Connect REST API:
  create validates (Connect's own ``config/validate``) then ``PUT``\\ s the config and waits until the
  connector and its tasks run — a connector that does not run is deleted again, so a failed ``up``
  leaves no half-made link; update ``PUT``\\ s the new config; delete removes the connector; ``read``
  (``pulumi refresh``) drops a connector deleted behind Pulumi's back from the state and records a
  ``FAILED`` one, so the next ``up`` re-creates or restarts it.
* :class:`ConnectMirrorLink` — the component: the link's source, checkpoint and heartbeat
  connectors. The source connector is created first and validates all three configs before
  anything exists on the Connect cluster.

Connector configs hold no password: they reference the replicator's credentials through the
workers' config provider — a local cluster's generated file (``${file:<path>:password}``), or on
an external Connect cluster the provider its ``replicator_credentials`` declare (file, directory
or environment variables), checked before anything is created (:mod:`stacks.links.connect_credentials`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from dr.base.errors import TopologyError
from dr.runtime.connect_link import wait_running
from dr.topology import ConnectCluster, Link, Topology
from stacks.engine_watch import die_with_engine

die_with_engine()  # in the provider process: exit when the engine does

__all__ = [
    "ConnectMirrorLink",
    "ConnectMirrorLinkArgs",
    "LocalConnectWorkers",
    "MirrorConnector",
    "connect_rest",
    "local_connect_runtime",
]

_WORKER_CONFIG = (
    "name",
    "workers",
    "base_port",
    "heap_mb",
    "home",
    "home_brokers",
    "home_port",
    "state_dir",
    "exactly_once",
)


def local_connect_runtime(props: dict[str, Any]):  # noqa: ANN201 - dr.runtime.connect.LocalConnectCluster
    """The runtime handle of a local Connect cluster from a resource's plain properties."""
    from dr.runtime.cluster import ClusterSpec, LocalCluster
    from dr.runtime.connect import ConnectSpec, LocalConnectCluster

    state = Path(props["state_dir"])
    home = LocalCluster(
        ClusterSpec(props["home"], brokers=int(props["home_brokers"]), base_port=int(props["home_port"])), state
    )
    return LocalConnectCluster(
        ConnectSpec(
            props["name"],
            workers=int(props["workers"]),
            base_port=int(props["base_port"]),
            heap_mb=int(props.get("heap_mb") or 768),
            exactly_once=bool(props.get("exactly_once")),
        ),
        home,
        state,
    )


def _start_workers(props: dict[str, Any]) -> dict[str, Any]:
    from dr.base.errors import DRError

    connect = local_connect_runtime(props)
    try:
        connect.write_secrets()
        connect.start()
    except Exception as exc:
        connect.stop()
        reason = str(exc) if isinstance(exc, DRError) else f"{type(exc).__name__}: {exc}"
        raise RuntimeError(
            f"Kafka Connect cluster {props['name']} could not start (workers stopped): {reason}"
        ) from None
    return {**props, "running": True, "url": connect.url}


class _WorkersProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"connect-{props['name']}", outs=_start_workers(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, {**props, "running": local_connect_runtime(props).alive()})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A new home cluster is a new Connect cluster (group and internal topics live there).
        replaces = [k for k in ("name", "home") if olds.get(k) != news.get(k)]
        changed = [k for k in _WORKER_CONFIG if olds.get(k) != news.get(k)]
        if olds.get("running") is False:
            changed.append("running")
        return DiffResult(changes=bool(changed), replaces=replaces, stables=["name"], delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        if any(olds.get(k) != news.get(k) for k in _WORKER_CONFIG):
            local_connect_runtime(olds).stop()
        return UpdateResult(outs=_start_workers(news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        local_connect_runtime(props).stop()


class LocalConnectWorkersArgs(dict):
    """Inputs of :class:`LocalConnectWorkers` (plain values: the dynamic provider serialises them)."""

    def __init__(
        self,
        *,
        name: str,
        workers: int,
        base_port: int,
        heap_mb: int,
        home: str,
        home_brokers: int,
        home_port: int,
        state_dir: str,
        exactly_once: bool = False,
    ) -> None:
        super().__init__(
            name=name,
            workers=workers,
            base_port=base_port,
            heap_mb=heap_mb,
            home=home,
            home_brokers=home_brokers,
            home_port=home_port,
            state_dir=state_dir,
        )
        # Only workers with exactly-once source support carry the flag: existing stacks keep their inputs.
        if exactly_once:
            self["exactly_once"] = True


class LocalConnectWorkers(Resource):
    """A Kafka Connect distributed cluster of ``workers`` processes on 127.0.0.1."""

    running: pulumi.Output[bool]
    url: pulumi.Output[str]

    def __init__(self, name: str, args: LocalConnectWorkersArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_WorkersProvider(), name, {**args, "running": None, "url": None}, opts)


# ---------------------------------------------------------------------------------------- connectors


def connect_rest(props: dict[str, Any]):  # noqa: ANN201 - dr.kafka.connect_rest.ConnectRest
    """A REST client for the Connect cluster a connector resource names (local: generated credentials)."""
    from dr.kafka.connect_rest import ConnectRest

    if props.get("local"):
        return local_connect_runtime(props["workers_props"]).rest()
    return ConnectRest(props["url"], username=props.get("username") or None, password=props.get("password") or None)


def _refuse(what: str, problems: list[str]) -> RuntimeError:
    listing = "\n".join(f"  - {p}" for p in problems)
    return RuntimeError(
        f"{what} was rejected by Kafka Connect's validation (nothing was created):\n{listing}\n"
        "fix the link in the stack file, then run `pulumi up` again"
    )


def _run(rest: Any, name: str, config: dict[str, str] | None, timeout: float) -> dict[str, Any]:
    """Put ``config`` (None: keep it) on the existing connector ``name`` and have it run from a clean start:
    stopped first when it is not healthy or its config changes — so no task state from before (a FAILED task
    of the old config, a connector left STOPPED) is read as the new one's — then resumed. Returns the status."""
    status = rest.status(name) or {}
    tasks = status.get("tasks") or []
    healthy = (status.get("connector") or {}).get("state") == "RUNNING" and all(
        t.get("state") == "RUNNING" for t in tasks
    )
    if config is not None or not healthy:
        rest.stop(name)
        rest.wait_state(name, "STOPPED", timeout=60, fail_fast=False)
        if config is not None:
            rest.put_config(name, config)
        rest.resume(name)
    return wait_running(rest, name, timeout)


def _create_connector(props: dict[str, Any]) -> dict[str, Any]:
    rest = connect_rest(props)
    name = props["connector"]
    config = dict(props["config"])
    for sibling, sibling_config in sorted((props.get("validate_first") or {}).items()):
        problems = rest.validate(dict(sibling_config))
        if problems:
            raise _refuse(f"connector {sibling}", problems)
    problems = rest.validate(config)
    if problems:
        raise _refuse(f"connector {name}", problems)
    timeout = float(props.get("timeout_s") or 90)
    if rest.config(name) is not None:
        # The Connect cluster already has it (state lost or imported, or an earlier run that stopped midway):
        # same link, offsets kept.
        status = _run(rest, name, config, timeout)
    else:
        try:
            # A new connector starts from the source's beginning: source offsets a deleted namesake left
            # in the Connect cluster's offsets topic (a link recreated under its old name, towards a
            # rebuilt source) would make it skip the records below them.
            rest.create_stopped(name, config)
            rest.reset_offsets(name)
            rest.resume(name)
            status = wait_running(rest, name, timeout)
        except Exception as exc:
            rest.delete(name)  # never a connector left stopped or failing for the next run to wait on
            raise RuntimeError(f"connector {name} did not run and was removed again: {exc}") from None
    return {**props, "state": status["connector"]["state"], "tasks": len(status.get("tasks", []))}


class _ConnectorProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=props["connector"], outs=_create_connector(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        status = connect_rest(props).status(id_)
        if status is None:  # deleted behind Pulumi's back: drop it from the state, `up` re-creates it
            return ReadResult("", {})
        tasks = status.get("tasks", [])
        state = status["connector"]["state"]
        if state == "RUNNING" and any(t.get("state") != "RUNNING" for t in tasks):
            state = "TASK_" + next(t["state"] for t in tasks if t.get("state") != "RUNNING")
        return ReadResult(id_, {**props, "state": state, "tasks": len(tasks)})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("connector", "url", "connect") if olds.get(k) != news.get(k)]
        changed = [k for k in ("config", "connector", "url", "connect") if olds.get(k) != news.get(k)]
        if olds.get("state") not in (None, "RUNNING"):
            changed.append("state")
        return DiffResult(changes=bool(changed), replaces=replaces, stables=["connector"], delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        rest = connect_rest(news)
        name = news["connector"]
        config: dict[str, str] | None = None
        if olds.get("config") != news.get("config"):
            config = dict(news["config"])
            problems = rest.validate(config)
            if problems:
                raise _refuse(f"connector {name}", problems)
        status = _run(rest, name, config, float(news.get("timeout_s") or 90))
        return UpdateResult(outs={**news, "state": status["connector"]["state"], "tasks": len(status.get("tasks", []))})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        connect_rest(props).delete(id_)


class MirrorConnector(Resource):
    """One MirrorMaker 2 connector on a Connect cluster (``state``: the connector's state at the last
    ``up``/``refresh``; ``TASK_FAILED`` when the connector runs but a task does not)."""

    state: pulumi.Output[str]
    tasks: pulumi.Output[int]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(_ConnectorProvider(), name, {**props, "state": None, "tasks": None}, opts)


# ---------------------------------------------------------------------------------------- component


def workers_props(topology: Topology, connect: ConnectCluster, state_dir: Path) -> dict[str, Any]:
    """The plain properties of a local Connect cluster (as :class:`LocalConnectWorkers` takes them)."""
    home = topology.cluster(connect.cluster)
    return dict(
        LocalConnectWorkersArgs(
            name=connect.name,
            workers=connect.workers,
            base_port=connect.base_port or 0,
            heap_mb=connect.heap_mb,
            home=home.name,
            home_brokers=home.brokers,
            home_port=home.base_port or 0,
            state_dir=str(state_dir),
            exactly_once=topology.connect_exactly_once(connect),
        )
    )


@dataclass(frozen=True, kw_only=True)
class ConnectMirrorLinkArgs:
    """A link running on a Connect cluster, and what must exist before its connectors."""

    topology: Topology
    link: Link
    state_dir: Path
    depends_on: list[pulumi.Resource]
    workers: LocalConnectWorkers | None = None
    """The local Connect cluster's resource (None for an external Connect cluster)."""
    internal_rf: int | None = None
    """Replication factor of MirrorMaker 2's internal topics on the target (None: the model's default)."""


class ConnectMirrorLink(pulumi.ComponentResource):
    """A replication flow from ``link.source`` to ``link.target`` as three connectors on a Connect cluster."""

    def __init__(self, name: str, args: ConnectMirrorLinkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("kafka-dr:index:ConnectMirrorLink", name, None, opts)
        from stacks.links.connect_config import connector_configs

        connect = args.topology.link_connect(args.link)
        if connect is None:
            raise TopologyError(f"link {args.link.name!r} names no Connect cluster", "set connect on the link")
        refs: tuple[str, str] | None = None
        if connect.is_local:
            wp = workers_props(args.topology, connect, args.state_dir)
            secrets = str(local_connect_runtime(wp).secrets_file())
            target: dict[str, Any] = {"local": True, "workers_props": wp, "connect": connect.name}
        else:
            if connect.replicator_credentials is None:  # validation refuses this; a bug if reached
                raise TopologyError(
                    f"Connect cluster {connect.name!r} declares no replicator_credentials",
                    "declare the config provider its workers use",
                )
            secrets = ""
            refs = connect.replicator_credentials.references()
            target = {
                "local": False,
                "url": connect.url,
                "username": connect.username or "",
                "password": pulumi.Output.secret(connect.password.get_secret_value())
                if connect.password is not None
                else "",
                "connect": connect.name,
            }
        configs = connector_configs(
            args.topology,
            args.link,
            **({"secrets_file": secrets} if secrets else {}),
            tasks_max=connect.tasks_max,
            credentials=refs,
            internal_rf=args.internal_rf,
            keystore=connect.replicator_credentials,
        )
        source_name = next(n for n in configs if n.endswith("-source"))
        deps = [*args.depends_on, *([args.workers] if args.workers is not None else [])]
        self.connectors: dict[str, MirrorConnector] = {}
        first = MirrorConnector(
            source_name,
            {
                **target,
                "connector": source_name,
                "config": configs[source_name],
                "validate_first": {n: c for n, c in configs.items() if n != source_name},
            },
            pulumi.ResourceOptions(parent=self, depends_on=deps),
        )
        self.connectors[source_name] = first
        for connector, config in configs.items():
            if connector == source_name:
                continue
            self.connectors[connector] = MirrorConnector(
                connector,
                {**target, "connector": connector, "config": config},
                pulumi.ResourceOptions(parent=self, depends_on=[*deps, first]),
            )
        self.register_outputs(
            {
                "source": args.link.source,
                "target": args.link.target,
                "connect": connect.name,
                "connectors": {n: c.state for n, c in self.connectors.items()},
            }
        )
