"""Where the Pulumi project is: the nearest directory holding ``Pulumi.yaml``, as the pulumi CLI finds it.

Kept free of the product's other modules so that :mod:`dr.base.errors` can name the state directory
(for traceback files) without an import cycle; :func:`dr.base.pulumi_env.project_dir` adds the error
raised outside a project.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The file that marks a Pulumi project's directory (``Pulumi.yml`` is accepted too, as by the CLI).
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")


def find_project_dir(start: Path | None = None) -> Path | None:
    """The nearest directory from ``start`` (default: the current one) upwards holding ``Pulumi.yaml``."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if any((directory / name).is_file() for name in PROJECT_FILES):
            return directory
    return None


def project_dir_or_none() -> Path | None:
    """``$KDR_STACK_DIR``, else the nearest project directory; None outside any project."""
    override = os.environ.get("KDR_STACK_DIR")
    return Path(override) if override else find_project_dir()


def state_base_or_none() -> Path | None:
    """``$KDR_STATE_DIR``, else ``<project dir>/.state``; None outside any project."""
    override = os.environ.get("KDR_STATE_DIR")
    if override:
        return Path(override)
    project = project_dir_or_none()
    return project / ".state" if project else None
