"""Helpers for integration tests: topics, producing and consuming against real clusters."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr.kafka.client import Endpoint
from dr.runtime.cluster import LocalCluster
from dr.runtime.process import wait_until
from tests import processes


def create_topic(
    cluster: LocalCluster, name: str, partitions: int = 3, rf: int = 1, config: dict[str, str] | None = None
) -> None:
    """Create a topic as the admin super-user and wait for it."""
    admin = AdminClient(cluster.endpoint().config())
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])
    futures[name].result(timeout=30)


def produce(endpoint: Endpoint, topic: str, keys: list[str], **extra: object) -> tuple[list[str], list[KafkaError]]:
    """Produce one record per key with acks=all; return (acknowledged keys, errors)."""
    acked: list[str] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg) -> None:  # noqa: ANN001
        if err is None:
            acked.append(msg.key().decode())
        else:
            errors.append(err)

    producer = Producer(endpoint.config(**{"acks": "all", "enable.idempotence": False, "linger.ms": 5, **extra}))
    for key in keys:
        producer.produce(topic, key=key, value=f"value-{key}", on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(60)
    return acked, errors


def consume_all(
    endpoint: Endpoint,
    topic: str,
    expected: int,
    timeout: float = 60,
    group: str | None = None,
    *,
    assigned: bool = False,
) -> list[str]:
    """Read a topic from the beginning until ``expected`` records or ``timeout``; return keys.

    ``assigned``: take every partition by assignment, never joining a group — how an application reads
    a passive cluster, where it holds no group right (only the replicator keeps offsets there)."""
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": group or f"reader-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )
    if assigned:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    else:
        consumer.subscribe([topic])
    keys: list[str] = []
    try:
        wait_until(lambda: _poll_into(consumer, keys) >= expected, timeout, interval=0)
    finally:
        consumer.close()
    return keys


def _poll_into(consumer: Consumer, keys: list[str]) -> int:
    for msg in consumer.consume(1000, timeout=0.5):
        if msg.error() is None:
            keys.append(msg.key().decode())
    return len(keys)


def teardown_stack(stack: str, original, state) -> None:  # noqa: ANN001 - Topology, Path
    """`pulumi destroy` of a test stack; then stop whatever either side of a failover left running."""
    from dr.base.stackref import StackRef, stack_dir
    from dr.estate.estate import Estate
    from dr.estate.stack import EstateStack

    try:
        EstateStack(StackRef(stack, stack_dir(), state)).destroy()
    finally:
        for topology in (original.after_failover(), original):
            estate = Estate(topology, state)
            estate.stop()
            for c in topology.clusters:
                if c.kind.value == "local":
                    estate.local_cluster(c.name).destroy()


def write_local_stack(
    root: Path,
    stack: str,
    ports: tuple[int, ...],
    *,
    one_broker: tuple[str, ...] = ("A",),
    example: str = "Pulumi.local.yaml",
    connect_ports: tuple[int, ...] = (),
    local_tls: bool = False,
) -> Path:
    """The example stack file ``example`` copied as ``<root>/Pulumi.<stack>.yaml`` on ``ports`` (A, B,
    C), the clusters named in ``one_broker`` cut to a single broker and its Connect clusters on
    ``connect_ports``, every cluster serving SASL_SSL with the estate's own CA if ``local_tls``; returns
    the file."""
    import yaml

    from tests import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / example).read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], ports, strict=True):
        c["base_port"] = port
        if c["name"] in one_broker:
            c["brokers"], c["racks"] = 1, ["r1"]
        if local_tls:
            c["local_tls"] = True
    for c, port in zip(doc["config"].get("kafka-dr:connectClusters", []), connect_ports, strict=True):
        c["base_port"] = port
    path = Path(root) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def jvms_under(path: Path) -> list[str]:
    """The product's JVMs (brokers, MirrorMaker 2) whose command line names ``path``."""
    out = processes.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "kdr.process" in line and str(path) in line]


class StackEnv(dict[str, str]):
    """The environment of one test stack (``KDR_STACK_DIR``/``KDR_STATE_DIR``) and its paths: the stack file in
    ``root``, the state in ``root/state`` unless ``state_dir`` says where."""

    def __init__(self, root: Path, stack: str, *, state_dir: Path | None = None) -> None:
        state = Path(root) / "state" if state_dir is None else Path(state_dir)
        super().__init__(KDR_STACK_DIR=str(root), KDR_STATE_DIR=str(state))
        self.root, self.stack = Path(root), stack

    @property
    def stack_file(self) -> Path:
        return self.root / f"Pulumi.{self.stack}.yaml"

    @property
    def state(self) -> Path:
        return Path(self["KDR_STATE_DIR"]) / self.stack

    def estate(self):  # noqa: ANN201 - dr.estate.estate.Estate, imported late like the other helpers
        """The estate as the stack file declares it now."""
        from dr.estate.estate import Estate
        from dr.topology import load_stack_file

        return Estate(load_stack_file(self.stack_file), self.state)


