"""Run the failover: lock, journal, resume, RTO probe, the eight steps, the summary.

``run_failover`` holds the stack's lock for the whole run, so two failovers of one stack never
run at once (:class:`~dr.base.errors.LockHeld`, exit 7). It journals every step before going on; a
rerun skips what is done and continues — also after ``kill -9``. A finished failover run again
reports that it is finished and changes nothing.

The original topology is read from the journal on resume, never from the stack file (which the
``desired-state`` step rewrites): a resumed run can therefore never promote twice.

A journal belongs to the estate it ran on (:mod:`dr.failover.frame.identity`): one whose clusters are not
the ones running now (the estate was destroyed and rebuilt) or whose stack left its backend is never
resumed — it is archived and the run refused (:class:`~dr.base.errors.JournalMismatch`, exit 6); the
next run starts afresh. Before any step, and so before A is fenced, a run refuses a Pulumi state file
that cannot be read (:func:`dr.estate.stack_state.state_problem`) and a stack file changed since the
run began (:mod:`dr.failover.frame.stack_guard`).

``on_step`` is called after each step's outcome is journaled (the drill reads the clusters there;
the tests' crash driver, ``tests/integration/failover_crash_driver.py``, ends the process there).

The stack file is read once per run (:class:`~dr.topology.StackFile`): by the command, which passes what
it read down (``stack``), else by the frame when it takes the lock. Every check before the first step —
a finished run, one finished elsewhere, the topologies, the digest the journal records — uses that one
reading; a file changed since it was read is refused before the first step (its digest differs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from dr.base.errors import ConfigError, DRError, FailoverError, JournalMismatch
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.failover.act.probe import WriteProbe
from dr.failover.frame.converge import Converger, PulumiConverger
from dr.failover.frame.journal import Journal, StackLock
from dr.failover.frame.stack_guard import check_unchanged, refuse_finished_elsewhere
from dr.failover.frame.step import MODES, Context, FailoverOptions, Step, StepResult
from dr.failover.frame.summary import FailoverSummary, summarize
from dr.failover.record.metrics import seconds_between
from dr.kafka.tls import TlsFiles, uses_sasl
from dr.topology import Role, StackFile, Topology, read_stack_file
from dr.topology.access import applications_on

__all__ = [
    "OnStep",
    "OpenRun",
    "already_finished",
    "new_context",
    "refuse_damaged_state",
    "refuse_foreign",
    "run_frame",
    "run_mode",
    "run_step",
    "summarize",
]

OnStep = Callable[[str, StepResult], None]
"""Called with a step's name and result once its outcome is journaled."""


def run_mode(options: FailoverOptions, journal: Journal | None, resuming: bool) -> str:
    """The run's mode: ``--mode``, else a resumed run's own, else ``planned``; an unknown one refused."""
    mode = options.mode or (journal.mode if resuming and journal else "planned")
    if mode not in MODES:
        raise FailoverError(f"unknown mode {mode!r}.", "use --mode planned or --mode unplanned")
    return mode


def _start_probe(ctx: Context) -> WriteProbe | None:
    if not ctx.options.probe or ctx.journal.measurements.probe:
        return None
    hub_apps = applications_on(ctx.original, Role.ACTIVE, ctx.source)  # not an edge's own applications
    producer = next((app for app in hub_apps if ctx.original.produced_by(app)), None)
    if producer is None:
        return None
    if ctx.b_ep.uses_oauth:
        # OAUTHBEARER: the application's own client identity and its secret from the stack (the estate refuses
        # an identity or a secret the stack lacks); a secret its team keeps to itself means no probe (no RTO,
        # not one measured as another identity).
        try:
            endpoint = ctx.before.endpoint(ctx.target, producer.name)
        except ConfigError:
            ctx.progress(
                f"RTO probe: not run — over OAUTHBEARER it logs in as {producer.name}'s client, whose secret the "
                f"stack does not hold (oauth.applications.{producer.name}.clientSecret)"
            )
            return None
    else:
        endpoint = ctx.b_ep.with_user(producer.name, ctx.before.app_password(producer.name))
    tls = endpoint.tls
    if not uses_sasl(endpoint.security_protocol) and tls is not None and tls.mutual:
        # Mutual TLS: the login is the certificate, so with_user would still write as the admin — never
        # fenced, never refused, "recovered" at its first write. The probe writes as the application, with
        # its own certificate where its published files name it, or there is no probe (no RTO, not a false one).
        own = _own_certificate(ctx.state, producer.name, tls)
        if own is None:
            ctx.progress(
                f"RTO probe: not run — under mutual TLS it writes as {producer.name}, whose certificate and key are "
                f"not at {ctx.state / 'clients'}/{producer.name}.crt and .key (its published files name them)"
            )
            return None
        endpoint = replace(endpoint, tls=own)
    probe = WriteProbe(endpoint, ctx.original.produced_by(producer)[0], failover_id=ctx.journal.failover_id)
    probe.start()
    return probe


