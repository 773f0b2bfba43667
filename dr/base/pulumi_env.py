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
from dr.base.files import private_dir
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
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


def mask_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part replaced by ``***`` (for every message and log)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    auth, at, host = rest.rpartition("@")
    if not at or ":" not in auth:
        return url
    return f"{scheme}://{auth.split(':', 1)[0]}:***@{host}"


def project_backend_url(directory: Path | None = None) -> str | None:
    """``backend: url:`` of the project's ``Pulumi.yaml`` (the stack's backend as the project declares it), or None."""
    import yaml

    directory = directory or project_dir_or_none()
    if directory is None:
        return None
    for name in ("Pulumi.yaml", "Pulumi.yml"):
        path = directory / name
        if path.is_file():
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError:
                return None
            backend = doc.get("backend") if isinstance(doc, dict) else None
            url = backend.get("url") if isinstance(backend, dict) else None
            return str(url) if url else None
    return None


def backend_url(default_dir: Path, project: Path | None = None) -> str:
    """The backend ``pulumi`` itself would use: ``$PULUMI_BACKEND_URL``, else the project's
    ``backend.url``, else the local ``file://`` backend in ``default_dir``."""
    return os.environ.get("PULUMI_BACKEND_URL") or project_backend_url(project) or f"file://{default_dir}"


def pulumi_env(backend_dir: Path | str | None = None) -> dict[str, str]:
    """Environment variables for the Pulumi CLI and the Automation API (no secret values in it).

    ``backend_dir`` is a directory (a local ``file://`` backend) or a backend URL; the default is
    :func:`backend_url` of ``<state base>/pulumi``. The passphrase comes from the caller's
    ``PULUMI_CONFIG_PASSPHRASE``/``PULUMI_CONFIG_PASSPHRASE_FILE`` when set, as for ``pulumi``, else
    from the generated ``passphrase`` file beside a local backend (or in the state base). The program
    and dynamic providers run with this interpreter's environment (the one ``drctl`` is installed in)."""
    tc = toolchain()
    pulumi = tc.pulumi_bin / "pulumi"
    if not pulumi.is_file():
        raise ToolchainError(
            f"the Pulumi CLI v{versions()['PULUMI_VERSION']} is not built ({pulumi} missing).", "run `make setup`"
        )
    if backend_dir is None:
        url = backend_url(state_base() / "pulumi")
    elif isinstance(backend_dir, Path):
        url = f"file://{backend_dir}"
    else:
        url = backend_dir
    python = Path(sys.executable)
    env = {
        "PATH": f"{tc.pulumi_bin}{os.pathsep}{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(kdr_home() / "pulumi-home"),
        "PULUMI_BACKEND_URL": url,
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
    local = url.startswith("file://")
    if local:
        backend = Path(url.removeprefix("file://"))
        backend.mkdir(parents=True, exist_ok=True)
    if not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
        # beside a local backend, as `.env` has it: <state>/pulumi and <state>/passphrase
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(passphrase_file(backend.parent if local else state_base()))
    return env


def pulumi_command() -> PulumiCommand:
    """The Automation API's handle on the locally built CLI (never downloads one)."""
    from pulumi import automation as auto

    return auto.PulumiCommand(root=str(toolchain().pulumi_bin.parent))
