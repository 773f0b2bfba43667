"""The active site's self-fence: a controller that cannot renew its lease in time fences its own cluster.

Failing closed (runbooks/controller.md, "The self-fence"): the active site's controller renews the lease
every third of ``lease_ttl_s - margin_s``. When it has not renewed for ``lease_ttl_s - margin_s`` (the
witness does not answer it, or answers too slowly), or the witness says the lease expired or another
holder took it, it removes the application principals' write ACLs from its cluster — the planned
failover's fence (:func:`dr.failover.act.fencing.fence`), not a second one — so that by the time the lease
can expire, and another site can be promoted, the site acknowledges no application write. Not being able
to renew is enough: the active site cannot tell "I am cut off" from "the witness is down", and both
fail closed.

The fence is recorded durably, with the last fencing token the controller held, the reason, the moment
the fence was confirmed and the earliest moment the lease could expire (:class:`FenceRecord`): with a
``postgres://`` backend as ``kdr_event`` rows (``self-fence``, ``self-fence-lifted``), otherwise in
``<failover home>/failover/self-fence.json`` beside the failover journal. Not as a journal record: a
journal means a failover was started (``drctl status`` shows it, a resume continues it), which a fence
is not — and the lift rule below asks exactly whether one was started.

Lifting the fence is automatic only when it is safe (:func:`may_lift`): the controller holds the lease
again, no failover journal was created since the fence (every promotion is journaled), and the stack
file still names this site active. Otherwise the site stays fenced until an operator decides.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, Field

from dr.base.errors import DRError
from dr.base.files import private_dir, write_json
from dr.controller.witness import Holding
from dr.failover.act.fencing import fence, unfence
from dr.kafka.client import Endpoint

if TYPE_CHECKING:
    from dr.controller.metrics import ControllerMetrics
    from dr.failover.record.team_store import TeamStore

__all__ = [
    "FenceReason",
    "FenceRecord",
    "FenceStore",
    "SelfFence",
    "fence_reason",
    "may_lift",
    "renew_deadline",
    "renew_interval",
]

#: The controller's log (:class:`dr.controller.loop.Log`): ``log(level, event, message, **fields)``.
LogFn = Callable[..., None]

FenceReason = Literal["renew-deadline", "lease-lost", "lease-taken"]

#: The ``kdr_event`` kinds of the PostgreSQL store.
FENCED_EVENT, LIFTED_EVENT = "self-fence", "self-fence-lifted"


# ---------------------------------------------------------------------------------------- pure decisions
def renew_deadline(renewed_at: float, ttl_s: float, margin_s: float) -> float:
    """The moment (on ``renewed_at``'s clock: when the last successful renewal was *sent*) after which the
    holder fences itself. The witness counts the TTL from when it received that renewal, which is later:
    so the lease expires no earlier than ``renewed_at + ttl_s``, ``margin_s`` after this deadline."""
    return renewed_at + ttl_s - margin_s


def renew_interval(ttl_s: float, margin_s: float) -> float:
    """How often the holder renews: three tries before its fence deadline (and at most a third of the TTL)."""
    return max(0.2, min(ttl_s, ttl_s - margin_s) / 3)


def fence_reason(
    now: float, renewed_at: float | None, ttl_s: float, margin_s: float, *, lost: bool = False, taken: bool = False
) -> FenceReason | None:
    """Why the active site must fence itself now, or None.

    ``renewed_at``: when the last successful renewal (or the acquisition) was sent, None when it never held
    the lease (nothing to fence for: it never was allowed to act); ``lost``: the witness said the lease
    expired; ``taken``: the witness said another holder has it."""
    if renewed_at is None:
        return None
    if taken:
        return "lease-taken"
    if lost:
        return "lease-lost"
    if now >= renew_deadline(renewed_at, ttl_s, margin_s):
        return "renew-deadline"
    return None


class FenceRecord(BaseModel):
    """One self-fence, as recorded in the stack's backend."""

    cluster: str
    holder: str
    """The controller that fenced (``<operator>/<site>``)."""
    token: int
    """The last fencing token this controller held."""
    reason: FenceReason
    fenced_at: float
    """Seconds since the epoch when the fence was confirmed (no application write ACL left)."""
    last_renewed_at: float
    """Seconds since the epoch when the last successful renewal (or the acquisition) was sent."""
    lease_expires_at: float
    """The earliest moment the lease could expire (the last renewal sent + TTL): the fence came before it
    when ``fenced_at`` is smaller."""
    removed: list[dict[str, str]] = Field(default_factory=list)
    """The write ACLs the fence removed (what lifting it re-creates)."""
    lifted_at: float | None = None
    lifted_token: int | None = None
    """The token held again when the fence was lifted."""


def may_lift(
    record: FenceRecord,
    holding: Holding | None,
    current: Holding | None,
    journal: tuple[float, str] | None,
    site_is_active: bool,
) -> tuple[bool, str]:
    """Whether the controller may lift its own fence, and why (or why not).

    Only when it holds the lease again (``holding`` is what the witness says holds it, ``current``), no
    failover was started since it last renewed before the fence and none is unfinished (``journal``: the
    stack's current journal's creation time and status, None when none — every promotion goes through a
    journaled failover) and the stack file still names this site active."""
    if record.lifted_at is not None:
        return False, "the fence is already lifted"
    if holding is None or current is None or current.token != holding.token:
        return False, "this controller does not hold the lease"
    if journal is not None and (journal[0] >= record.last_renewed_at or journal[1] != "completed"):
        return False, f"a failover was started since the fence or is unfinished ({journal[1]}): an operator decides"
    if not site_is_active:
        return False, "the stack file no longer names this site active: an operator decides"
    return True, f"the lease is held again (token {holding.token}), no failover was started and the site is active"


# ---------------------------------------------------------------------------------------- the record
class FenceStore:
    """Where the stack's self-fence records live: the team database's ``kdr_event`` or ``self-fence.json``."""

    def __init__(self, home: Path, stack: str, team: TeamStore | None) -> None:
        self.path = Path(home) / "failover" / "self-fence.json"
        self.stack, self.team = stack, team

    def latest(self) -> FenceRecord | None:
        """The last self-fence recorded (lifted or not), or None."""
        if self.team is not None:
            events = [e for e in self.team.events(self.stack) if e["kind"] in (FENCED_EVENT, LIFTED_EVENT)]
            if not events:
                return None
            return FenceRecord.model_validate(events[-1]["detail"])  # the database's identity keys are ignored
        if not self.path.exists():
            return None
        doc = json.loads(self.path.read_text())
        return FenceRecord.model_validate(doc["current"]) if doc.get("current") else None

    def save(self, record: FenceRecord, actor: str) -> None:
        """Record ``record`` (a new fence, or its lifting) durably; earlier records stay in the history."""
        if self.team is not None:
            kind = LIFTED_EVENT if record.lifted_at is not None else FENCED_EVENT
            self.team.record_event(self.stack, kind, actor, cast(Any, record.model_dump(mode="json")))
            return
        history: list[Any] = []
        if self.path.exists():
            old = json.loads(self.path.read_text())
            history = list(old.get("history") or [])
            previous = old.get("current")
            if previous and (previous.get("fenced_at") != record.fenced_at):
                history.append(previous)
        private_dir(self.path.parent)
        write_json(self.path, {"current": record.model_dump(mode="json"), "history": history})


# ---------------------------------------------------------------------------------------- the act
class SelfFence:
    """The active site's fail-closed fence (see the module doc): a watchdog thread beside the lease keeper
    that fences at the renew deadline, and :meth:`lease_lost` / :meth:`lease_regained` the keeper calls."""

    def __init__(
        self,
        *,
        cluster: str,
        holder: str,
        endpoint: Callable[[], Endpoint],
        principals: list[str],
        store: FenceStore,
        ttl_s: float,
        margin_s: float,
        lift_allowed: Callable[[FenceRecord, Holding], tuple[bool, str]],
        log: LogFn,
        metrics: ControllerMetrics,
    ) -> None:
        self.cluster, self.holder, self.endpoint, self.principals = cluster, holder, endpoint, principals
        self.store, self.ttl_s, self.margin_s, self.lift_allowed = store, ttl_s, margin_s, lift_allowed
        self.log, self.metrics = log, metrics
        self.total = metrics.self_fences
        self._lock = threading.Lock()
        self._renewed_mono: float | None = None
        self._renewed_wall = 0.0
        self._token = 0
        self._refused = ""
        self._failing = ""
        self._owed: FenceReason | None = None
        latest = store.latest()
        # the store keeps the stack's last fence: another site's (the old active's, after a failover) is not ours
        self.record = latest if latest is not None and latest.cluster == cluster else None
        self.fenced = self.record is not None and self.record.lifted_at is None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kdr-controller-fence", daemon=True)

    @property
    def owed(self) -> bool:
        """A fence was due and has not been confirmed yet (it failed and is retried): the lease permit is
        withheld meanwhile, even when the lease is held again (:mod:`dr.controller.permit`)."""
        return self._owed is not None and not self.fenced

    @property
    def interval_s(self) -> float:
        """How often the keeper must renew (:func:`renew_interval`)."""
        return renew_interval(self.ttl_s, self.margin_s)

    def start(self) -> None:
        """Start the watchdog; a fence recorded and not lifted (a controller restarted while fenced) stays."""
        if self.fenced and self.record is not None:
            self.log(
                "warning", "self-fence-kept",
                f"cluster {self.cluster} was fenced by its controller ({self.record.reason}, token "
                f"{self.record.token}); it stays fenced until the lease is held again and nothing was failed over",
                token=self.record.token,
            )  # fmt: skip
            self.metrics.app_writes.labels(self.cluster).set(0)
        self._thread.start()

    def stop(self) -> None:
        """Stop the watchdog."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def renewed(self, holding: Holding, sent_mono: float, sent_wall: float) -> None:
        """The keeper renewed (or took) ``holding`` with a request sent at these instants."""
        with self._lock:
            self._renewed_mono, self._renewed_wall, self._token = sent_mono, sent_wall, holding.token

    def lease_lost(self, *, taken: bool) -> None:
        """The witness said the lease expired (``taken``: another holder has it): fence now."""
        self.check(lost=not taken, taken=taken)

    def lease_regained(self, holding: Holding) -> None:
        """The keeper holds ``holding``: lift a standing fence if :func:`may_lift` allows it."""
        with self._lock:
            record = self.record
            if not self.fenced or record is None:
                return
            ok, why = self.lift_allowed(record, holding)
            if not ok:
                if self._refused != why:
                    self.log(
                        "warning", "self-fence-kept", f"the fence of {self.cluster} stays: {why}", token=record.token
                    )
                self._refused = why
                return
            try:
                restored = unfence(self.endpoint(), record.removed)
            except DRError as exc:
                self.log("error", "self-fence-lift-failed", f"lifting the fence failed, retried: {exc.problem}")
                return
            lifted = record.model_copy(update={"lifted_at": time.time(), "lifted_token": holding.token})
            self.store.save(lifted, self.holder)
            self.record, self.fenced = lifted, False
        self.metrics.app_writes.labels(self.cluster).set(1)
        self.log(
            "info", "self-fence-lifted", f"the fence of {self.cluster} is lifted ({restored} write ACLs back): {why}",
            token=holding.token, fenced_token=record.token,
        )  # fmt: skip

    def check(self, *, lost: bool = False, taken: bool = False) -> None:
        """Fence now if :func:`fence_reason` says so (idempotent; a failed fence is retried at the next check)."""
        with self._lock:
            if self.fenced:
                return
            reason = fence_reason(
                time.monotonic(), self._renewed_mono, self.ttl_s, self.margin_s, lost=lost, taken=taken
            )
            reason = reason or self._owed  # a fence that failed stays due, the lease held again or not
            if reason is None:
                return
            expires_at = self._renewed_wall + self.ttl_s
            try:
                removed = fence(self.endpoint(), self.principals)
            except DRError as exc:  # retried every check (0.1 s) — logged once per distinct problem
                self._owed = reason
                if self._failing != exc.problem:
                    self.log("error", "self-fence-failed", f"fencing {self.cluster} failed, retried: {exc.problem}")
                self._failing = exc.problem
                return
            self._failing, self._owed = "", None
            record = FenceRecord(
                cluster=self.cluster, holder=self.holder, token=self._token, reason=reason, fenced_at=time.time(),
                last_renewed_at=self._renewed_wall, lease_expires_at=expires_at, removed=removed,
            )  # fmt: skip
            self.store.save(record, self.holder)
            self.record, self.fenced = record, True
        self.total.inc()
        self.metrics.app_writes.labels(self.cluster).set(0)
        self.log(
            "error", "self-fenced",
            f"cluster {self.cluster} is fenced by its own controller ({reason}: the lease could not be renewed "
            f"in time); {len(removed)} application write ACLs removed",
            token=record.token, reason=reason, fenced_at=record.fenced_at, lease_expires_at=expires_at,
        )  # fmt: skip

    def _watch(self) -> None:
        # the keeper may be stuck in a request to a witness that does not answer: the deadline is kept here
        while not self._stop.wait(0.1):
            self.check()
