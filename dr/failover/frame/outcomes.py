"""What each failover step found and did, as typed models (:attr:`dr.failover.frame.step.StepResult.outcome`).

The journal keeps the JSON form, :meth:`Outcome.journaled`: the fields a step set, in the order they
are declared here — the keys and order the steps wrote as dicts before, so a journal written before
these models and one written after read alike (the journal reads a step's outcome as plain JSON).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

from dr.base.types import Model
from dr.failover.act.endpoint_switch import EndpointSwitch
from dr.failover.act.groups import GroupState
from dr.failover.act.integrity import Verdict
from dr.failover.record.metrics import RpoEstimate
from verification.result import StartedFrom

__all__ = [
    "ClientsOutcome",
    "ConsumerGroupsOutcome",
    "DecommissionDeferred",
    "DecommissionOutcome",
    "DesiredStateOutcome",
    "Drained",
    "FenceOnly",
    "FenceSkipped",
    "FilesSeen",
    "GroupLine",
    "GroupPending",
    "GroupsSeen",
    "IntegrityDeferred",
    "IntegrityOutcome",
    "IntegritySeen",
    "IntegritySkipped",
    "LinkState",
    "OpenTransactions",
    "Outcome",
    "OutcomeSeen",
    "PreflightOutcome",
    "PromoteOutcome",
]


class Outcome(Model):
    """A step's outcome; :meth:`journaled` is the JSON the journal keeps."""

    def journaled(self) -> dict[str, Any]:
        """The fields that were set, in declaration order, as JSON (nested outcomes likewise)."""
        full = self.model_dump(mode="json")
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name in self.model_fields_set:
                value = getattr(self, name)
                out[name] = value.journaled() if isinstance(value, Outcome) else full[name]
        return out


class OutcomeSeen(Model):
    """The part of a step's outcome that a reader of any journal needs (the summary, the verdict): the
    other fields are ignored, and a field is absent when the step has not run or when the step of that
    name in this run's kind records another shape (a site's loss journals its ``details``)."""

    model_config = ConfigDict(extra="ignore")


class GroupLine(BaseModel):
    """A consumer group's state at promotion (:func:`dr.failover.act.groups.describe_group`, abridged)."""

    group: str
    status: str
    rereads: int | None = None
    would_skip: dict[str, int] | None = None
    consumers_will: str | None = None


class GroupsSeen(OutcomeSeen):
    """The groups of a ``consumer-groups`` outcome (:class:`ConsumerGroupsOutcome`), abridged."""

    groups: list[GroupLine] | None = None


class FilesSeen(OutcomeSeen):
    """The files of a ``clients`` outcome (:class:`ClientsOutcome`)."""

    files: list[dict[str, str]] | None = None


class IntegritySeen(OutcomeSeen):
    """The verdict, or the reason there is none, of an ``integrity`` outcome."""

    verdict: Verdict | None = None
    reason: str | None = None


# ---------------------------------------------------------------------------------- 1 preflight
class LinkState(Outcome):
    """The link A→B at preflight: its name and, when it runs here, its process (and Connect cluster)."""

    name: str
    process: str | None = None
    connect: str | None = None


class PreflightOutcome(Outcome):
    """B's health, A's reachability, the link's lag and the RPO estimate."""

    source: dict[str, Any]
    """A's name and :func:`~dr.failover.act.health.reachability`."""
    target: dict[str, Any]
    """B's name and :class:`~dr.failover.act.health.ClusterHealth` as JSON."""
    link: LinkState
    target_end_offsets: dict[str, int]
    source_end_offsets: dict[str, int] | None = None
    lag: dict[str, int] | None = None
    lag_total: int | None = None
    rpo_estimate: RpoEstimate | None = None


# ---------------------------------------------------------------------------------- 2 fence + drain
class FenceOnly(Outcome):
    """Unplanned, A answered: fenced, not drained."""

    fenced: bool
    removed_acls: int
    drained: bool


class FenceSkipped(Outcome):
    """Unplanned, A unreachable: neither fenced nor drained."""

    fenced: bool
    drained: bool
    reason: str


class GroupPending(Outcome):
    """A synced group whose translated offsets were not settled on B."""

    rereads: int | None
    missing_on_target: list[str]
    undiscovered: bool


