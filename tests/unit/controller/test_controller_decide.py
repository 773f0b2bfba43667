"""The passive site's automatic-failover decision (:func:`dr.controller.decide.decide`): every rule, in order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dr.controller.decide import Situation, decide

LOST = Situation(
    mode="automatic",
    site="B",
    passive=True,
    active="A",
    own_state="down",
    observers={"A": "down"},
    observer="B",
    witness_up=True,
    lease_holder=None,
    lease_free_for_s=5.0,
    margin_s=1.0,
    failover_running=False,
    last_automatic_age_s=None,
    cooldown_s=3600.0,
    lag_records=10,
    max_rpo_records=100,
)


def test_a_lost_active_cluster_agreed_by_two_observers_is_failed_over() -> None:
    decision = decide(LOST)
    assert (decision.action, decision.reason) == ("act", "lost")
    assert "failing over to B" in decision.message and "A, B" in decision.message


@pytest.mark.parametrize(
    ("change", "action", "reason"),
    [
        ({"mode": "manual"}, "wait", "manual"),
        ({"passive": False}, "wait", "not-passive"),
        ({"active": None}, "wait", "not-passive"),
        ({"own_state": "up"}, "wait", "active-up"),
        ({"own_state": "suspect"}, "wait", "active-suspect"),
        ({"witness_up": False}, "wait", "witness-down"),
        ({"observers": {"A": "down", "C": "up"}}, "wait", "observers-disagree"),
        ({"observers": {}}, "wait", "one-observer"),
        ({"observers": {"A": "suspect"}}, "wait", "one-observer"),
        ({"observers": {"B": "down"}}, "wait", "one-observer"),  # this site's own verdict counts once
        ({"lease_holder": "ops@a/A"}, "wait", "lease-held"),
        ({"lease_free_for_s": None}, "wait", "lease-margin"),
        ({"lease_free_for_s": 0.5}, "wait", "lease-margin"),
        ({"failover_running": True}, "wait", "failover-running"),
        ({"last_automatic_age_s": 60.0}, "refuse", "cooldown"),
        ({"lag_records": None}, "refuse", "lag-unknown"),
        ({"lag_records": 101}, "refuse", "rpo-over-budget"),
    ],
)
def test_each_rule(change: dict[str, object], action: str, reason: str) -> None:
    decision = decide(replace(LOST, **change))  # type: ignore[arg-type]
    assert (decision.action, decision.reason) == (action, reason), decision


def test_the_rules_apply_in_order() -> None:
    # a witness down wins over a disagreeing observer; the lease wins over the cooldown and the lag
    assert decide(replace(LOST, witness_up=False, observers={"C": "up"})).reason == "witness-down"
    held = replace(LOST, lease_holder="ops@b2/B", last_automatic_age_s=1.0, lag_records=None)
    decision = decide(held)
    assert decision.reason == "lease-held" and "ops@b2/B" in decision.message


def test_edges_of_the_budgets() -> None:
    assert decide(replace(LOST, lag_records=100)).action == "act"  # at the budget, not above
    assert decide(replace(LOST, last_automatic_age_s=3600.0)).action == "act"  # the cooldown has passed
    assert decide(replace(LOST, lease_free_for_s=1.0)).action == "act"  # exactly the margin
    assert decide(replace(LOST, observers={"A": "down", "C": "down"})).action == "act"


STOPPED = replace(
    LOST,
    unfinished="the automatic failover F (controller ops@b1/B; 3 of 9 steps done)",
    passive=False,  # the stack file may already name B active
    active=None,
    own_state="up",
    observers={},
    last_automatic_age_s=30.0,  # inside the cooldown: the same failover, not a new one
    lag_records=None,
    holder="ops@b2/B",
)


def test_an_automatic_failover_stopped_unfinished_is_resumed_without_asking_the_policy_again() -> None:
    decision = decide(STOPPED)
    assert (decision.action, decision.reason) == ("act", "resume")
    assert decision.message.startswith("the automatic failover F") and "resuming it at B" in decision.message
    assert decide(replace(STOPPED, lease_holder="ops@b2/B", lease_free_for_s=None)).reason == "resume"  # its own


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"mode": "manual"}, "manual"),
        ({"witness_up": False}, "witness-down"),
        ({"failover_running": True}, "failover-running"),
        ({"lease_holder": "ops@b1/B"}, "lease-held"),
        ({"lease_holder": "ops@b1/B", "holder": None}, "lease-held"),
        ({"lease_free_for_s": 0.5}, "lease-margin"),
        ({"lease_free_for_s": None}, "lease-margin"),
    ],
)
def test_a_resume_waits_for_the_witness_the_lock_and_the_lease(change: dict[str, object], reason: str) -> None:
    decision = decide(replace(STOPPED, **change))  # type: ignore[arg-type]
    assert (decision.action, decision.reason) == ("wait", reason), decision
