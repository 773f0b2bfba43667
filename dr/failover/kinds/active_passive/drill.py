"""``drctl drill``: a game day — traffic, a failover A→B→C, proof, a grade.

On a local estate:

1. Copy the stack file into ``<out>/stack/`` (the stack's own file is never touched) and provision
   A and B with their link (``pulumi up`` of the stack, :class:`dr.stack.EstateStack`), state under ``<out>/state/``.
2. Traffic: ``orders-app`` (the first producing application) writes keyed records with
   ``acks=all`` and keeps a delivery ledger; the ``billing`` group (the first consuming group)
   consumes and commits; A's end offsets are snapshotted five times a second (the RPO estimate's input).
3. Fail A: planned (the pipeline fences and drains it) or ``--unplanned`` (SIGKILL mid-traffic).
4. Run the failover A→B→C. When the client configurations are published, the producer and the
   consumer move to B with them — as applications would.
   With ``--automatic`` (unplanned only) nobody runs it: the controllers beside A and B and a third site's
   observer, on a witness of the drill's own, do — site A is lost whole (its brokers and its controller
   SIGKILLed at one instant) and the drill only waits (:mod:`dr.failover.drill.unattended`).
5. Unplanned: bring A back (restart its brokers); the resumed failover fences it and verifies
   A vs B, which lists the records that never reached B; recover them; verify again; decommission.
6. Grade: RTO, A→B→C, RPO (estimate and actual), acknowledged records lost before and after
   recovery, records the consumer read twice, records it skipped (must be 0), time per step,
   the HTML report. Everything is torn down at the end unless ``keep``.

On a stack with external clusters (clusters the product does not run) the drill is a real, planned
game day on that stack itself: nothing is copied, provisioned or torn down, no broker is stopped.
The applications start from the stack's published client configurations (``<state>/clients/``),
the pipeline fences A by ACLs, drains and fails over A→B→C, the verification proves it, and the
cycle is graded like a local one. Afterwards B is active (as after ``drctl failover``). Refused
before anything changes (:func:`external_refusal`): ``--unplanned`` (the drill would have to stop
brokers it does not own), ``--cycles`` above 1 (the old active must be wiped by its own tooling
before it can be the next standby), ``--base-port``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dr.failover.act.integrity as integrity
from dr.base.errors import ClusterError, ConfigError, FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import publish_clients
from dr.failover.act.health import listening
from dr.failover.drill.endpoint_clients import EndpointClients, endpoint_report, start_endpoint_clients
from dr.failover.drill.frame import (
    MARKER,
    DrillOptions,
    first_translation_within,
    on_a_copy,
    private_out,
    restart,
)
from dr.failover.drill.grade import grade
from dr.failover.drill.last import record_last_drill
from dr.failover.drill.phases import PhaseClock
from dr.failover.drill.replicator_crash import crash_refusal, crash_replicator
from dr.failover.drill.result import (
    DrillCycle,
    DrillResult,
    FirstRun,
    ProducerReport,
    RecoveryReport,
    ReplicatorCrash,
    RpoFigures,
)
from dr.failover.drill.traffic import (
    Traffic,
    application_rto,
    consumer_report,
    read_keys,
    start_traffic,
)
from dr.failover.drill.unattended import Sites, figures
from dr.failover.frame.journal import Journal, atomic_write_json
from dr.failover.frame.roles import Roles
from dr.failover.frame.run import OnStep
from dr.failover.frame.step import Context, FailoverOptions, Step, StepResult
from dr.failover.frame.summary import FailoverSummary, summarize
from dr.failover.kinds.active_passive.run import run_failover
from dr.failover.kinds.active_passive.steps import STEPS
from dr.failover.lifecycle import make_standby
from dr.kafka.client import Endpoint
from dr.kafka.offsets import OffsetReader, committed_offsets
from dr.runtime.process import wait_until
from dr.topology import Link, Topology, load_stack_file

__all__ = [
    "automatic_refusal",
    "dump",
    "external_refusal",
    "kill_refusal",
    "run_drill",
]


#: How long the final reads wait for the application's first write acknowledged by the new active (it has
#: written there since the promotion, long before; a drill whose application never did fails that check).
_WRITES_ON_TARGET_S = 30.0
#: How long an automatic drill gives the controller's unplanned failover to run once it may start (beyond
#: detection, the lease's TTL and margin): a bound on a hang, not an aim.
_AUTOMATIC_RUN_S = 600.0
#: How long ``--kill-replicator`` waits for the link to copy the cycle's traffic before it kills its replicator.
_COPYING_WITHIN_S = 60.0


# ------------------------------------------------------------------------------------------ the drill
def external_refusal(options: DrillOptions, topology: Topology) -> ConfigError | None:
    """Why the drill may not run on ``topology`` (a stack with external clusters) as asked, or None.

    Pure: the CLI and :func:`run_drill` both call it before anything changes."""
    outside = [c.name for c in topology.clusters if not c.is_local]
    if not outside:
        return None
    stack = options.stack
    A = topology.active().name
    if options.unplanned:
        return ConfigError(
            f"stack {stack!r} runs on clusters this machine does not own ({', '.join(outside)}): the drill "
            f"will not stop {A}'s brokers for an unplanned drill.",
            f"make {A} unreachable yourself (stop its brokers or block its listeners), then run "
            f"`drctl failover --stack {stack} --mode unplanned` (runbooks/unplanned-failover.md); "
            f"a planned drill (`drctl drill --stack {stack}`) needs nothing stopped. Nothing was changed",
        )
    if options.cycles > 1:
        return ConfigError(
            f"stack {stack!r} runs on external clusters: after a cycle the old active keeps its topics, and "
            "the drill never deletes topics on clusters it does not own, so it cannot be the next standby.",
            f"run one cycle (`drctl drill --stack {stack}`), wipe the old active with your own tooling and "
            f"declare it `role: standby` (docs/production/index.md), then drill again. Nothing was changed",
        )
    if options.kill_replicator:
        return ConfigError(
            f"--kill-replicator SIGKILLs a replicator this machine runs; stack {stack!r} runs on external "
            f"clusters ({', '.join(outside)}).",
            f"run `drctl drill --stack {stack}` without --kill-replicator; to prove exactly-once there, kill a "
            "Connect worker with your own tooling mid-copy and run `drctl verify`. Nothing was changed",
        )
    if options.base_port is not None:
        return ConfigError(
            f"--base-port moves clusters this machine runs; stack {stack!r} declares external ones "
            f"({', '.join(outside)}).",
            f"run `drctl drill --stack {stack}` without --base-port. Nothing was changed",
        )
    return None


def automatic_refusal(options: DrillOptions) -> ConfigError | None:
    """Why ``--automatic`` cannot run as asked, or None (pure; before anything changes)."""
    if not options.automatic:
        return None
    if not options.unplanned:
        return ConfigError(
            "--automatic rehearses the controllers failing over a lost site by themselves: it needs --unplanned.",
            f"run `drctl drill --stack {options.stack} --unplanned --automatic`. Nothing was changed",
        )
    if options.cycles > 1:
        return ConfigError(
            "--automatic runs one cycle: the policy's cooldown allows one automatic failover per period.",
            "drop --cycles, or drill the cycles without --automatic. Nothing was changed",
        )
    return None


def kill_refusal(options: DrillOptions, topology: Topology) -> ConfigError | None:
    """Why ``--kill-replicator`` cannot crash the active→passive link of local ``topology``, or None. Pure."""
    if not options.kill_replicator:
        return None
    link = _active_link(topology)
    if link is None:
        roles = Roles.of(topology)
        return ConfigError(
            f"--kill-replicator: stack {options.stack!r} has no link {roles.source.name}→{roles.target.name}.",
            "drill without --kill-replicator. Nothing was changed",
        )
    return crash_refusal(topology, link)


def _active_link(topology: Topology) -> Link | None:
    """The link from the active cluster to its passive copy."""
    roles = Roles.of(topology)
    return next(
        (lk for lk in topology.links if lk.source == roles.source.name and lk.target == roles.target.name), None
    )


def _prepare_out(options: DrillOptions) -> Path:
    out = options.out.resolve()
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ConfigError(
            f"{out} is not empty and was not written by a drill.", "pass --out with a new or empty directory"
        )
    private_out(out)
    (out / MARKER).write_text("written by drctl drill\n")
    return out


def run_drill(
    own: StackRef, topology: Topology, options: DrillOptions, progress: Progress = lambda _m: None
) -> DrillResult:
    """Run the game day (see the module doc) on a copy of the stack ``own``, whose topology is ``topology``;
    return the graded result (also in ``<out>/drill.json``).

    With ``cycles`` > 1 the old active cluster is declared, wiped, as the next standby after each
    cycle (:func:`dr.lifecycle.make_standby`) and the next cycle fails the new active over:
    A→B→C, B→C→A, C→A→B... Each cycle is graded on its own; the drill passes when all do.
    """
    if any(not c.is_local for c in topology.clusters):
        if options.automatic:
            raise ConfigError(
                f"stack {options.stack!r} runs on clusters this machine does not own: an automatic drill loses "
                "a site by SIGKILLing its brokers.",
                "run it on a local stack of the same shape; on this stack, rehearse with `drctl drill` (planned) "
                "and watch the controllers' metrics (runbooks/controller.md). Nothing was changed",
            )
        return _run_external(options, own, topology, progress)
    refusal = kill_refusal(options, topology) or automatic_refusal(options)
    if refusal is not None:
        raise refusal
    result = DrillResult(
        stack=options.stack, mode="unplanned" if options.unplanned else "planned", out=str(options.out.resolve())
    )
    clients: EndpointClients | None = None
    sites: Sites | None = None
    clock = PhaseClock()

    def conclude() -> None:
        result.phases = clock.phases
        result.conclude(options.cycles)

    with on_a_copy(own, options, result, progress, clock=clock, conclude=conclude) as copy:
        ref, state, seen = copy.ref, copy.state, copy.seen
        try:
            roles = Roles.of(seen[0])
            A, B = roles.source.name, roles.target.name
            progress(f"drill: provisioning {A} and {B} from {copy.path}")
            with clock.phase("provision"):
                result.provision_s = EstateStack(ref).up(seen[0], progress=progress)
                publish_clients(Estate(seen[0], state), A)  # as `drctl estate up` does
                if options.automatic:
                    sites = Sites(ref, seen[0], options.out.resolve(), progress)
                    sites.start()
                    sites.wait_holding(Estate(seen[0], state).local_cluster(A))
                clients = _endpoint_clients(Estate(seen[0], state), progress)
            for number in range(1, options.cycles + 1):
                if number > 1:
                    previous = result.cycles[-1]
                    progress(f"drill: declaring {previous.source}, wiped, as the next standby (`drctl estate standby`)")
                    with clock.phase(f"cycle {number}: standby rebuild"):
                        previous.standby_rebuild = make_standby(ref, previous.source, progress)
                current = load_stack_file(copy.path)
                seen.append(current)
                cycle = _cycle(options, ref, current, number, progress, clients, clock, sites)
                result.cycles.append(cycle)
                if not cycle.passed:
                    break
        finally:
            if clients is not None:
                clients.stop()
            if sites is not None:
                sites.stop()
    return result


def _run_external(options: DrillOptions, ref: StackRef, topology: Topology, progress: Progress) -> DrillResult:
    """The drill on a stack with external clusters: one planned cycle on the stack itself (module doc)."""
    refusal = external_refusal(options, topology)
    if refusal is not None:
        raise refusal
    out = _prepare_out(options)
    result = DrillResult(stack=options.stack, mode="planned", out=str(out))
    t_start = time.monotonic()
    clock = PhaseClock()
    try:
        A = Roles.of(topology).source.name
        state = ref.made_state_dir()
        progress(
            f"drill: stack {options.stack} runs on external clusters: a planned game day on the stack itself "
            f"(nothing provisioned or torn down); the applications start from their published configurations for {A}"
        )
        publish_clients(Estate(topology, state), A)  # what `drctl estate up` published; rewritten alike
        clients = _endpoint_clients(Estate(topology, state), progress)
        try:
            cycle = _cycle(options, ref, topology, 1, progress, clients, clock)
        finally:
            if clients is not None:
                clients.stop()
        result.cycles.append(cycle)
    finally:
        result.seconds = round(time.monotonic() - t_start, 3)
        result.phases = clock.phases
        result.conclude(1)
        atomic_write_json(out / "drill.json", result.to_json())
        record_last_drill(ref.made_state_dir(), result)
    return result


def _endpoint_clients(estate: Estate, progress: Progress) -> EndpointClients | None:
    """With a client endpoint declared: start its unmodified producer and consumer (on the topic and as
    the producing application :func:`start_traffic` picks; the consumer as another reader of it)."""
    topology = estate.topology
    if topology.endpoint is None:
        return None
    app = next(a for a in topology.principals.applications if topology.produced_by(a))
    topic = topology.produced_by(app)[0]
    drills = next(
        (a.name for a in topology.principals.applications if a.consumer_group and topic in topology.consumed_by(a)),
        None,
    )
    clients = start_endpoint_clients(estate, topology.active().name, topic, app.name, {drills} if drills else set())
    if clients is not None:
        progress(
            f"drill: unmodified clients on the endpoint {clients.bootstrap} (never restarted): {app.name} → {topic}"
            + (f", group {clients.group} consuming" if clients.group else ", no other consumer group reads it")
        )
    return clients


def _switched_at(home: Path) -> float | None:
    """When this failover's promote switched the client endpoint (epoch seconds), if it did."""
    journal = Journal.load(home)
    at = (journal.outcome("promote").get("endpoint") or {}).get("switched_at_ms") if journal else None
    return at / 1000 if isinstance(at, int | float) else None


