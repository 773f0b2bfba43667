"""``drctl verify``, ``drctl recover`` and ``drctl audit``: the verification package on the command line.

This is where a stack is resolved — its clusters into endpoints, its state directory into the audit
state files, its last failover into the default cut-off — so that :mod:`verification` takes only
resolved endpoints and paths. The options the submitted Spark job shares (sides, run, printed
result) come from :mod:`verification.command`.

Exit codes (from :mod:`dr.base.errors`): 0 clean / done · 1 differences found (``VerificationFailed``) ·
2 bad input (``ConfigError``) · 3 toolchain missing · 4 cluster unreachable or a read/write failed
(``ClusterError``) · 5 credentials refused (``AuthError``). Progress goes to stderr, the result to
stdout (``--json`` for machines). Passwords are never printed.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dr.base.errors import ConfigError, VerificationFailed
from dr.base.stackref import StackRef
from dr.cli.options import STACK
from dr.kafka.client import Endpoint
from verification import routes
from verification.audit_spark import FIRST_RUN_CHOICES, SPARK_FIRST_ABOVE
from verification.command import (
    CUTOFF_HELP,
    NAME_OPTIONS,
    RUN_OPTIONS,
    SIDE_OPTIONS,
    cutoff_option,
    exit_codes,
    print_result,
    resolve_sides,
    run_arguments,
    split_topics,
    with_options,
)
from verification.endpoints import endpoint_from_file, parse_cutoff
from verification.link_ref import LinkRef
from verification.progress import Progress, Reporter
from verification.route import AuditRequest, RecoverRequest, VerifyRequest
from verification.sides import KafkaSide

if TYPE_CHECKING:  # verification.audit imports Spark's fingerprint functions: loaded when a command runs
    from dr.estate.estate import Estate
    from dr.failover.act.edge_resume import SiteCopies
    from verification.audit import AuditResult
    from verification.recover import RecoveryResult

__all__ = [
    "OneStack",
    "audit",
    "audit_link",
    "audit_stack",
    "recover",
    "stack_endpoint",
    "state_path",
    "verification_commands",
    "verify",
]


# ------------------------------------------------------------------------------ stack resolution
def stack_endpoint(stack: str, cluster: str) -> Endpoint:
    """The admin endpoint of ``cluster`` in ``stack`` (:func:`dr.estate.estate.resolve_endpoint`): the
    verification's resolver, which names the stack given with ``--stack`` or recorded in a report."""
    from dr.estate.estate import resolve_endpoint

    return resolve_endpoint(StackRef.resolve(stack), cluster)


class OneStack:
    """The ``--stack`` of one command: resolved once and its stack file read once, when first asked (a command
    that names its sides by bootstrap never reads it)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @functools.cached_property
    def ref(self) -> StackRef:
        """The stack, resolved."""
        return StackRef.resolve(self.name)

    @functools.cached_property
    def estate(self) -> Estate:
        """The stack's estate, from its stack file read once."""
        from dr.estate.estate import Estate

        return Estate.for_stack(self.ref)

    def endpoint(self, stack: str, cluster: str) -> Endpoint:
        """The admin endpoint of ``cluster`` (as :func:`stack_endpoint`, ``stack`` being this one)."""
        return self.estate.endpoint(cluster)


def state_path(ref: StackRef, link: str) -> Path:
    """``<state dir of the stack>/audit/<link>.json``."""
    from verification.audit import state_file

    return state_file(ref.made_state_dir(), link)


