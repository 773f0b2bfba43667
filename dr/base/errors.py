"""One exception family for the whole product, each class with its documented exit code.

Every message says what went wrong *and* the next step. ``drctl`` maps an uncaught
:class:`DRError` to ``exit_code`` and prints only ``str(error)`` (never a secret).

The exit-code table lives once, as data: :data:`EXIT_CODES`, built from the classes' ``exit_code``.
``drctl --help`` shows it (:func:`exit_codes_help`) and docs/reference/exit-codes.md holds it between marker comments
(:func:`exit_codes_markdown`; a unit test fails, showing the rendered table, while the two differ).

Only ``drctl``'s entry point raises :class:`InternalError`: it wraps any exception that is not a
:class:`DRError` (see :meth:`InternalError.from_exception`), writes the traceback to a 0600 file
and prints one paragraph naming the exception, that file and the next step. The traceback is
printed too when ``KDR_DEBUG=1``. Values that look like secrets are masked in both.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from dr.base.project import state_base_or_none


class DRError(Exception):
    """Base of every error this product raises on purpose."""

    exit_code = 10

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}\n  next step: {fix}" if fix else problem)


class VerificationFailed(DRError):
    """The verifier found missing, unexpected, duplicated or corrupted records."""

    exit_code = 1


class ConfigError(DRError):
    """A configuration file, flag or stack setting is invalid."""

    exit_code = 2


class TopologyError(ConfigError):
    """The declared topology breaks a validation rule."""


class ToolchainError(DRError):
    """A required tool, jar or binary is missing, or a cached build is corrupt."""

    exit_code = 3


class ClusterError(DRError):
    """A local cluster or MirrorMaker 2 process failed to start, answer or stop."""

    exit_code = 4


class PortInUse(ClusterError):
    """A port the cluster needs is already taken by another process."""


class AuthError(DRError):
    """A cluster refused the credentials, or none were found."""

    exit_code = 5


class FailoverError(DRError):
    """A failover step refused to continue or failed; the journal allows resuming."""

    exit_code = 6


class JournalMismatch(FailoverError):
    """A failover journal belongs to other clusters (the estate was destroyed and rebuilt, or the stack
    removed from its backend): it is archived, never resumed; nothing was done."""


class LockHeld(DRError):
    """Another run already holds this stack's lock."""

    exit_code = 7


class StateStoreError(DRError):
    """The team database (a ``postgres://`` backend) is unreachable or refuses the run's state: nothing
    was changed by the command that failed; rerun it when the database is back."""

    exit_code = 8


class CertificateExpiring(DRError):
    """``drctl tls --within N``: a certificate the stack uses expires within N days (or has expired)."""

    exit_code = 9


class InternalError(DRError):
    """An unexpected exception (a bug, not bad input): reported with a traceback file."""

    exit_code = 10

    def __init__(
        self, problem: str, fix: str | None = None, *, traceback_file: Path | None = None, traceback_text: str = ""
    ) -> None:
        super().__init__(problem, fix)
        self.traceback_file = traceback_file
        self.traceback_text = traceback_text

    @classmethod
    def from_exception(cls, exc: BaseException) -> InternalError:
        """Wrap ``exc``: write its (masked) traceback to a 0600 file and say what failed and what next."""
        secrets = _known_secrets()
        kind = type(exc).__qualname__
        if type(exc).__module__ not in ("builtins", "__main__"):
            kind = f"{type(exc).__module__}.{kind}"
        try:
            message = _scrub(str(exc), secrets).strip() or "(no message)"
        except Exception:  # noqa: BLE001 — an exception whose str() fails still gets reported
            message = "(its message could not be read)"
        message = " ".join(message.split())
        if len(message) > 300:
            message = message[:297] + "..."
        try:
            text = _scrub("".join(traceback.format_exception(exc)), secrets)
        except Exception:  # noqa: BLE001
            text = _scrub("".join(traceback.format_tb(exc.__traceback__)), secrets) + f"{kind}: {message}\n"
        path, why_not = _write_traceback(text)
        if path is not None:
            where = f"The traceback was written to {path} (readable only by you)."
            fix = (
                f"report this as a bug and attach {path} (values that look like secrets are masked, but "
                "read it before sharing); KDR_DEBUG=1 also prints the traceback here"
            )
        else:
            where = f"The traceback could not be written to a file ({why_not})."
            fix = "run the command again with KDR_DEBUG=1 to print the traceback, and report it as a bug"
        return cls(
            f"internal error: drctl failed unexpectedly with {kind}: {message}. {where}",
            fix,
            traceback_file=path,
            traceback_text=text,
        )


@dataclass(frozen=True)
class ExitCode:
    """One row of the exit-code table: the code, the error classes that exit with it, what it means."""

    code: int
    classes: tuple[type[DRError], ...]
    meaning: str


