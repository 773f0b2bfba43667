"""The one shape of a plan: what a run would do (``drctl failover --dry-run``), for every kind of run.

Every kind's plan is a :class:`FailoverPlan`: a pydantic model whose ``--json`` is its
``model_dump(mode="json")`` and whose text for a person is :meth:`FailoverPlan.render`. A stack whose
run already finished plans :class:`FinishedPlan` (nothing would change).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Literal

from pydantic import BaseModel

from dr.failover.frame.summary import FailoverSummary

__all__ = ["FailoverPlan", "FinishedPlan", "PlanStep", "plan_lines"]


class FailoverPlan(BaseModel):
    """What a run of ``stack`` would do; each kind adds its own fields (who moves, which links stop...)."""

    stack: str

    @abstractmethod
    def render(self) -> str:
        """The plan for a person."""

    def to_json(self) -> dict[str, object]:
        """The plan as ``--json`` prints it."""
        return self.model_dump(mode="json")


class PlanStep(BaseModel):
    """One step of the plan: its journal status and what it would do."""

    name: str
    status: str
    action: str


class FinishedPlan(FailoverPlan):
    """The plan of a stack whose failover already finished: nothing would change."""

    dry_run: Literal[True] = True
    already_finished: Literal[True] = True
    summary: FailoverSummary

    def render(self) -> str:
        """The finished run's summary, and that nothing would change."""
        from dr.failover.frame.render import render_summary

        return render_summary(self.summary) + "\n(dry run: nothing would change)"


def plan_lines(steps: list[dict[str, str]], diff: str) -> list[str]:
    """The steps, numbered, and the stack file's diff: how a plan for a person ends."""
    return [
        "steps:",
        *(f"  {i}. {s['name']}: {s['description']}" for i, s in enumerate(steps, 1)),
        "stack file diff:",
        diff or "  (none)",
    ]
