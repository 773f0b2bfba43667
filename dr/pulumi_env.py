"""The Pulumi environment the product runs with: the locally built CLI, a local ``file://``
backend, passphrase secrets, and no automatic plugin downloads."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from dr.errors import ToolchainError
from dr.toolchain import REPO_ROOT, kdr_home, toolchain, versions

if TYPE_CHECKING:
    from pulumi.automation import PulumiCommand


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


def pulumi_env(backend_dir: Path | None = None, root: Path = REPO_ROOT) -> dict[str, str]:
    """Environment variables for the Pulumi CLI and the Automation API (no secret values in it)."""
    tc = toolchain()
    pulumi = tc.pulumi_bin / "pulumi"
    if not pulumi.is_file():
        raise ToolchainError(
            f"the Pulumi CLI v{versions()['PULUMI_VERSION']} is not built ({pulumi} missing).", "run `make setup`"
        )
    backend = backend_dir or root / ".state" / "pulumi"
    backend.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{tc.pulumi_bin}{os.pathsep}{root / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(kdr_home() / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        # beside the backend, as `.env` has it: <state>/pulumi and <state>/passphrase
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase_file(backend.parent)),
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        # Python dynamic providers and the language host run this clone's virtualenv.
        "PULUMI_RUNTIME_VIRTUALENV": str(root / ".venv"),
        "PULUMI_PYTHON_CMD": str(root / ".venv" / "bin" / "python"),
        # Refresh runs the program, so each resource is read with its provider's current settings and
        # after the resources it depends on: a stopped cluster is started before its topics are read.
        "PULUMI_RUN_PROGRAM": "true",
    }


def pulumi_command() -> PulumiCommand:
    """The Automation API's handle on the locally built CLI (never downloads one)."""
    from pulumi import automation as auto

    return auto.PulumiCommand(root=str(toolchain().pulumi_bin.parent))
