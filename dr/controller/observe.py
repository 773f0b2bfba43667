"""What a controller sees of its site: a metadata fetch and a produce probe on the canary topic, and
how long each cluster has been down (:class:`Detector`).

The canary topic is ``kdr-controller-canary`` (one partition, replicated like the cluster allows, kept an
hour): created by the controller on first use as the admin, never declared in the stack, so no link copies
it and no application is granted it. A cluster is **up** when its metadata answers and one record
produced with ``acks=all`` is acknowledged within the probe's timeout — a cluster that answers metadata
but cannot take a write (no leader, too few in-sync replicas, a frozen controller quorum) is down for its
applications, so it is down here too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from dr.base.errors import AuthError, ClusterError
from dr.kafka.client import Endpoint, connected_admin

__all__ = [
    "CANARY_TOPIC",
    "LEASE_FENCE_AUTHORIZER",
    "Detection",
    "Detector",
    "Probe",
    "broker_authorizers",
    "probe_site",
]

LEASE_FENCE_AUTHORIZER = "kafkadr.fence.LeaseFenceAuthorizer"
"""The broker-side lease fence's class (``toolchain/lease-authorizer``; :mod:`dr.controller.permit`)."""

CANARY_TOPIC = "kdr-controller-canary"
"""The topic each controller writes its produce probe to (see the module doc)."""

_CANARY_CONFIG = {"retention.ms": str(3_600_000), "cleanup.policy": "delete"}

Detection = Literal["up", "suspect", "down"]
"""``up``; ``suspect``: failing, for less than ``detect_after_s``; ``down``: failing for at least that long."""


@dataclass(frozen=True)
class Probe:
    """One look at a cluster."""

    cluster: str
    metadata_ok: bool
    produce_ok: bool
    brokers: int = 0
    error: str | None = None

    @property
    def up(self) -> bool:
        """Metadata answered and the canary record was acknowledged."""
        return self.metadata_ok and self.produce_ok


def probe_site(cluster: str, endpoint: Endpoint, timeout_s: float) -> Probe:
    """Fetch ``cluster``'s metadata, create the canary topic when missing, produce one record to it."""
    try:
        admin, metadata = connected_admin(endpoint, timeout=timeout_s)
    except (ClusterError, AuthError) as exc:
        return Probe(cluster, metadata_ok=False, produce_ok=False, error=exc.problem)
    brokers = len(metadata.brokers)
    if CANARY_TOPIC not in metadata.topics:
        topic = NewTopic(CANARY_TOPIC, 1, min(3, max(1, brokers)), config=_CANARY_CONFIG)
        try:
            admin.create_topics([topic])[CANARY_TOPIC].result(timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 — created meanwhile by another controller, or refused: the produce says
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code != KafkaError.TOPIC_ALREADY_EXISTS:
                return Probe(cluster, True, False, brokers, f"cannot create the canary topic {CANARY_TOPIC}: {exc}")
    outcome: list[KafkaError | None] = []
    producer = Producer(
        endpoint.config(
            **{
                "acks": "all",
                "enable.idempotence": False,
                "message.timeout.ms": max(1000, int(timeout_s * 1000)),
                "log_level": 0,
            }
        )
    )
    producer.produce(
        CANARY_TOPIC, key=cluster.encode(), value=str(time.time()).encode(), on_delivery=lambda e, _m: outcome.append(e)
    )
    producer.flush(timeout_s + 1)
    if not outcome:
        return Probe(cluster, True, False, brokers, "the canary record was not acknowledged in time")
    if outcome[0] is not None:
        return Probe(cluster, True, False, brokers, f"the canary record was refused: {outcome[0].str()}")
    return Probe(cluster, True, True, brokers)


def broker_authorizers(endpoint: Endpoint, timeout_s: float) -> dict[str, str]:
    """Each broker's ``authorizer.class.name`` as its own describeConfigs says (broker id → class; empty when
    unset): what can be observed of whether the site's brokers run the broker-side lease fence."""
    admin, metadata = connected_admin(endpoint, timeout=timeout_s)
    resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in sorted(metadata.brokers)]
    out: dict[str, str] = {}
    try:
        for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
            entry = future.result(timeout=timeout_s).get("authorizer.class.name")
            out[resource.name] = (entry.value or "") if entry is not None else ""
    except Exception as exc:  # noqa: BLE001 — confluent_kafka raises KafkaException or a timeout here
        raise ClusterError(
            f"cannot describe the brokers' configuration: {exc}", "check the admin's DESCRIBE_CONFIGS right"
        ) from exc
    return out


@dataclass
class Detector:
    """Each cluster's detection state from successive probes (pure: the caller gives the time)."""

    detect_after_s: float
    down_since: dict[str, float] = field(default_factory=dict)

    def update(self, cluster: str, up: bool, now: float) -> Detection:
        """Record one observation of ``cluster`` at ``now`` (monotonic seconds); its state after it."""
        if up:
            self.down_since.pop(cluster, None)
            return "up"
        since = self.down_since.setdefault(cluster, now)
        return "down" if now - since >= self.detect_after_s else "suspect"

    def down_for(self, cluster: str, now: float) -> float:
        """Seconds ``cluster`` has been failing (0 when up)."""
        since = self.down_since.get(cluster)
        return 0.0 if since is None else now - since
