"""Human-readable text for the failover summary and the dry-run plan, and the pieces ``drctl status``'s text
(:func:`dr.failover.status.render_status`) shares with them.

Only names, numbers and paths are printed: client configurations and credentials never are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dr.failover.frame.shorten import MANY, names_text
from dr.topology.client_endpoint import EndpointStatus

if TYPE_CHECKING:
    from dr.failover.frame.summary import FailoverSummary

__all__ = ["endpoint_text", "render_plan", "render_summary", "seconds_text"]


def _group_lines(s: FailoverSummary) -> list[str]:
    """One line per group; past :data:`MANY` groups alike (same status, same outlook), one line for them."""
    alike: dict[tuple[str, str], list[str]] = {}
    for g in s.consumer_groups:
        alike.setdefault((g.status, g.consumers_will or ""), []).append(g.group)
    lines = []
    for (status, will), groups in alike.items():
        if len(groups) > MANY:
            lines.append(f"groups {names_text(groups)}: {status} — {will}")
        else:
            lines += [f"group {group}: {status} — {will}" for group in groups]
    return lines


def _client_lines(s: FailoverSummary) -> list[str]:
    """Each application's client configuration files; past :data:`MANY`, where they all are."""
    if len(s.clients) <= MANY:
        return [f"client config {c['application']}: {c['properties']} / {c['json']}" for c in s.clients]
    folder = str(Path(s.clients[0]["json"]).parent)
    apps = names_text([c["application"] for c in s.clients])
    return [f"client configs of {apps}: {folder}/<application>.properties / .json"]


def seconds_text(value: float | None) -> str:
    """Seconds as printed (``4.7s``), or ``—`` when not measured."""
    return "—" if value is None else f"{value:.1f}s"


def render_summary(s: FailoverSummary) -> str:
    """The failover result: steps with times, RTO, A→B→C, RPO, groups, clients, verdict, next steps."""
    chain = f"{s.source} → {s.target}" + (f" → {s.standby}" if s.standby else "")
    lines = []
    if s.already_finished:
        lines.append(f"failover {s.failover_id} of stack {s.stack} ({chain}) already finished; nothing changed.")
    lines.append(
        f"{s.mode} failover {s.failover_id} of stack {s.stack}: {chain} — {s.status.upper()}"
        + (f" ({s.runs} runs)" if s.runs > 1 else "")
    )
    width = max((len(st.name) for st in s.steps), default=0)
    for i, st in enumerate(s.steps, 1):
        secs = "" if st.seconds is None else f"{st.seconds:6.1f}s"
        head = f"  {i}. {st.name:<{width}}  {st.status:<11} {secs:>7}  "
        # A refused step's summary is its error, whose "next step:" is a second line: keep it in the column.
        text = ("\n" + " " * len(head)).join(line.strip() for line in st.summary.splitlines())
        lines.append((head + text).rstrip())
    runs = f"{s.runs} runs" + (f", {s.interrupted_runs} interrupted" if s.interrupted_runs else "")
    lines.append(
        f"RTO probe (the run that fenced {s.source} → first probe write acknowledged by {s.target}): {seconds_text(s.rto_s)}"
        + (
            f"  [{runs}; from the start of the run that measured it: {seconds_text(s.rto_this_run_s)}]"
            if s.runs > 1
            else ""
        )
    )
    if s.write_outage_s is not None:
        lines.append(f"writes refused everywhere (fence → first ack): {seconds_text(s.write_outage_s)}")
    lines.append(
        f"A→B→C ({chain}, fencing run start → {s.standby or s.target} converged): {seconds_text(s.a_b_c_s)}"
        f"   total: {seconds_text(s.total_s)}"
    )
    if s.cutoff_ms is not None:
        lines.append(
            f"verification cut-off: {s.cutoff_utc} ({s.cutoff_ms} ms) — records on {s.target} "
            "after it were written there after the promotion and are not compared"
        )
    rpo = s.rpo_estimate
    if rpo:
        n, hi = rpo.get("records"), rpo.get("upper_bound")
        span = "unknown" if n is None else (f"{n} records" if hi is None or hi == n else f"{n}–{hi} records")
        lines.append(
            f"RPO estimate: {span} ({rpo.get('basis')})"
            + (f"; snapshot {rpo['snapshot_age_s']}s old" if rpo.get("snapshot_age_s") is not None else "")
        )
    lines += _group_lines(s)
    lines += _client_lines(s)
    v = s.verdict
    if v:
        counts = ", ".join(f"{n} {k}" for k, n in v.counts.items())
        lines.append(f"verification: {'CLEAN' if v.clean else 'DIFFERENCES'} ({counts}); report {v.html}")
    if s.pending:
        lines.append(f"pending: {', '.join(s.pending)}")
    for command in s.next:
        lines.append(f"next: {command}")
    lines.append(f"journal: {s.journal}")
    return "\n".join(lines)


class _Plan(Protocol):
    def render(self) -> str: ...


def render_plan(p: _Plan) -> str:
    """The dry-run plan for a person (:meth:`dr.failover.frame.plan.FailoverPlan.render`)."""
    return p.render()


def endpoint_text(ep: EndpointStatus) -> str:
    """Where the client endpoint points, or why that is unknown."""
    if ep.get("error"):
        return f"UNKNOWN ({ep['error']})"
    return f"points at {', '.join(ep.get('points_at') or []) or 'nothing'}" + (
        f" (proxy {ep['proxy']})" if ep.get("proxy") else ""
    )
