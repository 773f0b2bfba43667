"""``drctl status``: roles, broker health, link lag, consumer-group positions and the last failover.

Read-only towards the clusters. As a side effect it records the end offsets it sees of every
cluster that holds topics (:mod:`dr.failover.snapshots`), which is what an unplanned failover
later uses to estimate its RPO — so running it periodically is useful.

The report's ``problems`` (:func:`status_problems`) are what monitoring acts on: a link the
topology says runs that is stopped or cannot be measured, an active or passive cluster that is
down or unreachable, a last failover that failed or was interrupted. :func:`raise_for_problems`
turns them into the command's exit code (4, or 6 when the failover is among them).
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dr.errors import ClusterError, ConfigError, DRError, FailoverError
from dr.estate import Estate
from dr.failover.health import cluster_health
from dr.failover.journal import Journal
from dr.failover.metrics import Offsets, encode_offsets, lag
from dr.failover.snapshots import record_offsets
from dr.failover.summary import summarize
from dr.kafka_client import Endpoint
from dr.offsets import committed_offsets, end_offsets
from dr.topology import Application, Cluster, Kind, Link, Role, Topology, load_stack_file

__all__ = ["LastFailover", "StepState", "lock_held", "raise_for_problems", "status_problems", "status_report"]


class StepState(BaseModel):
    """A step of the last failover and its status."""

    name: str
    status: str


class LastFailover(BaseModel):
    """The last failover in ``drctl status``: an abridged :class:`~dr.failover.summary.FailoverSummary`."""

    failover_id: str
    mode: str
    status: str
    source: str
    target: str
    standby: str | None
    rto_s: float | None
    a_b_c_s: float | None
    pending: list[str]
    next: list[str]
    journal: str
    steps: list[StepState]
    lock_held: bool
    """Whether a process holds the stack's failover lock now (a ``running`` failover without one was interrupted)."""

    @classmethod
    def of(cls, journal: Journal, lock_held: bool) -> LastFailover:
        """The last failover of a stack from its journal."""
        s = summarize(journal)
        return cls(
            **s.model_dump(include=set(cls.model_fields) - {"steps", "lock_held"}),
            steps=[StepState(name=st.name, status=st.status) for st in s.steps],
            lock_held=lock_held,
        )


def status_report(
    *, stack: str, stack_path: Path, state: Path, isr: bool = False, snapshot: bool = True
) -> dict[str, Any]:
    """The status of ``stack`` as a JSON-able dict (see the module doc)."""
    topology = load_stack_file(stack_path)
    estate = Estate(topology, Path(state))
    seen = _Seen()
    clusters = [_cluster_entry(estate, c, seen, isr=isr, snapshot=snapshot) for c in topology.clusters]
    journal = Journal.load(Path(state))
    report = {
        "stack": stack,
        "failover_done": topology.failover_done,
        "clusters": clusters,
        "links": [_link_entry(estate, link, seen.ends) for link in topology.links],
        "consumer_groups": [
            _group_entry(topology, app, seen) for app in topology.principals.applications if app.consumer_group
        ],
        "last_failover": LastFailover.of(journal, lock_held(Path(state))).model_dump(mode="json")
        if journal is not None
        else None,
    }
    report["problems"] = status_problems(report)
    return report


@dataclass
class _Seen:
    """What the cluster entries found, for the link and group entries: endpoints of the clusters
    that answer, and their end offsets."""

    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    ends: dict[str, Offsets] = field(default_factory=dict)