def _own_certificate(state: Path, app: str, cluster_tls: TlsFiles) -> TlsFiles | None:
    """``app``'s own certificate and key at the paths its published client files name (``clients/<app>.crt``,
    ``.key``: the application team writes them), with the cluster's trust; None while they are not there."""
    cert, key = state / "clients" / f"{app}.crt", state / "clients" / f"{app}.key"
    if not (cert.is_file() and key.is_file()):
        return None
    return TlsFiles(
        ca_location=cluster_tls.ca_location,
        certificate_location=str(cert),
        key_location=str(key),
        hostname_verification=cluster_tls.hostname_verification,
    )


def _record_probe(journal: Journal, probe: WriteProbe | None) -> None:
    if probe is None or probe.result is None or journal.measurements.probe:
        return
    run = journal.runs[-1]
    first = journal.outage_run() or run
    # RTO counts from the run that fenced A: a crash and a resume after it are part of the outage.
    journal.measure(
        probe={**probe.result.to_dict(), "application": probe.endpoint.username},
        rto_s=seconds_between(first.started_at, probe.result.acked_at),
        rto_this_run_s=seconds_between(run.started_at, probe.result.acked_at),
        write_outage_s=seconds_between(journal.measurements.fenced_at, probe.result.acked_at),
    )


def already_finished(journal: Journal | None, stack: StackFile) -> TypeGuard[Journal]:
    """True when ``journal`` is of a finished failover whose desired state is still the stack file's
    (``stack``, as read): running the failover again changes nothing."""
    return journal is not None and journal.finished and stack.config == journal.record.desired_config


C = TypeVar("C", bound=Context)


def new_context(
    kind: type[C],
    ref: StackRef,
    journal: Journal,
    original: Topology,
    desired: Topology,
    mode: str,
    *,
    options: FailoverOptions,
    converger: Converger | None,
    progress: Progress,
    **fields: Any,
) -> C:
    """A run's context of class ``kind`` (``fields``: its own); without ``converger``, ``pulumi up``
    through the Automation API."""
    return kind(
        ref=ref,
        original=original,
        desired=desired,
        mode=mode,
        options=options,
        journal=journal,
        converger=converger or PulumiConverger(ref, catch_up_timeout=options.catch_up_timeout),
        progress=progress,
        **fields,
    )


OpenRun = Callable[[Journal | None, StackFile], tuple[C, bool]]
"""Given the stack's journal (None when it has none) and its stack file as read, the run's context — its
journal loaded, or created for a new run — and whether the run resumes one that is unfinished."""


