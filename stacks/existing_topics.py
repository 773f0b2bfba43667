"""Topics that already exist on an external cluster: imported into the stack, not created (per-resource mode).

A team adopting a running cluster (``drctl estate adopt``) declares topics that are already there. A
``pulumi_kafka`` Topic would fail to create them ("topic already exists"), so the program registers each
one found on the cluster with Pulumi's ``import_`` resource option (its ID is the topic's name): the first
``up`` imports it, and an import is refused by the engine when the declaration differs from the topic (its
partitions, replication factor or configurations) — the same refusal as the batched ``TopicSet``'s. Once
the topic is in the state, the engine ignores ``import_`` whose ID equals the state's, so keeping the
option is harmless and the program needs no memory of what it adopted.

The provider reads only topic-level settings, so ``min.insync.replicas`` that the topic inherits from the
brokers is not declared on an imported topic when its value already is the stack's: declaring it would
make the import differ. A different value is declared, so the import says so.

The cluster is read once per program run (one metadata request and one DescribeConfigs for the declared
topics that exist). A cluster that cannot be read is warned about and nothing is imported (the creates
then fail with the cluster's own error). Under Pulumi's mocks (unit tests) nothing is read.
"""

from __future__ import annotations

from collections.abc import Iterable

import pulumi
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_monitor

from dr.base.errors import DRError
from dr.kafka.client import Endpoint, connected_admin
from dr.kafka.live import TopicConfigs, topic_configs

__all__ = ["declared_config", "existing_topics"]

MIN_INSYNC = "min.insync.replicas"


def existing_topics(cluster: str, endpoint: Endpoint, names: Iterable[str]) -> dict[str, TopicConfigs]:
    """Of ``names``, the topics the cluster already holds, with their configuration (empty under mocks)."""
    if isinstance(get_monitor(), MockMonitor):
        return {}
    wanted = sorted(set(names))
    if not wanted:
        return {}
    try:
        admin, metadata = connected_admin(endpoint, timeout=15)
        there = [n for n in wanted if n in metadata.topics and metadata.topics[n].error is None]
        return topic_configs(admin, endpoint, there)
    except DRError as exc:
        pulumi.log.warn(
            f"cluster {cluster}: could not read which declared topics already exist ({exc.problem}); none is "
            "imported, so creating one that exists will fail"
        )
        return {}


def declared_config(config: dict[str, str], found: TopicConfigs) -> dict[str, str]:
    """The ``config`` input of a topic imported from ``found`` (pure): ``config`` without
    ``min.insync.replicas`` when the topic inherits it from the brokers with the same value."""
    if not found.min_insync_pinned and config.get(MIN_INSYNC) == str(found.min_insync_replicas):
        return {key: value for key, value in config.items() if key != MIN_INSYNC}
    return config
