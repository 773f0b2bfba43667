"""Click commands ``failover``, ``status`` and ``drill``, attached to ``drctl`` (:mod:`dr.cli`, the one CLI).

This module never imports :mod:`dr.cli`: the group imports the commands, not the other way round.

Exit codes (:mod:`dr.base.errors`): 0 done — also when a failover is already finished, or finished
with A's decommissioning pending · 2 bad input (unknown stack...) · 4 a cluster could not be
reached · 5 credentials refused · 6 a failover step refused (the journal is kept: rerun to
resume), or the journal belongs to other clusters (archived, never resumed: the next run starts
afresh) · 7 another failover of the stack is running. Progress goes to stderr, results to stdout
(``--json`` for machines). Every failover path (active-passive or hub, ``--region``, ``--rejoin``,
``--edge``) prints the one result :class:`~dr.failover.frame.summary.FailoverSummary`, also when a step fails
(then with ``status`` failed and the step's ``error``, and that error's exit code); a run refused before
it began (no confirmation, another run holding the lock, a bad flag) prints nothing on stdout.
Passwords are never printed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel

from dr.base.errors import ConfigError, DRError, FailoverError
from dr.base.stackref import StackRef
from dr.cli.options import STACK
from dr.failover.drill.grade import DEFAULT_AIMS

if TYPE_CHECKING:
    from click.decorators import FC

    from dr.failover.frame.journal import Journal
    from dr.failover.frame.summary import FailoverSummary
    from dr.topology import Topology

__all__ = ["drill", "failover", "failover_commands", "status"]


def progress(message: str) -> None:
    """Progress lines go to stderr so ``--json`` output stays clean."""
    click.echo(f"[{time.strftime('%H:%M:%S')}] {message}", err=True)


def warn_if_too_large(topology: Topology) -> None:
    """Say on stderr, before anything runs, when the stack is larger than its provisioning was
    measured to carry (:func:`dr.topology.provisioning.provisioning_warning`)."""
    from dr.topology.provisioning import provisioning_warning

    found = provisioning_warning(topology)
    if found is not None:
        click.echo(f"warning: {found}", err=True)


def _shown(*decls: str, **attrs: Any) -> Callable[[FC], FC]:
    """A click option whose default ``--help`` shows."""
    return click.option(*decls, show_default=True, **attrs)


def _paths(ref: StackRef) -> tuple[Path, Path]:
    """The stack file (an unknown stack is refused here, first) and the state directory (created)."""
    return ref.existing_stack_file(), ref.made_state_dir()


@click.command("failover")
@_shown("--stack", "ref", type=STACK, default="local", help="Stack whose Pulumi.<stack>.yaml to fail over.")
@click.option(
    "--mode",
    type=click.Choice(["planned", "unplanned"]),
    default=None,
    help="planned: fence and drain A first (zero loss); unplanned: A is gone. "
    "[default: planned; a resumed failover keeps its mode]",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and the desired-state diff; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Go on past the drain deadline (the lag is lost) or with B degraded.")
@click.option("--force-decommission", is_flag=True, help="Decommission A without a clean verification verdict.")
@click.option(
    "--skip-verify",
    is_flag=True,
    help="Do not run the verification (then A is only decommissioned with --force-decommission).",
)
@_shown(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    help="Seconds to wait for the link lag to reach 0 (planned).",
)
@click.option(
    "--region",
    default=None,
    help="Active-active stacks: the peer whose applications move to a surviving peer (its links stop).",
)
@click.option(
    "--edge",
    default=None,
    help="Hub-and-spoke stacks: the lost edge whose applications move to their fallbacks (its link stops).",
)
@click.option(
    "--recover",
    is_flag=True,
    help="With --region/--edge: replay its records never replicated into their remote topics <name>.<topic>.",
)
@click.option(
    "--rejoin",
    is_flag=True,
    help="With --region: fail back — the rebuilt region rejoins as an active peer, its links and applications back.",
)
@click.option(
    "--take-over",
    is_flag=True,
    help="postgres:// backend: take over a stale lease of another operator (journaled); a live one is never "
    "taken. The same as KDR_TAKE_OVER_STALE_LEASE=1.",
)
@click.option("--started-by", default=None, hidden=True, help="drctl controller: who started the run (journaled).")
@click.option(
    "--fencing-token",
    type=click.IntRange(min=1),
    default=None,
    hidden=True,
    help="drctl controller: its lease's token.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def failover(
    ref: StackRef,
    mode: str | None,
    dry_run: bool,
    yes: bool,
    force: bool,
    force_decommission: bool,
    skip_verify: bool,
    drain_timeout: float,
    region: str | None,
    edge: str | None,
    recover: bool,
    rejoin: bool,
    take_over: bool,
    started_by: str | None,
    fencing_token: int | None,
    as_json: bool,
) -> None:
    """Fail the stack over: promote the passive cluster B, make the standby C its passive, decommission A.

    On an active-active stack, --region A moves A's applications to a surviving peer instead, and
    --region A --rejoin brings the rebuilt A back as a peer (runbooks/active-active.md); on a
    hub-and-spoke stack, --edge E moves a lost edge's applications to their fallbacks
    (runbooks/hub-and-spoke.md). Every step is journaled; rerunning resumes where a refused or crashed
    run stopped, and a finished failover run again changes nothing.
    """
    from dr.failover.frame.step import FailoverOptions
    from dr.failover.kind import Request
    from dr.failover.kinds import KINDS
    from dr.topology import read_stack_file

    if take_over:  # read where the lease is taken (dr.failover.frame.journal), for every failover path
        os.environ["KDR_TAKE_OVER_STALE_LEASE"] = "1"
    stack, (stack_path, _state) = ref.name, _paths(ref)
    options = FailoverOptions(
        mode=mode,
        force=force,
        force_decommission=force_decommission,
        skip_verify=skip_verify,
        drain_timeout=drain_timeout,
        started_by=started_by,
        fencing_token=fencing_token,
    )
    if recover and dry_run:  # the replay would run: a dry run changes nothing
        raise ConfigError(
            "--recover replays records now; it has no --dry-run.",
            "what it would replay is what the failover's integrity step listed (the `integrity` step of "
            f"`drctl failover --stack {stack} --{'edge' if edge else 'region'} <site> --json`, and "
            "<region|edge>-<id>-missing.json next to the journal); run --recover without --dry-run to replay it",
        )
    if edge is not None and (rejoin or region is not None):
        raise ConfigError(
            "--edge moves a lost edge's applications; --region and --rejoin act on an active-active stack.",
            f"pass either --edge or --region: `drctl failover --stack {stack} --edge {edge} --dry-run`",
        )
    if edge is None and region is None and (recover or rejoin):
        raise ConfigError(
            f"--{'recover' if recover else 'rejoin'} acts on one region of an active-active stack.",
            f"pass --region <the failed peer>: `drctl failover --stack {stack} --region A --{'recover' if recover else 'rejoin'}`",
        )
    if recover and rejoin:
        raise ConfigError("--recover and --rejoin are two steps.", "run --recover first, then --rejoin")
    read = read_stack_file(stack_path)  # the stack file read once: every layer below takes what was read here
    topology = read.topology
    if fencing_token is not None:
        from dr.controller.token import lease_guard

        options.lease_check = lease_guard(stack, topology, fencing_token)
    kind = KINDS[topology.architecture]  # the one place a command learns the stack's architecture
    flag, site = ("edge", edge) if edge is not None else ("region", region)
    if site is not None and kind.site_flag != flag and rejoin:
        raise FailoverError(
            f"stack '{stack}' is {topology.architecture}: --rejoin brings a region of an active-active stack back.",
            f"for an active-passive stack rebuild the old cluster as the standby: `drctl estate standby "
            f"--stack {stack} --cluster {site}`",
        )
    if site is not None and kind.site_flag != flag:
        raise FailoverError(
            f"stack '{stack}' is {topology.architecture}: --{flag} {_SITE_FLAGS[flag]}.",
            f"run `drctl failover --stack {stack}` without --{flag}",
        )
    request = Request(site=site, rejoin=rejoin)
    refusal = kind.refusal(ref, topology, request)
    if refusal is not None:
        raise refusal
    if recover and site is not None:
        click.echo(json.dumps(kind.recover(ref, site, progress=progress).to_json(), indent=2))
        return
    if dry_run:
        if site is None:
            warn_if_too_large(topology)
        plan = kind.plan(ref, read, request, options=options)
        click.echo(_json(plan) if as_json else plan.render())
        return
    asked = kind.confirmation(ref, read, request, options=options)
    _confirm_then_run(
        ref,
        lambda: kind.run(ref, read, request, options=options, progress=progress),
        yes=yes or asked.needless,
        refusal=(asked.refusal, asked.look_at),
        question=asked.question,
        as_json=as_json,
    )


#: What each site flag of ``drctl failover`` does, for the refusal of a stack it does not apply to.
_SITE_FLAGS = {
    "region": "fails over one peer of an active-active stack",
    "edge": "moves the applications of a lost edge of a hub-spoke stack",
}


def _confirm_then_run(
    ref: StackRef,
    run: Callable[[], FailoverSummary],
    *,
    yes: bool,
    refusal: tuple[str, str],
    question: str,
    as_json: bool,
) -> None:
    """Ask ``question`` unless ``yes`` (refused as ``refusal`` — the message and the dry run to look at
    first — without a terminal to ask on), then ``run`` and print its summary: the one result of every
    failover path, on success and when a step fails (``status`` failed, ``error`` the step's error; the
    exit code is the error's). A run refused before it journaled anything prints nothing on stdout."""
    if not yes:
        if not sys.stdin.isatty():
            raise FailoverError(refusal[0], f"pass --yes (look at {refusal[1]} first)")
        click.confirm(question, abort=True)
    from dr.failover.frame.journal import Journal

    before = _run_mark(Journal.load(ref.failover_home))
    signal.signal(signal.SIGTERM, _interrupt)  # journaled as "interrupted", like Ctrl-C
    try:
        summary = run()
    except DRError:
        from dr.failover.frame.summary import summarize

        journal = Journal.load(ref.failover_home)
        if journal is not None and _run_mark(journal) != before:  # this run was journaled, then refused
            click.echo(_result(summarize(journal), as_json))
        raise
    click.echo(_result(summary, as_json))


def _run_mark(journal: Journal | None) -> tuple[str, int] | None:
    """Which failover a journal holds and how many runs it counts: a run that began changes it."""
    return None if journal is None else (journal.failover_id, len(journal.record.runs))


def _json(model: BaseModel) -> str:
    """A result model as ``--json`` prints it."""
    return json.dumps(model.model_dump(mode="json"), indent=2)


def _result(summary: FailoverSummary, as_json: bool) -> str:
    from dr.failover.frame.render import render_summary

    return _json(summary) if as_json else render_summary(summary)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@click.command("status")
@_shown("--stack", "ref", type=STACK, default="local")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON on stdout.")
@click.option("--isr", is_flag=True, help="Show leader, replicas and in-sync replicas of every partition.")
@click.option(
    "--parity",
    is_flag=True,
    help="Also compare the clusters each link joins: topic configurations, SCRAM users, ACLs (against each "
    "cluster's role) and user quotas; each difference is a problem naming the command that repairs it.",
)
def status(ref: StackRef, as_json: bool, isr: bool, parity: bool) -> None:
    """Roles, broker health, link lag per partition, consumer-group positions, the last failover.

    The full status is printed first (with --json: plus a `problems` list); then the exit code says
    whether anything needs a person, so monitoring can run it: 0 no problem · 4 a link the topology
    says runs is stopped or a side of it is unreachable, or an active, passive or edge cluster is down ·
    6 the last failover failed or was interrupted (its journal says running, but no process holds
    the stack's lock), or its journal belongs to other clusters (an estate rebuilt) or was archived
    unfinished — 6 wins when both apply · 2 the stack's Pulumi state file cannot be read (it is named).
    The message lists every problem.
    """
    from dr.failover.status import raise_for_problems, render_status, status_report

    _paths(ref)
    report = status_report(ref, isr=isr)
    if parity:
        from dr.estate.estate import Estate
        from dr.failover.parity import parity_problems

        report.problems += parity_problems(Estate.for_stack(ref))
    click.echo(json.dumps(report.to_json(), indent=2) if as_json else render_status(report))
    raise_for_problems(report)


@click.command("drill")
@_shown(
    "--stack",
    default="local",
    help="The stack: a local one is copied for the drill; one with external clusters is drilled itself.",
)
@click.option("--unplanned", is_flag=True, help="SIGKILL A mid-traffic instead of a planned failover.")
@click.option(
    "--automatic",
    is_flag=True,
    help="With --unplanned: nobody runs the failover — controllers beside A and B and a third site's observer, "
    "on an etcd witness of the drill's own, do; site A is lost whole (brokers and controller). Graded: "
    "detection, promotion, unattended RTO, no write acknowledged by A after the promotion.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the drill's estate, journal and reports (an external stack keeps its own journal; "
    "only drill.json goes here) [default: out/drill-<time>].",
)
@_shown("--rate", type=click.IntRange(min=1), default=500, help="Records per second.")
@_shown("--warmup", type=click.FloatRange(min=1), default=6.0, help="Seconds of traffic before A fails.")
@click.option(
    "--base-port",
    type=click.IntRange(1024, 32468),
    default=None,
    help="Run the clusters at BASE, BASE+100, ... instead of the stack's ports (below 32768, Linux's ephemeral range).",
)
@click.option("--keep", is_flag=True, help="Leave the drill's clusters running at the end.")
@_shown(
    "--cycles",
    type=click.IntRange(1, 12),
    default=1,
    help="Failovers in a row: A→B→C, then B→C→A (the old active rebuilt as standby), then C→A→B...",
)
@_shown(
    "--aim-rto",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_AIMS["rto_s"],
    help="Seconds each application may be without its cluster (the RTO check).",
)
@_shown(
    "--aim-a-b-c",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_AIMS["a_b_c_s"],
    help="Seconds from the start of the failover until the standby replicates from the new active (the A→B→C "
    "check); "
    "a large estate's desired-state step takes longer (docs/scale.md).",
)
@click.option(
    "--kill-replicator",
    is_flag=True,
    help="SIGKILL the active→passive link's replicator (its MirrorMaker 2 process, or the Connect worker running "
    "its source task) mid-copy in each cycle's warm-up, then start it again; graded: no record twice on the passive.",
)
@click.option(
    "--strict-aims",
    is_flag=True,
    help="Fail the drill (exit 6) when a timing aim (application RTO, A→B→C, the survivor's pause) is missed; "
    "without it a missed aim is graded MISSED and reported, and only correctness checks decide the exit code.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the graded result as JSON on stdout.")
def drill(
    stack: str,
    unplanned: bool,
    automatic: bool,
    out: Path | None,
    rate: int,
    warmup: float,
    base_port: int | None,
    keep: bool,
    cycles: int,
    aim_rto: float,
    aim_a_b_c: float,
    kill_replicator: bool,
    strict_aims: bool,
    as_json: bool,
) -> None:
    """Game day: A and B with traffic, fail A, fail over A→B→C, verify, recover, grade.

    The applications (a producer and a consumer group member) follow the client configuration the
    failover publishes, as applications watching a config source would; each one's RTO is measured
    on its own traffic. With --cycles N the lifecycle repeats: the lost site is rebuilt as the next
    standby and the next failover runs.

    On a stack with external clusters the drill is one planned failover of that stack itself, its
    applications on their published client configurations; it stops no broker, so --unplanned and
    --cycles above 1 are refused there, naming the next step. On a hub-and-spoke stack the drill is
    a hub failover under edge traffic, graded per edge and per hub application (runbooks/hub-and-spoke.md).

    On an active-active stack the drill runs traffic on every peer, fails the first peer's region
    over to the next (`failover --region`), recovers what never crossed and grades each moving
    application's RTO and that the survivor's own applications were never interrupted."""
    from dr.estate.estate import load_stack
    from dr.failover.drill.frame import DrillOptions
    from dr.failover.kinds import KINDS

    options = DrillOptions(
        stack=stack,
        out=out or Path("out") / f"drill-{time.strftime('%Y%m%dT%H%M%S')}",
        unplanned=unplanned,
        automatic=automatic,
        rate=rate,
        warmup_s=warmup,
        base_port=base_port,
        keep=keep,
        cycles=cycles,
        aims={"rto_s": aim_rto, "a_b_c_s": aim_a_b_c},
        kill_replicator=kill_replicator,
        strict_aims=strict_aims,
    )
    ref = StackRef.resolve(stack)  # the stack resolved, and its file read, once for the whole drill
    topology = load_stack(ref)
    if automatic and not topology.shape().site_controllers:  # --automatic drills the sites' controllers
        raise ConfigError(
            f"--automatic drills the controllers of an active-passive stack; {stack!r} is {topology.architecture.value}.",
            f"run `drctl drill --stack {stack} --unplanned` without --automatic. Nothing was changed",
        )
    result, text = KINDS[topology.architecture].drill(ref, topology, options, progress=progress, as_json=as_json)
    click.echo(text)
    if not result.passed:
        raise FailoverError(f"the drill failed: {result.grade}.", f"read {Path(result.out) / 'drill.json'}")


def failover_commands() -> list[click.Command]:
    """The commands to attach to the ``drctl`` group."""
    return [failover, status, drill]
