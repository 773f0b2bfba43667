"""The frame every drill shares, whichever the architecture: its options, the copy of the stack it runs
on and the one way every drill on a copy ends (:func:`on_a_copy`), the restart of a killed cluster, the
teardown.

Each architecture's drill (``drill.py`` of :mod:`dr.failover.kinds`) runs its game day in it and grades
it (:mod:`dr.failover.drill.grade`, :mod:`dr.failover.drill.result`, :mod:`dr.failover.drill.render`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from dr.base.errors import ConfigError
from dr.base.files import private_dir, write_json
from dr.base.stackref import StackRef, stack_file
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.estate.stack_owner import claim
from dr.failover.act.groups import translated_within
from dr.failover.drill.grade import DEFAULT_AIMS
from dr.failover.drill.last import DrillOutcome, record_last_drill
from dr.failover.drill.phases import PhaseClock
from dr.failover.drill.result import LinkRestart
from dr.runtime.cluster import LocalCluster
from dr.runtime.mirrormaker import restarts_under
from dr.runtime.process import port_free, wait_until
from dr.topology import Topology, load_stack_file

__all__ = [
    "MARKER",
    "DrillCopy",
    "DrillOptions",
    "DrillRecord",
    "current_topology",
    "drill_stack",
    "first_translation_within",
    "link_restarts",
    "on_a_copy",
    "prepare_copy",
    "restart",
    "teardown",
    "utc_now",
]


MARKER = ".kdr-drill"


@dataclass(kw_only=True)
class DrillOptions:
    """How the drill runs (the ``drctl drill`` flags)."""

    stack: str = "local"
    out: Path
    unplanned: bool = False
    rate: int = 500
    """Records per second the producer writes."""
    warmup_s: float = 6.0
    """Seconds of traffic before A fails."""
    base_port: int | None = None
    """Move the clusters to ``base_port``, ``+100``, ``+200``... and a client endpoint's ports right after
    them (default: the stack's ports)."""
    keep: bool = False
    """Leave the drill's clusters running at the end."""
    cycles: int = 1
    """Failovers in a row: A→B→C, then B→C→A (A rebuilt as the standby), then C→A→B..."""
    aims: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_AIMS))
    strict_aims: bool = False
    """A timing aim missed fails the drill (otherwise it is graded MISSED and reported: load alone can miss it)."""
    kill_replicator: bool = False
    """SIGKILL the active→passive link's replicator mid-copy in each cycle's warm-up, then start it again
    (:mod:`dr.failover.drill.replicator_crash`); graded: no record twice on the passive."""
    automatic: bool = False
    """With ``unplanned``: nobody runs the failover — the controllers beside A and B and a third site's observer
    do, on a witness of the drill's own (:mod:`dr.failover.drill.unattended`)."""


def first_translation_within(topology: Topology, target: str) -> float:
    """How long a drill waits for the link into ``target`` to translate its traffic's new consumer group
    once, before it fails the source: a precondition, not a graded figure. Twice the link's bound
    (:func:`dr.failover.act.groups.translated_within`): a group the link has just discovered is translated
    after its checkpoint tasks restart, which on a loaded 2-core machine took longer than one bound (28 s
    against 26 s, under exactly-once with the suite beside it; 17 s alone)."""
    return 2 * translated_within(topology, target)


def restart(cluster: LocalCluster, timeout: float = 90.0) -> None:
    """Start a killed cluster again once its ports are free.

    Right after a SIGKILL the kernel may still hold one of its ports for a while (seen on the
    controller port), and ``LocalCluster.start`` refuses a taken port.
    """
    wait_until(lambda: all(port_free(p) for p in cluster.spec.ports()), timeout, interval=0.5)
    cluster.start()


def utc_now() -> str:
    """Now, as the links' watchdogs record their restarts (UTC, ISO 8601 to the second)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def link_restarts(state: Path, since: str) -> list[LinkRestart]:
    """The restarts the links' watchdogs made at or after ``since`` (UTC, ISO 8601, as they record it)
    in the drill's estate under ``state``, oldest first; read before the teardown removes them."""
    found = [
        LinkRestart(link=link, at=r["at"], tasks=r["tasks"])
        for link, done in restarts_under(state).items()
        for r in done
        if r["at"] >= since
    ]
    return sorted(found, key=lambda r: r.at)


def prepare_copy(options: DrillOptions, source: Path | None = None) -> tuple[Path, Path]:
    """Copy the stack file ``source`` (default: that of the stack ``options`` names) into ``<out>/stack/``
    (moved to ``--base-port`` if given; ``<out>`` must be new, empty or an earlier drill's); return the copy's
    path and its state directory ``<out>/state``."""
    out = options.out.resolve()
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ConfigError(
            f"{out} is not empty and was not written by a drill.", "pass --out with a new or empty directory"
        )
    for sub in ("stack", "state", "pulumi"):
        shutil.rmtree(out / sub, ignore_errors=True)
    private_out(out)
    private_dir(out / "stack")
    (out / MARKER).write_text("written by drctl drill\n")
    doc = yaml.safe_load((source or stack_file(options.stack)).read_text())
    if options.base_port is not None:
        for i, c in enumerate(doc["config"]["kafka-dr:clusters"]):
            c["base_port"] = options.base_port + 100 * i
        endpoint = doc["config"].get("kafka-dr:endpoint")
        if endpoint:  # its ports follow, right after the clusters' windows
            first = options.base_port + 100 * len(doc["config"]["kafka-dr:clusters"])
            slots = len(endpoint.pop("brokerPorts", None) or endpoint.pop("broker_ports", None) or [])
            endpoint.pop("bootstrap_port", None)
            endpoint["bootstrapPort"] = first
            endpoint["brokerPorts"] = [first + 1 + i for i in range(slots)]
    for key in ("kafka-dr:failoverPolicy", "kafka-dr:failover_policy"):
        policy = doc["config"].get(key)
        if isinstance(policy, dict) and policy.get("mode") == "automatic":
            # a drill runs no controller: in mode automatic its copy's brokers would run the lease fence and
            # refuse every application write, waiting for a lease permit nobody writes
            policy["mode"] = "manual"
    if options.automatic:
        from dr.failover.drill.unattended import drill_policy

        policy = drill_policy(doc["config"])
        for key in ("kafka-dr:failoverPolicy", "kafka-dr:failover_policy"):
            doc["config"].pop(key, None)
        doc["config"]["kafka-dr:failoverPolicy"] = policy
    stack_path = out / "stack" / f"Pulumi.{options.stack}.yaml"
    stack_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return stack_path, out / "state"