@dataclass
class _Proof:
    """What the verification listed against what really never reached B, and the recovery."""

    summary: FailoverSummary
    exact: bool
    never_reached_target: int
    lost_before_recovery: int
    verdicts: list[integrity.Verdict]
    recovery: RecoveryReport | None


def _cycle(
    options: DrillOptions,
    ref: StackRef,
    original: Topology,
    number: int,
    progress: Progress,
    clients: EndpointClients | None = None,
    clock: PhaseClock | None = None,
    sites: Sites | None = None,
) -> DrillCycle:
    """One failover of the drill: traffic on the active cluster, fail it, fail over, prove, grade (each
    phase timed on ``clock``)."""
    clock = clock or PhaseClock()
    began = time.time()
    roles = Roles.of(original)
    A, B, C = roles.source.name, roles.target.name, roles.standby_name
    estate = Estate(original, ref.state_dir)
    chain = f"{A}→{B}" + (f"→{C}" if C else "")
    prefix = f"drill-c{number}"
    traffic = start_traffic(estate, ref.state_dir, options.rate, prefix)
    try:
        progress(
            f"drill cycle {number} ({chain}): traffic on {A}: {traffic.producer_app.name} → {traffic.topic} at "
            f"{options.rate}/s" + (f", group {traffic.group} consuming" if traffic.group else "")
        )
        cycle_name = f"cycle {number}"
        with clock.phase(f"{cycle_name}: warm-up"):
            crash = _crash_replicator(options, estate, traffic, progress)
            _fail_source(options, estate, traffic, A, B, progress, sites)
        with clock.phase(f"{cycle_name}: failover"):
            holdings, first, journal = fail_over(options, ref, estate, traffic, progress, sites=sites)
        with clock.phase(f"{cycle_name}: recovery"):  # after the verification in the failover: what it listed, replayed
            proof = prove_and_recover(ref, estate, traffic, holdings, first, A, B, progress)
        with clock.phase(f"{cycle_name}: preview"):
            preview = EstateStack(ref).preview()
        with clock.phase(f"{cycle_name}: final reads"):
            # the ledger and the consumer against what B holds, once the application has written there
            wait_until(lambda: bool(traffic.producer.ack_times(B)), _WRITES_ON_TARGET_S, interval=0.1)
            traffic.producer.stop()
            read_at = time.time()  # the endpoint's producer goes on: what it has acknowledged by now must be on B
            final_b = read_keys(estate.endpoint(B), traffic.topic)
            consumer = (
                consumer_report(traffic.consumer, traffic.group, A, B, final_b, prefix)
                if traffic.consumer is not None and traffic.group
                else None
            )
            acked_a = traffic.producer.acked_on(A)
            endpoint = (
                None
                if clients is None
                else endpoint_report(clients, _switched_at(ref.failover_home), B, final_b, began, read_at)
            )
        summary = proof.summary
        rpo = summary.rpo_estimate or {}
        cycle = DrillCycle(
            number=number,
            chain=chain,
            source=A,
            target=B,
            standby=C,
            topic=traffic.topic,
            failover_first_run=FirstRun.model_validate(
                first.model_dump(include={"status", "rto_s", "a_b_c_s", "rpo_estimate"})
            ),
            failover=summary,
            verification_exact=proof.exact,
            never_reached_target=proof.never_reached_target,
            lost_before_recovery=proof.lost_before_recovery,
            lost_after_recovery=len(acked_a - set(final_b)),
            verdicts=proof.verdicts,
            recovery=proof.recovery,
            preview_after_failover=preview.changes,
            producer=ProducerReport(
                acked_on_source=len(acked_a),
                acked_on_target=len(traffic.producer.acked_on(B)),
                not_acknowledged=len(traffic.producer.failed),
                moved_at=[t for t, _c in traffic.producer.moves],
            ),
            consumer=consumer,
            application_rto=application_rto(
                traffic.producer, traffic.consumer, A, B, traffic.producer_app.name, traffic.group
            ),
            report_html=proof.verdicts[-1].html if proof.verdicts else None,
            rpo=RpoFigures(
                estimate=rpo.get("records"),
                estimate_upper_bound=rpo.get("upper_bound"),
                estimate_basis=rpo.get("basis"),
                actual_never_replicated=proof.never_reached_target,
                acknowledged_lost_before_recovery=proof.lost_before_recovery,
            ),
            grade="UNGRADED",
            checks=[],
            endpoint_clients=endpoint,
            unattended=None
            if sites is None or journal is None or sites.lost_at is None
            else figures(
                journal,
                sites.lost_at,
                original.failover_policy.detect_after_s,
                traffic.producer.ack_times(B),
                traffic.producer.ack_times(A),
                [sites.log(k) for k in sites.procs],
                None if endpoint is None else endpoint.first_write_after_switch_at,
            ),
            replicator_crash=None
            if crash is None
            else crash.model_copy(
                update={"duplicated": proof.verdicts[0].counts["duplicated"] if proof.verdicts else None}
            ),
        )
        grade(cycle, options.aims, planned=not options.unplanned, strict=options.strict_aims)
    finally:
        traffic.stop()
    return cycle


