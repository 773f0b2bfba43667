"""``drctl drill --kill-replicator``: the replicator of the active→passive link SIGKILLed mid-copy, then
started again, under the drill's traffic — a machine lost under the link, not a clean stop.

What is killed depends on where the link runs (:meth:`dr.topology.Topology.placement`): a dedicated
MirrorMaker 2 process is SIGKILLed and started again from the positions it committed; on a local Connect
cluster, the worker running the link's source task is SIGKILLed (it does not leave the group, as a lost
machine would not) and started again once the other workers took its tasks over. An exactly-once link
(the default) then leaves no record twice on its target; an at-least-once one copies again what it copied
after its last offset commit. The drill grades it from the failover's verification.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dr.base.errors import ClusterError, ConfigError
from dr.base.types import Reporter as Progress
from dr.estate.estate import Estate
from dr.failover.drill.result import ReplicatorCrash
from dr.runtime.connect_link import connector_names
from dr.runtime.process import wait_until
from dr.topology import Link, Placement, Topology

__all__ = ["crash_refusal", "crash_replicator"]


def crash_refusal(topology: Topology, link: Link) -> ConfigError | None:
    """Why ``--kill-replicator`` cannot crash ``link`` from this machine, or None. Pure."""
    placement = topology.placement(link)
    if placement is Placement.DEDICATED:
        return None
    connect = topology.link_connect(link)
    if placement is Placement.CONNECT and connect is not None and connect.is_local:
        if connect.workers < 2:
            return ConfigError(
                f"--kill-replicator: link {link.name!r} runs on Connect cluster {connect.name!r} with one worker; "
                "killing it would stop the link, not move it.",
                f"declare `workers: 2` or more on Connect cluster {connect.name!r}, or drill without --kill-replicator",
            )
        return None
    return ConfigError(
        f"--kill-replicator: link {link.name!r} is not run by a process of this machine ({placement.value}).",
        "drill without --kill-replicator; crash its replicator with the tooling that runs it",
    )


def crash_replicator(
    estate: Estate, link: Link, acknowledged: Callable[[], int], progress: Progress
) -> ReplicatorCrash:
    """SIGKILL ``link``'s replicator now (mid-copy under traffic), start it again, wait until it copies."""
    refusal = crash_refusal(estate.topology, link)
    if refusal is not None:
        raise refusal
    runner = estate.link_runner(link.name)
    acked = acknowledged()
    t0 = time.monotonic()
    if estate.topology.placement(link) is Placement.DEDICATED:
        killed = "MirrorMaker 2 process"
        progress(f"drill: SIGKILL the {killed} of link {link.name} mid-copy ({acked} records acknowledged so far)")
        runner.kill()
        runner.resume()
    else:
        killed = _kill_source_worker(estate, link, progress, acked)
    if not wait_until(runner.alive, 120, interval=0.5):
        raise ClusterError(
            f"link {link.name} did not copy again within 120 s of its replicator's SIGKILL.",
            f"read its log ({runner.log_hint() or 'drctl status'})",
        )
    running_again = round(time.monotonic() - t0, 3)
    progress(f"drill: link {link.name} copies again {running_again:.1f}s after the SIGKILL")
    return ReplicatorCrash(
        link=link.name,
        delivery=estate.topology.delivery_of(link),
        killed=killed,
        acknowledged_before_kill=acked,
        running_again_s=running_again,
    )


def _kill_source_worker(estate: Estate, link: Link, progress: Progress, acked: int) -> str:
    """SIGKILL the local Connect worker running ``link``'s source task; start it again once the others
    took its tasks over. Returns what was killed."""
    connect = estate.connect(link.connect or "")
    source = connector_names(link.name)[0]
    rest = connect.rest()
    status = rest.status(source) or {}
    running_on = {t.get("worker_id") for t in status.get("tasks", [])}
    victim = next((i for i in connect.alive_workers() if connect.worker_id(i) in running_on), 0)
    worker = connect.worker_id(victim)
    progress(
        f"drill: SIGKILL Connect worker {worker}, which runs {source}'s task, mid-copy "
        f"({acked} records acknowledged so far)"
    )
    connect.kill_worker(victim)

    def moved() -> bool:
        tasks = (rest.status(source) or {}).get("tasks", [])
        return bool(tasks) and all(t.get("state") == "RUNNING" and t.get("worker_id") != worker for t in tasks)

    if not wait_until(moved, 120, interval=1.0):
        raise ClusterError(
            f"{source}'s task did not move off the killed worker {worker} within 120 s.",
            f"read the surviving workers' logs under the state directory (connect/{connect.spec.name}/)",
        )
    connect.start_worker(victim)
    return f"Connect worker {worker}"
