"""The drill's graded result as typed models: what ``drill.json`` holds and what ``drctl drill`` prints.

Every figure the text shows comes from these models, so a dict where a model is expected is a
``mypy`` error, not a crash after a passing drill (issue 25).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dr.base.types import Model as _Model
from dr.failover.act.integrity import RecoveryReport, Verdict
from dr.failover.drill.phases import Phase
from dr.failover.frame.summary import FailoverSummary
from dr.failover.lifecycle import StandbyRebuild
from dr.failover.record.metrics import RpoEstimate
from dr.topology import Delivery

__all__ = [
    "ApplicationRto",
    "Check",
    "ConsumerReport",
    "DrillCycle",
    "DrillResult",
    "EndpointClientsReport",
    "FirstRun",
    "LinkRestart",
    "Phase",
    "ProducerReport",
    "RecoveryReport",
    "ReplicatorCrash",
    "RpoFigures",
    "StandbyRebuild",
    "Unattended",
]


class ApplicationRto(_Model):
    """One application's outage, measured on its own traffic."""

    application: str
    """The producing application, or the consumer group."""
    kind: Literal["writes", "reads"]
    source: str
    target: str
    last_on_source: float | None
    """Epoch seconds of the last write acknowledged (writes) or offset commit (reads) on the source."""
    first_on_target: float | None
    """Epoch seconds of the first write acknowledged (writes) or record read (reads) on the target."""
    measured: str
    """What the figure spans, in words."""
    rto_s: float | None
    data_gap_s: float | None = None
    """Reads only: the last record read on the source → the first record read on the target."""


class LinkRestart(_Model):
    """A dedicated link's process started again by its watchdog during the drill, after a task died."""

    link: str
    at: str
    """When (UTC, ISO 8601)."""
    tasks: dict[str, str]
    """Each dead task and its root cause."""


class Check(_Model):
    """One graded check. A timing aim (``aim``) that was measured but not met is ``MISSED``: printed and
    kept in ``drill.json``, it fails the drill only under ``drctl drill --strict-aims`` (load alone can
    miss an aim; the correctness checks never depend on the machine's speed). An aim not measured fails."""

    check: str
    result: Literal["PASS", "FAIL", "MISSED", "n/a"]
    aim: bool = False


class ProducerReport(_Model):
    """What the producing application's ledger holds."""

    acked_on_source: int
    acked_on_target: int
    not_acknowledged: int
    moved_at: list[float]
    """When it moved to another cluster (epoch seconds)."""


class ConsumerReport(_Model):
    """What the consumer group read, against what the target finally holds."""

    group: str
    read_on_source: int
    read_on_target: int
    read_twice: int
    skipped: int
    records_on_target: int


class EndpointClientsReport(_Model):
    """The clients that know only the client endpoint's address (started once, never restarted) through
    one cycle's switch: the "unmodified client RTO" beside the published-configuration one (issue 31)."""

    bootstrap: str
    target: str
    switched_at: float | None
    """Epoch seconds of the endpoint's switch (the promote step's journal); None: it did not switch."""
    producer: str
    acked_before_switch: int
    acked_after_switch: int
    acknowledged_lost: int
    """Acknowledged this cycle and not on the target after recovery (must be 0)."""
    lost_sample: list[str] = Field(default_factory=list)
    producer_fatal: str | None = None
    writes_rto_s: float | None
    """The last acknowledgement through the endpoint before the switch → the first after it."""
    first_write_after_switch_at: float | None = None
    """Epoch seconds of the first acknowledgement through the endpoint after the switch (None: none)."""
    group: str | None = None
    read: int = 0
    read_twice: int = 0
    skipped: int = 0
    """Records on the target acknowledged this cycle that the consumer never read (must be 0)."""
    reads_rto_s: float | None = None
    """The last record read through the endpoint before the switch → the first after it."""


class RpoFigures(_Model):
    """The failover's RPO estimate beside the records that really never reached the target."""

    estimate: int | None
    estimate_upper_bound: int | None
    estimate_basis: str | None
    actual_never_replicated: int
    acknowledged_lost_before_recovery: int


class FirstRun(_Model):
    """The failover's first run, before A came back (unplanned) or the recovery re-ran it."""

    status: str
    rto_s: float | None
    a_b_c_s: float | None
    rpo_estimate: RpoEstimate | None


class ReplicatorCrash(_Model):
    """What ``--kill-replicator`` did to a cycle's link, and what it left on the target."""

    link: str
    delivery: Delivery
    killed: str
    """What was SIGKILLed: ``MirrorMaker 2 process`` or ``Connect worker <id>``."""
    acknowledged_before_kill: int
    """Records the drill's producer had acknowledged on the source when the replicator died."""
    running_again_s: float
    """From the SIGKILL until the link copied again."""
    duplicated: int | None = None
    """Records the failover's verification found more than once on the target (None: no verification)."""


