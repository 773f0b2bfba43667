"""``drctl controller``'s loop: observe the site, read the stack's status, keep or watch the lease, serve
the metrics, log what changed — until SIGTERM.

Shaped like a reconcile loop (strimzi's ``AbstractOperator.reconcile``: one pass, its hooks, again), read,
not copied. One pass: probe the site's cluster (:func:`~dr.controller.observe.probe_site`), update its
detection state, read the site's fence state (whether applications may write there), take ``drctl
status``'s report (:func:`~dr.failover.status.status_report`: the other clusters, the links, the problems
— the same reasons ``kdr_ready`` shows; read in a thread of its own, :mod:`dr.controller.status_reader`, so
that a cluster dying mid-read never holds up the probes), then wait. At a link's target site, every ``parity_every_s`` a thread
compares the linked clusters as ``drctl status --parity`` does; its differences join the readiness problems. The lease lives in a thread of its own (:class:`LeaseKeeper`)
so a slow pass never starves its renewal: the active site's controller takes and renews it, the others
only read who holds it. The active site's controller fences its own cluster when it cannot renew in time
(:mod:`dr.controller.fence`).

Mode ``manual`` detects and alerts — a log line and ``kdr_alerts_total{kind="cluster_down"}`` — and never
acts. With a witness, every pass ends in :class:`~dr.controller.act.Automatic`: the controller publishes
its verdicts, and in mode ``automatic`` the passive site fails over by itself when
:func:`~dr.controller.decide.decide` says so.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TextIO

from dr.base.errors import ClusterError, ConfigError, DRError
from dr.base.stackref import StackRef
from dr.controller.act import Automatic
from dr.controller.etcd import EtcdWitness
from dr.controller.feed import StatusFeed
from dr.controller.fence import FenceRecord, FenceStore, SelfFence, may_lift
from dr.controller.metrics import ControllerMetrics, MetricsServer
from dr.controller.observe import LEASE_FENCE_AUTHORIZER, Detection, Detector, Probe, broker_authorizers, probe_site
from dr.controller.permit import LeasePermit
from dr.controller.status_reader import StatusReader
from dr.controller.witness import Holding, Witness
from dr.estate.estate import Estate
from dr.failover.status import StatusReport, link_problem, status_report
from dr.kafka.client import connected_admin, reused_admin_clients
from dr.topology import Cluster, Kind, Role, Topology, load_stack_file

__all__ = ["Controller", "LeaseKeeper", "Log", "witness_for"]

STATUS_LATE_PASSES = 3
"""``status-late`` is logged once a report has been outstanding this many passes (a loaded machine makes a
report take more than one pass now and then: that alone is not worth a line)."""

LogFormat = Literal["text", "json"]


class Log:
    """One line per event on ``stream``: ``<time> <LEVEL> <event>: <message> key=value`` or a JSON object."""

    def __init__(self, fmt: LogFormat = "text", stream: TextIO | None = None) -> None:
        self.fmt, self.stream = fmt, stream if stream is not None else sys.stdout
        self._lock = threading.Lock()

    def __call__(self, level: str, event: str, message: str, **fields: object) -> None:
        """Write one line (thread-safe)."""
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if self.fmt == "json":
            line = json.dumps({"ts": at, "level": level, "event": event, "message": message, **fields}, default=str)
        else:
            extra = "".join(f" {k}={v}" for k, v in fields.items())
            line = f"{at} {level.upper():5} {event}: {message}{extra}"
        with self._lock:
            print(line, file=self.stream, flush=True)


BROKER_FENCE_EVERY_S = 60.0
"""How often a controller asks its brokers which authorizer they run: a static broker setting, changed only
by a broker restart, so not every pass."""


def witness_for(stack: str, topology: Topology) -> Witness | None:
    """The witness the stack's policy declares, or None; ConfigError when a postgres witness has no team database."""
    from dr.failover.record.team_store import is_team_url, project_name, team_store

    declared, policy = topology.failover_policy.witness, topology.failover_policy
    if declared is None:
        return None
    if declared.kind == "etcd":
        return EtcdWitness(declared.endpoints, f"{declared.prefix}{project_name()}/{stack}/leader", policy.lease_ttl_s)
    from dr.base.pulumi_env import project_backend_url
    from dr.controller.pg_witness import PostgresWitness

    url = os.environ.get("PULUMI_BACKEND_URL") or project_backend_url()
    if not url or not is_team_url(url):
        raise ConfigError(
            f"stack '{stack}' declares failover_policy.witness kind postgres, but its Pulumi backend is not a "
            "postgres:// team database",
            "set PULUMI_BACKEND_URL (or backend: url: in Pulumi.yaml) to the team's postgres:// URL, or declare an "
            "etcd witness",
        )
    return PostgresWitness(team_store(url), stack, policy.lease_ttl_s)


