"""The passive site's decision, each pass, whether to fail the stack over by itself — a pure function.

:func:`decide` reads a :class:`Situation` (what this controller and the other observers see of the active
cluster, the witness's lease, the last known lag, the last automatic failover, the mode) and answers one of:

- ``act``: take the lease and run the unplanned failover;
- ``wait`` (a reason): nothing to do yet, or not allowed now; looked at again next pass;
- ``refuse`` (a reason): the active cluster is lost, but the policy forbids an unattended failover —
  a person must decide (the controller pages: an error line and ``kdr_automatic_refusals_total``).

The rules, in order (the first that applies answers):

1. mode ``manual`` → wait (``manual``): detect and alert only;
R. an automatic failover to this site stopped unfinished (its journal ``running`` or ``interrupted``, its
   runner gone: the controller that started it was killed or stopped) → resume it (``act``, ``resume``) once
   the witness answers, nobody else holds the lease (or this controller does) and it has been free for
   ``margin_s``: the decision was taken, within the policy, by the controller that held the lease, and a
   half-done failover is the one state worse than either end — so neither the cooldown nor the lag nor the
   observers' verdicts are asked again (the stack file may already name this site active);
2. this site is not the passive cluster of an active-passive stack, or the stack is already failed over →
   wait (``not-passive``);
3. this controller does not see the active cluster ``down`` (every probe failing for ``detect_after_s``) →
   wait (``active-up`` or ``active-suspect``);
4. the witness does not answer → wait (``witness-down``): no lease can be taken, so nobody acts;
5. another observer's live verdict says the active cluster is ``up`` → wait (``observers-disagree``);
   fewer than two observers (distinct names: a site's controllers publish as the site, a third-site
   observer as its own name) see it ``down`` → wait (``one-observer``);
6. the lease is held → wait (``lease-held``, naming the holder): the active site's controller still renews
   it, or another controller already acts;
7. the lease has been free for less than ``margin_s`` → wait (``lease-margin``);
8. a failover of the stack is running (its lock is held) → wait (``failover-running``);
9. the last automatic failover is less than ``cooldown_s`` ago → refuse (``cooldown``);
10. the last known lag of the link into this site is unknown → refuse (``lag-unknown``); above
    ``max_rpo_records`` → refuse (``rpo-over-budget``);
11. otherwise → act.

Fail-back is never decided here: once the stack is failed over, rule 2 holds for every site.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "Decision", "Situation", "decide"]

Action = Literal["act", "wait", "refuse"]


@dataclass(frozen=True)
class Situation:
    """Everything :func:`decide` reads (see the module doc)."""

    mode: str
    """The policy's mode: ``manual`` or ``automatic``."""
    site: str
    """This controller's cluster."""
    passive: bool
    """True when ``site`` is the passive cluster of an active-passive stack not yet failed over."""
    active: str | None
    """The active cluster's name (None when the stack has none)."""
    own_state: str
    """This controller's detection state of the active cluster: ``up``, ``suspect`` or ``down``."""
    observers: Mapping[str, str]
    """Other observers' live verdicts about the active cluster: observer name → ``up``/``suspect``/``down``."""
    observer: str
    """This controller's name as an observer (its site)."""
    witness_up: bool
    """The witness answered this controller's last request."""
    lease_holder: str | None
    """Who holds the stack's lease now (None: nobody)."""
    lease_free_for_s: float | None
    """How long this controller has seen the lease free (None: not free, or not seen yet)."""
    margin_s: float
    """The policy's margin beyond the lease's expiry."""
    failover_running: bool
    """A failover of the stack holds its lock."""
    last_automatic_age_s: float | None
    """Seconds since the last automatic failover of the stack was started (None: never)."""
    cooldown_s: float
    """The policy's cooldown."""
    lag_records: int | None
    """The last known lag of the link from the active cluster into this site, in records — else the upper bound
    of the RPO estimate from the active cluster's last offsets snapshot (None: neither known)."""
    max_rpo_records: int | None
    """The policy's budget (required by ``automatic``)."""
    unfinished: str | None = None
    """An automatic failover to this site that stopped unfinished with nobody running it, described (None: none)."""
    holder: str | None = None
    """This controller's name as a lease holder (a lease it holds itself does not stop a resume)."""


