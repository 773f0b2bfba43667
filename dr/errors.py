"""One exception family for the whole product, each class with its documented exit code.

Every message says what went wrong *and* the next step. ``drctl`` maps an uncaught
:class:`DRError` to ``exit_code`` and prints only ``str(error)`` (never a secret).

| exit code | class |
|-----------|-------|
| 0 | success (and, for ``drctl verify``, a clean verdict) |
| 1 | :class:`VerificationFailed` – verify ran and found differences |
| 2 | :class:`ConfigError` / :class:`TopologyError` – bad input, nothing was changed |
| 3 | :class:`ToolchainError` – a tool/jar/binary is missing or the cache is corrupt |
| 4 | :class:`ClusterError` – a cluster/MM2 process could not be started, reached or stopped |
| 5 | :class:`AuthError` – credentials refused or missing |
| 6 | :class:`FailoverError` – a failover step refused or failed (journal kept; re-run resumes) |
| 7 | :class:`LockHeld` – another run holds the stack's lock |
"""

from __future__ import annotations


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


class LockHeld(DRError):
    """Another run already holds this stack's lock."""

    exit_code = 7
