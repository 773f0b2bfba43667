"""``drctl drill`` as the integration tests run it: a subprocess on a stack file written under a temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import REPO_ROOT


def drctl_drill(stack_dir: Path, stack: str, out: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``drctl drill --stack STACK --out OUT ARGS... --json`` with the stack file in ``stack_dir``."""
    return subprocess.run(
        [sys.executable, "-m", "dr.cli", "drill", "--stack", stack, "--out", str(out), *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KDR_STACK_DIR": str(stack_dir)},
        timeout=timeout,
        cwd=REPO_ROOT,
    )