def run_frame(
    ref: StackRef,
    steps: Sequence[Step[C]],
    open_run: OpenRun[C],
    *,
    title: Callable[[C], str],
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
    probe: bool = False,
    is_finished: Callable[[Journal | None, StackFile], bool] | None = None,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """The frame of every journaled run of a step list (a failover, a region failover, a rejoin): the
    stack's lock held throughout; a finished run whose desired state is the stack file's reports so and
    changes nothing; otherwise ``open_run`` gives the context, the run is journaled, and every step not
    done yet runs in order (``probe``: with the RTO probe writing to B meanwhile). ``is_finished`` tells a
    finished run of this kind (default :func:`already_finished`). ``stack``: the stack file as the command
    read it; None: read here, once the lock is held."""
    stack_path = ref.existing_stack_file()
    ref.made_state_dir()
    home = ref.made_failover_home()
    with StackLock(home, ref.name):
        read = stack or read_stack_file(stack_path)
        journal = Journal.load(home)
        if journal is not None:
            refuse_foreign(ref, journal, progress)
            refuse_finished_elsewhere(journal, read)
        if journal is not None and (is_finished or already_finished)(journal, read):
            progress(f"failover {journal.failover_id} of stack {ref.name} already finished; nothing to do")
            return summarize(journal, already_finished=True)
        refuse_damaged_state(ref)
        ctx, resuming = open_run(journal, read)
        if not resuming:
            _record_estate(ctx, read)
        ctx.journal.begin_run(mode=ctx.mode, options=ctx.options.to_dict())
        progress(f"{'resuming' if resuming else 'starting'} {ctx.mode} {title(ctx)}")
        _run_steps(ctx, steps, on_step, probe=probe)
        return summarize(ctx.journal)


#: Roles whose clusters exist when a run begins: their IDs are recorded then (a standby's once it is built).
_RUNNING_ROLES = (Role.ACTIVE, Role.PASSIVE, Role.EDGE)


def _identified(topology: Topology, known: dict[str, str]) -> list[str]:
    """Clusters of ``topology`` whose ID is to be recorded: running roles, not recorded yet."""
    return [c.name for c in topology.clusters if c.role in _RUNNING_ROLES and c.name not in known]


def _record_estate(ctx: Context, stack: StackFile) -> None:
    """Record in a new journal which estate it belongs to: the clusters' IDs, the Pulumi state file, the
    digest of the stack file the run was planned from (:meth:`Journal.record_estate`) — so a file changed
    since it was read is refused before the first step."""
    from dr.estate.stack_state import checkpoint_file
    from dr.failover.frame.identity import cluster_ids

    state = checkpoint_file(ctx.ref)
    names = _identified(ctx.original, {})
    source = ctx.original.cluster(ctx.source)
    if ctx.mode == "unplanned" and not source.is_local:  # presumed lost: asking it would only delay the run
        names = [n for n in names if n != source.name]
    ctx.journal.record_estate(
        clusters=cluster_ids(ctx.original, ctx.ref.state_dir, names),
        stack_state=str(state) if state else None,
        stack_digest=stack.digest,
    )


def _record_built(ctx: Context) -> None:
    """After the desired state converged: the IDs of the clusters it built (the new passive, a rebuilt peer)."""
    from dr.failover.frame.identity import cluster_ids

    record = ctx.journal.record
    if not record.stack_digests:  # a journal of an older drctl: it records no identities
        return
    new = cluster_ids(ctx.desired, ctx.ref.state_dir, _identified(ctx.desired, record.clusters))
    if new:
        record.clusters = {**record.clusters, **new}
        ctx.journal.save()


def refuse_foreign(ref: StackRef, journal: Journal, progress: Progress = lambda _m: None) -> None:
    """When ``journal`` does not belong to the estate running now (:func:`dr.failover.frame.identity.foreign_reason`):
    archive it (:meth:`Journal.abandon`) and raise :class:`~dr.base.errors.JournalMismatch` — never resume it.
    The caller holds the stack's failover lock."""
    from dr.failover.frame.identity import foreign_reason, refusal_text

    reason = foreign_reason(ref, journal)
    if reason is None:
        return
    failover_id = journal.failover_id
    where = journal.abandon(reason, by="drctl failover: its clusters are not the ones running now")
    progress(f"failover {failover_id}: journal archived to {where}")
    raise JournalMismatch(
        f"{refusal_text(ref, failover_id, reason)}. Nothing was done; the journal was archived to {where}.",
        f"check `drctl status --stack {ref.name}`, then run `drctl failover --stack {ref.name} --dry-run`: "
        "the next failover starts afresh from the stack file",
    )


def refuse_damaged_state(ref: StackRef) -> None:
    """Refuse (ConfigError, exit 2) a run whose Pulumi state file cannot be read, naming the file —
    before any step, so before A is fenced."""
    from dr.estate.stack_state import state_fix, state_problem

    problem = state_problem(ref)
    if problem is not None:
        raise ConfigError(f"{problem}; a failover needs it to converge the desired state.", state_fix(ref.name))


def _run_steps(ctx: C, steps: Sequence[Step[C]], on_step: OnStep | None, *, probe: bool) -> None:
    """Every step not done yet, in order (``probe``: with the RTO probe writing to B meanwhile); the run's
    end journaled."""
    journal = ctx.journal
    writer: WriteProbe | None = None
    outcome = "failed"
    try:
        writer = _start_probe(ctx) if probe else None
        for number, step in enumerate(steps, 1):
            label = f"[{number}/{len(steps)}] {step.name}"
            if journal.is_done(step.name):
                ctx.progress(f"{label}: {journal.step(step.name).status} earlier — skipped")
                continue
            check_unchanged(journal, ctx.stack_path, step.name)
            ctx.progress(f"{label}: {ctx.described(step)}")
            t0 = time.monotonic()
            result = run_step(ctx, step)
            _record_probe(journal, writer)
            ctx.progress(f"{label}: {result.status} in {time.monotonic() - t0:.1f}s — {result.summary}")
            if on_step is not None:
                on_step(step.name, result)
        if writer is not None and journal.is_done("promote"):
            writer.acked.wait(10)
        _record_probe(journal, writer)
        outcome = "completed" if all(journal.is_done(s.name) for s in steps) else "pending"
        journal.set_status(outcome)
    except DRError:
        journal.set_status("failed")
        raise
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (the CLI turns it into KeyboardInterrupt)
        outcome = "interrupted"
        journal.set_status("interrupted")
        raise
    finally:
        if writer is not None:
            writer.stop()
            _record_probe(journal, writer)
        journal.end_run(outcome)


def run_step(ctx: C, step: Step[C]) -> StepResult:
    """Run one step and journal its start and its result — a failure too, then raised as a FailoverError."""
    journal = ctx.journal
    journal.start_step(step.name, step.inputs(ctx))
    t0 = time.monotonic()
    try:
        result = step.run(ctx)
    except DRError as exc:
        journal.finish_step(step.name, "failed", {}, time.monotonic() - t0, error=str(exc))
        raise
    except Exception as exc:
        journal.finish_step(step.name, "failed", {}, time.monotonic() - t0, error=f"{type(exc).__name__}: {exc}")
        raise FailoverError(
            f"step {step.name} failed unexpectedly: {type(exc).__name__}: {exc}",
            "read the journal and the cluster logs; rerun to resume from this step",
        ) from exc
    journal.finish_step(step.name, result.status, result.journaled(), time.monotonic() - t0)
    if step.name == "desired-state":
        journal.measure(abc_done_at=round(time.time(), 3), abc_run=len(journal.runs))
        _record_built(ctx)
    return result
