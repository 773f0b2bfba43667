"""Which stack: where its stack file (``Pulumi.<name>.yaml``) and its state directory are.

The project directory is ``$KDR_STACK_DIR``, else the nearest ``Pulumi.yaml`` upwards; the state
directory is ``<state base>/<name>`` (``$KDR_STATE_DIR``, else ``<project>/.state``), see
:mod:`dr.base.pulumi_env`. The backend (``file://``) and the passphrase file live beside the state
directories of all stacks: ``<state dir>/../pulumi`` and ``<state dir>/../passphrase``.
"""

from __future__ import annotations

import os
from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.pulumi_env import project_dir, state_base

__all__ = ["stack_dir", "stack_file", "state_dir"]


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
    path = state_base() / stack
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
