"""Whether the chosen provisioning has been measured to carry an estate of this size (pure).

``provisioning: individual`` (the default) makes a Pulumi resource per topic and per ACL, and the
Kafka provider lists every ACL of the cluster after each ACL it creates — the cost of an ``up`` grows
with the square of the ACLs. docs/scale.md has its measured sizes: 10 and 100 topics (20
applications) and the 200-topic / 40-application integration test came up (``pulumi up`` 256.9 s at
200 topics); 1,000 topics / 200 applications failed after 53 minutes (``write: broken pipe``, at
~94 % of its ~4,020 resources). ``provisioning: batched`` came up at that size in 96-132 s.
"""

from __future__ import annotations

from dr.topology.model import Topology

__all__ = ["INDIVIDUAL_MEASURED_APPLICATIONS", "INDIVIDUAL_MEASURED_TOPICS", "provisioning_warning"]

INDIVIDUAL_MEASURED_TOPICS = 200
"""The most topics ``provisioning: individual`` was measured to carry (docs/scale.md)."""
INDIVIDUAL_MEASURED_APPLICATIONS = 40
"""The most applications it was measured to carry, at that topic count (docs/scale.md)."""


def provisioning_warning(topology: Topology) -> str | None:
    """A warning when ``topology`` is larger than its provisioning was measured to carry, else None."""
    if topology.provisioning != "individual":
        return None
    topics = len(topology.topics)
    apps = len(topology.principals.applications)
    if topics <= INDIVIDUAL_MEASURED_TOPICS and apps <= INDIVIDUAL_MEASURED_APPLICATIONS:
        return None
    return (
        f"stack '{topology.name}' declares {topics} topics and {apps} applications with "
        f"`provisioning: individual` (the default), which was measured to carry up to "
        f"{INDIVIDUAL_MEASURED_TOPICS} topics / {INDIVIDUAL_MEASURED_APPLICATIONS} applications: at 1,000 topics / "
        "200 applications its `pulumi up` failed after 53 minutes (write: broken pipe; the Kafka provider "
        "lists every ACL after each one it creates). Set `kafka-dr:provisioning: batched` in the stack "
        "file (measured at 1,000 topics / 200 applications: `pulumi up` 96-132 s, no-op preview 8-9 s; "
        "docs/scale.md)."
    )