class Drained(Outcome):
    """Planned: A fenced, the link drained (or not, with ``--force``), the groups' offsets waited for."""

    fenced: bool
    removed_acls: int
    drained: bool
    drain_s: float
    residual_lag: dict[str, int]
    source_end_offsets: dict[str, int]
    groups_synced: bool
    group_wait_s: float
    groups_pending: dict[str, GroupPending]


# ---------------------------------------------------------------------------------- 3 promote
class OpenTransactions(TypedDict):
    """What a link writing in transactions left open on B once stopped (``"topic:partition"`` → first
    offset), what was aborted, and the seconds waited."""

    found: dict[str, int]
    aborted: dict[str, int]
    waited_s: float


class PromoteOutcome(Outcome):
    """The link stopped and B made writable."""

    link_stopped: str
    link_was_running: bool
    link_stop_s: float
    link_stop: str
    acls_granted: int
    writable_from_ms: int
    target_until_taken: bool | None = None
    """B's end offsets were journaled before the grant (``measurements.target_until``): the verification reads
    B only below them; False when B did not answer then (time cut-off only); None in a journal from before."""
    edge_links_stopped: list[str] | None = None
    """Hub-and-spoke: the edges' links into the old hub, stopped (:mod:`dr.failover.act.edge_resume`)."""
    edge_resume: list[dict[str, Any]] | None = None
    """Hub-and-spoke: per edge partition, where its link resumes on the new hub."""
    endpoint: EndpointSwitch | None = None
    """With a client endpoint: where it pointed before, the cluster it points at now, the switch's seconds."""
    open_transactions: OpenTransactions | None = None
    """A link writing in transactions: what it left open on B once stopped (partition → first offset),
    what was aborted, and the seconds waited (:func:`dr.failover.kinds.active_passive.steps.close_open_transactions`)."""


# ---------------------------------------------------------------------------------- 4 clients
class ClientsOutcome(Outcome):
    """The client configurations published for B (paths, never passwords)."""

    files: list[dict[str, str]]


# ---------------------------------------------------------------------------------- 5 consumer groups
class ConsumerGroupsOutcome(Outcome):
    """Each application group's translated offsets on B (:func:`~dr.failover.act.groups.describe_group`)."""

    groups: list[GroupState]
    without_offsets: list[str]
    would_skip: list[str]
    rereads_total: int | None
    source_readable: bool


# ---------------------------------------------------------------------------------- 6 desired state
class DesiredStateOutcome(Outcome):
    """The new topology written to the stack file and converged."""

    stack_file: str
    written: bool
    backup: str
    converger: str
    timings: dict[str, float]
    roles: dict[str, str]
    links: list[str]
    recovered: list[str] = Field(default_factory=list)
    """What the stack driver repaired after a killed engine (stale lock, interrupted operations), one line each."""


# ---------------------------------------------------------------------------------- 7 integrity
class IntegritySkipped(Outcome):
    """``--skip-verify``: no verdict."""

    verdict: None = None
    reason: str
    fenced_on_return: int


class IntegrityDeferred(Outcome):
    """A unreadable: the verification waits for the next run."""

    verdict: None = None
    reason: str


class IntegrityOutcome(Outcome):
    """The verification of A vs B: its verdict, the cut-off, and the audit it started from (if any)."""

    verdict: Verdict
    fenced_on_return: int
    cutoff_ms: int | None
    cutoff_utc: str | None
    started_from: StartedFrom | None


# ---------------------------------------------------------------------------------- 8 decommission
class DecommissionDeferred(Outcome):
    """A kept: no clean verdict and no ``--force-decommission``."""

    reason: str
    stopped: bool


class DecommissionOutcome(Outcome):
    """A stopped (local) or left to its own tooling (external), and declared decommissioned."""

    forced: bool
    stopped: bool | None = None
    access_forgotten: bool | None = None
    """External A: the stack no longer manages its users, topics and ACLs (nothing on it deleted)."""
    data_kept: str | bool | None = None
    """Local A: where its data stays; external A: True (its topics and data are untouched)."""
    fenced: bool | None = None
    note: str | None = None
    role: str | None = None
