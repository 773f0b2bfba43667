"""The sites of an automatic drill (``drctl drill --unplanned --automatic``): nobody types the failover.

The drill's copy of the stack gets ``failoverPolicy.mode: automatic`` (:func:`drill_policy`: the stack's own
detection, lease and RPO budget when it declares them, else the policy's defaults and a budget of
:data:`DRILL_MAX_RPO_RECORDS`), on a witness of the drill's own — one etcd member at the third site's ports
(:data:`dr.runtime.reserved.DRILL_WITNESS_OFFSET`): a drill never touches the team's witness, as it never
touches the stack it rehearses. :class:`Sites` then runs what a team runs: a controller beside A, one beside
B and a third site's observer, each a ``drctl controller`` process with JSON-line logs under
``<out>/controllers``. Its brokers running the lease fence, A takes writes only once its controller holds
the lease (:meth:`Sites.wait_holding`). The drill loses site A — its brokers and its controller SIGKILLed at
one instant (:meth:`Sites.lose`) — and only watches: B's controller sees A down with the observer, takes the
lease once A's has expired, and runs the journaled unplanned failover (:meth:`Sites.wait_failover`). Its
figures (:func:`figures`) count from the loss.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dr.base.errors import ClusterError
from dr.base.files import private_dir
from dr.base.stackref import PINNED_STATE, StackRef
from dr.base.types import Reporter as Progress
from dr.failover.drill.result import Unattended
from dr.failover.frame.journal import Journal
from dr.runtime.cluster import LocalCluster
from dr.runtime.etcd_member import EtcdMember
from dr.runtime.process import wait_until
from dr.runtime.reserved import DRILL_METRICS_OFFSET, DRILL_WITNESS_OFFSET
from dr.topology import Topology

__all__ = ["DRILL_MAX_RPO_RECORDS", "Sites", "drill_policy", "figures"]

DRILL_MAX_RPO_RECORDS = 100_000
"""The RPO budget (records of last known lag) of an automatic drill whose stack declares none."""

_POLICY_KEYS = ("kafka-dr:failoverPolicy", "kafka-dr:failover_policy")
_SITE_KEYS = {"mode", "witness", "metricsPorts", "metrics_ports"}


def drill_policy(config: Mapping[str, Any]) -> dict[str, Any]:
    """The failover policy of an automatic drill's copy, from the copy's ``kafka-dr:`` configuration (pure):
    the stack's declared detection, lease, margin, cooldown and RPO budget kept; mode ``automatic``; the
    drill's witness at the third site's ports (the standby's window, the passive's without one); each
    site's controller metrics at ``base_port + 90``."""
    declared: dict[str, Any] = next((config[k] for k in _POLICY_KEYS if isinstance(config.get(k), dict)), {})
    clusters = {str(c.get("role", "")): c for c in config.get("kafka-dr:clusters", [])}
    active, passive = clusters.get("active"), clusters.get("passive")
    if active is None or passive is None:
        raise ClusterError(
            "an automatic drill needs an active and a passive cluster.",
            "declare both in the stack file (role: active, role: passive)",
        )
    third = clusters.get("standby") or passive
    witness = int(third["base_port"]) + DRILL_WITNESS_OFFSET
    policy = {k: v for k, v in declared.items() if k not in _SITE_KEYS}
    if not any(k in policy for k in ("maxRpoRecords", "max_rpo_records")):
        policy["maxRpoRecords"] = DRILL_MAX_RPO_RECORDS
    policy["mode"] = "automatic"
    policy["witness"] = {"kind": "etcd", "endpoints": [f"http://127.0.0.1:{witness}"]}
    policy["metricsPorts"] = {str(c["name"]): int(c["base_port"]) + DRILL_METRICS_OFFSET for c in (active, passive)}
    return policy


