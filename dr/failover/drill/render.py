"""The graded drill as text: what ``drctl drill`` (and so ``make demo``) prints for a person."""

from __future__ import annotations

from pathlib import Path

from dr.failover.drill.phases import phases_text
from dr.failover.drill.result import DrillCycle, DrillResult, LinkRestart
from dr.failover.frame.render import render_summary, seconds_text

__all__ = ["render_drill", "restart_lines"]


def render_drill(r: DrillResult) -> str:
    """The graded drill summary as text (every cycle, then the overall grade)."""
    lines = [
        f"DRILL ({r.mode}) on stack {r.stack}: {r.grade}"
        + (f" — {' then '.join(c.chain for c in r.cycles)}" if len(r.cycles) > 1 else "")
    ]
    for c in r.cycles:
        if len(r.cycles) > 1:
            lines += ["", f"cycle {c.number}: {c.chain} — {c.grade}"]
        lines += _render_cycle(c)
        if c.standby_rebuild:
            rebuild = c.standby_rebuild
            lines.append(f"then {rebuild.cluster} declared, wiped, as the next standby ({rebuild.seconds:.1f}s)")
    lines += restart_lines(r.link_restarts)
    timed = phases_text(r.phases)
    if timed:
        lines.append(timed)
    lines.append(f"drill result: {Path(r.out) / 'drill.json'} ({r.seconds:.0f}s)")
    return "\n".join(lines)


def _render_cycle(c: DrillCycle) -> list[str]:
    A, B = c.source, c.target
    lines = [f"  [{k.result:>4}] {k.check}" for k in c.checks]
    for app in c.application_rto:
        lines.append(
            f"application RTO {app.application} ({app.kind}): {seconds_text(app.rto_s)} — {app.measured}"
            + (
                f"; last record read on {A} → first on {B}: {seconds_text(app.data_gap_s)}"
                if app.data_gap_s is not None
                else ""
            )
        )
    if c.endpoint_clients:
        lines += _endpoint_lines(c)
    if c.unattended:
        u = c.unattended
        lines.append(
            f"unattended: site {A} lost (brokers and controller SIGKILLed) → failover started by "
            f"{u.acted_by or 'nobody'} after {seconds_text(u.detection_s)} (detect_after_s {u.detect_after_s:g}), "
            f"{B} promoted after {seconds_text(u.promotion_s)}, first application write on {B} after "
            f"{seconds_text(u.unattended_rto_s)}"
            + (
                f" (through the client endpoint: {seconds_text(u.endpoint_unattended_rto_s)})"
                if c.endpoint_clients is not None
                else ""
            )
            + f"; writes acknowledged by {A} after the promotion: {u.writes_on_source_after_promotion}"
        )
    if c.replicator_crash:
        k = c.replicator_crash
        lines.append(
            f"replicator crash: link {k.link} ({k.delivery.value}): {k.killed} SIGKILLed after "
            f"{k.acknowledged_before_kill} records acknowledged on {A}, copying again {k.running_again_s:.1f}s later; "
            f"records on {B} twice: {'not verified' if k.duplicated is None else k.duplicated}"
        )
    s = c.failover
    lines.append(
        f"RTO probe {seconds_text(s.rto_s)} (supplement) · {c.chain} {seconds_text(s.a_b_c_s)} · failover total {seconds_text(s.total_s)}"
    )
    rpo = c.rpo
    hi = rpo.estimate_upper_bound
    estimate = (
        "unknown" if rpo.estimate is None else f"{rpo.estimate}{'' if hi is None or hi == rpo.estimate else f'–{hi}'}"
    )
    lines.append(
        f"RPO: estimate {estimate} records; never reached {B} {rpo.actual_never_replicated}; acknowledged and "
        f"lost before recovery {rpo.acknowledged_lost_before_recovery}; after recovery {c.lost_after_recovery}"
    )
    p = c.producer
    lines.append(
        f"producer: {p.acked_on_source} acknowledged on {A}, {p.acked_on_target} on {B}, "
        f"{p.not_acknowledged} not acknowledged (refused/timed out: the application retries those)"
    )
    if c.consumer:
        g = c.consumer
        lines.append(
            f"consumer group {g.group}: {g.read_on_source} read on {A}, {g.read_on_target} on {B}, "
            f"{g.read_twice} read twice, {g.skipped} skipped"
        )
    if c.recovery:
        rec = c.recovery
        lines.append(f"recovery: {rec.missing} missing, {rec.written} written, {rec.already_present} already present")
    lines += ["", render_summary(s)]
    lines.append(f"HTML report: {c.report_html or '— (no verification ran)'}")
    return lines


def _endpoint_lines(c: DrillCycle) -> list[str]:
    """The unmodified clients' figures (issue 31), beside the published-configuration RTO above."""
    e = c.endpoint_clients
    if e is None:
        return []
    said = f"through the endpoint {e.bootstrap}, started once and never restarted"
    lines = [
        f"unmodified client RTO {e.producer} (writes): {seconds_text(e.writes_rto_s)} — last write acknowledged "
        f"before the endpoint's switch → first after it, {said}; {e.acked_before_switch} acknowledged before, "
        f"{e.acked_after_switch} after, {e.acknowledged_lost} acknowledged and lost"
        + (f" (e.g. {', '.join(e.lost_sample)})" if e.lost_sample else "")
        + (f"; fatal: {e.producer_fatal}" if e.producer_fatal else "")
    ]
    if e.group is not None:
        lines.append(
            f"unmodified client RTO {e.group} (reads): {seconds_text(e.reads_rto_s)} — last record read before the "
            f"switch → first after it; {e.read} read, {e.read_twice} read twice, {e.skipped} skipped"
        )
    return lines


def restart_lines(restarts: list[LinkRestart]) -> list[str]:
    """The drill text's lines for :func:`link_restarts` (none when no link was restarted)."""
    return [
        f"link {r.link} restarted by its watchdog at {r.at}: "
        + "; ".join(f"task {task} died: {cause}" for task, cause in sorted(r.tasks.items()))
        for r in restarts
    ]