def _crash_replicator(
    options: DrillOptions, estate: Estate, traffic: Traffic, progress: Progress
) -> ReplicatorCrash | None:
    """With ``--kill-replicator``: traffic until the link copies it (mid-copy), then the link's replicator
    SIGKILLed and started again (:func:`crash_replicator`); the warm-up follows."""
    link = _active_link(estate.topology) if options.kill_replicator else None
    if link is None:
        return None
    copying(estate.endpoint(link.target), traffic.topic, _COPYING_WITHIN_S)
    return crash_replicator(estate, link, lambda: len(traffic.producer.acked), progress)


def copying(target: Endpoint, topic: str, within: float) -> bool:
    """Wait until ``topic``'s end offsets on ``target`` grow (the link copies the traffic now), at most
    ``within`` seconds; False when they did not (the crash then lands wherever the link stands)."""
    reader = OffsetReader(target, [topic])
    first = sum(reader.end_offsets().values())
    return wait_until(lambda: sum(reader.end_offsets().values()) > first, within, interval=0.1)


def group_synced(endpoint: Endpoint, group: str) -> bool:
    """True once ``group`` has committed offsets on ``endpoint`` (a coordinator still loading on a
    cluster just rebuilt as the passive is waited for inside :func:`committed_offsets`)."""
    return bool(committed_offsets(endpoint, group))


