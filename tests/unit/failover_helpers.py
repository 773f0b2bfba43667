"""Helpers of the failover unit tests: a journal of stack ``unit`` (A → B → C), and another process
holding a stack's failover lock (for the tests of what a second run does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dr.base.stackref import StackRef
from dr.failover.frame.journal import Journal
from dr.failover.kinds.active_passive.steps import STEPS
from tests import REPO_ROOT

_UNSET: dict[str, Any] = {}


def journal_home(stack: str = "unit") -> Path:
    """Where ``drctl`` keeps ``stack``'s journal and failover lock (with its backend), as the
    environment (``KDR_STACK_DIR``, ``KDR_STATE_DIR``) resolves it."""
    return StackRef.resolve(stack).failover_home


def new_journal(
    state: Path, original_config: dict[str, Any] = _UNSET, desired_config: dict[str, Any] = _UNSET
) -> Journal:
    """A new planned failover A → B → C of stack ``unit`` with the eight steps pending."""
    return Journal.create(
        state,
        stack="unit",
        mode="planned",
        source="A",
        target="B",
        standby="C",
        original_config=original_config or {"kafka-dr:failoverDone": False},
        desired_config=desired_config or {"kafka-dr:failoverDone": True},
        steps=[s.name for s in STEPS],
    )


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from dr.failover.frame.journal import StackLock
    StackLock(Path(sys.argv[1]), "unit").acquire()
    print("locked", flush=True)
    time.sleep(120)
""")


@contextmanager
def lock_held_elsewhere(state: Path) -> Iterator[subprocess.Popen[str]]:
    """A child process that holds the failover lock of ``state`` until the block ends (it is then SIGKILLed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(state)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)


def local_stack_copy(tmp_path: Path, ports: tuple[int, ...], header: str = "") -> Path:
    """``Pulumi.local.yaml`` copied as stack ``unit`` under ``tmp_path/stacks`` with its clusters on
    ``ports`` (idle during the unit tests), ``header`` written above it; returns the copy's path. The
    caller points ``KDR_STACK_DIR``/``KDR_STATE_DIR`` at it."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], ports, strict=True):
        c["base_port"] = port
    path = tmp_path / "stacks" / "Pulumi.unit.yaml"
    path.parent.mkdir()
    path.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    return path
