"""``drctl drill`` on a hub-and-spoke stack: a graded hub failover game day.

Like the active-passive drill (:mod:`dr.failover.kinds.active_passive.drill`), on a copy of the stack under ``<out>``:

1. provision the edges, the hub H, its passive copy P and their links (``pulumi up`` of the copy);
2. traffic: every edge application that writes produces keyed records on its edge (``acks=all``, a
   delivery ledger); on H, the first hub application that writes produces on its topic, and the hub's
   consumer group reads the edge copies it declares (``E1.readings``...), committing as it goes — the
   hub's applications follow the client configuration the failover publishes;
3. fail H: planned (the pipeline fences and drains it) or ``--unplanned`` (SIGKILL mid-traffic);
4. ``drctl failover``: P promoted, every edge link re-pointed at P where H's copy ended; unplanned,
   H is brought back, verified against P and the records it never passed on recovered;
5. prove and grade: every acknowledged edge record on P exactly once (missing and duplicates per
   edge), the hub's acknowledged records on P, application RTO per hub application (edge
   applications never move: their writes during the failover are counted), H→P→S, the failover's
   status. The text report and ``<out>/drill.json``; everything torn down unless ``keep``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Literal

from pydantic import Field

from dr.base.errors import ClusterError, ConfigError
from dr.base.stackref import StackRef
from dr.base.types import Model as _Model
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import publish_clients
from dr.failover.act.health import listening
from dr.failover.drill.frame import (
    DrillOptions,
    current_topology,
    first_translation_within,
    on_a_copy,
)
from dr.failover.drill.grade import DEFAULT_AIMS, Aim, Finding, graded
from dr.failover.drill.render import restart_lines
from dr.failover.drill.result import ApplicationRto, Check, LinkRestart
from dr.failover.drill.traffic import (
    ConfigSource,
    ConsumerLoop,
    ProducerLoop,
    SnapshotLoop,
    Traffic,
    read_keys,
    rto_gap,
    start_config,
)
from dr.failover.frame.roles import Roles
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.active_passive.drill import fail_over, prove_and_recover
from dr.failover.kinds.hub_spoke.steps import HUB_STEPS
from dr.failover.record.metrics import seconds_between
from dr.kafka.offsets import committed_offsets
from dr.runtime.process import wait_until
from dr.topology import Kind, Topology
from dr.topology.hub_spoke import edges
from dr.topology.topics import remote_topic

__all__ = ["EdgeProof", "HubDrillResult", "hub_drill_refusal", "run_hub_drill"]


class EdgeProof(_Model):
    """One edge's records against their copy ``<edge>.<topic>`` on the new hub."""

    edge: str
    application: str
    topic: str
    acknowledged: int
    acknowledged_during_failover: int
    """Writes the edge acknowledged between the hub's failure and the end of the failover (edges never stop)."""
    on_new_hub: int
    lost: int
    """Acknowledged on the edge, not on the new hub."""
    duplicates: int
    """Acknowledged records the new hub holds more than once (MirrorMaker 2 is at-least-once)."""