@dataclass(frozen=True)
class Decision:
    """What to do this pass: ``action``, a short ``reason`` (a metric label) and a sentence for the log."""

    action: Action
    reason: str
    message: str


def _wait(reason: str, message: str) -> Decision:
    return Decision("wait", reason, message)


def _resume(s: Situation, what: str) -> Decision:
    """Rule R: resume ``what`` once the lease can be this controller's."""
    if not s.witness_up:
        return _wait("witness-down", f"{what} stopped unfinished, but the witness does not answer: nobody resumes it")
    if s.failover_running:
        return _wait("failover-running", "a failover of the stack is running (its lock is held)")
    if s.lease_holder is not None and s.lease_holder != s.holder:
        return _wait("lease-held", f"{what} stopped unfinished; the lease is held by {s.lease_holder}")
    if s.lease_holder is None and (s.lease_free_for_s is None or s.lease_free_for_s < s.margin_s):
        free = 0.0 if s.lease_free_for_s is None else s.lease_free_for_s
        return _wait("lease-margin", f"the lease has been free for {free:.1f} s, less than margin_s {s.margin_s:g}")
    return Decision("act", "resume", f"{what} stopped unfinished and nobody runs it: resuming it at {s.site}")


def decide(s: Situation) -> Decision:
    """Act, wait or refuse (the rules in the module doc, in order)."""
    if s.mode != "automatic":
        return _wait("manual", "mode manual: the controller detects and alerts, a person fails over")
    if s.unfinished is not None:
        return _resume(s, s.unfinished)
    if not s.passive or s.active is None:
        return _wait("not-passive", f"{s.site} is not the passive cluster of a stack to fail over")
    active = s.active
    if s.own_state != "down":
        return _wait(f"active-{s.own_state}", f"this controller sees {active} {s.own_state}")
    if not s.witness_up:
        return _wait(
            "witness-down", f"{active} is down, but the witness does not answer: no lease can be taken, nobody acts"
        )
    others = {name: state for name, state in s.observers.items() if name != s.observer}
    if up := sorted(name for name, state in others.items() if state == "up"):
        return _wait("observers-disagree", f"{active} is down here, but observer(s) {', '.join(up)} see it up")
    agreeing = sorted({s.observer, *(name for name, state in others.items() if state == "down")})
    if len(agreeing) < 2:
        return _wait(
            "one-observer",
            f"only {', '.join(agreeing)} sees {active} down; a second observer must agree "
            f"(live verdicts: {dict(others) or 'none'})",
        )
    if s.lease_holder is not None:
        return _wait("lease-held", f"{active} is down, but the lease is held by {s.lease_holder}")
    if s.lease_free_for_s is None or s.lease_free_for_s < s.margin_s:
        free = 0.0 if s.lease_free_for_s is None else s.lease_free_for_s
        return _wait("lease-margin", f"the lease has been free for {free:.1f} s, less than margin_s {s.margin_s:g}")
    if s.failover_running:
        return _wait("failover-running", "a failover of the stack is running (its lock is held)")
    if s.last_automatic_age_s is not None and s.last_automatic_age_s < s.cooldown_s:
        return Decision(
            "refuse",
            "cooldown",
            f"{active} is lost, but the last automatic failover was {s.last_automatic_age_s:.0f} s ago "
            f"(cooldown_s {s.cooldown_s:g}): a person decides",
        )
    if s.lag_records is None:
        return Decision(
            "refuse",
            "lag-unknown",
            f"{active} is lost, but the lag of its link into {s.site} was never measured, and no offsets snapshot "
            f"of {active} is there to estimate it from",
        )
    if s.max_rpo_records is None or s.lag_records > s.max_rpo_records:
        return Decision(
            "refuse",
            "rpo-over-budget",
            f"{active} is lost with {s.lag_records} records of last known lag, above max_rpo_records "
            f"{s.max_rpo_records}: a person decides",
        )
    return Decision(
        "act",
        "lost",
        f"{active} is down for {', '.join(agreeing)}, the lease free for {s.lease_free_for_s:.1f} s, the last known "
        f"lag {s.lag_records} records (max {s.max_rpo_records}): failing over to {s.site}",
    )
