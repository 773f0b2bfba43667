"""Which stack: one value — its name, the project directory holding ``Pulumi.<name>.yaml``, its state
directory and the Pulumi backend beside it — resolved once, where ``drctl`` parses ``--stack``, and
passed down instead of being looked up again.

The project directory is ``$KDR_STACK_DIR``, else the nearest ``Pulumi.yaml`` upwards; the state
directory is ``<state base>/<name>`` (``$KDR_STATE_DIR``, else ``<project>/.state``), see
:mod:`dr.base.pulumi_env`. The backend (``file://``) and the passphrase file live beside the state
directories of all stacks: ``<state dir>/../pulumi`` and ``<state dir>/../passphrase``.

The failover journal and the lock that serialises runs live with the stack's backend
(:attr:`StackRef.failover_home`), so that any clone with the same backend resumes a failover.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.files import private_dir
from dr.base.pulumi_env import backend_url, project_dir, state_base

__all__ = ["PINNED_STATE", "StackRef", "stack_dir", "stack_file", "state_dir", "valid_stack_name"]

PINNED_STATE = "KDR_PINNED_STATE"
"""The environment variable naming one stack's exact state directory (:meth:`StackRef.resolve`)."""

_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""Pulumi's rule for a stack name (its backends' ``validateStackName``: 1-100 letters, digits, ``_``,
``.``, ``-``; so no ``/``); ``.`` and ``..`` are refused besides, as they name directories."""


def valid_stack_name(name: str) -> str:
    """``name`` when it is a stack name Pulumi accepts and no path step; else :class:`ConfigError`.

    Checked before any path is built from it (the state directory is ``<state base>/<name>``)."""
    if _STACK_NAME.fullmatch(name) and name not in (".", ".."):
        return name
    shown = repr(name if len(name) <= 40 else name[:37] + "...")
    why = f"is {len(name)} characters long (at most 100)" if len(name) > 100 else "is not a stack name"
    raise ConfigError(
        f"--stack {shown} {why}: a stack name is 1-100 letters, digits, '_', '.' or '-' (Pulumi's rule), "
        "and not '.' or '..'.",
        "name an existing stack (the <name> of a Pulumi.<name>.yaml file), e.g. --stack local",
    )


_PROJECT = "kafka-dr"
"""The Pulumi project (``dr.topology.stackconfig.NAMESPACE``), as the backend names its stacks."""


@dataclass(frozen=True)
class StackRef:
    """One stack of the project and where it lives."""

    name: str
    """The stack name (``Pulumi.<name>.yaml``)."""
    project_dir: Path
    """The directory holding the stack file (the Pulumi project)."""
    state_dir: Path
    """Where the stack keeps its local state (0700): data, logs, generated credentials, journals."""
    backend: str | None = None
    """The backend pinned to this stack whatever ``$PULUMI_BACKEND_URL`` says (a drill's own
    ``file://<out>/pulumi``); None: as ``pulumi`` picks it (:attr:`pulumi_backend`)."""
    owner: str | None = None
    """The token of the drill that created this stack in its pinned backend: every Pulumi operation on it
    first checks that the backend still carries it (:mod:`dr.estate.stack_owner`); None for a real stack."""

    @classmethod
    def resolve(cls, name: str) -> StackRef:
        """The stack ``name`` of the current project; :class:`ConfigError` outside any project or for
        a name that is not a stack name (:func:`valid_stack_name`).

        ``$KDR_PINNED_STATE`` (``<name>=<state dir>``) gives that one stack its state directory exactly: a
        drill sets it for the processes it starts (an automatic drill's controllers and their failovers), so
        they work on the drill's copy with the very paths its program declared — a path that differs, even
        through a link, is a changed input to Pulumi, which would replace the clusters."""
        pinned, _, directory = os.environ.get(PINNED_STATE, "").partition("=")
        if directory and pinned == name:
            return cls(valid_stack_name(name), project_dir(), Path(directory))
        return cls(valid_stack_name(name), project_dir(), state_base() / name)

    @classmethod
    def of_file(
        cls, stack_file: Path, state_dir: Path, *, backend: str | None = None, owner: str | None = None
    ) -> StackRef:
        """The stack of an explicit ``Pulumi.<name>.yaml`` and state directory (a drill's copy, a test's),
        optionally on a pinned ``backend`` created by ``owner`` (a drill's)."""
        stack_file = Path(stack_file)
        name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
        return cls(name, stack_file.parent, Path(state_dir), backend, owner)

    @property
    def stack_file(self) -> Path:
        """``Pulumi.<name>.yaml`` in the project directory, whether or not it exists."""
        return self.project_dir / f"Pulumi.{self.name}.yaml"

    @property
    def backend_dir(self) -> Path:
        """The local Pulumi backend shared by the project's stacks: ``<state dir>/../pulumi``."""
        return self.state_dir.parent / "pulumi"

    @property
    def backend_url(self) -> str:
        """The backend as the Pulumi CLI names it (``file://…``)."""
        return f"file://{self.backend_dir}"

    @property
    def pulumi_backend(self) -> str:
        """The backend this stack is on: the pinned :attr:`backend`, else ``$PULUMI_BACKEND_URL``, the
        project's ``backend.url``, else ``file://<state dir>/../pulumi``."""
        return self.backend or backend_url(self.backend_dir, self.project_dir)

    @property
    def failover_home(self) -> Path:
        """Where the stack's failover journal, lock and reports live (``failover.lock``, ``failover/``).

        With a ``file://`` backend (the local default, or a shared directory or NFS mount): beside the
        stack's state in the backend, ``<backend>/.pulumi/kdr/<project>/<stack>`` — every clone
        that uses that backend finds the journal and resumes the failover. With any other backend
        (``s3://``, Pulumi Cloud...) Pulumi offers no place for it: the stack's state directory,
        which operators who resume each other's failovers must then share (``KDR_STATE_DIR``).
        Nothing is created here.
        """
        url = self.pulumi_backend
        if not url.startswith("file://"):
            return self.state_dir
        return Path(url.removeprefix("file://")).expanduser() / ".pulumi" / "kdr" / _PROJECT / self.name

    @property
    def journal_shared(self) -> bool:
        """True when the journal is in the stack's backend: a ``file://`` one (:attr:`failover_home`), or
        the team database of a ``postgres://`` one (:mod:`dr.failover.record.team_store`)."""
        url = self.pulumi_backend
        return self.failover_home != self.state_dir or url.startswith(("postgres://", "postgresql://"))

    def made_failover_home(self) -> Path:
        """:attr:`failover_home`, created (0700) when missing."""
        return private_dir(self.failover_home)

    def existing_stack_file(self) -> Path:
        """The stack file, or a clear error naming the stacks that exist."""
        return stack_file(self.name, self.project_dir)

    def made_state_dir(self) -> Path:
        """The state directory, created (0700) when missing."""
        return private_dir(self.state_dir)


def stack_dir() -> Path:
    """Where stack files live: the Pulumi project directory (:func:`dr.base.pulumi_env.project_dir`)."""
    return project_dir()


def stack_file(stack: str, root: Path | None = None) -> Path:
    """``Pulumi.<stack>.yaml`` in the stack directory, or a clear error naming the stacks that exist."""
    root = root or stack_dir()
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))
        raise ConfigError(
            f"unknown stack {stack!r}: {path.name} does not exist.", f"use one of: {', '.join(known) or '(none)'}"
        )
    return path


def state_dir(stack: str) -> Path:
    """Where a stack keeps its local state (0700): ``<state base>/<stack>`` (:func:`dr.base.pulumi_env.state_base`)."""
    return private_dir(state_base() / valid_stack_name(stack))