def private_out(out: Path) -> Path:
    """``out`` (a drill's: new, empty or an earlier drill's) made 0700, also when it existed with a wider
    mode: it holds the drill's backend, generated credentials and passphrase."""
    private_dir(out)
    out.chmod(0o700)
    return out


def drill_stack(stack_path: Path, state: Path) -> tuple[StackRef, Callable[[], None]]:
    """The drill's copy as a stack on a backend of its own, ``file://<out>/pulumi``, created here and
    owned by the drill (:mod:`dr.estate.stack_owner`), whatever backend the environment or the project
    names; and a function that undoes what this did to the process.

    Until that function is called this process's ``PULUMI_BACKEND_URL`` names the drill's backend, so
    that the failover's journal, lease and audit state (which follow the backend) stay the drill's too."""
    backend_dir = Path(state).parent / "pulumi"
    token = claim(backend_dir)
    ref = StackRef.of_file(stack_path, state, backend=f"file://{backend_dir}", owner=token)
    before = os.environ.get("PULUMI_BACKEND_URL")
    os.environ["PULUMI_BACKEND_URL"] = ref.pulumi_backend

    def restore() -> None:
        if before is None:
            os.environ.pop("PULUMI_BACKEND_URL", None)
        else:
            os.environ["PULUMI_BACKEND_URL"] = before

    return ref, restore


def current_topology(stack_path: Path) -> list[Topology]:
    """The stack file's topology now (a failover may have rewritten it), if it still loads."""
    try:
        return [load_stack_file(stack_path)]
    except Exception:  # noqa: BLE001 - teardown goes on with the topologies already seen
        return []


def teardown(ref: StackRef, topologies: tuple[Topology, ...], progress: Progress) -> None:
    """``pulumi destroy`` of the drill's stack; should it fail, stop every process the drill's
    topologies name anyway, so that no JVM outlives the drill."""
    try:
        EstateStack(ref).destroy(progress)
        return
    except Exception as exc:  # noqa: BLE001 - teardown must go on
        progress(f"drill: `pulumi destroy` failed ({str(exc).splitlines()[0]}); stopping the processes directly")
    for topology in topologies:
        Estate(topology, ref.state_dir).stop()


class DrillRecord(DrillOutcome, Protocol):
    """What :func:`on_a_copy` writes of every drill's result: its seconds, the links' restarts, its JSON."""

    seconds: float
    link_restarts: list[LinkRestart]

    def to_json(self) -> dict[str, Any]:
        """The result as ``<out>/drill.json`` holds it."""


@dataclass
class DrillCopy:
    """The copy of the stack a drill runs on (:func:`on_a_copy`): its stack file, its state directory, the
    :class:`StackRef` of it on the drill's own backend, and every topology it has had (the first one as
    copied), each torn down at the end."""

    path: Path
    state: Path
    ref: StackRef
    seen: list[Topology]


@contextmanager
def on_a_copy(
    own: StackRef,
    options: DrillOptions,
    result: DrillRecord,
    progress: Progress,
    *,
    clock: PhaseClock | None = None,
    conclude: Callable[[], None] = lambda: None,
) -> Iterator[DrillCopy]:
    """Run the ``with`` block on a copy of the stack ``own`` (:func:`prepare_copy`, on a backend of its own:
    :func:`drill_stack`), and end every drill on a copy the same way, whatever happened in it: ``result``'s
    seconds and the links' restarts, the teardown unless ``options.keep`` (timed on ``clock`` as the phase
    ``teardown``, when given), the process's backend restored, ``conclude()`` (the drill's grade), then
    ``<out>/drill.json`` and the stack's last drill (the controller's ``kdr_drill_*`` metrics)."""
    stack_path, state = prepare_copy(options, own.existing_stack_file())
    ref, restore_backend = drill_stack(stack_path, state)  # never the real stack's backend
    copy = DrillCopy(path=stack_path, state=state, ref=ref, seen=[load_stack_file(stack_path)])
    t_start, started_at = time.monotonic(), utc_now()
    try:
        yield copy
    finally:
        result.seconds = round(time.monotonic() - t_start, 3)
        result.link_restarts = link_restarts(state, started_at)
        if not options.keep:
            progress("drill: tearing the drill's estate down (`pulumi destroy`: processes stopped, data removed)")
            with clock.phase("teardown") if clock is not None else nullcontext():
                teardown(ref, (*copy.seen, *current_topology(stack_path)), progress)
        restore_backend()
        conclude()
        write_json(options.out.resolve() / "drill.json", result.to_json())
        record_last_drill(own.made_state_dir(), result)