class Unattended(_Model):
    """An automatic drill's failover, made by the passive site's controller with nobody typing anything
    (``drctl drill --unplanned --automatic``): seconds from the instant site A was lost (its brokers and its
    controller SIGKILLed together)."""

    detect_after_s: float
    """The policy's ``detect_after_s`` the controllers ran with."""
    acted_by: str | None
    """Who started the failover (the journal's ``started_by``: ``controller <holder>``); None: nobody did."""
    fencing_token: int | None
    """The lease revision the failover carried."""
    detection_s: float | None
    """Site lost → the controller started the journaled unplanned failover."""
    promotion_s: float | None
    """Site lost → the promote step finished."""
    unattended_rto_s: float | None
    """Site lost → the first write of the application on its published file acknowledged on B."""
    writes_on_source_after_promotion: int
    """Writes the application's own ledger has acknowledged by A after B's promotion (must be 0)."""
    endpoint_unattended_rto_s: float | None = None
    """Site lost → the first write acknowledged through the client endpoint after its switch (the unmodified
    client's unattended RTO); None when the stack has no endpoint or nothing was acknowledged after it."""
    controller_logs: list[str] = Field(default_factory=list)
    """The controllers' JSON-line logs, under ``<out>/controllers``."""


class DrillCycle(_Model):
    """One failover of the drill, graded."""

    number: int
    chain: str
    source: str
    target: str
    standby: str | None
    topic: str
    failover_first_run: FirstRun
    failover: FailoverSummary
    """The failover's summary after its last run in this cycle."""
    verification_exact: bool
    never_reached_target: int
    lost_before_recovery: int
    lost_after_recovery: int
    verdicts: list[Verdict]
    recovery: RecoveryReport | None = None
    preview_after_failover: dict[str, int]
    producer: ProducerReport
    consumer: ConsumerReport | None
    application_rto: list[ApplicationRto]
    report_html: str | None
    rpo: RpoFigures
    grade: str
    checks: list[Check]
    standby_rebuild: StandbyRebuild | None = None
    endpoint_clients: EndpointClientsReport | None = None
    """With a client endpoint declared: its unmodified clients through this cycle's switch."""
    replicator_crash: ReplicatorCrash | None = None
    """With ``--kill-replicator``: the link's replicator SIGKILLed mid-copy, and the copies it left twice."""
    unattended: Unattended | None = None
    """With ``--automatic``: the failover the controller made by itself, timed from the site's loss."""

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return self.grade.startswith("PASS")


class DrillResult(_Model):
    """The whole drill: its cycles and the overall grade."""

    stack: str
    mode: Literal["planned", "unplanned"]
    out: str
    cycles: list[DrillCycle] = Field(default_factory=list)
    provision_s: dict[str, float] | None = None
    link_restarts: list[LinkRestart] = Field(default_factory=list)
    """Links whose watchdog restarted them during the drill (a task died; none lost or copied twice under
    exactly-once, but each is a finding for the team)."""
    seconds: float = 0.0
    phases: list[Phase] = Field(default_factory=list)
    """Where the drill's time went, in the order its phases ran (the teardown last)."""
    grade: str = "INCOMPLETE"

    @property
    def passed(self) -> bool:
        """The drill ran every cycle and each passed."""
        return self.grade.startswith("PASS")

    def conclude(self, cycles: int) -> None:
        """Grade the drill: every one of ``cycles`` ran and passed."""
        failed = [c.number for c in self.cycles if not c.passed]
        if not self.cycles:
            self.grade = "INCOMPLETE"
        elif cycles == 1:
            self.grade = self.cycles[0].grade
        elif failed:
            self.grade = f"FAIL (cycle {', '.join(map(str, failed))} of {cycles})"
        elif len(self.cycles) < cycles:
            self.grade = f"INCOMPLETE ({len(self.cycles)} of {cycles} cycles)"
        else:
            self.grade = f"PASS ({cycles} cycles)"

    def to_json(self) -> dict[str, Any]:
        """``drill.json``: the model, with a one-cycle drill's fields also at the top level
        (``failover``, ``checks``...), as readers of a one-cycle drill expect."""
        doc = self.model_dump(mode="json")
        if len(self.cycles) == 1:
            doc.update({k: v for k, v in doc["cycles"][0].items() if k not in ("number", "grade")})
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DrillResult:
        """The result a ``drill.json`` holds (:meth:`to_json`): a one-cycle drill's copies of its
        cycle's fields at the top level are left out, anything else unknown is refused."""
        copied = set(DrillCycle.model_fields) - set(cls.model_fields) if len(doc.get("cycles") or []) == 1 else set()
        return cls.model_validate({k: v for k, v in doc.items() if k not in copied})
