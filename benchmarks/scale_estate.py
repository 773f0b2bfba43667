"""The generated estate of N topics and N/5 applications, shared by ``benchmarks/scale_bench.py`` and
``tests/integration/test_scale_estate.py`` (one generator, so the test runs the estate the benchmark measures).

N topics of 3 partitions in N/5 domains ``dNNN.t0..t4``; application ``appNNN`` produces its domain's
topics and consumes the next domain's, with its own consumer group ``appNNN``. An application owns
its topics by prefix (``produces_prefix: "d007."``, ``consumes_prefix: "d008."``: one prefixed ACL per
operation) unless it is one of the last ``named`` applications, which list every topic by name as
stack files always did (one literal ACL per topic and operation).

:func:`generate_platform` is the estate of a platform team instead (issue 46): N topics in N/50 domains
(at least 2) with 1 to 12 partitions each (about 4.2 per topic on average), N/5 applications each owning
1 to 4 topics of its domain and reading 2 to 8 topics of other domains, every topic named (one literal
ACL per topic and operation), ``provisioning: batched``. Every choice is a pure function of the indices,
so two runs build the same estate.
"""

from __future__ import annotations

from typing import Any

__all__ = ["applications", "generate", "generate_platform", "platform_estate", "topic_names"]


def _domains(n_topics: int) -> tuple[int, int]:
    domains = max(2, n_topics // 5)
    return domains, max(1, n_topics // domains)


def topic_names(n_topics: int) -> list[str]:
    """The topics of the generated estate, domain by domain."""
    domains, per = _domains(n_topics)
    return [f"d{d:03d}.t{j}" for d in range(domains) for j in range(per)]


def applications(n_topics: int, *, named: int = 0) -> list[dict[str, Any]]:
    """The applications of the generated estate; the last ``named`` list their topics by name."""
    domains, per = _domains(n_topics)
    apps = []
    for d in range(domains):
        nxt = (d + 1) % domains
        owns: dict[str, Any]
        if d >= domains - named:
            owns = {
                "produces": [f"d{d:03d}.t{j}" for j in range(per)],
                "consumes": [f"d{nxt:03d}.t{j}" for j in range(per)],
            }
        else:
            owns = {"produces_prefix": f"d{d:03d}.", "consumes_prefix": f"d{nxt:03d}."}
        apps.append({"name": f"app{d:03d}", **owns, "consumer_group": f"app{d:03d}"})
    return apps


def generate(config: dict[str, Any], n_topics: int, *, named: int = 0) -> dict[str, Any]:
    """``config`` (a stack file's ``config:`` mapping) with the generated topics and applications in
    place of its own; the clusters, links and other principals are kept. Returns ``config``."""
    config["kafka-dr:topics"] = [
        {"name": name, "partitions": 3, "replication_factor": 1, "min_insync_replicas": 1}
        for name in topic_names(n_topics)
    ]
    config["kafka-dr:principals"]["applications"] = applications(n_topics, named=named)
    return config


_PARTITIONS = (1, 1, 2, 3, 3, 4, 6, 12, 2, 6)
"""Partition counts cycled through by a pseudo-random index: from 1 to 12, 4.0 on average."""


def _pick(i: int, salt: int) -> int:
    """A deterministic spread of ``i`` (Knuth's multiplicative hash): the same estate every run."""
    return ((i * 2654435761) ^ (salt * 40503)) & 0xFFFFFFFF


def platform_estate(n_topics: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The platform team's estate: its topics and its applications (see the module doc)."""
    domains = max(2, n_topics // 50)
    names = [f"dom{i % domains:02d}.topic{i:04d}" for i in range(n_topics)]
    by_domain: dict[int, list[str]] = {}
    for i, name in enumerate(names):
        by_domain.setdefault(i % domains, []).append(name)
    topics = [
        {
            "name": name,
            "partitions": _PARTITIONS[_pick(i, 1) % len(_PARTITIONS)],
            "replication_factor": 1,
            "min_insync_replicas": 1,
        }
        for i, name in enumerate(names)
    ]
    apps: list[dict[str, Any]] = []
    cursor = {d: 0 for d in by_domain}
    for a in range(max(1, n_topics // 5)):
        d = a % domains
        mine = by_domain[d]
        owned = [mine[(cursor[d] + k) % len(mine)] for k in range(1 + _pick(a, 2) % 4)]
        cursor[d] += len(owned)
        others = [n for dd, ts in by_domain.items() if dd != d for n in ts]
        reads = sorted({others[_pick(a * 8 + k, 3) % len(others)] for k in range(2 + _pick(a, 4) % 7)})
        apps.append(
            {"name": f"app{a:03d}", "produces": sorted(set(owned)), "consumes": reads, "consumer_group": f"app{a:03d}"}
        )
    return topics, apps


def generate_platform(config: dict[str, Any], n_topics: int) -> dict[str, Any]:
    """``config`` with the platform team's estate (:func:`platform_estate`) in place of its own topics and
    applications, provisioned in batches. Returns ``config``."""
    topics, apps = platform_estate(n_topics)
    config["kafka-dr:topics"] = topics
    config["kafka-dr:principals"]["applications"] = apps
    config["kafka-dr:provisioning"] = "batched"
    return config
