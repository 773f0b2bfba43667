"""``drctl status``: roles, broker health, link lag, consumer-group positions and the last failover.

Read-only towards the clusters. As a side effect it records the end offsets it sees of every
cluster that holds topics (:mod:`dr.failover.snapshots`), which is what an unplanned failover
later uses to estimate its RPO — so running it periodically is useful.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dr.errors import ClusterError, ConfigError
from dr.estate import Estate
from dr.failover.health import cluster_health
from dr.failover.journal import Journal
from dr.failover.metrics import encode_offsets, lag
from dr.failover.snapshots import record_offsets
from dr.runtime.mirrormaker import committed_offsets, end_offsets
from dr.topology import Kind, Role, load_stack_file

__all__ = ["status_report"]


def status_report(*, stack: str, stack_path: Path, state: Path, isr: bool = False,
                  snapshot: bool = True) -> dict[str, Any]:
    """The status of ``stack`` as a JSON-able dict (see the module doc)."""
    from dr.failover.pipeline import summarize

    topology = load_stack_file(stack_path)
    estate = Estate(topology, Path(state))
    topics = [t.name for t in topology.topics]
    endpoints: dict[str, Any] = {}
    ends: dict[str, dict[tuple[str, int], int]] = {}
    clusters = []
    for c in topology.clusters:
        entry: dict[str, Any] = {"name": c.name, "role": c.role.value, "kind": c.kind.value}
        if c.kind is Kind.LOCAL:
            lc = estate.local_cluster(c.name)
            entry.update(process=lc.state(), bootstrap=lc.bootstrap, brokers_declared=c.brokers,
                         running_nodes=lc.running_nodes())
            if entry["process"] in ("absent", "stopped"):
                clusters.append(entry)
                continue
        else:
            entry["bootstrap"] = c.bootstrap_servers
        try:
            ep = estate.endpoint(c.name)
        except ConfigError as exc:
            entry["error"] = exc.problem
            clusters.append(entry)
            continue
        health = cluster_health(ep, expected_brokers=c.brokers if c.kind is Kind.LOCAL else None,
                                topics=topics if c.holds_topics else None, isr=isr)
        h = health.to_dict()
        if not isr:
            h.pop("partitions")
        entry["health"] = h
        if health.reachable:
            endpoints[c.name] = ep
            try:
                ends[c.name] = end_offsets(ep, topics)
                entry["end_offsets"] = encode_offsets(ends[c.name])
                if snapshot and c.role in (Role.ACTIVE, Role.PASSIVE):
                    record_offsets(Path(state), c.name, ends[c.name])
            except ClusterError as exc:
                entry["error"] = exc.problem
        clusters.append(entry)
    links = []
    for link in topology.links:
        entry = {"name": link.name, "source": link.source, "target": link.target}
        if topology.both_local(link):
            entry["process"] = "running" if estate.mirror(link.name).alive() else "stopped"
        if link.source in ends and link.target in ends:
            wanted = {t.name for t in topology.topics_for(link)}
            per = {tp: n for tp, n in lag(ends[link.source], ends[link.target]).items() if tp[0] in wanted}
            entry.update(lag=encode_offsets(per), total_lag=sum(per.values()))
        else:
            entry["error"] = "lag unknown: a side is unreachable"
        links.append(entry)
    groups = []
    for app in topology.principals.applications:
        if not app.consumer_group:
            continue
        entry = {"group": app.consumer_group, "application": app.name, "topics": app.consumes, "positions": {}}
        for name, ep in endpoints.items():
            if not topology.cluster(name).holds_topics:
                continue
            try:
                done = {tp: n for tp, n in committed_offsets(ep, app.consumer_group).items() if tp[0] in app.consumes}
            except ClusterError as exc:
                entry["positions"][name] = {"error": exc.problem}
                continue
            behind = {tp: max(0, n - done.get(tp, 0)) for tp, n in ends.get(name, {}).items()
                      if tp[0] in app.consumes}
            entry["positions"][name] = {"committed": encode_offsets(done), "committed_total": sum(done.values()),
                                        "lag_total": sum(behind.values())}
        groups.append(entry)
    journal = Journal.load(Path(state))
    last = None
    if journal is not None:
        s = summarize(journal)
        last = {k: s[k] for k in ("failover_id", "mode", "status", "source", "target", "standby", "rto_s",
                                  "a_b_c_s", "pending", "next", "journal")}
        last["steps"] = [{"name": st["name"], "status": st["status"]} for st in s["steps"]]
    return {"stack": stack, "failover_done": topology.failover_done, "clusters": clusters, "links": links,
            "consumer_groups": groups, "last_failover": last}