#: Exit code of a run that succeeded (``drctl verify``: the verdict is clean).
EXIT_OK = 0
#: Exit code of a run interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _row(meaning: str, *classes: type[DRError]) -> ExitCode:
    codes = {c.exit_code for c in classes}
    if len(codes) != 1:
        raise InternalError(f"exit-code row {meaning!r}: its classes exit with different codes {sorted(codes)}.")
    return ExitCode(codes.pop(), classes, meaning)


#: Every exit code of ``drctl``, in order. The only copy: ``drctl --help`` and docs/reference/exit-codes.md render it.
EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(EXIT_OK, (), "success (verify: clean)"),
    _row("verification found differences", VerificationFailed),
    _row("bad input (flags, stack file, topology rule) — nothing changed", ConfigError, TopologyError),
    _row("toolchain missing or cache corrupt — run `make setup`", ToolchainError),
    _row("a cluster or MirrorMaker 2 process failed to start, answer or stop", ClusterError, PortInUse),
    _row("credentials refused or missing", AuthError),
    _row(
        "failover refused or failed (the journal allows resuming; one of other clusters is archived, never resumed)",
        FailoverError,
        JournalMismatch,
    ),
    _row("another run holds the stack's lock", LockHeld),
    _row(
        "the team database (postgres:// backend) is unreachable — nothing changed; rerun when it is back",
        StateStoreError,
    ),
    _row("a certificate the stack uses expires within `drctl tls --within` days", CertificateExpiring),
    _row("internal error (a bug): the message names the file holding the traceback", InternalError),
    ExitCode(EXIT_INTERRUPTED, (), "interrupted (Ctrl-C)"),
)


def exit_codes_help() -> str:
    """The table as ``drctl --help`` shows it (``\\b`` keeps click from re-wrapping the lines)."""
    width = max(len(str(row.code)) for row in EXIT_CODES)
    return "\b\nExit codes:\n" + "\n".join(f"  {row.code:>{width}}  {row.meaning}" for row in EXIT_CODES)


def exit_codes_by_code() -> dict[str, str]:
    """The table as JSON documents carry it (the verification's ``summary.json``): code → meaning."""
    return {str(row.code): row.meaning for row in EXIT_CODES}


def exit_codes_markdown() -> str:
    """The table as docs/reference/exit-codes.md holds it between its ``exit-codes`` marker comments."""
    lines = ["| code | meaning | raised as |", "|---|---|---|"]
    for row in EXIT_CODES:
        names = ", ".join(f"`{c.__name__}`" for c in row.classes) or "—"
        lines.append(f"| {row.code} | {row.meaning} | {names} |")
    return "\n".join(lines)


_SECRET_ENV = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|CREDENTIAL", re.IGNORECASE)
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b((?:sasl[._])?(?:password|passwd|passphrase|secret|token|api[_-]?key)[\w.-]*)"
    r"(\s*[=:]\s*|\s*\"\s*:\s*|'\s*:\s*)"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;\]\)}]+)"
)
_MASK = "**********"


def _state_base() -> Path | None:
    """The state directory of the project (:func:`dr.base.project.state_base_or_none`), None outside any project."""

    return state_base_or_none()


def _known_secrets() -> set[str]:
    """Secret values this process could leak: secret-named environment variables and local passwords."""
    found = {value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 4}
    # the password of a postgres://user:password@host backend URL
    auth = os.environ.get("PULUMI_BACKEND_URL", "").partition("://")[2].rpartition("@")[0]
    if ":" in auth and len(password := auth.split(":", 1)[1]) >= 4:
        found.add(password)
    try:
        base = _state_base()
        for path in list(base.glob("*/credentials.json"))[:50] if base else []:
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                found |= {v for v in data.values() if isinstance(v, str) and len(v) >= 4}
    except (OSError, ValueError):
        pass
    return found


def mask_secrets(text: str) -> str:
    """``text`` with every secret this process knows of, and every ``password=...``-like value, masked."""
    return _scrub(text, _known_secrets())


def _scrub(text: str, secrets: set[str]) -> str:
    """``text`` with every known secret and every ``password=...``-like value masked."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)


def _write_traceback(text: str) -> tuple[Path | None, str]:
    """Write ``text`` to a new 0600 file under the state directory (or the temp directory)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    reasons = []
    base = _state_base()
    for directory in (*([base / "internal-errors"] if base else []), Path(tempfile.gettempdir())):
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"drctl-{stamp}-", suffix=".traceback.txt", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp creates the file 0600
                f.write(text)
            return Path(name), ""
        except OSError as exc:
            reasons.append(f"{directory}: {exc.strerror or exc}")
    return None, "; ".join(reasons)
