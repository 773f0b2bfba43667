"""``drctl status --parity``: read the clusters each link joins and name every difference (:mod:`dr.topology.parity`).

Per serving cluster of a link: one metadata request, one DescribeConfigs, one DescribeAcls, one
DescribeUserScramCredentials (:func:`dr.kafka.live.read_live`) and Kafka's ``ConfigCommand`` for the user
quotas (one JVM). A cluster that cannot be read is a problem of its own and joins no comparison.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from dr.base.errors import DRError
from dr.estate.estate import Estate
from dr.kafka.live import LiveCluster, read_live
from dr.runtime.quota_reader import read_quotas
from dr.topology import Kind, Role
from dr.topology.parity import parity_drifts

__all__ = ["parity_problems"]

_SERVING = (Role.ACTIVE, Role.PASSIVE, Role.EDGE)


def _read(estate: Estate, name: str) -> LiveCluster:
    endpoint = estate.endpoint(name)
    held = read_live(endpoint)
    if estate.topology.cluster(name).kind is not Kind.CONFLUENT_CLOUD:
        held.quotas = read_quotas(endpoint, kinds=(("users",),))
    return held


def parity_problems(estate: Estate) -> list[str]:
    """One problem line per difference between the clusters the topology's links join, with its repair."""
    t = estate.topology
    names = sorted({n for link in t.links for n in (link.source, link.target) if t.cluster(n).role in _SERVING})
    problems: list[str] = []
    live: dict[str, LiveCluster] = {}

    def attempt(name: str) -> tuple[str, LiveCluster | None, str | None]:
        try:
            return name, _read(estate, name), None
        except DRError as exc:
            return name, None, exc.problem

    with ThreadPoolExecutor(max(1, len(names))) as pool:
        for name, held, error in pool.map(attempt, names):
            if held is not None:
                live[name] = held
            else:
                problems.append(f"parity: cluster {name} could not be read: {' '.join(str(error).split())}")
    return problems + [d.text() for d in parity_drifts(t, live)]
