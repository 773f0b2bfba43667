"""The vocabulary of every run: a step, its context, its result, the run's options.

A :class:`Step` is a named function of a context returning a :class:`StepResult`; it is generic in its
context (``Step[RegionContext]``), so a step reads its own context's fields without narrowing it. The
:class:`Context` is the active-passive failover's (A, B and C from the topology's roles); the loss of a
site (:mod:`dr.failover.frame.site_loss`) and the kinds under :mod:`dr.failover.kinds` extend it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from dr.base.errors import FailoverError
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.failover.frame.converge import Converger
from dr.failover.frame.journal import Journal
from dr.failover.frame.outcomes import Outcome
from dr.failover.frame.roles import Roles
from dr.kafka.client import Endpoint
from dr.topology import Link, Topology
from dr.topology.topics import topics_on

__all__ = ["MODES", "Context", "FailoverOptions", "Step", "StepResult", "StepStatus", "named_roles"]

MODES = ("planned", "unplanned")


@dataclass(kw_only=True)
class FailoverOptions:
    """How a failover runs (the ``drctl failover`` flags)."""

    mode: str | None = None
    """``planned`` or ``unplanned``; None resumes in the journal's mode (a new failover: planned)."""
    force: bool = False
    """Go on past the drain deadline, or with B degraded (brokers down but partitions online)."""
    force_decommission: bool = False
    """Decommission A without a clean verdict."""
    skip_verify: bool = False
    """Do not run the verification (decommissioning then needs ``force_decommission``)."""
    drain_timeout: float = 60.0
    group_sync_timeout: float = 10.0
    catch_up_timeout: float = 120.0
    link_stop_timeout: float = 20.0
    probe: bool = True
    """Measure RTO with a probe producer writing to B as an application principal."""
    started_by: str | None = None
    """Who started the run when it was not a person: ``controller <operator>/<site>`` (``drctl controller``'s
    automatic failover). Journaled with the run's options."""
    fencing_token: int | None = None
    """The witness lease's fencing token of the controller that started the run (journaled with it)."""
    lease_check: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Run before the promote step grants writes: refuses (FailoverError) unless the witness still holds the
    lease with :attr:`fencing_token` (:func:`dr.controller.token.lease_guard`; never journaled)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (recorded in the journal for every run)."""
        found = asdict(self)
        found.pop("lease_check", None)
        return found


StepStatus = Literal["done", "skipped", "deferred", "differences"]


class StepResult(BaseModel):
    """A step's result: ``done``, ``skipped``, ``deferred`` (retried by the next run) or ``differences``."""

    status: StepStatus
    outcome: Outcome = Field(default_factory=Outcome)
    """What the step found and did (:mod:`dr.failover.frame.outcomes`; journaled as the step's ``outcome``)."""
    summary: str = ""
    """One line for the operator."""

    def __init__(self, status: StepStatus, outcome: Outcome | None = None, summary: str = "") -> None:
        super().__init__(status=status, outcome=outcome or Outcome(), summary=summary)

    def journaled(self) -> dict[str, Any]:
        """The outcome as the journal keeps it: its JSON with the summary line."""
        return {**self.outcome.journaled(), "summary": self.summary}


@dataclass
class Context:
    """Everything a step needs. ``original`` is the topology before the failover (from the journal)."""

    ref: StackRef
    """Which stack: its name, stack file and state directory."""
    original: Topology
    desired: Topology
    mode: str
    options: FailoverOptions
    journal: Journal
    converger: Converger
    progress: Progress

    @property
    def stack(self) -> str:
        """The stack's name."""
        return self.ref.name

    @property
    def stack_path(self) -> Path:
        """The stack file (``Pulumi.<stack>.yaml``) the failover rewrites."""
        return self.ref.stack_file

    @property
    def state(self) -> Path:
        """The stack's state directory (snapshots, client files, credentials)."""
        return self.ref.state_dir

    @property
    def home(self) -> Path:
        """Where the journal, the stack file's backups and the verification reports live
        (:attr:`dr.base.stackref.StackRef.failover_home`)."""
        return self.ref.failover_home

    @cached_property
    def roles(self) -> Roles:
        """A, B and C of the original topology."""
        return Roles.of(self.original)

    @property
    def source(self) -> str:
        """A: the active cluster being replaced."""
        return self.roles.source.name

    @property
    def target(self) -> str:
        """B: the passive cluster being promoted."""
        return self.roles.target.name

    @property
    def standby(self) -> str | None:
        """C: the standby that becomes the new passive (None when the topology declares none)."""
        return self.roles.standby_name

    @cached_property
    def link(self) -> Link:
        """The link A→B."""
        links = [lk for lk in self.original.links_into(self.target) if lk.source == self.source]
        if not links:
            raise FailoverError(
                f"stack '{self.stack}' has no link {self.source} → {self.target}.",
                "declare it in kafka-dr:links; a passive cluster is fed by the active one",
            )
        return links[0]

    @cached_property
    def topics(self) -> list[str]:
        """The topics the link replicates (what is drained and verified): the declared ones, and on the
        hub of a hub-and-spoke estate the edges' ``<edge>.<topic>`` copies too."""
        return [t.name for t in topics_on(self.original, self.roles.source) if self.link.selects_topic(t.name)]

    @cached_property
    def before(self) -> Estate:
        """The estate as it was declared before the failover."""
        return Estate(self.original, self.state)

    @cached_property
    def after(self) -> Estate:
        """The estate as declared after the failover."""
        return Estate(self.desired, self.state)

    @cached_property
    def a_ep(self) -> Endpoint:
        """Admin endpoint of A."""
        return self.before.endpoint(self.source)

    @cached_property
    def b_ep(self) -> Endpoint:
        """Admin endpoint of B."""
        return self.before.endpoint(self.target)

    @property
    def applications(self) -> list[str]:
        """Every application principal."""
        return [app.name for app in self.original.principals.applications]

    def write_stack(self, topology: Topology) -> bool:
        """Write ``topology`` to the stack file, checked unchanged since the run began and its new digest
        journaled (:func:`dr.failover.frame.stack_guard.guarded_write`); True when the file changed."""
        from dr.failover.frame.stack_guard import guarded_write

        return guarded_write(self.journal, self.stack_path, topology)

    def say(self, message: str) -> None:
        """One progress line."""
        self.progress(message)

    def role_names(self) -> dict[str, str]:
        """The role letters of this run's step descriptions and the clusters they stand for: A, B, C."""
        return {"A": self.source, "B": self.target, **({"C": self.standby} if self.standby else {})}

    def described(self, step: Step[Any]) -> str:
        """``step``'s description with this run's cluster names for its role letters (a progress line)."""
        return named_roles(step.description, **self.role_names())


def named_roles(text: str, **names: str) -> str:
    """``text`` with the role letters standing alone (``A``, ``B``) replaced by cluster names, in one pass
    (so region B with peer A reads right)."""
    return re.sub(r"\b([A-Z])\b", lambda m: names.get(m.group(1), m.group(1)), text)


C = TypeVar("C", bound=Context)


def _no_inputs(_ctx: Context) -> Mapping[str, object]:
    return {}


@dataclass(frozen=True)
class Step(Generic[C]):
    """One named step of a run, a function of its context ``C``."""

    name: str
    run: Callable[[C], StepResult]
    description: str
    inputs: Callable[[C], Mapping[str, object]] = _no_inputs