class Sites:
    """The drill's witness, A's and B's controllers and the third site's observer (see the module doc)."""

    def __init__(self, ref: StackRef, topology: Topology, out: Path, progress: Progress) -> None:
        self.ref, self.topology, self.progress = ref, topology, progress
        self.dir = out / "controllers"
        self.active = topology.active().name
        passive = topology.passive()
        if passive is None:
            raise ClusterError("an automatic drill needs a passive cluster.", "declare one (role: passive)")
        self.passive = passive.name
        third = topology.standby() or passive
        self.observer = f"{third.name}-site"
        witness = topology.failover_policy.witness
        if witness is None or witness.kind != "etcd":  # drill_policy wrote it: the copy was changed since
            raise ClusterError("the automatic drill's copy declares no etcd witness.", "run the drill again")
        port = urlsplit(witness.endpoints[0]).port or 0
        self.witness = EtcdMember(self.dir / "witness", port, port + 1)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.lost_at: float | None = None

    def log(self, key: str) -> Path:
        """The JSON-line log of controller ``key`` (a cluster's name, or the observer's)."""
        return self.dir / f"{key}.log"

    def events(self, key: str) -> list[dict[str, Any]]:
        """What controller ``key`` has logged so far."""
        path = self.log(key)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(errors="replace").splitlines() if line.startswith("{")]

    def start(self) -> None:
        """Start the witness, then the controllers of A and B and the observer."""
        private_dir(self.dir)
        self.progress(f"drill: starting the drill's etcd witness at {self.witness.url}")
        self.witness.start()
        # The controllers resolve the stack by name, as an operator's do: the drill's copy, its very state
        # directory and its own backend.
        env = {
            **os.environ,
            "KDR_STACK_DIR": str(self.ref.project_dir),
            PINNED_STATE: f"{self.ref.name}={self.ref.state_dir}",
            "PULUMI_BACKEND_URL": self.ref.pulumi_backend,
        }
        for key, where in (
            (self.active, ["--site", self.active]),
            (self.passive, ["--site", self.passive]),
            (self.observer, ["--observer", self.observer]),
        ):
            with self.log(key).open("ab") as out:
                self.procs[key] = subprocess.Popen(  # noqa: S603 — our own CLI
                    [sys.executable, "-m", "dr.cli", "controller", "--stack", self.ref.name, *where, "--log-format", "json"],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    env={**env, "KDR_OPERATOR": f"drill-{key}"},
                )  # fmt: skip
        self.progress(
            f"drill: controllers beside {self.active} and {self.passive} and observer {self.observer} started "
            f"(logs: {self.dir})"
        )

    def wait_holding(self, cluster: LocalCluster, timeout: float = 180.0) -> None:
        """Wait until A's controller holds the lease and A's lease permit lets applications write."""

        def holding() -> bool:
            self._alive(self.active)
            took = any(e.get("event") == "lease-taken" for e in self.events(self.active))
            return took and _permit_until(cluster.lease_permit_file) > time.time()

        if not wait_until(holding, timeout, interval=0.5):
            raise ClusterError(
                f"the controller beside {self.active} did not take the lease within {timeout:.0f}s.",
                f"read {self.log(self.active)}",
            )
        self.progress(f"drill: the controller beside {self.active} holds the lease; its brokers take writes")

    def lose(self, cluster: LocalCluster) -> float:
        """Lose site A: its controller's process group and its brokers SIGKILLed at one instant; that instant."""
        proc = self.procs.get(self.active)
        self.lost_at = time.time()
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        cluster.kill()
        return self.lost_at

    def wait_failover(self, timeout: float) -> Journal:
        """Wait until a controller has run the unplanned failover and its run has ended; its journal.
        :class:`ClusterError` after ``timeout`` (naming what B's controller said last)."""
        found: list[Journal] = []

        def ended() -> bool:
            for key in (self.passive, self.observer):
                self._alive(key)
            journal = Journal.load(self.ref.failover_home)
            if journal is None or not journal.record.runs:
                return False
            run = journal.record.runs[-1]
            if not str(run.options.get("started_by") or "").startswith("controller") or run.outcome == "running":
                return False
            found.append(journal)
            return True

        if not wait_until(ended, timeout, interval=0.5):
            said = [e.get("message") for e in self.events(self.passive)][-3:]
            raise ClusterError(
                f"no controller failed {self.active} over to {self.passive} within {timeout:.0f}s of the loss; "
                f"the controller beside {self.passive} said last: {said}",
                f"read {self.log(self.passive)}",
            )
        return found[-1]

    def _alive(self, key: str) -> None:
        proc = self.procs.get(key)
        if proc is not None and proc.poll() is not None:
            raise ClusterError(
                f"the drill's controller {key} exited (code {proc.returncode}).",
                f"read {self.log(key)}",
            )

    def stop(self) -> None:
        """Stop the controllers (SIGTERM, then their process groups killed) and the witness; idempotent."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.witness.stop()


def figures(
    journal: Journal,
    lost_at: float,
    detect_after_s: float,
    acks_on_b: list[float],
    acks_on_a: list[float],
    logs: list[Path],
    endpoint_first_ack: float | None = None,
) -> Unattended:
    """The automatic failover's figures, each from the instant site A was lost (pure); ``endpoint_first_ack``:
    the first write acknowledged through the client endpoint after its switch, when the stack has one."""
    run = journal.record.runs[0]
    promoted = journal.step("promote").finished_at
    after = [t for t in acks_on_b if t >= lost_at]

    def since(at: float | None) -> float | None:
        return None if at is None else round(at - lost_at, 3)

    return Unattended(
        detect_after_s=detect_after_s,
        acted_by=run.options.get("started_by"),
        fencing_token=run.options.get("fencing_token"),
        detection_s=since(run.started_at),
        promotion_s=since(promoted),
        unattended_rto_s=since(min(after)) if after else None,
        writes_on_source_after_promotion=sum(1 for t in acks_on_a if promoted is not None and t > promoted),
        controller_logs=[str(p) for p in logs],
        endpoint_unattended_rto_s=since(endpoint_first_ack),
    )


def _permit_until(path: Path) -> float:
    """Until when (epoch seconds) the permit at ``path`` lets applications write; 0 when absent or revoked."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("until.ms="):
                return int(line.removeprefix("until.ms=")) / 1000
    except (OSError, ValueError):
        pass
    return 0.0