def _cutoff(
    text: str | None, stack: str | OneStack | None, source: str | None, target: str | None, quiet: bool
) -> tuple[int | None, dict[str, dict[int, int]] | None]:
    """``--cutoff``; by default, after a failover of ``stack`` between these two clusters, its cut-off and its
    bound on the target (B's end offsets just before the promotion granted writes, when the failover took them).

    Records written on the new active cluster after its promotion (applications that moved, the
    RTO probe, a client that kept records created while the source was gone) are not something the link
    should have copied; without the failover's cut-off and bound a later verification of the same pair
    would list them as unexpected. ``--cutoff none`` compares everything.
    """
    if text is not None:
        return (None if text.strip().lower() == "none" else parse_cutoff(text)), None
    if not (stack and source and target):
        return None, None
    from dr.failover.frame.journal import Journal
    from dr.failover.record.metrics import utc_text

    one = stack if isinstance(stack, OneStack) else OneStack(stack)
    journal = Journal.load(one.ref.failover_home)
    if journal is None or (journal.record.source, journal.record.target) != (source, target):
        return None, None
    ms, until = journal.cutoff_ms(), journal.target_until()
    if ms is not None and not quiet:
        click.echo(
            f"cut-off from failover {journal.failover_id}: {utc_text(ms)} ({ms} ms) — records after "
            f"it on {target} were written after the promotion"
            + (f", as are those from {target}'s end offsets at the promotion on" if until else "")
            + "; --cutoff none compares everything",
            err=True,
        )
    return ms, until


# ------------------------------------------------------------------------------------- verify
@click.command("verify")
@with_options(
    [
        click.option("--stack", help="Stack whose clusters --source/--target name."),
        click.option(
            "--edge",
            metavar="NAME",
            help="Hub-and-spoke, with --stack only: compare edge NAME's topics with their copies NAME.<topic> on "
            "the hub its link feeds — every record there exactly once (read whole, in Python).",
        ),
        *NAME_OPTIONS,
        *SIDE_OPTIONS,
        cutoff_option(
            CUTOFF_HELP + " Default with --stack: the last failover's cut-off when SOURCE/TARGET are its clusters."
        ),
        *RUN_OPTIONS,
    ]
)
@exit_codes
def verify(
    stack: str | None,
    edge: str | None,
    topics: tuple[str, ...],
    cutoff: str | None,
    out: Path | None,
    as_json: bool,
    master: str,
    windows: int | None,
    quiet: bool,
    **sides: Any,
) -> None:
    """Compare SOURCE and TARGET record by record (key + checksum); exit 0 only when clean.

    With --edge E (hub-and-spoke): E's topics against their copies E.<topic> on the hub; exit 1 when a
    record is missing there, there twice, or there but not on E."""
    if edge is not None:
        extra = {"cutoff": cutoff, "out": out, "windows": windows}
        flags = {"source_name": "source", "target_name": "target"}
        given = [f"--{flags.get(k, k).replace('_', '-')}" for k, v in {**sides, **extra}.items() if v is not None]
        if stack is None or given:
            raise ConfigError(
                f"--edge compares an edge of a stack with the hub its link feeds; {', '.join(given) or '--stack'} "
                + ("does not apply." if given else "is missing."),
                f"`drctl verify --stack <stack> --edge {edge}`",
            )
        report = edge_copies(StackRef.resolve(stack), edge, split_topics(topics))
        _print_edge_copies(report, as_json=as_json)
        return
    one = OneStack(stack) if stack else None
    source, target = resolve_sides(stack=stack, stack_endpoint=one.endpoint if one else stack_endpoint, **sides)
    cutoff_ms, until = _cutoff(cutoff, one, sides["source_name"], sides["target_name"], quiet)
    if until is not None and isinstance(target, KafkaSide):
        target = replace(target, until=until)
    run = run_arguments(topics=topics, out=out, windows=windows, quiet=quiet)
    progress = run.pop("progress")
    request = VerifyRequest(source=source, target=target, cutoff_ms=cutoff_ms, master=master, **run)
    print_result(routes.run(request, progress=progress), as_json=as_json)