def _fail_source(
    options: DrillOptions,
    estate: Estate,
    traffic: Traffic,
    A: str,
    B: str,
    progress: Progress,
    sites: Sites | None = None,
) -> None:
    """Traffic for the warm-up, the group's offsets synced to B once; unplanned: SIGKILL A (automatic: site A
    whole, its controller with its brokers)."""
    time.sleep(options.warmup_s)
    if traffic.group:
        progress(f"drill: waiting until link {A}→{B} has synced group {traffic.group}'s offsets at least once")
        within = first_translation_within(estate.topology, B)
        if not wait_until(lambda: group_synced(estate.endpoint(B), traffic.group or ""), within, interval=0.5):
            raise ClusterError(
                f"the link never synced group {traffic.group} to {B} within {within:.0f}s.",
                "read the MirrorMaker 2 log under <out>/state/links/",
            )
    if sites is not None:
        progress(
            f"drill: site {A} lost — SIGKILL its controller and every node of {A} at one instant, mid-traffic "
            f"({len(traffic.producer.acked)} records acknowledged so far); nobody runs the failover"
        )
        sites.lose(estate.local_cluster(A))
        wait_until(lambda: not listening(estate.local_cluster(A).bootstrap), 5, interval=0.05)
    elif options.unplanned:
        progress(
            f"drill: SIGKILL every node of {A} mid-traffic ({len(traffic.producer.acked)} records acknowledged so far)"
        )
        estate.local_cluster(A).kill()
        wait_until(lambda: not listening(estate.local_cluster(A).bootstrap), 5, interval=0.05)
    traffic.snapshots.stop()


