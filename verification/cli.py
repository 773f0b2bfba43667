"""Click commands ``verify`` and ``recover`` (attached to ``drctl``; also ``python -m verification.cli``).

Exit codes (from :mod:`dr.errors`): 0 clean / done · 1 differences found (``VerificationFailed``) ·
2 bad input (``ConfigError``) · 3 toolchain missing · 4 cluster unreachable or a read/write failed
(``ClusterError``) · 5 credentials refused (``AuthError``). Progress goes to stderr, the result to
stdout (``--json`` for machines). Passwords are never printed.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from dr.errors import ConfigError, DRError
from verification.classes import CLASSES
from verification.endpoints import endpoint_from_file, parse_cutoff, resolve_side, stack_endpoint
from verification.progress import Progress
from verification.session import DEFAULT_MASTER

__all__ = ["audit", "main", "recover", "verification_commands", "verify"]

F = TypeVar("F", bound=Callable[..., Any])


def _exit_codes(fn: F) -> F:
    """Turn a :class:`DRError` into its message on stderr and its documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DRError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


def _topics(values: tuple[str, ...]) -> list[str] | None:
    out = [t.strip() for v in values for t in v.split(",") if t.strip()]
    return out or None


def _table(summary: dict[str, Any]) -> str:
    head = ["topic", "source", "target", "after cut-off", *CLASSES]
    rows = [
        [
            t,
            f"{v['source_read']:,}",
            f"{v['target_read']:,}",
            f"{v['source_after_cutoff']:,}/{v['target_after_cutoff']:,}",
            *(f"{v[c]:,}" for c in CLASSES),
        ]
        for t, v in sorted(summary["topics"].items())
    ]
    tot = summary["totals"]
    rows.append(
        [
            "TOTAL",
            f"{tot['source_read']:,}",
            f"{tot['target_read']:,}",
            f"{tot['source_after_cutoff']:,}/{tot['target_after_cutoff']:,}",
            *(f"{tot[c]:,}" for c in CLASSES),
        ]
    )
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    return "\n".join(lines)


_side_opts = [
    click.option("--stack", help="Stack whose clusters --source/--target name."),
    click.option("--source", "source_name", metavar="NAME", help="Source cluster name in the stack (e.g. A)."),
    click.option("--target", "target_name", metavar="NAME", help="Target cluster name in the stack (e.g. B)."),
    click.option("--source-bootstrap", metavar="HOST:PORT", help="Source bootstrap servers (instead of --stack)."),
    click.option("--target-bootstrap", metavar="HOST:PORT", help="Target bootstrap servers (instead of --stack)."),
    click.option(
        "--credentials",
        type=click.Path(path_type=Path, dir_okay=False),
        help='0600 JSON file {"username", "password"} for both sides.',
    ),
    click.option(
        "--source-credentials",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Credentials file for the source only.",
    ),
    click.option(
        "--target-credentials",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Credentials file for the target only.",
    ),
]


def _with(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    def deco(fn: F) -> F:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


@click.command("verify")
@_with(_side_opts)
@click.option("--source-archive", type=click.Path(path_type=Path), help="Read the source from a Parquet archive.")
@click.option("--target-archive", type=click.Path(path_type=Path), help="Read the target from a Parquet archive.")
@click.option("--topics", multiple=True, help="Topics to compare (comma-separated or repeated); default: all.")
@click.option(
    "--cutoff",
    metavar="TS",
    help="Ignore records after this time (epoch ms or ISO-8601; 'none': compare "
    "all). Default with --stack: the last failover's cut-off when SOURCE/TARGET are its clusters.",
)
@click.option(
    "--out", type=click.Path(path_type=Path, file_okay=False), help="Report directory (default out/verify-<UTC time>)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON on stdout.")
@click.option(
    "--master",
    default=DEFAULT_MASTER,
    show_default=True,
    help="Spark master: local[N], or spark://HOST:PORT of a standalone cluster (the Kafka connector "
    "jars are shipped to its executors; exit 4 if it cannot be reached). Ignored under spark-submit.",
)
@click.option(
    "--windows",
    type=int,
    default=None,
    help="Time windows per topic in pass 1 (default: about 500 records each, 512 to 65536).",
)
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@_exit_codes
def verify(
    stack: str | None,
    source_name: str | None,
    target_name: str | None,
    source_bootstrap: str | None,
    target_bootstrap: str | None,
    credentials: Path | None,
    source_credentials: Path | None,
    target_credentials: Path | None,
    source_archive: Path | None,
    target_archive: Path | None,
    topics: tuple[str, ...],
    cutoff: str | None,
    out: Path | None,
    as_json: bool,
    master: str,
    windows: int | None,
    quiet: bool,
) -> None:
    """Compare SOURCE and TARGET record by record (key + checksum); exit 0 only when clean."""
    from verification.job import run_verification

    source = resolve_side(
        "source",
        stack=stack,
        name=source_name,
        bootstrap=source_bootstrap,
        credentials=source_credentials or credentials,
        archive=source_archive,
    )
    target = resolve_side(
        "target",
        stack=stack,
        name=target_name,
        bootstrap=target_bootstrap,
        credentials=target_credentials or credentials,
        archive=target_archive,
    )
    cutoff_ms = _cutoff(cutoff, stack, source_name, target_name, quiet)
    if windows is not None and windows < 1:
        raise ConfigError(f"--windows must be positive, not {windows}.", "leave it out to use the default")
    out = out or Path("out") / f"verify-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    result = run_verification(
        source=source,
        target=target,
        out_dir=out,
        topics=_topics(topics),
        cutoff_ms=cutoff_ms,
        master=master,
        windows=windows,
        progress=Progress("verify", enabled=not quiet),
    )
    if as_json:
        click.echo(json.dumps(result.summary, indent=2))
    else:
        verdict = "CLEAN" if result.clean else "DIFFERENCES FOUND"
        click.echo(f"verdict: {verdict} (exit code {result.exit_code})")
        click.echo(_table(result.summary))
        click.echo(f"report: {result.out_dir / 'report.html'}")
        if result.summary["totals"]["missing"]:
            click.echo(f"next: drctl recover --report {result.out_dir} --dry-run")
    result.raise_for_verdict()