def edge_copies(ref: StackRef, edge: str, topics: list[str] | None = None) -> SiteCopies:
    """Edge ``edge`` of the stack ``ref`` against the copies ``<edge>.<topic>`` on the cluster its link feeds,
    as the stack's :class:`~dr.failover.kind.FailoverKind` compares them (``site_copies``): refused
    unless the kind's lost sites are edges (``site_flag``)."""
    from dr.estate.estate import Estate
    from dr.failover.kinds import KINDS

    estate = Estate.for_stack(ref)
    topology = estate.topology
    kind = KINDS[topology.architecture]  # the one place this command learns the stack's architecture
    if kind.site_flag != "edge":
        raise ConfigError(
            f"stack {ref.name!r} is {topology.architecture}: --edge compares an edge of a hub-spoke stack.",
            "compare two clusters with --source and --target",
        )
    return kind.site_copies(ref, estate, edge, topics)


def _print_edge_copies(report: SiteCopies, *, as_json: bool) -> None:
    """Print :func:`edge_copies`' report; raise :class:`VerificationFailed` unless every record is there once."""
    edge, hub = report["edge"], report["hub"]
    bad = {
        k: n
        for k, n in (
            ("missing", report["missing"]),
            ("duplicates", report["duplicates"]),
            ("unexpected", report["unexpected"]),
        )
        if n
    }
    if as_json:
        click.echo(json.dumps({**report, "clean": not bad}, indent=2))
    else:
        click.echo(
            f"edge {edge} → {hub} ({', '.join(f'{edge}.{t}' for t in report['topics'])}): "
            f"{'CLEAN' if not bad else 'DIFFERENCES'} — {report['records']:,} records on {edge}, "
            f"{report['missing']:,} missing on {hub}, {report['duplicates']:,} there twice or more, "
            f"{report['unexpected']:,} on {hub} but not on {edge}"
        )
    if bad:
        raise VerificationFailed(
            f"edge {edge}'s copies on {hub} differ: {', '.join(f'{n:,} {k}' for k, n in bad.items())}.",
            f"records missing on {hub}: `drctl status --stack <stack>` shows whether link {edge}-to-{hub} still "
            "lags; once it is at 0, copy them again (MirrorMaker 2 offsets on the hub: runbooks/hub-and-spoke.md)",
        )


# ------------------------------------------------------------------------------------ recover
def _recovery_endpoint(
    role: str, recorded: dict[str, Any], *, stack: str | None, bootstrap: str | None, credentials: Path | None
) -> Endpoint:
    if credentials is not None:
        return endpoint_from_file(
            bootstrap or recorded["bootstrap"],
            credentials,
            security_protocol=recorded.get("security_protocol") or "SASL_PLAINTEXT",
            sasl_mechanism=recorded.get("sasl_mechanism") or "SCRAM-SHA-512",
        )
    stack = stack or recorded.get("stack")
    if stack and recorded.get("cluster"):
        return stack_endpoint(stack, recorded["cluster"])
    raise ConfigError(
        f"no credentials for the {role} {recorded.get('bootstrap')}.",
        f"pass --credentials FILE (or --{role}-credentials FILE), or --stack STACK",
    )