class ProjectEnv:
    """An operator's own Pulumi project, as a platform team keeps it beside clusters the product did not start:
    a project directory holding ``Pulumi.yaml`` and the stack file, a file backend, a 0600 passphrase file,
    and the state directory (:meth:`create` makes them and the stack, :meth:`secret` sets a stack secret the
    way the team does, ``pulumi config set --secret``)."""

    def __init__(self, root: Path, stack: str) -> None:
        self.root, self.stack = Path(root), stack
        self.project = self.root / "project"
        self.vars = {
            **StackEnv(self.project, stack, state_dir=self.root / "state"),
            "PULUMI_BACKEND_URL": f"file://{self.root / 'backend'}",
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(self.root / "passphrase"),
        }
        self.outputs: list[str] = []
        """Every drctl output of this environment, for the checks that no secret reached one."""

    @property
    def stack_file(self) -> Path:
        return self.project / f"Pulumi.{self.stack}.yaml"

    @property
    def state(self) -> Path:
        return Path(self.vars["KDR_STATE_DIR"]) / self.stack

    @property
    def home(self) -> Path:
        """Where the failover journal and lock live: beside the stack in its file backend."""
        backend = Path(self.vars["PULUMI_BACKEND_URL"].removeprefix("file://"))
        return backend / ".pulumi" / "kdr" / "kafka-dr" / self.stack

    def create(self, doc: dict[str, Any], passphrase: str = "correct horse battery staple") -> None:
        """The project, the stack file ``doc``, the backend, the passphrase file and ``pulumi stack init``."""
        import os

        import yaml

        self.project.mkdir(parents=True)
        (self.root / "passphrase").write_text(passphrase + "\n")
        os.chmod(self.root / "passphrase", 0o600)
        (self.root / "backend").mkdir()
        (self.project / "Pulumi.yaml").write_text("name: kafka-dr\nruntime: python\n")
        self.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        res = self.pulumi("stack", "init", self.stack)
        assert res.returncode == 0, res.stderr

    def secret(self, path: str, value: str, stack: str | None = None) -> None:
        """``pulumi config set --path --secret -- <path> <value>`` (after ``--``: a value may start with "-")."""
        res = self.pulumi("config", "set", "--stack", stack or self.stack, "--path", "--secret", "--", path, value)
        assert res.returncode == 0, res.stderr

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The Pulumi CLI in the project, as the operator runs it (global flags first)."""
        import os

        from dr.base.pulumi_env import pulumi_env

        env = {**os.environ, **pulumi_env(self.vars["PULUMI_BACKEND_URL"]), **self.vars}
        return processes.run(
            ["pulumi", "--cwd", str(self.project), "--non-interactive", *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip

    def drctl(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """:func:`drctl` in this environment, its output kept in :attr:`outputs`."""
        return drctl(self.vars, *args, timeout=timeout, outputs=self.outputs)


def drctl(
    env: dict[str, str], *args: str, timeout: float = 900, outputs: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``drctl <args>`` in a subprocess, as an operator runs it; its output appended to ``outputs``."""
    import os
    import sys

    from tests import REPO_ROOT

    res = processes.run(
        [sys.executable, "-m", "dr.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    if outputs is not None:
        outputs.append(res.stdout + res.stderr)
    return res


@contextmanager
def provisioned(env: StackEnv, up: Callable[[], None] | None = None) -> Iterator[StackEnv]:
    """``env`` set in this process, the stack provisioned (``drctl estate up`` unless ``up`` is given)
    and, on the way out, destroyed with whatever either side of a failover left running — checked."""
    import pytest

    from dr.topology import load_stack_file

    original = load_stack_file(env.stack_file)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        try:
            if up is None:
                res = drctl(env, "estate", "up", "--stack", env.stack)
                assert res.returncode == 0, res.stderr[-3000:]
            else:
                up()
            yield env
        finally:
            teardown_stack(env.stack, original, env.state)
    left = jvms_under(env.root)
    assert not left, f"processes left running: {left}"


def mm2_checkpoints(target: Endpoint, source_alias: str, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """The last checkpoint MirrorMaker 2 wrote for ``group`` on a link's ``target``, per partition of the
    target's topic: ``{(topic, partition): (upstream offset, downstream offset)}``, read (as the admin)
    from ``<source_alias>.checkpoints.internal``. The records are MirrorMaker 2's own ``Checkpoint``
    encoding: key (group string, topic string, partition int32), value (version int16, upstream int64,
    downstream int64, metadata string); strings are an int16 length and UTF-8 bytes."""
    import struct

    from confluent_kafka import TopicPartition

    from dr.kafka.offsets import end_offsets

    def strings(buf: bytes, at: int, n: int) -> tuple[list[str], int]:
        out = []
        for _ in range(n):
            (size,) = struct.unpack_from(">h", buf, at)
            out.append(buf[at + 2 : at + 2 + size].decode())
            at += 2 + size
        return out, at

    topic = f"{source_alias}.checkpoints.internal"
    ends = {tp: n for tp, n in end_offsets(target, [topic]).items() if n > 0}
    found: dict[tuple[str, int], tuple[int, int]] = {}
    if not ends:
        return found
    consumer = Consumer(target.config(**{"group.id": f"kdr-test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(t, p, 0) for (t, p) in ends])
        left = dict(ends)
        for _ in range(60):  # each consume waits at most 0.5 s
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    continue
                tp = (msg.topic(), msg.partition())
                if msg.offset() + 1 >= left.get(tp, 0):
                    left.pop(tp, None)
                key, value = msg.key(), msg.value()
                if not key or not value:
                    continue
                (g, t), at = strings(key, 0, 2)
                if g == group:
                    (partition,) = struct.unpack_from(">i", key, at)
                    _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
                    found[(t, partition)] = (upstream, downstream)
            # the consumer's position passes a transaction's commit marker, which no record carries: an
            # exactly-once MirrorMaker 2 ends its checkpoints topic with one, so the last record is end - 2
            for tp in consumer.position([TopicPartition(t, p) for (t, p) in left]):
                if tp.offset >= left.get((tp.topic, tp.partition), 0):
                    left.pop((tp.topic, tp.partition), None)
            if not left:
                break
    finally:
        consumer.close()
    return found


def link_copied(estate: Any, link_name: str, topics: list[str], timeout: float = 90) -> bool:
    """True once link ``link_name`` of ``estate`` (a :class:`dr.estate.estate.Estate`) has copied every
    committed record its source holds now, judged as the failover judges it
    (:func:`dr.failover.frame.converge.wait_copied`): an exactly-once link by the source offsets it committed,
    not by equal end offsets (its target's ends also count commit markers)."""
    import functools

    from dr.base.errors import ClusterError
    from dr.failover.frame.converge import wait_copied
    from dr.topology.topics import target_topic

    topology = estate.topology
    link = next(lk for lk in topology.links if lk.name == link_name)
    try:
        wait_copied(
            estate.endpoint(link.source),
            estate.endpoint(link.target),
            topics,
            timeout=timeout,
            what=f"link {link_name}",
            rename=functools.partial(target_topic, topology, link),
            copied=estate.copied_positions(link_name),
        )
    except ClusterError:
        return False
    return True


def committed_counts(endpoint: Endpoint, topics: list[str]) -> dict[tuple[str, int], int]:
    """Per partition, how many committed records ``endpoint`` holds (commit markers and aborted records
    excluded, unlike the difference of its offsets)."""
    from dr.kafka.offsets import end_offsets

    ends = {tp: n for tp, n in end_offsets(endpoint, topics).items() if n > 0}
    counts = dict.fromkeys(end_offsets(endpoint, topics), 0)
    if not ends:
        return counts
    consumer = Consumer(
        endpoint.config(
            **{
                "group.id": f"kdr-test-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
    )
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in ends])
        left = dict(ends)
        for _ in range(240):  # each consume waits at most 0.5 s
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    counts[(msg.topic(), msg.partition())] += 1
            for tp in consumer.position([TopicPartition(t, p) for (t, p) in left]):
                if tp.offset >= left[(tp.topic, tp.partition)]:
                    left.pop((tp.topic, tp.partition))
            if not left:
                break
    finally:
        consumer.close()
    return counts


def stop_copying(rest: Any, connector: str, timeout: float = 60) -> None:
    """Stop source connector ``connector`` (a :class:`dr.kafka.connect_rest.ConnectRest` at ``rest``) so that
    nothing written to its source from now on is copied: paused first, until each of its tasks reports
    PAUSED — a task writes that itself, at the top of its send loop, and polls no more — then stopped,
    until Connect reports it STOPPED with no task. The stop alone gives no such event: Connect drops a
    stopped connector's task statuses in the rebalance that tells their worker to stop them, so an empty
    task list may show while a task still finishes its last poll."""
    import urllib.parse

    # the product never pauses a connector, so ConnectRest has no method for it
    rest._call("PUT", f"/connectors/{urllib.parse.quote(connector, safe='')}/pause")

    def paused() -> bool:
        status = rest.status(connector) or {}
        tasks = status.get("tasks") or []
        return (
            (status.get("connector") or {}).get("state") == "PAUSED"
            and all(t.get("state") == "PAUSED" for t in tasks)
            and bool(tasks)
        )

    assert wait_until(paused, timeout, interval=0.2), f"{connector} did not pause: {rest.status(connector)}"
    rest.stop(connector)

    def stopped() -> bool:
        status = rest.status(connector) or {}
        return (status.get("connector") or {}).get("state") == "STOPPED" and not status.get("tasks")

    assert wait_until(stopped, timeout, interval=0.2), f"{connector} did not stop: {rest.status(connector)}"