def _cluster_entry(estate: Estate, c: Cluster, seen: _Seen, *, isr: bool, snapshot: bool) -> dict[str, Any]:
    """One cluster: role, process (local), health and end offsets (recorded for the RPO estimate)."""
    entry: dict[str, Any] = {"name": c.name, "role": c.role.value, "kind": c.kind.value}
    if c.kind is Kind.LOCAL:
        lc = estate.local_cluster(c.name)
        entry.update(
            process=lc.state(), bootstrap=lc.bootstrap, brokers_declared=c.brokers, running_nodes=lc.running_nodes()
        )
        if entry["process"] in ("absent", "stopped"):
            return entry
    else:
        entry["bootstrap"] = c.bootstrap_servers
    try:
        ep = estate.endpoint(c.name)
    except ConfigError as exc:
        entry["error"] = exc.problem
        return entry
    topics = [t.name for t in estate.topology.topics]
    health = cluster_health(
        ep,
        expected_brokers=c.brokers if c.kind is Kind.LOCAL else None,
        topics=topics if c.holds_topics else None,
        isr=isr,
    )
    h = health.to_dict()
    if not isr:
        h.pop("partitions")
    entry["health"] = h
    if health.reachable:
        seen.endpoints[c.name] = ep
        try:
            seen.ends[c.name] = end_offsets(ep, topics)
            entry["end_offsets"] = encode_offsets(seen.ends[c.name])
            if snapshot and c.role in (Role.ACTIVE, Role.PASSIVE):
                record_offsets(estate.state, c.name, seen.ends[c.name])
        except ClusterError as exc:
            entry["error"] = exc.problem
    return entry


def _link_entry(estate: Estate, link: Link, ends: dict[str, Offsets]) -> dict[str, Any]:
    """One link: state, engine, whether it runs (process or connectors) and its lag per partition."""
    topology = estate.topology
    entry: dict[str, Any] = {
        "name": link.name,
        "source": link.source,
        "target": link.target,
        "state": link.state.value,
        "engine": link.engine.value,
    }
    if link.is_running and topology.runs_on_connect(link):
        entry.update(_connect_link(estate, link.name, link.connect or ""))
    elif topology.both_local(link):
        entry["process"] = "running" if estate.mirror(link.name).alive() else "stopped"
    if link.source in ends and link.target in ends:
        wanted = {t.name for t in topology.topics_for(link)}
        per = {tp: n for tp, n in lag(ends[link.source], ends[link.target]).items() if tp[0] in wanted}
        entry.update(lag=encode_offsets(per), total_lag=sum(per.values()))
    else:
        entry["error"] = "lag unknown: a side is unreachable"
    return entry


def _group_entry(topology: Topology, app: Application, seen: _Seen) -> dict[str, Any]:
    """One application's consumer group: committed offsets and lag on every cluster that answers."""
    group = app.consumer_group or ""
    entry: dict[str, Any] = {"group": group, "application": app.name, "topics": app.consumes, "positions": {}}
    for name, ep in seen.endpoints.items():
        if not topology.cluster(name).holds_topics:
            continue
        try:
            done = {tp: n for tp, n in committed_offsets(ep, group).items() if tp[0] in app.consumes}
        except ClusterError as exc:
            entry["positions"][name] = {"error": exc.problem}
            continue
        behind = {tp: max(0, n - done.get(tp, 0)) for tp, n in seen.ends.get(name, {}).items() if tp[0] in app.consumes}
        entry["positions"][name] = {
            "committed": encode_offsets(done),
            "committed_total": sum(done.values()),
            "lag_total": sum(behind.values()),
        }
    return entry


def lock_held(state: Path) -> bool:
    """True while a process holds the stack's failover lock (``<state>/failover.lock``, see
    :class:`~dr.failover.journal.StackLock`). Tested with a shared, non-blocking ``flock`` released at once."""
    path = Path(state) / "failover.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _cluster_problem(c: dict[str, Any]) -> str | None:
    if c.get("role") not in ("active", "passive"):
        return None  # a standby is not provisioned yet; a decommissioned cluster is stopped on purpose
    what = f"cluster {c['name']} ({c['role']})"
    if c.get("process") in ("absent", "stopped"):
        return f"{what} is {c['process']}"
    h = c.get("health") or {}
    if h and not h.get("reachable"):
        return f"{what} is unreachable: {h.get('error') or 'no answer'}"
    if c.get("process") == "degraded":
        return f"{what} is degraded: nodes {c.get('running_nodes')} of {c.get('brokers_declared')} brokers run"
    if h and h.get("brokers_down"):
        return f"{what} has {h['brokers_down']} of {h.get('expected_brokers')} brokers down"
    if h and h.get("offline"):
        return f"{what} has {len(h['offline'])} offline partitions"
    if not h and c.get("error"):
        return f"{what}: {c['error']}"
    return None