class HubDrillResult(_Model):
    """A hub-and-spoke drill, graded (what ``drill.json`` holds)."""

    stack: str
    architecture: Literal["hub-spoke"] = "hub-spoke"
    mode: Literal["planned", "unplanned"]
    out: str
    hub: str = ""
    new_hub: str = ""
    standby: str | None = None
    provision_s: dict[str, float] | None = None
    failover: FailoverSummary | None = None
    edges: list[EdgeProof] = Field(default_factory=list)
    hub_topic: str = ""
    hub_acknowledged: int = 0
    hub_lost_after_recovery: int = 0
    verification_exact: bool = False
    never_reached_new_hub: int = 0
    application_rto: list[ApplicationRto] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    link_restarts: list[LinkRestart] = Field(default_factory=list)
    """Links whose watchdog restarted them during the drill, after a task died."""
    grade: str = "INCOMPLETE"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return self.grade.startswith("PASS")

    def to_json(self) -> dict[str, Any]:
        """``drill.json``."""
        return self.model_dump(mode="json")

    def render(self) -> str:
        """The text report."""
        lines = [
            f"drill of hub-and-spoke stack {self.stack} ({self.mode}): {self.grade}",
            f"hub failover {self.hub}→{self.new_hub}→{self.standby or '—'}: "
            + (
                f"{self.failover.status}, H→P→S {self.failover.a_b_c_s}s, RTO {self.failover.rto_s}s"
                if self.failover
                else "did not run"
            ),
        ]
        if self.failover is not None:
            lines += [
                f"  step {st.name}: {st.status} — {st.summary}"
                for st in self.failover.steps
                if st.status not in ("done", "skipped")
            ]
            v = self.failover.verdict
            if v is not None and not v.clean:
                lines.append(f"  verification {v.counts} per topic {v.per_topic}; report {v.report_dir}")
        for e in self.edges:
            lines.append(
                f"edge {e.edge} ({e.application} → {e.topic}): {e.acknowledged} acknowledged "
                f"({e.acknowledged_during_failover} during the failover); on {self.new_hub} as "
                f"{remote_topic(e.edge, e.topic)}: {e.on_new_hub}, lost {e.lost}, duplicates {e.duplicates}"
            )
        lines.append(
            f"hub's own {self.hub_topic}: {self.hub_acknowledged} acknowledged on {self.hub}; "
            f"{self.never_reached_new_hub} never reached {self.new_hub}; lost after recovery "
            f"{self.hub_lost_after_recovery}"
        )
        for r in self.application_rto:
            lines.append(f"application RTO {r.application} ({r.kind}): {r.rto_s}s — {r.measured}")
        lines += [f"  [{c.result}] {c.check}" for c in self.checks]
        lines += restart_lines(self.link_restarts)
        lines.append(f"{self.seconds:.0f}s in all; drill.json in {self.out}")
        return "\n".join(lines)


def hub_drill_refusal(options: DrillOptions, topology: Topology) -> ConfigError | None:
    """Why the hub drill may not run on ``topology`` as asked, or None. Pure."""
    stack = options.stack
    outside = [c.name for c in topology.clusters if c.kind is not Kind.LOCAL]
    if outside:
        return ConfigError(
            f"stack {stack!r} is hub-and-spoke on clusters this machine does not own ({', '.join(outside)}); "
            "the hub-and-spoke drill runs on local estates only.",
            f"run `drctl failover --stack {stack} --dry-run`, then the failover itself (runbooks/hub-and-spoke.md). "
            "Nothing was changed",
        )
    if options.cycles > 1:
        return ConfigError(
            f"--cycles {options.cycles}: a hub-and-spoke drill runs one hub failover.",
            f"run `drctl drill --stack {stack}` without --cycles. Nothing was changed",
        )
    if options.kill_replicator:
        return ConfigError(
            "--kill-replicator crashes the link of an active-passive drill; the hub-and-spoke drill does not "
            "crash a replicator.",
            f"run `drctl drill --stack {stack}` without --kill-replicator. Nothing was changed",
        )
    hub = topology.active().name
    if not [a for a in topology.principals.applications if (a.home or hub) == hub and topology.produced_by(a)]:
        return ConfigError(
            f"stack {stack!r} has no application on hub {hub} that writes a declared topic: the drill "
            "proves the hub's own records reach its copy through one.",
            "declare one (e.g. `produces: [readings]` on a hub application). Nothing was changed",
        )
    return None


