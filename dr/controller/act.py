"""The automatic failover, carried out: each pass, publish this controller's verdicts, gather what
:func:`~dr.controller.decide.decide` reads, and act on its answer.

Acting, at the passive site: take the stack's lease in the witness (its create revision is the fencing
token; a controller that finds it held is told who holds it and does nothing), record the attempt in the
witness (the cooldown), then run the **same** journaled unplanned failover ``drctl failover --mode
unplanned`` runs — as a child ``drctl failover --stack S --mode unplanned --yes --json`` process, with the
token and ``started_by`` journaled with the run's options. A child process, not a call: the failover holds
the stack's lock and its own SIGTERM handling for a minute or more (a ``pulumi up`` among its steps), and
the controller's loop must keep probing, renewing the lease and serving metrics meanwhile; the run is
also exactly what a person's command would be, resumable by one (``drctl failover --stack S``) from the
journal if it stops. Its output goes to ``<state>/controller/failover-<token>.log``. A failed automatic
failover is never retried by the controller: the lease stays held by it, so the decision waits, and a
person resumes the journal. One whose runner is gone — the controller that started it killed or stopped
(its child with it) — is resumed by the next controller of the site that can take the lease
(:func:`~dr.controller.decide.decide`'s rule R): the same command, the same journal, a new token.

At the active site (automatic mode only): while this controller sees its own cluster ``down`` it gives
its lease back, so the passive site can act once the other observers agree; when the cluster answers
again it takes the lease again if nobody else has. The site's role is read from the stack file each pass:
once the stack is failed over — by this controller or by hand — the old active site's controller gives the
lease back and the new active site's controller takes it (and grants its brokers' lease permit), with no
restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from dr.base.errors import ClusterError, DRError
from dr.base.stackref import StackRef
from dr.controller.decide import Decision, Situation, decide
from dr.controller.metrics import ControllerMetrics
from dr.controller.observe import Detection
from dr.controller.readings import RpoReading
from dr.controller.witness import Holding, Witness
from dr.failover.frame.journal import Journal
from dr.failover.status import StatusReport, lock_held
from dr.topology import Role, Topology, load_stack_file

__all__ = ["Automatic"]


class Log(Protocol):
    """:class:`dr.controller.loop.Log`: one line per event."""

    def __call__(self, level: str, event: str, message: str, **fields: object) -> None: ...


class Keeper(Protocol):
    """What this module uses of :class:`dr.controller.loop.LeaseKeeper` (the thread holding or watching the lease)."""

    holder: str
    holds: bool
    mine: Holding | None
    metrics: ControllerMetrics

    def adopt(self, holding: Holding) -> None: ...

    def give_up(self, why: str) -> None: ...


class Automatic:
    """One controller's part in the automatic failover (see the module doc)."""

    def __init__(
        self,
        ref: StackRef,
        site: str,
        witness: Witness,
        keeper: Keeper,
        log: Log,
        metrics: ControllerMetrics,
    ) -> None:
        self.ref, self.site, self.witness, self.keeper, self.log = ref, site, witness, keeper, log
        self.failovers = metrics.automatic_failovers
        self.refusals = metrics.automatic_refusals
        self.child: subprocess.Popen[bytes] | None = None
        self.child_log: Path | None = None
        self.token: int | None = None
        self.last_lag: int | None = None
        self._free_since: float | None = None
        self._last: tuple[str, str] | None = None
        self._rpo: Mapping[str, RpoReading] = {}

    # ------------------------------------------------------------------ each pass
    def step(
        self, report: StatusReport, states: dict[str, Detection], rpo: Mapping[str, RpoReading] | None = None
    ) -> Decision | None:
        """Publish the verdicts, decide, act (called at the end of every pass); the decision, or None when
        this is not a site of an active-passive stack (or the stack file could not be read: logged). ``rpo``:
        this pass's RPO readings by link (:attr:`dr.controller.feed.StatusFeed.rpo`)."""
        self._reap()
        self._rpo = rpo or {}
        try:
            return self._step(report, states)
        except DRError as exc:
            self.log("warning", "automatic-error", f"the automatic failover's pass failed: {exc.problem}")
            return None

    def _step(self, report: StatusReport, states: dict[str, Detection]) -> Decision | None:
        topology = load_stack_file(self.ref.existing_stack_file())
        policy = topology.failover_policy
        with contextlib.suppress(ClusterError):  # the decision below finds the witness down
            self.witness.publish(self.site, {c: str(s) for c, s in states.items()}, ttl_s=policy.detect_after_s)
        if not topology.shape().site_controllers:
            return None
        role = topology.cluster(self.site).role
        if policy.mode == "automatic" and role is Role.ACTIVE:
            self._active_site(states.get(self.site))
        elif policy.mode == "automatic" and topology.failover_done and self.keeper.holds and not self.running:
            # failed over (by hand too): the lease follows the stack file to the new active site's controller
            self.keeper.give_up(f"the stack names {topology.active().name} the active cluster now, not {self.site}")
        decision = decide(self._situation(topology, report, states))
        self._report(decision)
        if decision.action == "act":
            self._start(topology, resume=decision.reason == "resume")
        return decision

    def _unfinished(self) -> str | None:
        """The automatic failover to this site that stopped unfinished with nobody running it, described (the
        caller has checked that no failover holds the stack's lock)."""
        journal = Journal.load(self.ref.failover_home)
        if journal is None or journal.status not in ("running", "interrupted") or not journal.runs:
            return None
        started_by = str(journal.runs[0].options.get("started_by") or "")
        if (
            journal.mode != "unplanned"
            or journal.record.target != self.site
            or not started_by.startswith("controller ")
        ):
            return None
        done = sum(1 for step in journal.record.steps.values() if step.done)
        return (
            f"the automatic failover {journal.failover_id} ({started_by}; {done} of {len(journal.record.steps)} "
            f"steps done)"
        )

    def _situation(self, topology: Topology, report: StatusReport, states: dict[str, Detection]) -> Situation:
        policy = topology.failover_policy
        me = topology.cluster(self.site)
        active = topology.active().name
        passive = me.role is Role.PASSIVE and not topology.failover_done
        running = self.running or lock_held(self.ref.failover_home)
        unfinished = self._unfinished() if policy.mode == "automatic" and not running else None
        for link in report.links:
            if link.source == active and link.target == self.site and link.total_lag is not None:
                self.last_lag = link.total_lag
        lag = self.last_lag if self.last_lag is not None else self._estimated_lag(topology, active)
        witness_up, observers, holder, last = True, {}, None, None
        try:
            current = self.witness.current()
            holder = None if current is None else current.holder
            observers = {name: seen[active] for name, seen in self.witness.verdicts().items() if active in seen}
            last = self.witness.last_automatic()
        except ClusterError:
            witness_up = False
        now = time.monotonic()
        if not witness_up or holder is not None:
            self._free_since = None
        elif self._free_since is None:
            self._free_since = now
        return Situation(
            mode=policy.mode,
            site=self.site,
            passive=passive,
            active=active if active != self.site else None,
            own_state=states.get(active, "up"),
            observers=observers,
            observer=self.site,
            witness_up=witness_up,
            lease_holder=holder,
            lease_free_for_s=None if self._free_since is None else now - self._free_since,
            margin_s=policy.margin_s,
            failover_running=running,
            last_automatic_age_s=None if last is None else max(0.0, time.time() - last),
            cooldown_s=policy.cooldown_s,
            lag_records=lag,
            max_rpo_records=policy.max_rpo_records,
            unfinished=unfinished,
            holder=self.keeper.holder if self.keeper.mine is not None else None,
        )

    def _estimated_lag(self, topology: Topology, active: str) -> int | None:
        """Without a live lag ever seen (this controller started after the source died): the upper bound of
        the unplanned failover's own RPO estimate from the source's last offsets snapshot, None without one."""
        for link in topology.links:
            if link.source == active and link.target == self.site and (found := self._rpo.get(link.name)):
                worst = found.upper_bound if found.upper_bound is not None else found.records
                if worst is not None:
                    return worst
        return None

    def _report(self, decision: Decision) -> None:
        """Log a decision when it changes (a refusal pages once per episode)."""
        key = (decision.action, decision.reason)
        if key == self._last or decision.reason == "manual":
            self._last = key
            return
        self._last = key
        if decision.action == "refuse":
            self.refusals.labels(decision.reason).inc()
            self.keeper.metrics.alerts.labels("automatic_refused").inc()
            self.log("error", "automatic-refused", decision.message + ": page a person", reason=decision.reason)
        elif decision.action == "wait" and decision.reason not in ("not-passive", "active-up"):
            self.log("info", "automatic-wait", decision.message, reason=decision.reason)

    def _active_site(self, own: Detection | None) -> None:
        """At the active site: give the lease back while the cluster is down, take it again when it is up."""
        if own == "down" and self.keeper.holds:
            self.keeper.give_up(f"cluster {self.site} is down here: the passive site may take over")
        elif own == "up" and not self.keeper.holds:
            self.keeper.holds = True
            self.log(
                "info", "lease-wanted",
                f"cluster {self.site} is the active cluster and answers: this controller takes the lease when it is free",
            )  # fmt: skip

    # ------------------------------------------------------------------ acting
    @property
    def running(self) -> bool:
        """True while this controller's failover child runs."""
        return self.child is not None and self.child.poll() is None

    def _start(self, topology: Topology, *, resume: bool = False) -> None:
        if self.running:
            return
        holder = self.keeper.holder
        try:
            holding = self.keeper.mine if resume and self.keeper.mine is not None else self.witness.acquire(holder)
            current = self.witness.current() if holding is None else holding
        except ClusterError as exc:
            self.log("warning", "automatic-wait", f"the lease could not be taken: {exc.problem}", reason="witness-down")
            return
        if holding is None:
            who = (
                "nobody (it was released meanwhile)" if current is None else f"{current.holder} (token {current.token})"
            )
            self.failovers.labels("lease-held-elsewhere").inc()
            self.log(
                "warning", "lease-held-elsewhere",
                f"the lease is held by {who}: this controller does not fail over",
                holder=current.holder if current else None, token=current.token if current else None,
            )  # fmt: skip
            return
        if holding is not self.keeper.mine:
            self.keeper.adopt(holding)
            self.log("info", "lease-taken", f"this controller holds the lease as {holder}", token=holding.token)
        if not resume:  # a resumed run is the same failover: its start was recorded
            try:
                self.witness.mark_automatic(holder, holding.token)
            except ClusterError as exc:
                self.log("warning", "cooldown-unrecorded", f"the attempt could not be recorded: {exc.problem}")
        directory = self.ref.made_state_dir() / "controller"
        directory.mkdir(parents=True, exist_ok=True)
        self.child_log, self.token = directory / f"failover-{holding.token}.log", holding.token
        command = [
            sys.executable, "-m", "dr.cli", "failover", "--stack", self.ref.name, "--mode", "unplanned", "--yes",
            "--json", "--started-by", f"controller {holder}", "--fencing-token", str(holding.token),
        ]  # fmt: skip
        with self.child_log.open("wb") as out:
            self.child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # noqa: S603 — our own CLI
        self.failovers.labels("resumed" if resume else "started").inc()
        self.log(
            "warning", "automatic-failover-resumed" if resume else "automatic-failover-started",
            f"unplanned failover of stack {self.ref.name} to {self.site} {'resumed' if resume else 'started'} by this "
            f"controller (`drctl failover --stack {self.ref.name} --mode unplanned`, pid {self.child.pid})",
            token=holding.token, pid=self.child.pid, output=str(self.child_log),
            source=topology.active().name,
        )  # fmt: skip

    def _reap(self) -> None:
        """Report the child's end once."""
        if self.child is None or self.child.poll() is None:
            return
        code, self.child = self.child.returncode, None
        tail = self.child_log.read_text(errors="replace")[-1500:] if self.child_log else ""
        if code == 0:
            self.failovers.labels("completed").inc()
            self.log(
                "info", "automatic-failover-done", f"the automatic failover finished: {self.site} is the active cluster",
                token=self.token, output=str(self.child_log),
            )  # fmt: skip
            return
        self.failovers.labels("failed").inc()
        self.keeper.metrics.alerts.labels("automatic_failed").inc()
        self.log(
            "error", "automatic-failover-failed",
            f"the automatic failover ended with exit code {code}; it is not retried: resume it with "
            f"`drctl failover --stack {self.ref.name} --yes` (the journal keeps what was done). Last output: {tail}",
            token=self.token, code=code, output=str(self.child_log),
        )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM a running failover child (it journals the run as interrupted; a rerun resumes) and reap it."""
        if self.child is None:
            return
        if self.child.poll() is None:
            self.log("warning", "automatic-failover-interrupted", "stopping: the running failover is interrupted")
            os.kill(self.child.pid, signal.SIGTERM)
            try:
                self.child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
        self._reap()
