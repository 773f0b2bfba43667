"""``drctl drill`` on an active-active stack: traffic on every peer, one region failed over, graded.

On a copy of the stack (as the active-passive drill, :mod:`dr.failover.kinds.active_passive.drill`):

1. provision the peers and their links (``pulumi up``); publish each application's client
   configuration for its home peer (as ``drctl estate up`` does);
2. traffic on every peer: each producing application writes the first topic it produces on its home
   (``acks=all``, a delivery ledger); each consuming group reads the global view
   (``^([^.]+\\.)?<topic>$``) on its home; all follow their published client configuration;
3. fail the first peer A: planned (the region failover fences and drains it) or ``--unplanned``
   (SIGKILL of A's brokers mid-traffic; the failover completes without A, then A's brokers come back
   with their data and the resumed failover compares them);
4. ``drctl failover --region A``: A's applications move to the survivor B when their configuration is
   published; the integrity step lists what never reached ``A.<topic>`` on B, ``--recover`` replays it;
5. ``drctl failover --region A --rejoin`` (once the failover completed) while A's applications still
   write and read on B from their files: they move home when A's file is published;
6. grade (:mod:`dr.failover.kinds.active_active.drill_result`): application RTO per moving application (writes and
   reads), the survivor's own applications never interrupted, the listed records exactly those that
   never crossed, nothing acknowledged lost after recovery, no record skipped by the moved consumers,
   no loop topic, ``pulumi preview`` clean; then the rejoin: completed, the returning applications' write
   gap (last write acknowledged on B → first on A) within its aim, none of their writes refused, their
   groups skipping nothing at home (what they read twice is reported).

The result is ``<out>/drill.json``. Everything is torn down at the end unless ``keep``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from functools import partial
from pathlib import Path

from dr.base.errors import ConfigError, FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import publish_clients
from dr.failover.act.health import listening
from dr.failover.drill.frame import (
    DrillOptions,
    first_translation_within,
    on_a_copy,
    restart,
)
from dr.failover.drill.result import ConsumerReport
from dr.failover.drill.traffic import (
    ConfigSource,
    ConsumerLoop,
    ProducerLoop,
    application_rto,
    consumer_report,
    read_keys,
    rto_gap,
    start_config,
    unanswered,
)
from dr.failover.frame.journal import Journal
from dr.failover.frame.run import OnStep
from dr.failover.frame.site_loss import SiteOutcome
from dr.failover.frame.step import FailoverOptions, StepResult
from dr.failover.frame.summary import FailoverSummary, summarize
from dr.failover.kinds.active_active.drill_result import (
    AppTraffic,
    RegionDrillResult,
    RejoinFigures,
    RejoinWrites,
    grade_region_drill,
    longest_pause,
    loop_topics,
)
from dr.failover.kinds.active_active.rejoin import run_region_rejoin
from dr.failover.kinds.active_active.run import recover_region, run_region_failover
from dr.kafka.client import admin_client
from dr.kafka.offsets import committed_offsets
from dr.runtime.process import wait_until
from dr.topology import Kind, Topology, load_stack_file
from dr.topology.active_active import moving_applications, peers, survivor_for
from dr.topology.topics import remote_topic

__all__ = ["region_drill_refusal", "run_region_drill"]

KEY_PREFIX = "drill"


class _Apps:
    """The drill's applications: a producer per producing application, a consumer per consuming group,
    each on its home peer."""

    def __init__(self, estate: Estate, state: Path, rate: int) -> None:
        topology = estate.topology
        clusters = {
            (estate.local_cluster(c.name).bootstrap if c.kind is Kind.LOCAL else c.bootstrap_servers or ""): c.name
            for c in topology.clusters
        }
        bootstrap_of = {name: b for b, name in clusters.items()}
        self.producers: dict[str, ProducerLoop] = {}
        self.consumers: dict[str, tuple[str, ConsumerLoop]] = {}
        self.homes: dict[str, str] = {}
        self.topics: dict[str, str] = {}
        for app in topology.principals.applications:
            home = app.home or peers(topology)[0]
            self.homes[app.name] = home
            produced = topology.produced_by(app)
            if produced:
                conf = start_config(estate, state, app, home, bootstrap_of[home])
                conf.pop("group.id", None)  # a producer property only in name: librdkafka warns of it
                self.topics[app.name] = produced[0]
                self.producers[app.name] = ProducerLoop(
                    conf, home, produced[0], rate, ConfigSource(state, app.name, clusters), f"{KEY_PREFIX}-{app.name}"
                )
            consumed = topology.consumed_by(app)
            if app.consumer_group and consumed:
                self.consumers[app.name] = (
                    app.consumer_group,
                    ConsumerLoop(
                        start_config(estate, state, app, home, bootstrap_of[home]),
                        home,
                        f"^([^.]+\\.)?{consumed[0]}$",  # the global view: local topic and its remote copies
                        ConfigSource(state, app.name, clusters),
                    ),
                )
        for t in self.threads():
            t.start()

    def threads(self) -> list[ProducerLoop | ConsumerLoop]:
        """Every running producer and consumer."""
        return [*self.producers.values(), *(c for _g, c in self.consumers.values())]

    def stop(self) -> None:
        """Stop whatever still runs."""
        for t in self.threads():
            if t.is_alive():
                t.stop()


def region_drill_refusal(options: DrillOptions, topology: Topology) -> ConfigError | None:
    """Why the active-active drill may not run on ``topology`` as asked, or None (pure)."""
    if options.cycles > 1:
        return ConfigError(
            "--cycles repeats the active-passive lifecycle; an active-active drill fails one region over "
            "(fail back is `drctl failover --region <peer> --rejoin`).",
            f"run `drctl drill --stack {options.stack}` without --cycles. Nothing was changed",
        )
    if options.kill_replicator:
        return ConfigError(
            "--kill-replicator crashes the one active→passive link of an active-passive drill; an active-active "
            "stack runs a link each way.",
            f"run `drctl drill --stack {options.stack}` without --kill-replicator. Nothing was changed",
        )
    outside = [c.name for c in topology.clusters if not c.is_local]
    if outside:
        return ConfigError(
            f"stack {options.stack!r} runs on clusters this machine does not own ({', '.join(outside)}): the "
            "active-active drill runs on a local copy only.",
            f"fail a region over on it with `drctl failover --stack {options.stack} --region <peer>` "
            "(runbooks/active-active.md). Nothing was changed",
        )
    return None


def run_region_drill(
    own: StackRef, topology: Topology, options: DrillOptions, progress: Progress = lambda _m: None
) -> RegionDrillResult:
    """The active-active game day (module doc) on a copy of the stack ``own``, whose topology is ``topology``:
    the first peer fails over."""
    refusal = region_drill_refusal(options, topology)
    if refusal is not None:
        raise refusal
    region = peers(topology)[0]  # the copy's clusters are the stack's, moved only in their ports
    result = RegionDrillResult(
        stack=options.stack,
        mode="unplanned" if options.unplanned else "planned",
        out=str(options.out.resolve()),
        region=region,
        survivor=survivor_for(topology, region),
    )

    def conclude() -> None:
        grade_region_drill(result, options.aims, strict=options.strict_aims)

    with on_a_copy(own, options, result, progress, conclude=conclude) as copy:
        ref, state, original = copy.ref, copy.state, copy.seen[0]
        try:
            progress(f"drill: provisioning the peers {', '.join(peers(original))} and their links from {copy.path}")
            result.provision_s = EstateStack(ref).up(original, progress=progress)
            estate = Estate(original, state)
            for peer in peers(original):
                apps = moving_applications(original, peer)
                if apps:
                    publish_clients(estate, peer, apps=apps)
            running = _Apps(estate, state, options.rate)
            try:
                _run(options, ref, estate, running, result, progress)
            finally:
                running.stop()
        except BaseException as exc:
            result.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise
    return result


def _run(
    options: DrillOptions, ref: StackRef, estate: Estate, apps: _Apps, result: RegionDrillResult, progress: Progress
) -> None:
    """Traffic, the region failover (and the recovery), then the figures the grade reads."""
    topology = estate.topology
    A, B = result.region, result.survivor
    moving = moving_applications(topology, A)
    progress(
        f"drill: traffic on every peer ({', '.join(f'{n}@{apps.homes[n]}' for n in apps.producers)} at "
        f"{options.rate}/s each); consumer groups read the global view on their home"
    )
    time.sleep(options.warmup_s)
    groups = [g for n, (g, _c) in apps.consumers.items() if n in moving]
    if groups:
        within = first_translation_within(topology, B)
        progress(f"drill: waiting until link {A}→{B} has synced group {', '.join(groups)}'s offsets at least once")
        if not wait_until(lambda: all(_translated(estate, B, A, g) for g in groups), within, interval=0.5):
            progress(f"drill: no translated offset on {B} yet for {', '.join(groups)} (the moved groups may re-read)")
    if options.unplanned:
        progress(f"drill: SIGKILL every node of {A} mid-traffic")
        estate.local_cluster(A).kill()
        wait_until(lambda: not listening(estate.local_cluster(A).bootstrap), 5, interval=0.05)
    topics = sorted({apps.topics[n] for n in moving if n in apps.topics})
    holdings: dict[str, Counter[str]] = {}

    def on_step(name: str, step: StepResult) -> None:
        # what A and B hold, read right after the comparison and before A may be decommissioned
        if name == "integrity" and step.status in ("done", "differences"):
            for t in topics:
                holdings[t] = read_keys(estate.endpoint(A), t)
                holdings[remote_topic(A, t)] = read_keys(estate.endpoint(B), remote_topic(A, t))

    window = [time.time()]
    t0 = time.monotonic()
    summary = _failover(ref, A, FailoverOptions(mode=result.mode, probe=False), progress, on_step)
    if options.unplanned:
        progress(f"drill: bringing {A} back (its brokers restarted with their data); the failover resumes")
        restart(estate.local_cluster(A))
        summary = _failover(ref, A, FailoverOptions(probe=False), progress, on_step)
    window.append(time.time())
    never: set[str] = set()
    if holdings:
        never = {k for t in topics for k in set(holdings[t]) - set(holdings[remote_topic(A, t)])}
        result.never_reached_survivor = len(never)
    listed = _listed(ref)
    result.listed_by_verification = len(listed)
    result.verification_exact = bool(holdings) and listed == never
    if summary.status != "completed" and result.listed_by_verification:
        progress(f"drill: the integrity step listed {len(listed)} records never replicated; replaying them")
        result.replayed = recover_region(ref, A, progress).replayed
        summary = _failover(ref, A, FailoverOptions(probe=False), progress, None)
    result.failover_s = round(time.monotonic() - t0, 3)
    result.failover = summary
    result.preview_after_failover = EstateStack(ref).preview().changes
    # the moved applications write on B: each one's first write acknowledged there (long since, as a rule)
    moved_writers = [p for n, p in apps.producers.items() if n in moving]
    wait_until(lambda: all(p.ack_times(B) for p in moved_writers), 30, interval=0.1)
    rejoin = summary.status == "completed"  # then the region rejoins under its applications' traffic
    if not rejoin:
        for p in apps.producers.values():
            p.stop()
    acked = set().union(*(p.acked_on(A) | p.acked_on(B) for p in apps.producers.values()))
    b = estate.endpoint(B)
    on_b: Counter[str] = Counter()
    for t in sorted(set(apps.topics.values())):
        on_b += read_keys(b, t) + read_keys(b, remote_topic(A, t))
    result.lost_after_recovery = len(acked - set(on_b))
    for name, (group, consumer) in apps.consumers.items():
        if name in moving:
            result.consumers.append(consumer_report(consumer, group, A, B, on_b, KEY_PREFIX, stop=not rejoin))
    for name, producer in apps.producers.items():
        result.traffic.append(_traffic(apps, name, producer, name in moving, B, window))
        if name in moving:
            pair = apps.consumers.get(name)
            result.application_rto += application_rto(
                producer, pair[1] if pair else None, A, B, name, pair[0] if pair else None
            )
    if rejoin:
        _rejoin(ref, apps, moving, result, progress)
    result.loops = loop_topics(admin_client(b).list_topics(timeout=10).topics, [c.name for c in topology.clusters])


def _rejoin(ref: StackRef, apps: _Apps, moving: list[str], result: RegionDrillResult, progress: Progress) -> None:
    """``drctl failover --region A --rejoin`` while A's applications write and read on B from their files:
    each one's write gap (last write acknowledged on B → first on A) and refused writes, and what its group
    read twice or skipped at home."""
    A, B = result.region, result.survivor
    figures = result.rejoin = RejoinFigures()
    returning = {n: p for n, p in apps.producers.items() if n in moving}
    refused_before = {n: set(p.failed) for n, p in returning.items()}
    progress(f"drill: {A} rejoins under its applications' traffic (`drctl failover --region {A} --rejoin`)")
    began, t0 = time.time(), time.monotonic()
    try:
        figures.summary = run_region_rejoin(ref, A, options=FailoverOptions(probe=False), progress=progress)
    finally:
        figures.seconds = round(time.monotonic() - t0, 3)
    # the returning applications write at home: each one's first write acknowledged there since the rejoin
    # began (their groups' reads at home are waited for below)
    wait_until(lambda: all(any(t >= began for t in p.ack_times(A)) for p in returning.values()), 30, interval=0.1)
    for p in returning.values():
        p.stop()
    whys = {n: [why for k, why in dict(p.failed).items() if k not in refused_before[n]] for n, p in returning.items()}
    for name, p in returning.items():
        at_home = [t for t in p.ack_times(A) if t >= began]
        figures.writes.append(
            RejoinWrites(
                application=name,
                acked_on_peer=sum(1 for t in p.ack_times(B) if t >= began),
                acked_on_home=len(at_home),
                refused=sum(1 for why in whys[name] if not unanswered(why)),
                unanswered=sum(1 for why in whys[name] if unanswered(why)),
                refused_why=dict(Counter(whys[name])),
                gap=rto_gap(name, "writes", p.ack_times(B), at_home, B, A),
            )
        )
    journal = Journal.load(ref.failover_home)
    if journal is not None:
        figures.moved_within_s = journal.outcome_as("rejoin-release", SiteOutcome).details.get("moved_within_s")
    figures.positions = next((s.summary for s in figures.summary.steps if s.name == "rejoin-consumer-groups"), "")
    a = Estate(load_stack_file(ref.stack_file), ref.state_dir).endpoint(A)
    home: Counter[str] = Counter()
    for t in sorted(set(apps.topics.values())):
        home += read_keys(a, t) + read_keys(a, remote_topic(B, t))
    everything = {k for k in home if k.startswith(KEY_PREFIX)}
    for name, (group, consumer) in apps.consumers.items():
        if name not in moving:
            continue
        wait_until(partial(_has_read, consumer, everything), 60, interval=0.5)
        consumer.stop()
        reads = list(consumer.reads)
        seen_before = {k for c, k, t in reads if c == B or t < began}
        at_home_keys = [k for c, k, t in reads if c == A and t >= began]
        figures.consumers.append(
            ConsumerReport(
                group=group,
                read_on_source=sum(1 for c, _k, t in reads if c == B and t >= began),
                read_on_target=len(at_home_keys),
                read_twice=sum(1 for k in at_home_keys if k in seen_before),
                skipped=len(everything - {k for _c, k, _t in reads}),
                records_on_target=len(everything),
            )
        )


def _has_read(consumer: ConsumerLoop, keys: set[str]) -> bool:
    """True once ``consumer`` has read every one of ``keys``, on any cluster."""
    return keys <= {k for _c, k, _t in list(consumer.reads)}


def _translated(estate: Estate, survivor: str, region: str, group: str) -> bool:
    """True once ``group`` has a committed (translated) offset on a remote topic of ``region`` on the survivor."""
    return any(t.startswith(f"{region}.") for t, _p in committed_offsets(estate.endpoint(survivor), group))


def _listed(ref: StackRef) -> set[str]:
    """The keys the region failover's integrity step listed as never replicated."""
    journal = Journal.load(ref.failover_home)
    report = journal.outcome_as("integrity", SiteOutcome).details.get("report") if journal is not None else None
    if not report or not Path(report).exists():
        return set()
    return {m["key"] for m in json.loads(Path(report).read_text())["missing"]}


