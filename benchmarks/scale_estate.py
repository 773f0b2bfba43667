"""The generated estate of N topics and N/5 applications, shared by ``benchmarks/scale_bench.py`` and
``tests/integration/test_scale_estate.py`` (one generator, so the test runs the estate the benchmark measures).

N topics of 3 partitions in N/5 domains ``dNNN.t0..t4``; application ``appNNN`` produces its domain's
topics and consumes the next domain's, with its own consumer group ``appNNN``. An application owns
its topics by prefix (``produces_prefix: "d007."``, ``consumes_prefix: "d008."``: one prefixed ACL per
operation) unless it is one of the last ``named`` applications, which list every topic by name as
stack files always did (one literal ACL per topic and operation).
"""

from __future__ import annotations

from typing import Any

__all__ = ["applications", "generate", "topic_names"]


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
