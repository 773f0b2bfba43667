"""What ``drctl verify`` and the submitted job (``spark-submit verification/job.py``) share on the
command line: the options naming the sides and the run, error → exit code, and the printed result.

Stack-free on purpose: resolving a stack's cluster is the ``drctl`` layer's job
(:mod:`dr.cli.verify`), which adds ``--stack`` to these options.

Exit codes (from :mod:`dr.base.errors`): 0 clean / done · 1 differences found (``VerificationFailed``) ·
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
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from dr.base.errors import ConfigError, DRError
from verification.classes import CLASSES
from verification.endpoints import StackResolver, resolve_side
from verification.progress import Progress
from verification.session import DEFAULT_MASTER

if TYPE_CHECKING:  # the command line starts without pyarrow and Spark
    from verification.result import VerificationResult
    from verification.sides import Side

__all__ = [
    "CUTOFF_HELP",
    "NAME_OPTIONS",
    "RUN_OPTIONS",
    "SIDE_OPTIONS",
    "cutoff_option",
    "exit_codes",
    "print_result",
    "resolve_sides",
    "run_arguments",
    "split_topics",
    "summary_table",
    "with_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: ``--cutoff``'s help without a stack (the submitted job); ``drctl verify`` adds its stack default.
CUTOFF_HELP = "Ignore records after this time (epoch ms or ISO-8601; 'none': compare all)."


def exit_codes(fn: F) -> F:
    """Turn a :class:`DRError` into its message on stderr and its documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DRError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return cast(F, wrapper)


def with_options(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """Apply click ``options`` in the order given (the first is listed first in ``--help``)."""

    def deco(fn: F) -> F:
        for opt in reversed(options):
            fn = opt(fn)
        return fn

    return deco


def _credentials_option(flag: str, help_text: str | None = None) -> Callable[[F], F]:
    return click.option(flag, type=click.Path(path_type=Path, dir_okay=False), help=help_text)


NAME_OPTIONS = [
    click.option("--source", "source_name", metavar="NAME", help="Source cluster name in the stack (e.g. A)."),
    click.option("--target", "target_name", metavar="NAME", help="Target cluster name in the stack (e.g. B)."),
]
SIDE_OPTIONS = [
    click.option("--source-bootstrap", metavar="HOST:PORT", help="Source bootstrap servers (instead of --stack)."),
    click.option("--target-bootstrap", metavar="HOST:PORT", help="Target bootstrap servers (instead of --stack)."),
    _credentials_option("--credentials", '0600 JSON file {"username", "password"} for both sides.'),
    _credentials_option("--source-credentials", "Credentials file for the source only."),
    _credentials_option("--target-credentials", "Credentials file for the target only."),
    click.option("--source-archive", type=click.Path(path_type=Path), help="Read the source from a Parquet archive."),
    click.option("--target-archive", type=click.Path(path_type=Path), help="Read the target from a Parquet archive."),
    click.option("--topics", multiple=True, help="Topics to compare (comma-separated or repeated); default: all."),
]


def resolve_sides(
    *,
    stack: str | None = None,
    source_name: str | None,
    target_name: str | None,
    source_bootstrap: str | None,
    target_bootstrap: str | None,
    credentials: Path | None,
    source_credentials: Path | None,
    target_credentials: Path | None,
    source_archive: Path | None,
    target_archive: Path | None,
    stack_endpoint: StackResolver | None = None,
) -> tuple[Side, Side]:
    """The source and the target named by :data:`NAME_OPTIONS` and :data:`SIDE_OPTIONS` (a command
    passes its side options on as they are); ``--credentials`` serves a side without its own."""

    def side(role: str, name: str | None, bootstrap: str | None, own: Path | None, archive: Path | None) -> Side:
        return resolve_side(
            role,
            stack=stack,
            name=name,
            bootstrap=bootstrap,
            credentials=own or credentials,
            archive=archive,
            stack_endpoint=stack_endpoint,
        )

    return (
        side("source", source_name, source_bootstrap, source_credentials, source_archive),
        side("target", target_name, target_bootstrap, target_credentials, target_archive),
    )


def cutoff_option(help_text: str = CUTOFF_HELP) -> Callable[[F], F]:
    """``--cutoff TS``."""
    return click.option("--cutoff", metavar="TS", help=help_text)


RUN_OPTIONS = [
    click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        help="Report directory (default out/verify-<UTC time>).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the summary JSON on stdout."),
    click.option(
        "--master",
        default=DEFAULT_MASTER,
        show_default=True,
        help="Spark master: local[N], or spark://HOST:PORT of a standalone cluster (the Kafka connector "
        "jars are shipped to its executors; exit 4 if it cannot be reached). Ignored under spark-submit.",
    ),
    click.option(
        "--windows",
        type=int,
        default=None,
        help="Time windows per topic in pass 1 (default: about 500 records each, 512 to 65536).",
    ),
    click.option("--quiet", is_flag=True, help="No progress lines on stderr."),
]


def split_topics(values: tuple[str, ...]) -> list[str] | None:
    """``--topics`` values (comma-separated or repeated) as a list; None for every topic."""
    out = [t.strip() for v in values for t in v.split(",") if t.strip()]
    return out or None


def _row(name: str, v: dict[str, Any]) -> list[str]:
    return [
        name,
        f"{v['source_read']:,}",
        f"{v['target_read']:,}",
        f"{v['source_after_cutoff']:,}/{v['target_after_cutoff']:,}",
        *(f"{v[c]:,}" for c in CLASSES),
    ]


def summary_table(summary: dict[str, Any]) -> str:
    """The per-topic counts of a summary as an aligned text table with a TOTAL row."""
    head = ["topic", "source", "target", "after cut-off", *CLASSES]
    rows = [_row(t, v) for t, v in sorted(summary["topics"].items())]
    rows.append(_row("TOTAL", summary["totals"]))
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    return "\n".join(lines)


def run_arguments(*, topics: tuple[str, ...], out: Path | None, windows: int | None, quiet: bool) -> dict[str, Any]:
    """The :func:`~verification.job.run_verification` arguments the run options give (checked)."""
    if windows is not None and windows < 1:
        raise ConfigError(f"--windows must be positive, not {windows}.", "leave it out to use the default")
    return {
        "out_dir": out or Path("out") / f"verify-{datetime.now(UTC):%Y%m%dT%H%M%SZ}",
        "topics": split_topics(topics),
        "windows": windows,
        "progress": Progress("verify", enabled=not quiet),
    }


def print_result(result: VerificationResult, *, as_json: bool) -> None:
    """Print a verification's result (table or ``--json``) on stdout; raise unless it is clean."""
    if as_json:
        click.echo(json.dumps(result.summary, indent=2))
    else:
        verdict = "CLEAN" if result.clean else "DIFFERENCES FOUND"
        click.echo(f"verdict: {verdict} (exit code {result.exit_code})")
        click.echo(summary_table(result.summary))
        click.echo(f"report: {result.out_dir / 'report.html'}")
        if result.summary["totals"]["missing"]:
            click.echo(f"next: drctl recover --report {result.out_dir} --dry-run")
    result.raise_for_verdict()
