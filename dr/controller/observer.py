"""``drctl controller --stack S --observer NAME``: a third site's observer — it probes every cluster that
serves applications (the active and the passive one: metadata and a canary record, as a site's controller
probes its own) and publishes its verdicts in the witness under ``NAME``, so that the passive site has a
second observer when the whole active site, its controller with it, is lost. It never takes the lease and
never acts; it serves no metrics (its verdicts are in the witness, and in its log).
"""

from __future__ import annotations

import threading
import time

from dr.base.errors import ClusterError, ConfigError, DRError
from dr.base.stackref import StackRef
from dr.controller.act import Log
from dr.controller.observe import Detection, Detector, Probe, probe_site
from dr.controller.witness import Witness
from dr.estate.estate import Estate
from dr.topology import Role, load_stack_file

__all__ = ["Observer"]


class Observer:
    """The observer ``name`` of stack ``ref`` (see the module doc); bad input is refused here, before anything
    starts (exit 2)."""

    def __init__(self, ref: StackRef, name: str, log: Log, witness: Witness | None) -> None:
        self.ref, self.name, self.log = ref, name, log
        topology = load_stack_file(ref.existing_stack_file())
        if name in {c.name for c in topology.clusters}:
            raise ConfigError(
                f"observer name {name!r} is a cluster of stack '{ref.name}': its verdicts would replace that "
                "site's controller's",
                "name the observer after its own site (e.g. --observer C-site)",
            )
        if witness is None:
            raise ConfigError(
                f"stack '{ref.name}' declares no witness (failover_policy.witness): an observer publishes its "
                "verdicts there",
                "declare `witness: {kind: etcd, endpoints: [...]}` under kafka-dr:failoverPolicy",
            )
        self.witness = witness
        self.policy = topology.failover_policy
        self.interval_s = min(5.0, max(1.0, self.policy.detect_after_s / 6))
        self.detector = Detector(self.policy.detect_after_s)
        self._states: dict[str, Detection] = {}

    def run(self, stop: threading.Event) -> None:
        """Probe and publish until ``stop`` is set."""
        self.log("info", "started", f"observer {self.name} of stack {self.ref.name}", witness=self.witness.describe())
        try:
            while not stop.is_set():
                self.run_pass()
                stop.wait(self.interval_s)
        finally:
            self.witness.close()
            self.log("info", "stopped", "observer stopped")

    def run_pass(self) -> dict[str, Detection]:
        """Probe each serving cluster, update its detection state, publish them all; the states."""
        topology = load_stack_file(self.ref.existing_stack_file())
        estate = Estate(topology, self.ref.made_state_dir())
        now = time.monotonic()
        for c in topology.clusters:
            if c.role not in (Role.ACTIVE, Role.PASSIVE):
                continue
            try:
                probe = probe_site(c.name, estate.endpoint(c.name), timeout_s=self.interval_s)
            except DRError as exc:
                probe = Probe(c.name, metadata_ok=False, produce_ok=False, error=exc.problem)
            self._observed(c.name, self.detector.update(c.name, probe.up, now), probe.error)
        try:
            self.witness.publish(self.name, dict(self._states), ttl_s=self.policy.detect_after_s)
        except ClusterError as exc:
            self.log("error", "witness-down", exc.problem, witness=self.witness.describe())
        return dict(self._states)

    def _observed(self, cluster: str, state: Detection, error: str | None) -> None:
        before = self._states.get(cluster)
        self._states[cluster] = state
        if state == before:
            return
        if state == "suspect":
            self.log("warning", "cluster-suspect", f"cluster {cluster} does not answer: {error}", cluster=cluster)
        elif state == "down":
            self.log("error", "cluster-down", f"cluster {cluster} is down for this observer: {error}", cluster=cluster)
        elif before is not None:
            self.log("info", "cluster-up", f"cluster {cluster} answers again", cluster=cluster)
