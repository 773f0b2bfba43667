"""The controller's Prometheus metrics (``prometheus-client``), served at 127.0.0.1 on the site's declared port.

Every metric is prefixed ``kdr_``; ``runbooks/controller.md`` says what each means. The values come from the
controller's own probes (detection), from :func:`dr.failover.status.status_report` (links, readiness —
never computed a second time here), from the witness (lease) and, through :class:`dr.controller.feed.StatusFeed`,
from what the product keeps beside the status (lag in seconds, RPO estimate, audits, last drill, certificates,
the endpoint's target). ``kdr_automatic_failovers_total`` and ``kdr_self_fence_total`` are defined here for the
automatic failover and the self-fence to count on (the alert rules name them).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from dr.base.errors import ConfigError
from dr.controller.observe import Detection, Probe
from dr.controller.witness import Holding
from dr.failover.status import StatusReport
from dr.topology.failover_policy import METRICS_ADDRESS

__all__ = ["ControllerMetrics", "MetricsServer"]

_DETECTIONS: tuple[Detection, ...] = ("up", "suspect", "down")


class ControllerMetrics:
    """The gauges and counters of one controller, in a registry of their own."""

    def __init__(self, stack: str, site: str, mode: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        info = Gauge(
            "kdr_controller_info", "The controller: stack, site, policy mode.", ["stack", "site", "mode"], registry=r
        )
        info.labels(stack, site, mode).set(1)
        self.cluster_up = Gauge("kdr_cluster_up", "1 when the cluster's last probe succeeded.", ["cluster"], registry=r)
        self.detection = Gauge(
            "kdr_detection_state", "1 for the cluster's detection state (up, suspect, down).", ["cluster", "state"],
            registry=r,
        )  # fmt: skip
        self.down_seconds = Gauge(
            "kdr_cluster_down_seconds", "How long the cluster has been failing.", ["cluster"], registry=r
        )
        self.canary = Gauge(
            "kdr_canary_produce_ok", "1 when the site's canary record was acknowledged.", ["cluster"], registry=r
        )
        self.app_writes = Gauge(
            "kdr_app_writes_allowed",
            "Fence state: 1 when applications hold write ACLs on the site's cluster, 0 when it is fenced.",
            ["cluster"],
            registry=r,
        )
        self.link_state = Gauge("kdr_link_state", "1 for the link's declared state.", ["link", "state"], registry=r)
        self.link_running = Gauge(
            "kdr_link_running", "1 when a link the topology says runs copies (no problem in drctl status).", ["link"],
            registry=r,
        )  # fmt: skip
        self.link_lag = Gauge(
            "kdr_link_lag_records", "Records the link's target lacks (as drctl status measures them).",
            ["link", "source", "target"], registry=r,
        )  # fmt: skip
        self.link_restarts = Gauge(
            "kdr_link_watchdog_restarts", "How often the link's watchdog restarted its process.", ["link"], registry=r
        )
        self.ready = Gauge("kdr_ready", "1 when drctl status finds no problem.", registry=r)
        self.parity = Gauge(
            "kdr_parity_differences",
            "Differences between the clusters the links join at the last parity check (drctl status --parity), "
            "served by the controller of a link's target site only.",
            ["cluster"],
            registry=r,
        )
        self.parity_age = Gauge(
            "kdr_parity_timestamp_seconds", "When the last parity check ended.", ["cluster"], registry=r
        )
        self.problem = Gauge(
            "kdr_problem", "1 per problem drctl status lists (its text as the reason).", ["reason"], registry=r
        )
        self.status_age = Gauge("kdr_status_timestamp_seconds", "When the status was last read.", registry=r)
        self.witness_up = Gauge("kdr_witness_up", "1 when the witness answered the last request.", registry=r)
        self.lease_held = Gauge("kdr_lease_held", "1 when this controller holds the stack's lease.", registry=r)
        self.lease_holder = Gauge("kdr_lease_holder", "1 for the lease's current holder.", ["holder"], registry=r)
        self.lease_token = Gauge("kdr_lease_token", "The lease's fencing token (grows with every holder).", registry=r)
        self.lease_age = Gauge("kdr_lease_age_seconds", "Seconds since the current holder took the lease.", registry=r)
        self.alerts = Counter("kdr_alerts", "Alerts the controller raised, by kind.", ["kind"], registry=r)
        self.link_lag_seconds = Gauge(
            "kdr_link_lag_seconds",
            "At least how long the oldest record the link's target lacks has been on its source (one pass late).",
            ["link", "source", "target"], registry=r,
        )  # fmt: skip
        self.rpo_records = Gauge(
            "kdr_rpo_estimate_records",
            "Records the link's target would lack if its source were lost now (the unplanned failover's estimate).",
            ["link", "source", "target"], registry=r,
        )  # fmt: skip
        self.rpo_upper = Gauge(
            "kdr_rpo_estimate_upper_records",
            "The estimate's upper bound (adds the source's last write rate over the snapshot's age).",
            ["link", "source", "target"], registry=r,
        )  # fmt: skip
        self.rpo_budget = Gauge(
            "kdr_rpo_budget_records", "The declared failover_policy.max_rpo_records (absent when undeclared).",
            registry=r,
        )  # fmt: skip
        self.audit_verdict = Gauge(
            "kdr_audit_verdict", "1 for the verdict of the link's audits (clean, missing).", ["link", "verdict"],
            registry=r,
        )  # fmt: skip
        self.audit_missing = Gauge(
            "kdr_audit_missing_records", "Records the link's audits found missing on its target.", ["link"], registry=r
        )
        self.audit_age = Gauge(
            "kdr_audit_age_seconds", "Seconds since the link's last audit (drctl audit).", ["link"], registry=r
        )
        self.drill_grade = Gauge(
            "kdr_drill_grade", "1 for the last drill's grade (PASS, FAIL, INCOMPLETE).", ["grade"], registry=r
        )
        self.drill_passed = Gauge("kdr_drill_passed", "1 when the last drill passed.", registry=r)
        self.drill_rto = Gauge("kdr_drill_rto_seconds", "The last drill's RTO (its worst application RTO).", registry=r)
        self.drill_age = Gauge("kdr_drill_age_seconds", "Seconds since the last drill finished.", registry=r)
        self.cert_days = Gauge(
            "kdr_certificate_days_left", "Days until the certificate expires (drctl certificates).",
            ["cluster", "use", "subject", "serial"], registry=r,
        )  # fmt: skip
        self.endpoint_target = Gauge(
            "kdr_endpoint_target", "1 for each cluster the stack's client endpoint points at.", ["cluster"],
            registry=r,
        )  # fmt: skip
        self.automatic_failovers = Counter(
            "kdr_automatic_failovers",
            "Automatic failovers, by outcome: started, resumed, completed, failed, lease-held-elsewhere.",
            ["outcome"],
            registry=r,
        )
        for outcome in ("started", "resumed", "completed", "failed", "lease-held-elsewhere"):  # present from the start
            self.automatic_failovers.labels(outcome)
        self.automatic_refusals = Counter(
            "kdr_automatic_refusals", "Automatic failovers refused (a person is paged), by reason.", ["reason"],
            registry=r,
        )  # fmt: skip
        for reason in ("cooldown", "lag-unknown", "rpo-over-budget"):
            self.automatic_refusals.labels(reason)
        self.broker_fence = Gauge(
            "kdr_broker_fence",
            "1 when every broker of the site runs the broker-side lease fence (its authorizer.class.name), 0 when not.",
            ["cluster"],
            registry=r,
        )
        self.permit_until = Gauge(
            "kdr_lease_permit_until_seconds",
            "Until when the lease permit this controller wrote lets the site's brokers take application writes "
            "(seconds since the epoch; 0 revoked).",
            registry=r,
        )
        self.self_fences = Counter(
            "kdr_self_fence", "Times this controller fenced its own site (it could not keep its lease).", registry=r
        )

    def observed(self, probe: Probe, state: Detection, down_for: float) -> None:
        """One probe of a cluster and its detection state."""
        self.cluster_up.labels(probe.cluster).set(1 if probe.up else 0)
        for s in _DETECTIONS:
            self.detection.labels(probe.cluster, s).set(1 if s == state else 0)
        self.down_seconds.labels(probe.cluster).set(down_for)

    def status(self, report: StatusReport, link_problems: dict[str, bool], parity: list[str] | None = None) -> None:
        """What ``drctl status`` found: links, readiness and its problems — with ``parity``, the last parity
        check's differences among them."""
        self.link_state.clear()
        self.link_lag.clear()
        for link in report.links:
            self.link_state.labels(link.name, link.state.value).set(1)
            self.link_running.labels(link.name).set(0 if link_problems.get(link.name) else 1)
            if link.total_lag is not None:
                self.link_lag.labels(link.name, link.source, link.target).set(link.total_lag)
            self.link_restarts.labels(link.name).set(link.restarts or 0)
        problems = [*report.problems, *(parity or [])]
        self.ready.set(0 if problems else 1)
        self.problem.clear()
        for reason in problems:
            self.problem.labels(reason).set(1)
        self.status_age.set(time.time())

    def lease(self, witness_up: bool, current: Holding | None, mine: Holding | None) -> None:
        """The witness's answer: who holds the lease, since when, whether it is this controller."""
        self.witness_up.set(1 if witness_up else 0)
        if not witness_up:
            return
        self.lease_held.set(1 if mine is not None and current is not None and current.token == mine.token else 0)
        self.lease_holder.clear()
        if current is not None:
            self.lease_holder.labels(current.holder).set(1)
            self.lease_token.set(current.token)
            self.lease_age.set(max(0.0, time.time() - current.acquired_at))
        else:
            self.lease_age.set(0)


class MetricsServer:
    """The HTTP server of a registry on 127.0.0.1:``port``; a port taken is :class:`ConfigError` (exit 2)."""

    def __init__(self, metrics: ControllerMetrics, port: int, field_name: str) -> None:
        try:
            self._server: Any
            self._server, self._thread = start_http_server(port, addr=METRICS_ADDRESS, registry=metrics.registry)
        except OSError as exc:
            raise ConfigError(
                f"the controller's metrics port {METRICS_ADDRESS}:{port} ({field_name}) cannot be bound: "
                f"{exc.strerror or exc}; nothing was started",
                f"stop what listens there (`ss -ltnp 'sport = :{port}'`) or declare another port in {field_name}",
            ) from None
        self.port = port

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
