"""After each pass's status report: the metrics read from what the product keeps beside it (lag in seconds,
RPO estimate, audits, last drill, certificates, the endpoint's target) — :mod:`dr.controller.readings`
does the reading, this sets the gauges."""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from prometheus_client import Gauge

from dr.base.errors import ClusterError, ConfigError
from dr.controller.metrics import ControllerMetrics
from dr.controller.readings import (
    EndHistory,
    RpoReading,
    age,
    copied_positions,
    drill_reading,
    lag_seconds,
    read_audit,
    rpo_reading,
)
from dr.estate.estate import Estate
from dr.failover.act.snapshots import kept_offsets, last_offsets, write_rate
from dr.failover.drill.last import last_drill
from dr.failover.record.metrics import Offsets, decode_offsets
from dr.failover.status import LinkStatus, StatusReport
from dr.topology import Topology
from dr.topology.cert_expiry import certificate_expiries
from dr.topology.kinds import LinkState

__all__ = ["StatusFeed"]

_VERDICTS = ("clean", "missing")
_GRADES = ("PASS", "FAIL", "INCOMPLETE")


class StatusFeed:
    """The metrics beside ``drctl status``'s of one controller (see the module doc)."""

    def __init__(self, metrics: ControllerMetrics, topology: Topology, stack: str, state: Path) -> None:
        self.metrics, self.topology, self.stack, self.state = metrics, topology, stack, state
        self.ends = EndHistory()
        self.rpo: dict[str, RpoReading] = {}
        """This pass's RPO reading of each running link, by link name (the automatic failover's budget check
        falls back on it when it never saw the link's live lag: a controller started after the source died)."""
        self._shown = _Shown()
        for c in topology.clusters:  # what drctl status saw before this controller started
            for at, offsets in kept_offsets(state, c.name):
                self.ends.observe(c.name, at, offsets)
        if (budget := topology.failover_policy.max_rpo_records) is not None:
            metrics.rpo_budget.set(budget)

    def update(self, report: StatusReport, estate: Estate) -> None:
        """Set every gauge of this feed from ``report`` and the files beside it."""
        now = time.time()
        ends = {c.name: decode_offsets(c.end_offsets) for c in report.clusters if c.end_offsets is not None}
        for cluster, offsets in ends.items():
            self.ends.observe(cluster, now, offsets)
        self._links(report, ends, estate, now)
        self._audits(now)
        self._drill(now)
        self._certificates()
        self._endpoint(report)

    def _links(self, report: StatusReport, ends: Mapping[str, Offsets], estate: Estate, now: float) -> None:
        m = self.metrics
        lag_s: dict[tuple[str, ...], float] = {}
        rpo: dict[tuple[str, ...], float] = {}
        upper: dict[tuple[str, ...], float] = {}
        self.rpo = {}
        for link in report.links:
            labels = (link.name, link.source, link.target)
            if link.lag is not None and link.source in ends and link.error is None:
                copied = copied_positions(ends[link.source], link.lag)
                lag_s[labels] = lag_seconds(self.ends.of(link.source), copied, ends[link.source], now)
            if link.state is not LinkState.RUNNING:
                continue  # a promoted or kept link protects nothing now
            found = rpo_reading(
                link.total_lag if link.source in ends else None,
                snapshot=last_offsets(self.state, link.source),
                target_end=ends.get(link.target),
                copied=partial(_copied, estate, link),
                write_rate=write_rate(self.state, link.source),
                now=now,
            )
            self.rpo[link.name] = found
            if found.records is not None:
                rpo[labels] = found.records
            if found.upper_bound is not None:
                upper[labels] = found.upper_bound
        self._shown.replace(m.link_lag_seconds, lag_s)
        self._shown.replace(m.rpo_records, rpo)
        self._shown.replace(m.rpo_upper, upper)

    def _audits(self, now: float) -> None:
        m = self.metrics
        for link in self.topology.links:
            try:
                found = read_audit(self.state, self.stack, link.name)
            except (ConfigError, ClusterError):
                found = None  # a link name that cannot name a file, the team database away: no figure this pass
            if found is None:
                continue
            for verdict in _VERDICTS:
                m.audit_verdict.labels(link.name, verdict).set(1 if verdict == found.verdict else 0)
            m.audit_missing.labels(link.name).set(found.missing)
            m.audit_age.labels(link.name).set(age(found.at, now))

    def _drill(self, now: float) -> None:
        m, found = self.metrics, drill_reading(last_drill(self.state))
        if found is None:
            return
        for grade in _GRADES:
            m.drill_grade.labels(grade).set(1 if grade == found.grade else 0)
        m.drill_passed.set(1 if found.passed else 0)
        if found.rto_s is not None:
            m.drill_rto.set(found.rto_s)
        m.drill_age.set(age(found.at, now))

    def _certificates(self) -> None:
        days: dict[tuple[str, ...], float] = {
            (c.cluster, c.use, c.subject, c.serial): c.days_left
            for c in certificate_expiries(self.topology, self.state)
        }
        self._shown.replace(self.metrics.cert_days, days)

    def _endpoint(self, report: StatusReport) -> None:
        at = (report.endpoint or {}).get("points_at") or []
        self._shown.replace(self.metrics.endpoint_target, {(cluster,): 1.0 for cluster in at})


class _Shown:
    """The label sets each labelled gauge serves: a pass sets the new values first, then removes the sets that
    are gone — never a moment without a series a scrape (and an alert's ``for``) depends on."""

    def __init__(self) -> None:
        self._sets: dict[int, set[tuple[str, ...]]] = {}

    def replace(self, gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
        """Serve exactly ``values`` (label values → value) on ``gauge``."""
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        for gone in self._sets.get(id(gauge), set()) - set(values):
            gauge.remove(*gone)
        self._sets[id(gauge)] = set(values)


def _copied(estate: Estate, link: LinkStatus) -> Offsets | None:
    """The link's committed source positions (what the unplanned failover estimates from), or None."""
    try:
        read = estate.copied_positions(link.name)
        return read() if read is not None else None
    except (ClusterError, ConfigError):
        return None