def _print_recovery(result: RecoveryResult, *, dry_run: bool, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    mode = "dry run — " if dry_run else ""
    click.echo(
        f"{mode}missing in report: {result.missing:,}; already in target: {result.already_present:,}; "
        f"to write: {result.to_write:,}; written: {result.written:,}"
    )
    for topic, c in sorted(result.per_topic.items()):
        click.echo(f"  {topic}: missing {c['missing']:,}, to write {c['to_write']:,}, written {c['written']:,}")
    if not dry_run and result.written:
        click.echo("next: run the same drctl verify again; it should report 0 missing")


@click.command("recover")
@click.option(
    "--report",
    "report_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The --out directory of a drctl verify run.",
)
@click.option("--dry-run", is_flag=True, help="Plan only: count what would be written.")
@click.option("--stack", help="Stack to resolve the clusters recorded in the report (default: the report's).")
@click.option("--source-bootstrap", metavar="HOST:PORT", help="Override the source bootstrap in the report.")
@click.option("--target-bootstrap", metavar="HOST:PORT", help="Override the target bootstrap in the report.")
@click.option(
    "--credentials",
    type=click.Path(path_type=Path, dir_okay=False),
    help='0600 JSON file {"username", "password"} for both sides.',
)
@click.option("--source-credentials", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--target-credentials", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--source-archive", type=click.Path(path_type=Path), help="Replay from this Parquet archive.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@exit_codes
def recover(
    report_dir: Path,
    dry_run: bool,
    stack: str | None,
    source_bootstrap: str | None,
    target_bootstrap: str | None,
    credentials: Path | None,
    source_credentials: Path | None,
    target_credentials: Path | None,
    source_archive: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Replay the records a verification found missing into the target; a second run writes nothing."""
    from verification.report import load_summary

    summary = load_summary(report_dir)
    if summary["target"].get("kind") != "kafka":
        raise ConfigError(
            "the report's target is an archive; recovery writes to a Kafka cluster.",
            "verify against the target cluster, then recover from that report",
        )
    target = _recovery_endpoint(
        "target",
        summary["target"],
        stack=stack,
        bootstrap=target_bootstrap,
        credentials=target_credentials or credentials,
    )
    src = summary["source"]
    archive = source_archive or (Path(src["path"]) if src.get("kind") == "archive" else None)
    source = (
        None
        if archive
        else _recovery_endpoint(
            "source", src, stack=stack, bootstrap=source_bootstrap, credentials=source_credentials or credentials
        )
    )
    request = RecoverRequest(
        report_dir=report_dir, target=target, source=source, source_archive=archive, dry_run=dry_run
    )
    result = routes.run(request, progress=Progress("recover", enabled=not quiet))
    _print_recovery(result, dry_run=dry_run, as_json=as_json)


# -------------------------------------------------------------------------------------- audit
def audit_link(
    ref: StackRef,
    link_name: str,
    *,
    reset: bool = False,
    progress: Reporter = lambda _m: None,
    sample: int = 10,
    first_run: str = "auto",
    master: str | None = None,
) -> AuditResult:
    """Audit what arrived on ``link_name`` of the stack ``ref`` since its last audit (the first run reads all,
    on Spark when ``first_run`` says so: see :func:`verification.audit.audit_endpoints`), through
    :func:`verification.routes.run`."""
    import dr.failover.record.team_store  # noqa: F401 — with a postgres:// backend the audit state is in its database
    from dr.estate.estate import Estate

    started = time.monotonic()
    stack = ref.name
    estate = Estate.for_stack(ref)
    link = next((lk for lk in estate.topology.links if lk.name == link_name), None)
    if link is None:
        raise ConfigError(
            f"stack {stack!r} has no link {link_name!r}.",
            f"use one of: {', '.join(lk.name for lk in estate.topology.links) or '(none)'}",
        )
    request = AuditRequest(
        source=estate.endpoint(link.source),
        target=estate.endpoint(link.target),
        state_file=state_path(ref, link.name),
        ref=LinkRef(stack=stack, link=link.name, source=link.source, target=link.target),
        select=link.selects_topic,
        reset=reset,
        sample=sample,
        started=started,
        first_run=first_run,
        master=master,
    )
    return routes.run(request, progress=progress)


def audit_stack(
    ref: StackRef,
    links: list[str] | None = None,
    *,
    reset: bool = False,
    progress: Reporter = lambda _m: None,
    first_run: str = "auto",
    master: str | None = None,
) -> list[AuditResult]:
    """:func:`audit_link` for each of ``links`` (default: every link of the stack)."""
    from dr.estate.estate import Estate

    stack = ref.name
    names = links or [lk.name for lk in Estate.for_stack(ref).topology.links]
    if not names:
        raise ConfigError(f"stack {stack!r} has no links to audit.", "declare a link in its stack file")
    return [audit_link(ref, name, reset=reset, progress=progress, first_run=first_run, master=master) for name in names]


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _audit_lines(r: AuditResult) -> list[str]:
    from verification.report import utc_text

    kind = "first (full) audit" if r.first_run else f"run {r.run}"
    lines = [
        f"{r.link} ({r.source} → {r.target}), {kind} in {r.seconds:.2f} s: read {r.read_source:,} new on "
        f"{r.source}, {r.read_target:,} on {r.target}",
        f"  verified {r.verified:,} (total {r.verified_total:,}) · in flight {r.in_flight:,} · "
        f"missing beyond the link's lag {r.missing:,} · only on {r.target} {r.target_unmatched:,} · "
        f"link lag {r.link_lag:,} · oldest unreplicated {_age(r.oldest_unreplicated_age_s)}",
    ]
    if r.lost_to_retention:
        lines.append(
            f"  warning: {r.lost_to_retention:,} source offsets were deleted by retention before this "
            "audit read them (audit more often than the retention)"
        )
    if r.target_lost_to_retention:
        lines.append(
            f"  warning: {r.target_lost_to_retention:,} target offsets were deleted before this audit read "
            "them; the source records they copied will be reported missing"
        )
    for m in r.missing_sample:
        lines.append(f"  missing: {m['topic']}-{m['partition']}@{m['offset']} (ts {m['ts']} = {utc_text(m['ts'])})")
    return lines


@click.command("audit")
@click.option("--stack", "ref", type=STACK, required=True, help="Stack whose links to audit.")
@click.option("--link", "links", multiple=True, help="Link to audit (repeatable); default: every link of the stack.")
@click.option(
    "--every",
    type=float,
    default=None,
    metavar="N",
    help="Repeat every N seconds until interrupted (Ctrl-C ends with the last run's exit code).",
)
@click.option(
    "--reset",
    is_flag=True,
    help="Start over with a full audit; the old state file is replaced only when that run succeeds.",
)
@click.option(
    "--first-run",
    type=click.Choice(FIRST_RUN_CHOICES),
    default="auto",
    show_default=True,
    help="Where a link's first (full) audit runs: one Spark verification of everything, or one Python "
    f"process; auto takes Spark above {SPARK_FIRST_ABOVE:,} offsets. Later runs read only the increment, in Python.",
)
@click.option(
    "--master",
    metavar="URL",
    default=None,
    help="Spark master for a first audit on Spark (default local[2]; spark://HOST:PORT for a standalone cluster).",
)
@click.option("--json", "as_json", is_flag=True, help="Print each run's results as one JSON line on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@exit_codes
def audit(
    ref: StackRef,
    links: tuple[str, ...],
    every: float | None,
    reset: bool,
    first_run: str,
    master: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Verify only what each link copied since the last audit; exit 1 when records are missing.

    A record the target lacks is in flight while the link has not copied a later record of its
    partition, and missing once it has. A link's first audit verifies everything; above 2,000,000
    offsets it runs as one Spark verification (see --first-run and --master), whose report is kept
    next to the state file.
    """
    if every is not None and every <= 0:
        raise ConfigError(f"--every must be positive, not {every}.", "leave it out for a single run")
    progress = Progress("audit", enabled=not quiet)
    missing = 0
    try:
        while True:
            results = audit_stack(
                ref, list(links) or None, reset=reset, progress=progress, first_run=first_run, master=master
            )
            reset = False
            missing = sum(r.missing for r in results)
            if as_json:
                click.echo(json.dumps({"time_ms": int(time.time() * 1000), "links": [r.to_dict() for r in results]}))
            else:
                for r in results:
                    click.echo("\n".join(_audit_lines(r)))
            if every is None:
                break
            time.sleep(every)
    except KeyboardInterrupt:
        click.echo("audit stopped", err=True)
    if missing:
        raise VerificationFailed(
            f"{missing:,} record(s) missing beyond the link's lag.",
            "run `drctl verify` for the report of those records, then `drctl recover`",
        )


def verification_commands() -> list[click.Command]:
    """The commands to attach to the ``drctl`` group."""
    return [verify, recover, audit]