class _HubTraffic:
    """The drill's applications: a producer per edge application, the hub's producer and consumer group."""

    def __init__(self, estate: Estate, state: Any, rate: int) -> None:
        t = estate.topology
        self.hub = t.active().name
        clusters = {estate.local_cluster(c.name).bootstrap: c.name for c in t.clusters}
        boot = {name: b for b, name in clusters.items()}
        self.edge_producers: dict[str, tuple[str, ProducerLoop]] = {}
        for e in edges(t):
            for app in [a for a in t.principals.applications if a.home == e.name and t.produced_by(a)]:
                conf = start_config(estate, state, app, e.name, boot[e.name])
                conf.pop("group.id", None)
                loop = ProducerLoop(
                    conf, e.name, t.produced_by(app)[0], rate, ConfigSource(state, app.name, clusters), app.name
                )
                self.edge_producers[app.name] = (e.name, loop)
        hub_apps = [a for a in t.principals.applications if (a.home or self.hub) == self.hub]
        writer = next(a for a in hub_apps if t.produced_by(a))
        conf = start_config(estate, state, writer, self.hub, boot[self.hub])
        conf.pop("group.id", None)
        producer = ProducerLoop(
            conf, self.hub, t.produced_by(writer)[0], rate, ConfigSource(state, writer.name, clusters), writer.name
        )
        self.traffic = Traffic(
            producer, None, SnapshotLoop(estate.endpoint(self.hub), state, self.hub, [producer.topic]), writer, None
        )
        reader = next((a for a in hub_apps if a.consumer_group and a.consumes), None)
        self.group = reader.consumer_group if reader else None
        self.readers: list[ConsumerLoop] = []
        if reader is not None:
            for topic in reader.consumes:  # one member per edge copy it reads, one group
                self.readers.append(
                    ConsumerLoop(
                        start_config(estate, state, reader, self.hub, boot[self.hub]),
                        self.hub,
                        topic,
                        ConfigSource(state, reader.name, clusters),
                    )
                )

    def threads(self) -> list[Any]:
        return [*self.traffic.threads(), *(p for _e, p in self.edge_producers.values()), *self.readers]

    def start(self) -> None:
        for t in self.threads():
            t.start()

    def stop(self) -> None:
        for t in self.threads():
            if t.is_alive():
                t.stop()

    def rto(self, new_hub: str) -> list[ApplicationRto]:
        """RTO per hub application: its writes (last ack on H → first on P), its group's reads (last
        commit on H → first record read on P)."""
        p, p_app = self.traffic.producer, self.traffic.producer_app.name
        out = [rto_gap(p_app, "writes", p.ack_times(self.hub), p.ack_times(new_hub), self.hub, new_hub)]
        if self.group and self.readers:
            commits = [t for r in self.readers for c, t in r.commits if c == self.hub]
            firsts = [t for r in self.readers for c, _k, t in r.reads if c == new_hub]
            reads = rto_gap(self.group, "reads", commits, firsts, self.hub, new_hub)
            last_read = max((t for r in self.readers for c, _k, t in r.reads if c == self.hub), default=None)
            reads.data_gap_s = seconds_between(last_read, min(firsts, default=None))
            out.append(reads)
        return out


def run_hub_drill(
    own: StackRef, topology: Topology, options: DrillOptions, progress: Progress = lambda _m: None
) -> HubDrillResult:
    """Run the hub-and-spoke game day (module doc) on a copy of the stack ``own``, whose topology is
    ``topology``; return the graded result (also ``<out>/drill.json``)."""
    refusal = hub_drill_refusal(options, topology)
    if refusal is not None:
        raise refusal
    result = HubDrillResult(
        stack=options.stack, mode="unplanned" if options.unplanned else "planned", out=str(options.out.resolve())
    )
    traffic: _HubTraffic | None = None
    with on_a_copy(own, options, result, progress) as copy:
        ref, state, seen, topology = copy.ref, copy.state, copy.seen, copy.seen[0]
        stack_path = copy.path
        try:
            roles = Roles.of(topology)
            H, P = roles.source.name, roles.target.name
            result.hub, result.new_hub, result.standby = H, P, roles.standby_name
            progress(f"drill: provisioning hub-and-spoke stack {options.stack} from {stack_path}")
            result.provision_s = EstateStack(ref).up(topology, progress=progress)
            estate = Estate(topology, state)
            publish_clients(estate, H)  # as `drctl estate up` does: the hub's applications
            for e in edges(topology):
                publish_clients(estate, e.name)  # and each edge's own
            traffic = _HubTraffic(estate, state, options.rate)
            traffic.start()
            progress(
                f"drill: traffic on {', '.join(f'{e} ({a})' for a, (e, _p) in traffic.edge_producers.items())} and "
                f"{H} ({traffic.traffic.producer_app.name}"
                + (f", group {traffic.group}" if traffic.group else "")
                + ")"
            )
            time.sleep(options.warmup_s)
            if traffic.group:
                within = first_translation_within(topology, P)
                progress(f"drill: waiting until {H}→{P} has synced group {traffic.group}'s offsets at least once")
                if not wait_until(
                    lambda: bool(committed_offsets(estate.endpoint(P), traffic.group or "")), within, 0.5
                ):
                    raise ClusterError(
                        f"the link {H}→{P} never synced group {traffic.group} within {within:.0f}s.",
                        "read the MirrorMaker 2 log under <out>/state/links/",
                    )
            failed_at = time.time()
            if options.unplanned:
                progress(f"drill: SIGKILL every node of hub {H} mid-traffic")
                estate.local_cluster(H).kill()
                wait_until(lambda: not listening(estate.local_cluster(H).bootstrap), 5, interval=0.05)
            traffic.traffic.snapshots.stop()
            holdings, first, _ = fail_over(options, ref, estate, traffic.traffic, progress, HUB_STEPS)
            failover_done = time.time()
            proof = prove_and_recover(ref, estate, traffic.traffic, holdings, first, H, P, progress, HUB_STEPS)
            seen += current_topology(stack_path)
            # traffic on the new hub: its application's first write acknowledged there (long since, as a rule)
            wait_until(lambda: bool(traffic.traffic.producer.ack_times(P)), 30, interval=0.1)
            traffic.stop()
            result.failover = proof.summary
            result.verification_exact = proof.exact
            result.never_reached_new_hub = proof.never_reached_target
            result.application_rto = traffic.rto(P)
            p_ep = estate.endpoint(P)
            hub_writer = traffic.traffic.producer
            result.hub_topic = hub_writer.topic
            result.hub_acknowledged = len(hub_writer.acked_on(H))
            result.hub_lost_after_recovery = len(hub_writer.acked_on(H) - set(read_keys(p_ep, hub_writer.topic)))
            result.edges = [
                _prove_edge(p_ep, app, edge, loop, failed_at, failover_done, progress)
                for app, (edge, loop) in traffic.edge_producers.items()
            ]
            _grade(result, options)
        finally:
            if traffic is not None:
                traffic.stop()
    return result


