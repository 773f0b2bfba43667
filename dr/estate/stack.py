"""The estate's Pulumi stack, driven through the Automation API: the one way the estate changes.

``drctl`` runs the program of ``stacks/`` (:func:`stacks.program.run`) inline, on the stack file
``Pulumi.<stack>.yaml`` of the stack directory, with the locally built CLI, the local ``file://``
backend and passphrase secrets (:mod:`dr.base.pulumi_env`). ``pulumi up`` from the repository root runs
the very same function through the Python language host.

:meth:`EstateStack.up` first *forgets* (removes from the stack's state, without touching the
cluster) the users, topics and ACLs of clusters the topology now declares decommissioned: such a
cluster may be unreachable (an unplanned failover), and its topics hold what recovery may still
need. Its fenced ACLs stay as the failover left them.

Every operation first repairs what a killed engine left (:meth:`EstateStack.repair`): plugin
processes nobody owns are ended (:mod:`dr.estate.pulumi_orphans`), the backend lock of a dead engine is
removed — never one of a live process (:mod:`dr.estate.pulumi_locks`), a metadata sidecar it left
half-written is removed (:func:`dr.estate.stack_state.drop_damaged_sidecars`) — and interrupted operations are
settled (:func:`dr.stack_repair.settle_pending`), after which ``up`` refreshes before it updates.
What was repaired is in :attr:`EstateStack.recovered` (the failover journals it). ``destroy`` drops
from the state, with a warning, the users, topics and ACLs of local clusters that cannot be reached
(brokers down, data gone): their records and metadata go with the cluster's data anyway.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.errors import AuthError, ClusterError, ConfigError, DRError, LockHeld, ToolchainError, mask_secrets
from dr.base.pulumi_env import pulumi_command, pulumi_env
from dr.base.stackref import StackRef
from dr.base.types import Reporter
from dr.estate.pulumi_workspace import forget_backend_passwords
from dr.estate.stack_owner import require_owned
from dr.estate.stack_state import drop_damaged_sidecars
from dr.topology import NAMESPACE, Topology
from dr.topology.stackfile import render_stack_config

if TYPE_CHECKING:
    from pulumi.automation import OpType, Stack

    from dr.runtime.credentials import Credentials

__all__ = ["EstateStack", "PreviewSummary", "PulumiPreview", "forget", "forget_individual", "parallelism"]


_ACCESS_TYPE = "kafka-dr:index:ClusterAccess"
_DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"
_ITEM_TYPES = ("kafka:index/topic:Topic", "kafka:index/acl:Acl", "kafka:index/userScramCredential:UserScramCredential")
_SHOWN = re.compile(
    r"^\s*(\+\+|\+-|-\+|[+~-])\s+\S.*\b(created|updated|deleted|replaced|refreshed)\b"
    r"|\*\*failed\*\*|^\s*(error|warning):",
    re.IGNORECASE,
)


class PulumiPreview(TypedDict, total=False):
    """A preview as a plan shows it: :class:`PreviewSummary`'s ``changes`` and ``text`` (and a ``note``), or
    the ``error`` that kept Pulumi from previewing."""

    changes: dict[str, int]
    text: str
    note: str
    error: str


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
        self.recovered: list[str] = []
        """What :meth:`repair` and the loss handling did, one line each (journaled by the failover)."""
        self.backend_url = stack.pulumi_backend
        """The backend pinned to the stack (a drill's own), else as ``pulumi`` picks it:
        ``$PULUMI_BACKEND_URL``, the project's ``backend.url``, else ``file://<state>/pulumi``."""

    # -------------------------------------------------------------------------------- workspace
    def _stack(self, *, create: bool = True) -> Stack:
        from pulumi import automation as auto

        from stacks.program import run

        require_owned(self.ref, self.backend_url)  # a drill's stack: only on the backend the drill created
        for sidecar in drop_damaged_sidecars(self.ref):
            self.recovered.append(f"removed {sidecar}, the metadata file a killed Pulumi engine left half-written")
        state_dir = self.state_dir
        env = pulumi_env(self.backend_url)
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.stack_dir),
            pulumi_home=env["PULUMI_HOME"],
            env_vars=env,
            secrets_provider=_secrets_provider(self.stack_file),
            pulumi_command=pulumi_command(),
        )
        if not (self.stack_dir / "Pulumi.yaml").exists():
            opts.project_settings = auto.ProjectSettings(name=NAMESPACE, runtime="python")
        opener = auto.create_or_select_stack if create else auto.select_stack
        try:
            return opener(stack_name=self.name, project_name=NAMESPACE, program=lambda: run(state_dir), opts=opts)
        except auto.CommandError as exc:
            raise _translate(exc, f"opening stack {self.name!r} in backend {_shown(self.backend_url)}") from None
        finally:  # the CLI recorded the selection under the backend URL as given, password and all
            forget_backend_passwords(Path(env["PULUMI_HOME"]))

    # -------------------------------------------------------------------------------- operations
    def up(
        self, topology: Topology | None = None, *, refresh: bool = False, progress: Reporter = _quiet
    ) -> dict[str, float]:
        """Converge the estate to the stack file (``pulumi up``); return timings in seconds.

        After a killed engine (interrupted operations settled by :meth:`repair`) the ``up`` refreshes
        first. With ``refresh``, the users, topics and ACLs of a local cluster whose data is gone are
        dropped from the state first (they are created again with the cluster)."""
        stack = self._stack()
        t0 = time.monotonic()
        self._ensure_credentials(progress)
        settled, forgotten = self._repair_and_forget(stack, topology or self._stack_file_topology(), progress)
        t_edit = time.monotonic()
        if forgotten:
            progress(
                f"stack {self.name}: forgot {forgotten} resources of decommissioned clusters or of individual "
                "provisioning (left on the clusters as they are)"
            )
        if refresh:
            self.forget_unreachable(stack, progress, only_absent=True)
        if settled and not refresh:
            self._note("refreshing before the update: an interrupted operation was settled", progress)
        try:
            result = stack.up(
                on_output=_forward(progress), refresh=refresh or settled, color="never", parallel=parallelism()
            )
        except Exception as exc:  # noqa: BLE001 - CommandError and friends
            raise _translate(exc, f"`pulumi up` of stack {self.name!r}") from None
        changes = {k: v for k, v in _by_name(result.summary.resource_changes).items() if k != "same"}
        progress(f"stack {self.name}: up done ({_describe(changes)})")
        return {"pulumi up": round(time.monotonic() - t0, 3), "state edits": round(t_edit - t0, 3)}

    def _stack_file_topology(self) -> Topology | None:
        """The stack file's topology, for the state edits before an ``up`` (None when it cannot be
        read: the program then reports why)."""
        from dr.topology import load_stack_file

        try:
            return load_stack_file(self.stack_file)
        except DRError:
            return None

    def _ensure_credentials(self, progress: Reporter = _quiet) -> None:
        """Before the program runs here for the first time (a fresh clone): take the passwords the
        stack generated from its state, so the program does not generate (and rotate to) new ones."""
        from dr.runtime.credentials import Credentials as _Credentials

        credentials = _Credentials(self.state_dir)
        if credentials.path.exists():
            return
        restored = self.restore_credentials(credentials)
        if restored:
            progress(f"stack {self.name}: restored the generated passwords of {', '.join(restored)} from its state")

    def preview(self, *, refresh: bool = False, progress: Reporter = _quiet) -> PreviewSummary:
        """``pulumi preview``: the changes an ``up`` would make now (the state is not changed)."""
        self._ensure_credentials(progress)
        stack = self._stack()
        self.repair(stack, progress, settle=False)
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
        """True when the backend holds this stack (it was provisioned, or at least selected, there)."""
        if self.backend_url.startswith("file://"):
            stacks = Path(self.backend_url.removeprefix("file://")) / ".pulumi" / "stacks" / NAMESPACE
            return any((stacks / f"{self.name}{ext}").exists() for ext in (".json", ".json.gz"))
        try:
            self._stack(create=False)
        except DRError:
            return False
        return True

    def config(self) -> dict[str, Any]:
        """The stack's config as ``pulumi config --show-secrets`` gives it: every secret decrypted
        through the stack's own secrets provider and backend. Held in memory only, never printed."""
        from pulumi import automation as auto

        if not self.exists():
            raise AuthError(
                f"stack {self.name!r} holds encrypted secrets, but the backend {_shown(self.backend_url)} has no "
                f"stack {self.name!r} to decrypt them with.",
                "point PULUMI_BACKEND_URL (or the project's `backend: url:`) at the backend the stack was created "
                "in, with its passphrase in PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE",
            )
        stack = self._stack(create=False)
        try:
            values = stack.get_all_config()
        except auto.CommandError as exc:
            raise _translate(exc, f"reading the secrets of stack {self.name!r}") from None
        return {key: value.value for key, value in values.items()}

    def preview_of(self, topology: Topology) -> PreviewSummary:
        """``pulumi preview`` of ``topology`` written as the stack file would be — in a scratch copy
        of the stack directory, so neither the stack file nor the state changes."""

        with tempfile.TemporaryDirectory(prefix="kdr-preview-") as tmp:
            scratch = Path(tmp)
            (scratch / self.stack_file.name).write_text(
                render_stack_config(self.stack_file, topology), encoding="utf-8"
            )
            _scratch_project(self.stack_dir, scratch)
            copy = EstateStack(replace(self.ref, project_dir=scratch))
            copy.backend_url = self.backend_url  # the same backend and stack, whatever the scratch dir says
            return copy.preview()

    def refresh(self, progress: Reporter = _quiet) -> dict[str, int]:
        """``pulumi refresh``: read the real estate into the state; return the changes seen."""
        self._ensure_credentials(progress)
        stack = self._stack()
        self.repair(stack, progress)
        try:
            result = stack.refresh(on_output=_forward(progress), color="never", parallel=parallelism())
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi refresh` of stack {self.name!r}") from None
        return {k: v for k, v in (result.summary.resource_changes or {}).items() if k != "same"}

    def destroy(self, progress: Reporter = _quiet) -> None:
        """``pulumi destroy``: stop every process and remove the local clusters' data.

        The users, topics and ACLs of a local cluster that cannot be reached (brokers killed or
        stopped, data directory gone) are dropped from the state with a warning instead of blocking
        the destroy: they live in the cluster's data, which the destroy removes."""
        stack = self._stack()
        self.repair(stack, progress)
        self.forget_unreachable(stack, progress)
        try:
            stack.destroy(on_output=_forward(progress), color="never", parallel=parallelism())
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi destroy` of stack {self.name!r}") from None

    def outputs(self) -> dict[str, Any]:
        """The stack outputs, secrets decrypted (as ``pulumi stack output --show-secrets``): keep them
        in memory, never print them."""
        return {k: v.value for k, v in self._stack().outputs().items()}

    # -------------------------------------------------------------------------------- repairs
    def _note(self, message: str, progress: Reporter) -> None:
        self.recovered.append(message)
        progress(f"stack {self.name}: {message}")

    def repair(self, stack: Any, progress: Reporter = _quiet, *, settle: bool = True) -> bool:
        """Undo what a killed engine left: orphaned plugins, its lock, interrupted operations.

        Returns True when interrupted operations were settled (the caller refreshes before updating).
        Raises :class:`~dr.errors.LockHeld` when a live process holds the stack's lock.
        """
        from dr.estate.pulumi_locks import clear_stale_locks
        from dr.estate.pulumi_orphans import reap_orphans

        for orphan in reap_orphans(self.backend):
            self._note(f"ended plugin pid {orphan.pid} left by a killed engine ({orphan.command[:80]})", progress)
        for lock in clear_stale_locks(self.backend, NAMESPACE, self.name):
            self._note(f"removed the lock of a Pulumi engine that is gone: {lock.holder}", progress)
        if not settle:
            return False
        return self._repair_and_forget(stack, None, progress, reaped=True)[0]

    def _repair_and_forget(
        self, stack: Any, topology: Topology | None, progress: Reporter = _quiet, *, reaped: bool = False
    ) -> tuple[bool, int]:
        """:meth:`repair`, and with ``topology`` (an ``up``'s) the resources :func:`forgettable` names
        dropped too — in one export and at most one import (each a CLI call over the whole state: at
        1,000 topics the state is megabytes, and a failover's ``up`` paid for two exports before). Returns
        whether interrupted operations were settled and how many resources were forgotten."""
        from dr.estate.stack_repair import settle_pending

        if not reaped:
            self.repair(stack, progress, settle=False)
        try:
            deployment = stack.export_stack()
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi stack export` of stack {self.name!r}") from None
        settled, notes = settle_pending(deployment.deployment or {})
        kept, forgotten = forgettable(settled, topology) if topology is not None else (settled, 0)
        if not notes and not forgotten:
            return False, 0
        deployment.deployment = kept
        try:
            stack.import_stack(deployment)
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, f"`pulumi stack import` of stack {self.name!r}") from None
        for note in notes:
            self._note(note, progress)
        return bool(notes), forgotten

    def forget_unreachable(self, stack: Any, progress: Reporter = _quiet, *, only_absent: bool = False) -> int:
        """Drop from the state, with a warning, the ``ClusterAccess`` subtree of every local cluster
        whose brokers do not all run (``only_absent``: whose data directory is gone); return how many
        resources were dropped."""
        from dr.estate.stack_repair import unreachable_local_clusters

        deployment = stack.export_stack()
        lost = unreachable_local_clusters(deployment.deployment or {}, _local_state)
        if only_absent:
            lost = {k: v for k, v in lost.items() if "is gone" in v}
        if not lost:
            return 0
        if only_absent:
            self._stop_links_of(deployment.deployment or {}, set(lost), progress)
        kept, dropped = forget(deployment.deployment, {f"{name}-access" for name in lost})
        if not dropped:
            return 0
        deployment.deployment = kept
        stack.import_stack(deployment)
        for name, why in sorted(lost.items()):
            self._note(
                f"warning: cluster {name} cannot be reached ({why}): its users, topics and ACLs were removed "
                "from the state without touching the cluster",
                progress,
            )
        return dropped

    def _stop_links_of(self, deployment: dict[str, Any], clusters: set[str], progress: Reporter) -> None:
        """Stop the MirrorMaker 2 processes that copy from or to ``clusters`` (created again, empty): the
        refresh then records them stopped, and the ``up`` starts them on the new cluster."""
        from stacks.mirror_link import _runtime as mirror_runtime

        for r in deployment.get("resources") or []:
            props = r.get("outputs") or {}
            dedicated = "source_port" in props and "topics" in props  # a MirrorMakerProcess, not a connector
            if r.get("type") == _DYNAMIC_TYPE and dedicated and {props.get("source"), props.get("target")} & clusters:
                mirror = mirror_runtime(props)
                if mirror.alive() or mirror.failure() is not None:  # running, or running with a dead task
                    mirror.stop()
                    self._note(f"stopped MirrorMaker 2 {mirror.name}: a cluster it copies from or to is gone", progress)

    def restore_credentials(self, credentials: Credentials) -> list[str]:
        """Copy the passwords this stack generated (its secret ``credentials`` output) into
        ``credentials`` where they are missing — a fresh clone then uses the passwords the clusters
        already have instead of generating new ones. Returns the principals restored (never passwords)."""
        if not self.exists():
            return []
        try:
            stored = self.outputs().get("credentials") or {}
        except DRError:
            return []
        have = set(credentials.users())
        restored = sorted(user for user in stored if user not in have and isinstance(stored[user], str))
        for user in restored:
            credentials.set_password(user, stored[user])
        return restored


def _scratch_project(project: Path, scratch: Path) -> None:
    """A ``Pulumi.yaml`` for the scratch copy: the project's own settings without ``main`` (the
    program runs inline there, and ``main: stacks/`` would name a directory the copy lacks)."""
    import yaml

    source = next((project / n for n in ("Pulumi.yaml", "Pulumi.yml") if (project / n).is_file()), None)
    if source is None:
        return
    doc = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    if isinstance(doc, dict):
        doc.pop("main", None)
        (scratch / "Pulumi.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _secrets_provider(stack_file: Path) -> str:
    """The stack file's ``secretsprovider:`` (how its secrets are encrypted), else ``passphrase``."""
    import yaml

    try:
        doc = yaml.safe_load(stack_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return "passphrase"
    provider = doc.get("secretsprovider") if isinstance(doc, dict) else None
    return str(provider) if provider else "passphrase"


def _shown(url: str) -> str:
    """A backend URL fit for a message: any ``user:password@`` part dropped."""
    return re.sub(r"//[^/@]*@", "//", url)


def forgettable(deployment: dict[str, Any], topology: Topology) -> tuple[dict[str, Any], int]:
    """The deployment without the ``ClusterAccess`` subtree of every cluster ``topology`` declares
    decommissioned and, with ``provisioning: batched``, without every per-item Topic, Acl and SCRAM user
    resource left by individual provisioning (:func:`forget_individual`); and how many were dropped
    (pure). What an ``up`` drops first: nothing on the clusters changes."""
    names = {f"{c.name}-access" for c in topology.clusters if c.role.value == "decommissioned"}
    kept, dropped = forget(deployment, names)
    if topology.provisioning == "batched":
        kept, items = forget_individual(kept)
        dropped += items
    return kept, dropped


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
    return _without(deployment, gone)


def forget_individual(deployment: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The deployment without the per-item ``pulumi_kafka`` Topic, Acl and UserScramCredential resources of
    every ``ClusterAccess`` (pure): what switching a stack to ``provisioning: batched`` leaves behind. Their
    topics, ACLs and users stay on the clusters, where the new sets adopt them; without this edit the ``up``
    would delete the old Acl and user resources after the sets created the same bindings and users, and so
    the bindings and the users."""
    resources = deployment.get("resources") or []
    access = {r["urn"] for r in resources if r.get("type") == _ACCESS_TYPE}
    gone = {r["urn"] for r in resources if r.get("type") in _ITEM_TYPES and r.get("parent") in access}
    return _without(deployment, gone)


def _without(deployment: dict[str, Any], gone: set[str]) -> tuple[dict[str, Any], int]:
    """``deployment`` without the resources ``gone``, every reference to them removed (pure)."""
    resources = deployment.get("resources") or []
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


def _local_state(props: dict[str, Any]) -> str:
    """``running``, ``degraded``, ``stopped`` or ``absent`` for a local cluster's recorded inputs."""
    from dr.runtime.cluster import ClusterSpec, LocalCluster

    spec = ClusterSpec(
        str(props["name"]),
        brokers=int(props["brokers"]),
        base_port=int(props["base_port"]),
        racks=tuple(props.get("racks") or ()),
        tls=bool(props.get("tls")),
    )
    return LocalCluster(spec, Path(str(props["state_dir"]))).state()


def _forward(progress: Reporter) -> Callable[[str], None]:
    def out(line: str) -> None:
        if _SHOWN.search(line):
            progress(mask_secrets(line.rstrip()))

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
            "give the passphrase the stack was created with (PULUMI_CONFIG_PASSPHRASE or "
            "PULUMI_CONFIG_PASSPHRASE_FILE, else <state>/passphrase), or — for a stack with no state yet — "
            "delete `encryptionsalt:` from its stack file and run again",
        )
    if "currently locked by" in text:
        return LockHeld(
            f"{what} refused: another Pulumi operation holds the stack's lock.\n{detail}",
            "wait until that operation ends, then run the command again (a lock whose process is gone "
            "on this machine is removed by the next drctl command)",
        )
    if "no resource plugin" in text or "no language plugin" in text:
        return ToolchainError(f"{what} failed: {detail}", "run `make setup` (it builds and installs the plugins)")
    from dr.kafka.client import TLS_FAILED

    done = _engine_changes(text)
    if "error: error:" in text and TLS_FAILED in text and not done:
        # the program's handshake check (stacks.tls_preflight) stopped it before any resource was declared
        return ClusterError(
            f"{what} refused: {detail}",
            "correct the cluster's tls block as the message says, then run again (nothing was changed)",
        )
    if "error: error:" in text:
        if not done:
            nothing = "nothing was destroyed" if "destroy" in what else "nothing was created"
            return ConfigError(
                f"{what} refused the topology ({nothing}): {detail}",
                "correct the stack file as the message says, then run again",
            )
        return ConfigError(
            f"{what}: {done}, then refused the topology: {detail}",
            "correct the stack file as the message says, then run the same command again (it converges from there)",
        )
    if done:
        return ClusterError(
            f"{what}: {done}, then failed: {detail}",
            "read the resource error above, fix its cause and run it again (it converges)",
        )
    return ClusterError(
        f"{what} failed: {detail}", "read the resource error above, fix its cause and run it again (it converges)"
    )


_SUMMARY_LINE = re.compile(r"^\s*(?:\+\+|\+-|-\+|[+~-])?\s*(\d+) (created|updated|deleted|replaced)\s*$", re.MULTILINE)


def _engine_changes(text: str) -> str:
    """What the engine reports it changed before it stopped (``1 resource created``), from the
    ``Resources:`` summary of its output; empty when it changed nothing."""
    if "Resources:" not in text:
        return ""
    summary = text.rsplit("Resources:", 1)[1].split("Duration:", 1)[0]
    parts = []
    for count, verb in _SUMMARY_LINE.findall(summary):
        n = int(count)
        if n:
            parts.append(f"{n} resource{'s' if n != 1 else ''} {verb}")
    return ", ".join(parts)


def _tail(text: str, lines: int = 25) -> str:
    """The engine's diagnostics (what failed and why) when present, else the output's last lines.

    The engine prints the stack's outputs between its diagnostics and its resource summary, even when an
    operation fails; they are cut off, else a long output diff would push the resource error out of view."""
    if "Diagnostics:" in text:
        text = re.split(r"^(?:Outputs|Resources):", text.split("Diagnostics:", 1)[1], maxsplit=1, flags=re.M)[0]
    keep = [
        line.rstrip().removeprefix(" stderr: ")
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("code:", "stdout:")) and line.strip() != "stderr:"
    ]
    return "\n".join(keep[-lines:])