def _cutoff(text: str | None, stack: str | None, source: str | None, target: str | None, quiet: bool) -> int | None:
    """``--cutoff``; by default, after a failover of ``stack`` between these two clusters, its cut-off.

    Records written on the new active cluster after its promotion (applications that moved, the
    RTO probe) are not something the link should have copied; without the failover's cut-off a
    later verification of the same pair would list them as unexpected. ``--cutoff none`` compares
    everything.
    """
    if text is not None:
        return None if text.strip().lower() == "none" else parse_cutoff(text)
    if not (stack and source and target):
        return None
    from dr.estate import state_dir
    from dr.failover.journal import Journal
    from dr.failover.metrics import utc_text

    journal = Journal.load(state_dir(stack))
    if journal is None or (journal.data["source"], journal.data["target"]) != (source, target):
        return None
    ms = journal.cutoff_ms()
    if ms is not None and not quiet:
        click.echo(
            f"cut-off from failover {journal.data['failover_id']}: {utc_text(ms)} ({ms} ms) — records after "
            f"it on {target} were written after the promotion; --cutoff none compares everything",
            err=True,
        )
    return ms


def _recovery_endpoint(
    role: str, recorded: dict[str, Any], *, stack: str | None, bootstrap: str | None, credentials: Path | None
) -> Any:
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
@_exit_codes
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
    from verification.recover import recover as run_recovery
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
    result = run_recovery(
        report_dir,
        target=target,
        source=source,
        source_archive=archive,
        dry_run=dry_run,
        progress=Progress("recover", enabled=not quiet),
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        mode = "dry run — " if dry_run else ""
        click.echo(
            f"{mode}missing in report: {result.missing:,}; already in target: {result.already_present:,}; "
            f"to write: {result.to_write:,}; written: {result.written:,}"
        )
        for topic, c in sorted(result.per_topic.items()):
            click.echo(f"  {topic}: missing {c['missing']:,}, to write {c['to_write']:,}, written {c['written']:,}")
        if not dry_run and result.written:
            click.echo("next: run the same drctl verify again; it should report 0 missing")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _audit_lines(r: Any) -> list[str]:
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
        lines.append(f"  missing: {m['topic']}-{m['partition']}@{m['offset']} (ts {m['ts']})")
    return lines


@click.command("audit")
@click.option("--stack", required=True, help="Stack whose links to audit.")
@click.option("--link", "links", multiple=True, help="Link to audit (repeatable); default: every link of the stack.")
@click.option(
    "--every",
    type=float,
    default=None,
    metavar="N",
    help="Repeat every N seconds until interrupted (Ctrl-C ends with the last run's exit code).",
)
@click.option("--reset", is_flag=True, help="Discard the audit state first: the next run is a full audit.")
@click.option("--json", "as_json", is_flag=True, help="Print each run's results as one JSON line on stdout.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@_exit_codes
def audit(stack: str, links: tuple[str, ...], every: float | None, reset: bool, as_json: bool, quiet: bool) -> None:
    """Verify only what each link copied since the last audit; exit 1 when records are missing.

    A record the target lacks is in flight while the link has not copied a later record of its
    partition, and missing once it has.
    """
    import time as _time

    from verification.audit import audit_stack

    if every is not None and every <= 0:
        raise ConfigError(f"--every must be positive, not {every}.", "leave it out for a single run")
    progress = Progress("audit", enabled=not quiet)
    missing = 0
    try:
        while True:
            results = audit_stack(stack, list(links) or None, reset=reset, progress=progress)
            reset = False
            missing = sum(r.missing for r in results)
            if as_json:
                click.echo(json.dumps({"time_ms": int(_time.time() * 1000), "links": [r.to_dict() for r in results]}))
            else:
                for r in results:
                    click.echo("\n".join(_audit_lines(r)))
            if every is None:
                break
            _time.sleep(every)
    except KeyboardInterrupt:
        click.echo("audit stopped", err=True)
    if missing:
        from dr.errors import VerificationFailed

        raise VerificationFailed(
            f"{missing:,} record(s) missing beyond the link's lag.",
            "run `drctl verify` for the report of those records, then `drctl recover`",
        )


def verification_commands() -> list[click.Command]:
    """The commands to attach to the ``drctl`` group."""
    return [verify, recover, audit]


@click.group(name="verification")
def main() -> None:
    """Integrity verification and recovery (the same commands as ``drctl verify`` / ``drctl recover``)."""


main.add_command(verify)
main.add_command(recover)
main.add_command(audit)

if __name__ == "__main__":  # pragma: no cover
    main()