def fail_over(
    options: DrillOptions,
    ref: StackRef,
    estate: Estate,
    traffic: Traffic,
    progress: Progress,
    steps: Sequence[Step[Context]] = STEPS,
    sites: Sites | None = None,
) -> tuple[dict[str, Counter[str]], FailoverSummary, Journal | None]:
    """Run the failover; unplanned: it completes without A, then A comes back and is verified. With
    ``sites`` (automatic) the drill runs none of it until A comes back: it waits for the controller's run
    and returns its journal as that run left it.

    What A and B hold is read right after the verification, before A may be decommissioned.
    """
    roles = Roles.of(estate.topology)
    A, B = roles.source.name, roles.target.name
    holdings: dict[str, Counter[str]] = {}

    def on_step(name: str, step_result: StepResult) -> None:
        if name == "integrity" and step_result.status in ("done", "differences"):
            holdings.update(
                a=read_keys(estate.endpoint(A), traffic.topic), b=read_keys(estate.endpoint(B), traffic.topic)
            )

    mode = "unplanned" if options.unplanned else "planned"
    unattended: Journal | None = None
    if sites is not None:
        policy = estate.topology.failover_policy
        within = policy.detect_after_s + policy.lease_ttl_s + policy.margin_s + _AUTOMATIC_RUN_S
        progress(f"drill: waiting for the controllers to fail {A} over by themselves (at most {within:.0f}s)")
        unattended = sites.wait_failover(within)
        summary = summarize(unattended)
        progress(
            f"drill: the automatic failover's run ended ({unattended.status}), {unattended.record.runs[-1].options.get('started_by')}"
        )
    else:
        summary = _failover(ref, FailoverOptions(mode=mode), progress, on_step, steps)
    if options.unplanned:
        progress(f"drill: bringing {A} back (restarting its brokers)")
        restart(estate.local_cluster(A))
        summary = _failover(ref, FailoverOptions(), progress, on_step, steps)
    return holdings, summary, unattended