def _prove_edge(
    p_ep: Any, app: str, edge: str, loop: ProducerLoop, failed_at: float, done_at: float, progress: Progress
) -> EdgeProof:
    """The edge's acknowledged records against ``<edge>.<topic>`` on the new hub, once its link caught up."""
    copy = remote_topic(edge, loop.topic)
    acked = loop.acked_on(edge)
    found: Counter[str] = Counter()

    def caught_up() -> bool:
        found.clear()
        found.update(read_keys(p_ep, copy))
        return acked <= set(found)

    progress(f"drill: waiting until {edge}'s link has copied every acknowledged record into {copy}")
    wait_until(caught_up, 120, interval=3)
    return EdgeProof(
        edge=edge,
        application=app,
        topic=loop.topic,
        acknowledged=len(acked),
        acknowledged_during_failover=sum(1 for t in loop.ack_times(edge) if failed_at <= t <= done_at),
        on_new_hub=sum(n for k, n in found.items() if k in acked),
        lost=len(acked - set(found)),
        duplicates=sum(n - 1 for k, n in found.items() if k in acked and n > 1),
    )


def _grade(result: HubDrillResult, options: DrillOptions) -> None:
    """The checks and the grade."""
    aims = {**DEFAULT_AIMS, **options.aims}
    s = result.failover
    H, P = result.hub, result.new_hub
    found: list[Finding] = [
        (f"failover completed ({H} decommissioned)", s is not None and s.status == "completed"),
        Aim.of(
            f"{H}→{P}→{result.standby or '—'} ≤ {aims['a_b_c_s']:.0f}s ({s.a_b_c_s if s else None}s)",
            s.a_b_c_s if s is not None else None,
            aims["a_b_c_s"],
        ),
    ]
    found += [
        Aim.of(f"application RTO ≤ {aims['rto_s']:.0f}s ({r.application} {r.kind}: {r.rto_s}s)", r.rto_s, aims["rto_s"])
        for r in result.application_rto
    ]
    for e in result.edges:
        found += [
            (f"every acknowledged {e.edge} record on {P} ({e.lost} lost)", e.lost == 0),
            (f"{e.edge}'s records on {P} once ({e.duplicates} duplicates)", e.duplicates == 0),
            (f"{e.edge} kept writing during the failover", e.acknowledged_during_failover > 0),
        ]
    found += [
        (f"verification listed exactly the records that never reached {P}", result.verification_exact),
        (f"no acknowledged record of {H} lost after recovery", result.hub_lost_after_recovery == 0),
    ]
    result.checks, result.grade = graded(found, strict=options.strict_aims)


def dump_hub(result: HubDrillResult) -> str:
    """JSON text of the result."""
    return json.dumps(result.to_json(), indent=2, default=str)
