"""The Pulumi project and environment the product runs with: the project directory and its state,
the locally built CLI, a local ``file://`` backend, passphrase secrets, no automatic plugin downloads.

Like the ``pulumi`` CLI, ``drctl`` works on the project whose ``Pulumi.yaml`` is in the current
directory or the nearest one above it; ``$KDR_STACK_DIR`` names the directory instead (its
``Pulumi.<stack>.yaml`` files are the stacks). State — clusters' data, generated credentials, the
local backend — lives in ``<project>/.state``, or ``$KDR_STATE_DIR``. Nothing is looked up relative
to where the package is installed.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dr.base.errors import ConfigError, ToolchainError
from dr.base.project import project_dir_or_none, state_base_or_none
from dr.base.toolchain import kdr_home, toolchain, versions

if TYPE_CHECKING:
    from pulumi.automation import PulumiCommand


def project_dir() -> Path:
    """The project directory: ``$KDR_STACK_DIR``, else the nearest ``Pulumi.yaml`` from the current
    directory upwards; :class:`ConfigError` (exit 2) naming both ways when there is none."""
    found = project_dir_or_none()
    if found is None:
        raise ConfigError(
            f"no Pulumi project here: neither {Path.cwd()} nor a directory above it holds Pulumi.yaml.",
            "run drctl inside the kafka-dr project (the directory with Pulumi.yaml and the "
            "Pulumi.<stack>.yaml files), or set KDR_STACK_DIR to that directory",
        )
    return found


def state_base() -> Path:
    """Where every stack keeps its state: ``$KDR_STATE_DIR``, else ``<project dir>/.state``."""
    return state_base_or_none() or project_dir() / ".state"


def passphrase_file(directory: Path) -> Path:
    """The stacks' passphrase file ``<directory>/passphrase`` (0600), created on first use."""
    path = directory / "passphrase"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


def pulumi_env(backend_dir: Path | None = None) -> dict[str, str]:
    """Environment variables for the Pulumi CLI and the Automation API (no secret values in it).

    The backend defaults to ``<state base>/pulumi``; the program and dynamic providers run with
    this interpreter's environment (the one ``drctl`` is installed in)."""
    tc = toolchain()
    pulumi = tc.pulumi_bin / "pulumi"
    if not pulumi.is_file():
        raise ToolchainError(
            f"the Pulumi CLI v{versions()['PULUMI_VERSION']} is not built ({pulumi} missing).", "run `make setup`"
        )
    backend = backend_dir or state_base() / "pulumi"
    python = Path(sys.executable)
    backend.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{tc.pulumi_bin}{os.pathsep}{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(kdr_home() / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        # beside the backend, as `.env` has it: <state>/pulumi and <state>/passphrase
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase_file(backend.parent)),
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        # Python dynamic providers and the language host run drctl's own virtualenv.
        "PULUMI_RUNTIME_VIRTUALENV": sys.prefix,
        "PULUMI_PYTHON_CMD": str(python),
        # Refresh runs the program, so each resource is read with its provider's current settings and
        # after the resources it depends on: a stopped cluster is started before its topics are read.
        "PULUMI_RUN_PROGRAM": "true",
    }


def pulumi_command() -> PulumiCommand:
    """The Automation API's handle on the locally built CLI (never downloads one)."""
    from pulumi import automation as auto

    return auto.PulumiCommand(root=str(toolchain().pulumi_bin.parent))