def prove_and_recover(
    ref: StackRef,
    estate: Estate,
    traffic: Traffic,
    holdings: dict[str, Counter[str]],
    summary: FailoverSummary,
    A: str,
    B: str,
    progress: Progress,
    steps: Sequence[Step[Context]] = STEPS,
) -> _Proof:
    """What the verification lists against what really never reached B; recover it; verify again."""
    verdict = _verdict(ref.failover_home)
    verdicts = [verdict] if verdict else []
    a_keys, b_keys = holdings.get("a", Counter()), holdings.get("b", Counter())
    never = set(a_keys) - set(b_keys)
    listed = (
        {r["key"].decode() for r in integrity.missing_records(verdict.report_dir) if r["topic"] == traffic.topic}
        if verdict and not verdict.clean
        else set()
    )
    recovery = None
    if verdict and not verdict.clean:
        progress(f"drill: the verification lists {verdict.counts['missing']} missing records; recovering them")
        recovery = integrity.recover(
            verdict.report_dir, source=estate.endpoint(A), target=estate.endpoint(B), progress=progress
        )
        summary = _failover(ref, FailoverOptions(), progress, None, steps)
        verdict = _verdict(ref.failover_home)
        if verdict:
            verdicts.append(verdict)
    return _Proof(
        summary=summary,
        exact=bool(verdicts) and bool(holdings) and listed == never,
        never_reached_target=len(never),
        lost_before_recovery=len(traffic.producer.acked_on(A) - set(b_keys)),
        verdicts=verdicts,
        recovery=recovery,
    )


def _verdict(home: Path) -> integrity.Verdict | None:
    """The integrity step's verdict in the drill's journal."""
    journal = Journal.load(home)
    return journal.verdict() if journal is not None else None


def _failover(
    ref: StackRef,
    options: FailoverOptions,
    progress: Progress,
    on_step: OnStep | None,
    steps: Sequence[Step[Context]] = STEPS,
) -> FailoverSummary:
    """Run/resume the failover; a refusal at decommission (differences found) returns the summary."""
    try:
        return run_failover(ref, options=options, progress=progress, on_step=on_step, steps=steps)
    except FailoverError as exc:
        journal = Journal.load(ref.failover_home)
        if journal is None or journal.step("integrity").status != "differences":
            raise
        progress(f"drill: failover stopped as designed: {exc.problem}")
        return summarize(journal)


def dump(result: DrillResult) -> str:
    """JSON text of a drill result (what ``drill.json`` holds)."""
    return json.dumps(result.to_json(), indent=2, default=str)
