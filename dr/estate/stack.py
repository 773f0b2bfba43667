"""The estate's Pulumi stack, driven through the Automation API: the one way the estate changes.

``drctl`` runs the program of ``stacks/`` (:func:`stacks.program.run`) inline, on the stack file
``Pulumi.<stack>.yaml`` of the stack directory, with the locally built CLI, the local ``file://``
backend and passphrase secrets (:mod:`dr.base.pulumi_env`). ``pulumi up`` from the repository root runs
the very same function through the Python language host.

:meth:`EstateStack.up` first *forgets* (removes from the stack's state, without touching the
cluster) the users, topics and ACLs of clusters the topology now declares decommissioned: such a
cluster may be unreachable (an unplanned failover), and its topics hold what recovery may still
need. Its fenced ACLs stay as the failover left them.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr.base.errors import ClusterError, ConfigError, DRError, ToolchainError
from dr.base.pulumi_env import pulumi_command, pulumi_env
from dr.base.stackref import StackRef
from dr.topology import NAMESPACE, Topology
from dr.topology.stackfile import render_stack_config

if TYPE_CHECKING:
    from pulumi.automation import OpType, Stack

__all__ = ["EstateStack", "PreviewSummary", "forget", "parallelism"]

Progress = Callable[[str], None]

_ACCESS_TYPE = "kafka-dr:index:ClusterAccess"
_SHOWN = re.compile(
    r"^\s*(\+\+|\+-|-\+|[+~-])\s+\S.*\b(created|updated|deleted|replaced|refreshed)\b"
    r"|\*\*failed\*\*|^\s*(error|warning):",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PreviewSummary:
    """What ``pulumi preview`` would do: operation → count (``same`` excluded), and the text."""

    changes: dict[str, int]
    text: str

    @property
    def clean(self) -> bool:
        """True when the preview proposes no change at all."""
        return not self.changes


def parallelism() -> int | None:
    """``KDR_PULUMI_PARALLEL``: resource operations the engine runs at once (None: the engine's default, 8).

    Every operation here is a short admin request to a broker, so a large estate converges faster
    with more in flight than the machine has cores.
    """
    text = os.environ.get("KDR_PULUMI_PARALLEL", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(
            f"KDR_PULUMI_PARALLEL={text!r} is not a whole number of at least 1.",
            "set it to how many resource operations Pulumi may run at once (e.g. 32), or unset it",
        )
    return int(text)


def _quiet(_line: str) -> None:
    return None


class EstateStack:
    """One stack of the ``kafka-dr`` project on the local backend."""

    def __init__(self, stack: StackRef) -> None:
        """The stack file is in ``stack.project_dir``; the backend and the passphrase file live beside
        its state directory: ``<state_dir>/../pulumi`` and ``<state_dir>/../passphrase``."""
        self.ref = stack
        self.name = stack.name
        self.stack_dir = stack.project_dir
        self.stack_file = stack.existing_stack_file()
        self.state_dir = stack.made_state_dir()
        self.backend = stack.backend_dir

    # -------------------------------------------------------------------------------- workspace
    def _stack(self) -> Stack:
        from pulumi import automation as auto

        from stacks.program import run

        state_dir = self.state_dir
        env = pulumi_env(self.backend)
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.stack_dir),
            pulumi_home=env["PULUMI_HOME"],
            env_vars=env,
            secrets_provider="passphrase",
            pulumi_command=pulumi_command(),
        )
        if not (self.stack_dir / "Pulumi.yaml").exists():
            opts.project_settings = auto.ProjectSettings(name=NAMESPACE, runtime="python")
        try:
            return auto.create_or_select_stack(
                stack_name=self.name, project_name=NAMESPACE, program=lambda: run(state_dir), opts=opts
            )
        except auto.CommandError as exc:
            raise _translate(exc, f"opening stack {self.name!r}") from None

    # -------------------------------------------------------------------------------- operations
    def up(
        self, topology: Topology | None = None, *, refresh: bool = False, progress: Progress = _quiet
    ) -> dict[str, float]:
        """Converge the estate to the stack file (``pulumi up``); return timings in seconds."""
        stack = self._stack()
        t0 = time.monotonic()
        forgotten = self.forget_decommissioned(stack, topology)
        if forgotten:
            progress(
                f"stack {self.name}: forgot {forgotten} resources of decommissioned clusters "
                "(left on the clusters as they are)"
            )
        try:
            result = stack.up(on_output=_forward(progress), refresh=refresh, color="never", parallel=parallelism())
        except Exception as exc:  # noqa: BLE001 - CommandError and friends
            raise _translate(exc, f"`pulumi up` of stack {self.name!r}") from None
        changes = {k: v for k, v in _by_name(result.summary.resource_changes).items() if k != "same"}
        progress(f"stack {self.name}: up done ({_describe(changes)})")
        return {"pulumi up": round(time.monotonic() - t0, 3)}

    def preview(self, *, refresh: bool = False, progress: Progress = _quiet) -> PreviewSummary:
        """``pulumi preview``: the changes an ``up`` would make now."""
        stack = self._stack()
        lines: list[str] = []

        def on_output(line: str) -> None:
            lines.append(line)
            progress(line.rstrip())

        try:
            result = stack.preview(
                on_output=on_output, refresh=refresh, color="never", diff=True, parallel=parallelism()
            )
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi preview` of stack {self.name!r}") from None
        changes = {k: v for k, v in _by_name(result.change_summary).items() if k != "same" and v}
        return PreviewSummary(changes, "\n".join(line.rstrip("\n") for line in lines))

    def exists(self) -> bool:
        """True when the backend holds this stack (it was provisioned, or at least selected, here)."""
        stacks = self.backend / ".pulumi" / "stacks" / NAMESPACE
        return any((stacks / f"{self.name}{ext}").exists() for ext in (".json", ".json.gz"))

    def preview_of(self, topology: Topology) -> PreviewSummary:
        """``pulumi preview`` of ``topology`` written as the stack file would be — in a scratch copy
        of the stack directory, so neither the stack file nor the state changes."""

        with tempfile.TemporaryDirectory(prefix="kdr-preview-") as tmp:
            scratch = Path(tmp)
            (scratch / self.stack_file.name).write_text(
                render_stack_config(self.stack_file, topology), encoding="utf-8"
            )
            if (self.stack_dir / "Pulumi.yaml").exists():
                shutil.copy(self.stack_dir / "Pulumi.yaml", scratch / "Pulumi.yaml")
            return EstateStack(replace(self.ref, project_dir=scratch)).preview()

    def refresh(self, progress: Progress = _quiet) -> dict[str, int]:
        """``pulumi refresh``: read the real estate into the state; return the changes seen."""
        try:
            result = self._stack().refresh(on_output=_forward(progress), color="never", parallel=parallelism())
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi refresh` of stack {self.name!r}") from None
        return {k: v for k, v in (result.summary.resource_changes or {}).items() if k != "same"}

    def destroy(self, progress: Progress = _quiet) -> None:
        """``pulumi destroy``: stop every process and remove the local clusters' data."""
        try:
            self._stack().destroy(on_output=_forward(progress), color="never", parallel=parallelism())
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi destroy` of stack {self.name!r}") from None

    def outputs(self) -> dict[str, Any]:
        """The stack outputs (secrets stay masked unless asked for by the caller's own means)."""
        return {k: v.value for k, v in self._stack().outputs().items()}

    # -------------------------------------------------------------------------------- state
    def forget_decommissioned(self, stack: Any, topology: Topology | None) -> int:
        """Drop from the state the ``ClusterAccess`` subtree of every cluster ``topology`` declares
        decommissioned; return how many resources were dropped. Nothing on the clusters changes."""
        if topology is None:
            return 0
        names = {f"{c.name}-access" for c in topology.clusters if c.role.value == "decommissioned"}
        if not names:
            return 0
        deployment = stack.export_stack()
        kept, dropped = forget(deployment.deployment, names)
        if not dropped:
            return 0
        deployment.deployment = kept
        stack.import_stack(deployment)
        return dropped


def forget(deployment: dict[str, Any], access_names: set[str]) -> tuple[dict[str, Any], int]:
    """The deployment without the ``ClusterAccess`` components named ``access_names`` and their
    descendants, with every reference to them removed (pure)."""
    resources = deployment.get("resources") or []
    gone: set[str] = {
        r["urn"] for r in resources if r.get("type") == _ACCESS_TYPE and r["urn"].rsplit("::", 1)[-1] in access_names
    }
    grew = True
    while grew:
        before = len(gone)
        gone |= {r["urn"] for r in resources if r.get("parent") in gone}
        grew = len(gone) > before
    if not gone:
        return deployment, 0
    kept = []
    for r in resources:
        if r["urn"] in gone:
            continue
        r = dict(r)
        if r.get("dependencies"):
            r["dependencies"] = [d for d in r["dependencies"] if d not in gone]
        if r.get("propertyDependencies"):
            r["propertyDependencies"] = {
                k: [d for d in v if d not in gone] for k, v in r["propertyDependencies"].items()
            }
        kept.append(r)
    return {**deployment, "resources": kept}, len(gone)


def _forward(progress: Progress) -> Callable[[str], None]:
    def out(line: str) -> None:
        if _SHOWN.search(line):
            progress(line.rstrip())

    return out


def _by_name(counts: Mapping[OpType, int] | None) -> dict[str, int]:
    """Pulumi's resource counts keyed by operation name (``create``, ``same`` …). The automation API
    types the keys as :class:`OpType` but fills them with the JSON strings; either reads the same."""
    return {str(getattr(op, "value", op)): n for op, n in (counts or {}).items()}


def _describe(changes: dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in sorted(changes.items())) or "no changes"


def _translate(exc: Exception, what: str) -> DRError:
    if isinstance(exc, DRError):
        return exc
    text = str(exc)
    detail = _tail(text)
    if "incorrect passphrase" in text:
        return ConfigError(
            f"{what} failed: the passphrase does not open this stack's secrets "
            "(its encryptionsalt was made with another passphrase).",
            "restore the passphrase file the stack was created with, or — for a stack with no "
            "state yet — delete `encryptionsalt:` from its stack file and run again",
        )
    if "no resource plugin" in text or "no language plugin" in text:
        return ToolchainError(f"{what} failed: {detail}", "run `make setup` (it builds and installs the plugins)")
    if "error: error:" in text:
        return ConfigError(
            f"{what} refused the topology: {detail}", "correct the stack file as the message says; nothing was created"
        )
    return ClusterError(
        f"{what} failed: {detail}", "read the resource error above, fix its cause and run it again (it converges)"
    )


def _tail(text: str, lines: int = 25) -> str:
    """The engine's diagnostics (what failed and why) when present, else the output's last lines."""
    if "Diagnostics:" in text:
        text = text.split("Diagnostics:", 1)[1].split("Resources:", 1)[0]
    keep = [
        line.rstrip().removeprefix(" stderr: ")
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("code:", "stdout:")) and line.strip() != "stderr:"
    ]
    return "\n".join(keep[-lines:])