def _connect_link(estate: Estate, link_name: str, connect: str) -> dict[str, Any]:
    """A link on a Connect cluster: each connector's and task's state (and worker), and ``process``
    ``running`` only when all run."""
    from dr.runtime.connect_link import ConnectLink, runs

    try:
        runner = estate.link_runner(link_name)
        states = runner.states() if isinstance(runner, ConnectLink) else {}
    except (ClusterError, ConfigError) as exc:
        return {"connect": connect, "process": "unreachable", "connect_error": exc.problem}
    running = all(runs(name, s) for name, s in states.items())
    bad = sorted(
        {s["state"] for s in states.values() if s["state"] != "RUNNING"}
        | {t["state"] for s in states.values() for t in s["tasks"] if t["state"] != "RUNNING"}
    )
    return {
        "connect": connect,
        "connectors": states,
        "process": "running" if running else ("stopped" if bad == ["STOPPED"] else "/".join(bad).lower() or "no tasks"),
    }


def _link_problem(link: dict[str, Any]) -> str | None:
    if link.get("state", "running") != "running":
        return None  # a cluster link kept, promoted, after a failover: it no longer replicates
    what = f"link {link['name']} ({link['source']} → {link['target']})"
    if link.get("process") not in (None, "running"):
        return f"{what} is {link['process']}; the topology says it runs"
    if "error" in link:
        return f"{what}: {link['error']}"
    return None


def _failover_problem(last: dict[str, Any] | None) -> str | None:
    if not last:
        return None
    what = f"last failover {last.get('failover_id')} ({last.get('source')} → {last.get('target')})"
    status = last.get("status")
    failed = next((s["name"] for s in last.get("steps") or [] if s.get("status") == "failed"), None)
    if status == "failed":
        return f"{what} failed" + (f" at step {failed}" if failed else "")
    if status == "interrupted" or (status == "running" and last.get("lock_held") is False):
        return f"{what} was interrupted: its journal says running, but no process holds the stack's lock"
    return None


def status_problems(report: dict[str, Any]) -> list[str]:
    """What is wrong in a :func:`status_report` (pure): one line per stopped or unmeasurable running link,
    down or unreachable active/passive cluster, and a failed or interrupted last failover.

    A standby that does not exist yet, a decommissioned cluster that is stopped, and a failover whose
    decommissioning waits (``pending``) are not problems.
    """
    found = [p for c in report.get("clusters") or [] if (p := _cluster_problem(c))]
    found += [p for link in report.get("links") or [] if (p := _link_problem(link))]
    if (p := _failover_problem(report.get("last_failover"))) is not None:
        found.append(p)
    return found


def raise_for_problems(report: dict[str, Any]) -> None:
    """Raise when the report lists problems: FailoverError (exit 6) when the last failover failed or was
    interrupted, else ClusterError (exit 4). The message lists every problem; None when there is none."""
    problems = report.get("problems")
    if problems is None:
        problems = status_problems(report)
    if not problems:
        return
    stack = report.get("stack")
    last = report.get("last_failover") or {}
    failover = _failover_problem(report.get("last_failover")) in problems
    fixes = []
    if any(p.startswith("link ") and "the topology says it runs" in p for p in problems):
        fixes.append(f"start a stopped link with `drctl link start --stack {stack} --link NAME`")
    if any(p.startswith("cluster ") for p in problems) or any("unreachable" in p for p in problems):
        fixes.append(
            f"start the local clusters and links that stopped, with their data: "
            f"`drctl estate up --stack {stack} --refresh`"
        )
    if failover and last.get("status") == "failed":
        fixes.extend(last.get("next") or [f"rerun `drctl failover --stack {stack} --yes`: it resumes"])
    elif failover:
        fixes.append(f"rerun `drctl failover --stack {stack} --yes`: it resumes where the interrupted run stopped")
    cls: type[DRError] = FailoverError if failover else ClusterError
    count = len(problems)
    raise cls(
        f"stack {stack} has {count} problem{'s' if count != 1 else ''}:\n" + "\n".join(f"  - {p}" for p in problems),
        "; ".join(fixes) or f"look at `drctl status --stack {stack}`",
    )