def _traffic(
    apps: _Apps, name: str, producer: ProducerLoop, moved: bool, survivor: str, window: list[float]
) -> AppTraffic:
    """One producing application's figures; the pauses are measured inside the failover's window."""
    home = apps.homes[name]
    start, end = window[0], window[-1]
    during = [t for _c, _p, _o, t in list(producer.acked.values()) if start <= t <= end]
    pause = longest_pause(during, start, end)
    reads_during = None
    if name in apps.consumers:
        read_times = [t for _c, _k, t in list(apps.consumers[name][1].reads)]
        reads_during = sum(1 for t in read_times if start <= t <= end)
        read_pause = longest_pause(read_times, start, end)
        if pause is not None and read_pause is not None:
            pause = max(pause, read_pause)
    return AppTraffic(
        application=name,
        home=home,
        topic=apps.topics[name],
        moved=moved,
        acked_on_home=len(producer.acked_on(home)),
        acked_on_survivor=len(producer.acked_on(survivor)) if moved else 0,
        not_acknowledged=len(producer.failed),
        acked_during_failover=len(during),
        longest_pause_s=pause,
        reads_during_failover=reads_during,
    )


def _failover(
    ref: StackRef, region: str, options: FailoverOptions, progress: Progress, on_step: OnStep | None
) -> FailoverSummary:
    """Run or resume the region failover; its refusal to decommission a region whose records never all
    crossed is the designed stop (the drill recovers them), so that returns the summary."""
    try:
        return run_region_failover(ref, region, options=options, progress=progress, on_step=on_step)
    except FailoverError as exc:
        journal = Journal.load(ref.failover_home)
        if journal is None or journal.step("integrity").status != "differences":
            raise
        progress(f"drill: the region failover stopped as designed: {exc.problem}")
        return summarize(journal)