class LeaseKeeper:
    """A thread that, every third of the TTL, takes or renews the lease (``holds``) or only reads it."""

    def __init__(self, witness: Witness, holder: str, *, holds: bool, log: Log, metrics: ControllerMetrics) -> None:
        self.witness, self.holder, self.holds, self.log, self.metrics = witness, holder, holds, log, metrics
        self.mine: Holding | None = None
        self.witness_up: bool | None = None
        self.fence: SelfFence | None = None
        """The active site's self-fence (:mod:`dr.controller.fence`), told of every renewal and loss."""
        self.permit: LeasePermit | None = None
        """The site's brokers' lease permit (:mod:`dr.controller.permit`): granted after each renewal,
        revoked when the lease is lost, given up or released."""
        self._permit_problem = ""
        self._told_holder: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kdr-controller-lease", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.tick()
            if self._stop.wait(self.fence.interval_s if self.fence else self.witness.ttl_s / 3):
                return

    def tick(self) -> None:
        """One turn: take or renew (when it holds), then read the holder, and publish both."""
        try:
            if self.holds:
                self._keep()
            current = self.witness.current()
        except ClusterError as exc:
            if self.witness_up is not False:
                self.log("error", "witness-down", exc.problem, witness=self.witness.describe())
                self.metrics.alerts.labels("witness_down").inc()
            self.witness_up = False
            self.metrics.lease(False, None, self.mine)
            return
        if self.witness_up is False:
            self.log("info", "witness-up", "the witness answers again", witness=self.witness.describe())
        self.witness_up = True
        self.metrics.lease(True, current, self.mine)

    def _keep(self) -> None:
        sent = time.monotonic(), time.time()
        if self.mine is not None and not self.witness.renew(self.mine):
            self.log(
                "error", "lease-lost", "the lease expired or was taken before it was renewed", token=self.mine.token
            )
            self.metrics.alerts.labels("lease_lost").inc()
            lost, self.mine = self.mine, None
            self._revoke(lost)
            if self.fence is not None:  # fail closed before anything else, taking it again included
                self.fence.lease_lost(taken=False)
        elif self.mine is not None:
            if self.fence is not None:
                self.fence.renewed(self.mine, *sent)
            self._grant(self.mine, sent[1])
        if self.mine is None:
            sent = time.monotonic(), time.time()
            self.mine = self.witness.acquire(self.holder)
            if self.mine is not None:
                self.log(
                    "info", "lease-taken", f"this controller holds the lease as {self.holder}", token=self.mine.token
                )
                if self.fence is not None:
                    self.fence.renewed(self.mine, *sent)
                self._grant(self.mine, sent[1])
            else:
                self._held_elsewhere()
                if self.fence is not None:
                    self.fence.lease_lost(taken=True)
        if self.mine is not None and self.fence is not None:
            self.fence.lease_regained(self.mine)

    def _held_elsewhere(self) -> None:
        """This controller wants the lease and another holds it: say who, once per holder."""
        try:
            current = self.witness.current()
        except ClusterError:
            return  # the tick that follows reports the witness down
        if current is None or current.holder == self._told_holder:
            return
        self._told_holder = current.holder
        self.log(
            "info", "lease-held-elsewhere", f"the lease is held by {current.holder} (token {current.token}): "
            "this controller takes it when it is free", holder=current.holder, token=current.token,
        )  # fmt: skip

    def _grant(self, holding: Holding, sent_wall: float) -> None:
        """Let the site's brokers take application writes until the renewal sent at ``sent_wall`` runs out —
        not while a self-fence is due and unconfirmed (the permit would let the queued writes through)."""
        if self.permit is None:
            return
        if self.fence is not None and self.fence.owed:
            self._permit_failed(
                "the lease permit is withheld until the self-fence is confirmed", "lease-permit-withheld"
            )
            return
        try:
            until = self.permit.grant(holding, sent_wall)
        except OSError as exc:
            self._permit_failed(f"the lease permit {self.permit.path} cannot be written: {exc}")
            return
        if self._permit_problem:
            self.log(
                "info", "lease-permit-granted", f"the site's brokers take application writes again until {until:.3f}"
            )
        self._permit_problem = ""
        self.metrics.permit_until.set(until)

    def _revoke(self, holding: Holding | None) -> None:
        """Refuse application writes on the site's brokers from now on."""
        if self.permit is None or self.permit.until_s == 0:
            return
        try:
            self.permit.revoke(holding.token if holding else 0, self.holder)
        except OSError as exc:  # it runs out by itself at its instant: said, not fatal
            self._permit_failed(f"the lease permit {self.permit.path} cannot be revoked (it runs out by itself): {exc}")
            return
        self.metrics.permit_until.set(0)
        self.log("warning", "lease-permit-revoked", "the site's brokers refuse application writes (no lease)")

    def _permit_failed(self, problem: str, event: str = "lease-permit-failed") -> None:
        if self._permit_problem != problem:
            self.log("error", event, problem)
        self._permit_problem = problem

    def adopt(self, holding: Holding) -> None:
        """Keep renewing ``holding``, taken by this controller outside the thread (the automatic failover)."""
        self.mine = holding
        self.holds = True

    def give_up(self, why: str) -> None:
        """Stop holding: give the lease back now (left to expire when the witness does not answer)."""
        self.holds = False
        mine, self.mine = self.mine, None
        if mine is None:
            return
        self._revoke(mine)
        try:
            self.witness.release(mine)
            self.log("warning", "lease-given-up", f"the lease was given back: {why}", token=mine.token)
        except ClusterError as exc:
            self.log("warning", "lease-left", f"the lease is left to expire ({why}): {exc.problem}")

    def stop(self) -> None:
        """Stop the thread and give the lease back (left to expire when the witness does not answer)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.mine is not None:
            self._revoke(self.mine)
            try:
                self.witness.release(self.mine)
                self.log("info", "lease-released", "the lease was given back", token=self.mine.token)
            except ClusterError as exc:
                self.log("warning", "lease-left", f"the lease is left to expire: {exc.problem}")
            self.mine = None
        self.witness.close()


class Controller:
    """The controller of ``site`` in stack ``ref`` (see the module doc); every bad input is refused here,
    before anything starts."""

    def __init__(
        self, ref: StackRef, site: str, log: Log, metrics_port: int | None = None, permit_file: Path | None = None
    ) -> None:
        from dr.failover.record.team_store import operator_identity

        self.ref, self.log = ref, log
        self.topology = load_stack_file(ref.existing_stack_file())
        self.cluster = self.topology.cluster(site)
        self.policy = self.topology.failover_policy
        self.port_field = f"failover_policy.metrics_ports.{site}"
        if metrics_port is not None:
            self.port_field = "--metrics-port"
        port = metrics_port if metrics_port is not None else self.policy.metrics_ports.get(site)
        if port is None:
            raise ConfigError(
                f"stack '{ref.name}' declares no metrics port for {site}'s controller ({self.port_field})",
                f"declare one under kafka-dr:failoverPolicy: metricsPorts: {{{site}: <port>}} in "
                f"Pulumi.{ref.name}.yaml (a free port; it is served at 127.0.0.1)",
            )
        self.metrics_port: int = port
        self.witness = witness_for(ref.name, self.topology)
        self.interval_s = min(5.0, max(1.0, self.policy.detect_after_s / 6))
        self.detector = Detector(self.policy.detect_after_s)
        self.metrics = ControllerMetrics(ref.name, site, self.policy.mode)
        self.feed = StatusFeed(self.metrics, self.topology, ref.name, ref.state_dir)
        self.holder = f"{operator_identity()}/{site}"
        if permit_file is not None and self.witness is None:
            raise ConfigError(
                f"--lease-permit-file is given, but stack '{ref.name}' declares no witness: there is no lease to permit writes",
                "declare kafka-dr:failoverPolicy.witness (and mode: automatic), or drop --lease-permit-file",
            )
        self.permit_file = permit_file
        self._broker_fence: tuple[bool, str] | None = None
        self._broker_fence_at = -BROKER_FENCE_EVERY_S  # monotonic time of the last describeConfigs
        self._states: dict[str, Detection] = {}
        self.automatic: Automatic | None = None
        self._parity: list[str] = []  # the last parity check's differences (readiness problems)
        self._parity_at = -float("inf")  # monotonic time the last parity check ended
        self._parity_thread: threading.Thread | None = None
        self.status = StatusReader(lambda down, topology: status_report(ref, unreachable=down, topology=topology))
        self._report: StatusReport | None = None  # the last report that came back
        self._late_since: float | None = None  # monotonic time the report became late
        self._late_told = False

    def run(self, stop: threading.Event) -> None:
        """Serve the metrics and run passes until ``stop`` is set; give the lease back at the end."""
        server = MetricsServer(self.metrics, self.metrics_port, self.port_field)
        keeper = self.automatic = None
        estate = Estate(self.topology, self.ref.made_state_dir())
        if self.witness is not None:
            keeper = LeaseKeeper(
                self.witness, self.holder, holds=self.cluster.role is Role.ACTIVE, log=self.log, metrics=self.metrics
            )
            keeper.permit = self._permit(estate)
            if keeper.holds:
                keeper.fence = self._self_fence(estate)
                keeper.fence.start()
            keeper.start()
            self.automatic = Automatic(self.ref, self.cluster.name, self.witness, keeper, self.log, self.metrics)
        self.log(
            "info", "started", f"controller of {self.cluster.name} in stack {self.ref.name}",
            mode=self.policy.mode, metrics=f"http://127.0.0.1:{server.port}/metrics",
            witness=self.witness.describe() if self.witness else "none",
        )  # fmt: skip
        try:
            with reused_admin_clients():  # the same clusters every pass: one client each, not one per pass
                while not stop.is_set():
                    self.run_pass(estate)
                    if keeper is not None:
                        self._fence_if_active(keeper, estate)
                    stop.wait(self.interval_s)
        finally:
            if self.automatic is not None:
                self.automatic.stop()
            if keeper is not None and keeper.fence is not None:  # stopping on purpose gives the lease back: no fence
                keeper.fence.stop()
            if keeper is not None:
                keeper.stop()
            server.close()
            self.log("info", "stopped", "controller stopped")

    def _fence_if_active(self, keeper: LeaseKeeper, estate: Estate) -> None:
        """Give the site the active site's self-fence once it holds the lease as the active cluster — after an
        automatic failover to it, or a failover by hand that the lease followed — when it was not the active
        site at this controller's start (the fence is built at start only for the site that was active then)."""
        if keeper.fence is not None or keeper.mine is None:
            return
        try:
            role = load_stack_file(self.ref.existing_stack_file()).cluster(self.cluster.name).role
        except DRError:
            return  # the pass reports an unreadable stack file; the next one tries again
        if role is not Role.ACTIVE:
            return
        fence = self._self_fence(
            estate
        )  # armed by the keeper's next renewal: its deadline counts from when that was sent
        fence.start()
        keeper.fence = fence
        self.log(
            "info", "self-fence-armed",
            f"cluster {self.cluster.name} is the active cluster now: its controller fences it if the lease cannot be "
            "renewed in time", token=keeper.mine.token,
        )  # fmt: skip

    def _self_fence(self, estate: Estate) -> SelfFence:
        """The active site's fail-closed fence (:mod:`dr.controller.fence`), recorded beside the journal."""
        from dr.failover.frame.journal import team_store_for

        home = self.ref.failover_home
        site = self.cluster.name
        return SelfFence(
            cluster=site, holder=self.holder, endpoint=lambda: estate.endpoint(site),
            principals=[a.name for a in self.topology.principals.applications],
            store=FenceStore(home, self.ref.name, team_store_for(home)),
            ttl_s=self.policy.lease_ttl_s, margin_s=self.policy.margin_s, lift_allowed=self._may_lift,
            log=self.log, metrics=self.metrics,
        )  # fmt: skip

    def _permit(self, estate: Estate) -> LeasePermit | None:
        """The site's brokers' lease permit (:mod:`dr.controller.permit`): ``--lease-permit-file``, or a local
        cluster's own when the stack's brokers run the fence; None otherwise."""
        path = self.permit_file
        if path is None and self.cluster.is_local and self.policy.broker_fence:
            path = estate.local_cluster(self.cluster.name).lease_permit_file
        return None if path is None else LeasePermit(path, self.policy.lease_ttl_s, self.policy.margin_s)

    def _may_lift(self, record: FenceRecord, holding: Holding) -> tuple[bool, str]:
        """:func:`~dr.controller.fence.may_lift` on what the witness, the journal and the stack file say now."""
        from dr.failover.frame.journal import Journal

        if self.witness is None:  # never: the fence exists only beside a witness
            return False, "no witness is declared"
        try:
            current = self.witness.current()
            journal = Journal.load(self.ref.failover_home)
            active = load_stack_file(self.ref.existing_stack_file()).cluster(self.cluster.name).role is Role.ACTIVE
        except DRError as exc:
            return False, f"cannot check that nothing was failed over: {exc.problem}"
        started = None if journal is None else (journal.record.created_at, journal.status)
        return may_lift(record, holding, current, started, active)

    def run_pass(self, estate: Estate) -> None:
        """One pass: probe the site, read its fence state, read the status (see the module doc). A pass
        that takes longer than two intervals is logged (``pass-slow``) with where its time went: a slow pass
        delays what this controller sees."""
        took: dict[str, float] = {}
        started = mark = time.monotonic()

        def lap(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            took[name] = now - mark
            mark = now

        try:
            self._pass(estate, lap)
        finally:
            total = time.monotonic() - started
            if total > 2 * self.interval_s:
                spent = ", ".join(f"{k} {v:.1f}s" for k, v in took.items() if v >= 0.1)
                self.log("warning", "pass-slow", f"a pass took {total:.1f} s ({spent})", seconds=round(total, 1))

    def _pass(self, estate: Estate, lap: Callable[[str], None]) -> None:
        site = self.cluster.name
        try:
            probe = probe_site(site, estate.endpoint(site), timeout_s=self.interval_s)
        except DRError as exc:
            probe = Probe(site, metadata_ok=False, produce_ok=False, error=exc.problem)
        self.metrics.canary.labels(site).set(1 if probe.produce_ok else 0)
        self._observed(site, probe.up, probe.error)
        lap("probe")
        if probe.metadata_ok:
            self._fence_state(estate, site)
            if time.monotonic() - self._broker_fence_at >= BROKER_FENCE_EVERY_S:
                self._broker_fence_at = time.monotonic()
                self._broker_fence_state(estate, site)
        lap("fence state")
        try:  # read once a pass: a failover changes the roles; the status report reads the same
            topology = load_stack_file(self.ref.existing_stack_file())
        except DRError:
            topology = None
        down = self._reach_others(estate, topology or self.topology)
        lap("reach")
        found = self.status.report(down, topology, wait_s=self.interval_s)
        lap("status")
        if isinstance(found, DRError):
            self.log("warning", "status-failed", f"drctl status could not be read: {found.problem}")
            return
        if found is None:  # still being read (a cluster slow to answer): the detection above went on regardless
            now = time.monotonic()
            self._late_since = self._late_since or now
            if not self._late_told and now - self._late_since >= STATUS_LATE_PASSES * self.interval_s:
                self._late_told = True
                self.log(
                    "warning", "status-late",
                    f"drctl status's report has not come back for {now - self._late_since:.0f} s: the passes go on "
                    "probing; links and readiness show the last report until it does",
                )  # fmt: skip
        else:
            self._late_since, self._late_told = None, False
            self._report = found
            self._start_parity(topology or self.topology)
            self.metrics.status(
                found, {link.name: link_problem(link) is not None for link in found.links}, self._parity
            )
            self.feed.update(found, estate)
            lap("metrics")
        if self.automatic is not None and self._report is not None:  # the report gives it the last known lag
            self.automatic.step(self._report, self._states, self.feed.rpo)
            lap("automatic")

    def _start_parity(self, topology: Topology) -> None:
        """Start a parity check in a thread of its own — it reads every linked cluster and starts a JVM for the
        quotas, never inside a pass — when this site is a link's target (the site that must match what it
        would take over) and ``parity_every_s`` has passed since the last one ended."""
        every = self.policy.parity_every_s
        if not every or not any(link.target == self.cluster.name for link in topology.links):
            return
        if self._parity_thread is not None and self._parity_thread.is_alive():
            return
        if time.monotonic() - self._parity_at < every:
            return
        self._parity_thread = threading.Thread(target=self._check_parity, args=(topology,), name="parity", daemon=True)
        self._parity_thread.start()

    def _check_parity(self, topology: Topology) -> None:
        """``drctl status --parity``'s comparison: its differences become readiness problems and a metric; a
        change is logged (``parity-drift`` naming the first difference, ``parity-equal`` once none is left)."""
        from dr.failover.parity import parity_problems

        try:
            found = parity_problems(Estate(topology, self.ref.made_state_dir()))
        except DRError as exc:
            found = [f"parity: the check could not run: {exc.problem}"]
        except Exception as exc:  # noqa: BLE001 - a thread of its own: say it, never die silently
            found = [f"parity: the check failed: {type(exc).__name__}: {exc}"]
        self.metrics.parity.labels(self.cluster.name).set(len(found))
        self.metrics.parity_age.labels(self.cluster.name).set(time.time())
        if found and found != self._parity:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            self.log(
                "warning", "parity-drift",
                f"{len(found)} difference(s) between the linked clusters: {found[0]}{more}; "
                f"`drctl status --stack {self.ref.name} --parity` lists each with its repair",
                differences=len(found),
            )  # fmt: skip
        elif not found and self._parity:
            self.log("info", "parity-equal", "the linked clusters match again", differences=0)
        self._parity = found
        self._parity_at = time.monotonic()

    def _reach_others(self, estate: Estate, topology: Topology) -> dict[str, str]:
        """Judge every other active, passive or edge cluster of ``topology`` (the stack as it stands now),
        each within one interval — a local cluster by its processes first, then by a metadata call — and
        return the ones down (name → why). These verdicts, not the status report's admin calls (which wait
        on a dead cluster's timeouts), feed the detector."""
        down: dict[str, str] = {}
        for c in topology.clusters:
            if c.name == self.cluster.name or c.role not in (Role.ACTIVE, Role.PASSIVE, Role.EDGE):
                continue
            why = self._unanswered(estate, c)
            self._observed(c.name, why is None, why)
            if why is not None:
                down[c.name] = why
        return down

    def _unanswered(self, estate: Estate, cluster: Cluster) -> str | None:
        """Why ``cluster`` does not answer within one interval, or None when it does."""
        if cluster.kind is Kind.LOCAL:
            process = estate.local_cluster(cluster.name).state()
            if process in ("absent", "stopped"):
                return process
        try:
            connected_admin(estate.endpoint(cluster.name), timeout=self.interval_s)
        except DRError as exc:
            return exc.problem
        return None

    def _observed(self, cluster: str, up: bool, error: str | None) -> None:
        now = time.monotonic()
        state = self.detector.update(cluster, up, now)
        down_for = self.detector.down_for(cluster, now)
        self.metrics.observed(Probe(cluster, up, up, error=error), state, down_for)
        before = self._states.get(cluster)
        self._states[cluster] = state
        if state == before:
            return
        if state == "suspect":
            self.log("warning", "cluster-suspect", f"cluster {cluster} does not answer: {error}", cluster=cluster)
        elif state == "down":
            self.metrics.alerts.labels("cluster_down").inc()
            self.log(
                "error", "cluster-down",
                f"cluster {cluster} has been down for {down_for:.0f} s (detect_after_s {self.policy.detect_after_s:g}): "
                f"{error}. "
                + (
                    "Mode automatic: the passive site's controller decides (automatic-* events)"
                    if self.policy.mode == "automatic"
                    else "No action taken (this controller detects and alerts; fail over by hand: "
                    f"`drctl failover --stack {self.ref.name} --mode unplanned --dry-run`)"
                ),
                cluster=cluster,
            )  # fmt: skip
        elif before is not None:
            self.log("info", "cluster-up", f"cluster {cluster} answers again", cluster=cluster)

    def _broker_fence_state(self, estate: Estate, site: str) -> None:
        """Whether the site's brokers run the broker-side lease fence, from their own describeConfigs: a
        metric, and a log line when the answer changes (a warning when it does not match the policy)."""
        try:
            classes = broker_authorizers(estate.endpoint(site), timeout_s=self.interval_s)
        except DRError:
            return
        fenced = bool(classes) and all(c == LEASE_FENCE_AUTHORIZER for c in classes.values())
        others = sorted({c or "none" for c in classes.values() if c != LEASE_FENCE_AUTHORIZER})
        self.metrics.broker_fence.labels(site).set(1 if fenced else 0)
        if fenced and self.witness is not None and self.permit_file is None and not self.cluster.is_local:
            why = (
                "runs the broker-side lease fence, but this controller writes no lease permit for it: application "
                "writes are refused there; pass --lease-permit-file (the brokers' kdr.lease.permit.file)"
            )
            level = "error"
        elif fenced:
            why, level = f"runs the broker-side lease fence ({LEASE_FENCE_AUTHORIZER}) on every broker", "info"
        elif self.policy.broker_fence:
            why = (
                f"does not run the broker-side lease fence (authorizer: {', '.join(others)}): mode automatic, but a "
                "frozen site may acknowledge writes after its lease expired; install it (runbooks/controller.md, section 5)"
            )
            level = "warning"
        else:
            why, level = (
                f"has no broker-side lease fence (authorizer: {', '.join(others)}; mode {self.policy.mode})",
                "info",
            )
        if self._broker_fence != (fenced, why):
            self.log(level, "broker-fence", f"cluster {site} {why}", cluster=site, broker_fence=fenced)
        self._broker_fence = (fenced, why)

    def _fence_state(self, estate: Estate, site: str) -> None:
        from dr.failover.act.fencing import write_bindings

        writers = [a.name for a in self.topology.principals.applications if a.writes]
        if not writers:
            return
        try:
            held = write_bindings(estate.endpoint(site), writers)
        except DRError:
            return
        self.metrics.app_writes.labels(site).set(1 if held else 0)
