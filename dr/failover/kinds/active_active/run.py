"""The region failover's run (:func:`run_region_failover`, through the frame) and its recovery (``--recover``).

Its plan — ``drctl failover --region A --dry-run``: the region failover's plan; changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from dr.base.errors import ClusterError, FailoverError
from dr.base.files import write_atomic
from dr.base.stackref import StackRef
from dr.base.types import Reporter as Progress
from dr.failover.act.health import listening
from dr.failover.frame.converge import Converger, PulumiConverger
from dr.failover.frame.journal import Journal
from dr.failover.frame.plan import FailoverPlan, plan_lines
from dr.failover.frame.run import OnStep, already_finished
from dr.failover.frame.site_loss import (
    Found,
    SiteRecovery,
    lost_site,
    named_steps,
    plan_site_loss,
    recover_site,
    run_site_loss,
    site_topologies,
)
from dr.failover.frame.step import FailoverOptions
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.active_active.steps import REGION_STEPS, RegionContext
from dr.topology import Kind, StackFile, Topology
from dr.topology.active_active import (
    after_region_failover,
    is_active_active,
    moving_applications,
    survivor_for,
)

__all__ = [
    "RegionPlan",
    "plan_region_failover",
    "recover_region",
    "recovered_marker",
    "run_region_failover",
    "topologies",
]


# ---------------------------------------------------------------------------------- running


def topologies(ref: StackRef, read: StackFile, journal: Journal | None, region: str) -> Found:
    """``(original, desired, survivor, resuming)`` of the failover of ``region`` (:func:`site_topologies`)."""

    def unfinished(journal: Journal) -> FailoverError | None:
        if journal.mode == "rejoin":
            return FailoverError(
                f"the rejoin {journal.failover_id} of region {journal.record.source} is unfinished.",
                f"finish it first: `drctl failover --stack {ref.name} --region {journal.record.source} --rejoin`",
            )
        if journal.record.source != region:
            return FailoverError(
                f"failover {journal.failover_id} of region {journal.record.source} is unfinished.",
                f"finish it first: `drctl failover --stack {ref.name} --region {journal.record.source}`",
            )
        return None

    def fresh(current: Topology) -> tuple[Topology, str]:
        if not is_active_active(current):
            raise FailoverError(
                f"stack '{ref.name}' is {current.architecture}: --region fails over one peer of an active-active stack.",
                f"run `drctl failover --stack {ref.name}` without --region",
            )
        survivor = survivor_for(current, region)
        return after_region_failover(current, region, survivor), survivor

    return site_topologies(ref, read, journal, unfinished=unfinished, fresh=fresh)


def run_region_failover(
    ref: StackRef,
    region: str,
    *,
    options: FailoverOptions,
    converger: Converger | None = None,
    progress: Progress = lambda _m: None,
    on_step: OnStep | None = None,
    stack: StackFile | None = None,
) -> FailoverSummary:
    """Fail region ``region`` of the active-active stack ``ref`` over to a surviving peer (or resume it);
    ``stack``: its stack file as the command read it (None: read once the lock is held)."""

    def title(ctx: RegionContext) -> str:
        return f"region failover {ctx.journal.failover_id} of stack {ref.name}: {region}'s applications → {ctx.target}"

    def finished(journal: Journal | None, read: StackFile) -> bool:
        return already_finished(journal, read) and journal.mode != "rejoin"

    return run_site_loss(
        RegionContext,
        ref,
        region,
        REGION_STEPS,
        lambda journal, read: topologies(ref, read, journal, region),
        title=title,
        options=options,
        converger=converger or PulumiConverger(ref, catch_up_timeout=options.catch_up_timeout, wait_for_links=False),
        progress=progress,
        on_step=on_step,
        is_finished=finished,
        stack=stack,
    )


def recover_region(ref: StackRef, region: str, progress: Progress = lambda _m: None) -> SiteRecovery:
    """Replay into ``<region>.<topic>`` on the survivor the records of ``region`` never replicated.

    The comparison runs again first, so a second run writes nothing. Records keep their key, value,
    headers and timestamp.
    """
    journal, original = lost_site(
        ref,
        region,
        is_loss=lambda journal, _original: journal.mode != "rejoin",
        refusal=FailoverError(
            f"no region failover of {region} in stack '{ref.name}' to recover.",
            f"run `drctl failover --stack {ref.name} --region {region}` first",
        ),
    )
    from dr.estate.estate import Estate

    estate = Estate(original, ref.state_dir)
    a_ep, b_ep = estate.endpoint(region), estate.endpoint(journal.record.target)
    if not listening(a_ep.bootstrap):
        local = original.cluster(region).kind is Kind.LOCAL
        raise ClusterError(
            f"{region} does not answer at {a_ep.bootstrap}: its records that never reached "
            f"{journal.record.target} are read from it, so nothing was replayed.",
            "bring its brokers back with their data ("
            + (f"`drctl estate start --stack {ref.name} --cluster {region}`" if local else "the cluster's own tooling")
            + f"), then rerun `drctl failover --stack {ref.name} --region {region} --recover`",
        )
    topics = [t.name for t in original.topics]
    done = recover_site(
        a_ep,
        b_ep,
        region,
        topics,
        rerun=f"rerun `drctl failover --stack {ref.name} --region {region} --recover` (it compares again first)",
        progress=progress,
    )
    written, missing = done.replayed, done.missing_before
    progress(f"replayed {written} records of {region} into their remote topics on {journal.record.target}")
    marker = {"failover_id": journal.failover_id, "replayed": written, "missing_before": missing}
    write_atomic(recovered_marker(ref, journal.failover_id), json.dumps(marker))
    return done


def recovered_marker(ref: StackRef, failover_id: str) -> Path:
    """Written when a ``--recover`` of region failover ``failover_id`` left nothing of the region missing."""
    return ref.made_failover_home() / f"recovered-{failover_id}.json"


# ---------------------------------------------------------------------------------- its plan (--dry-run)
class RegionPlan(FailoverPlan):
    """What ``drctl failover --region A --dry-run`` shows: the steps, who moves, and the stack-file diff."""

    mode: str
    region: str
    survivor: str
    moving: list[str]
    links_stopped: list[str]
    steps: list[dict[str, str]]
    stack_file_diff: str

    def render(self) -> str:
        """The plan for a person."""
        lines = [
            f"{self.mode} region failover of stack {self.stack}: {self.region} → {self.survivor}",
            f"applications moving: {', '.join(self.moving) or 'none'}",
            f"links stopped: {', '.join(self.links_stopped) or 'none'}",
            *plan_lines(self.steps, self.stack_file_diff),
        ]
        return "\n".join(lines)


def plan_region_failover(
    ref: StackRef, region: str, *, options: FailoverOptions, stack: StackFile | None = None
) -> RegionPlan:
    """The plan of a region failover (``stack``: the stack file as the command read it); changes nothing."""
    original, _desired, survivor, diff = plan_site_loss(
        ref, lambda journal, read: topologies(ref, read, journal, region), stack
    )
    return RegionPlan(
        stack=ref.name,
        mode=options.mode or "planned",
        region=region,
        survivor=survivor,
        moving=moving_applications(original, region),
        links_stopped=[lk.name for lk in original.links if region in (lk.source, lk.target)],
        steps=named_steps(REGION_STEPS, A=region, B=survivor),
        stack_file_diff=diff,
    )
