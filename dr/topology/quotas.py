"""The client quotas a cluster carries, as pure data (no engine, no client).

Every cluster that carries the applications' SCRAM users (:class:`stacks.access.ClusterAccess`: the
active, the passive, every edge and peer — and a standby once a failover made it passive) carries the
same quotas: each application's own (``principals.applications[].quota``) on its user entity, and
``principals.default_quota`` on Kafka's default user entity. Declared from the stack file on every serving
cluster, they are on B before a failover and reach C with the ``pulumi up`` that provisions it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dr.topology.model import Topology

__all__ = ["UserQuota", "user_quotas"]


@dataclass(frozen=True, order=True)
class UserQuota:
    """Kafka quota configs (``producer_byte_rate`` → ``"1048576"``) on one user entity."""

    user: str | None
    """The user principal's name; None is Kafka's default user entity (``--entity-default``)."""
    configs: dict[str, str] = field(compare=False)

    @property
    def logical_name(self) -> str:
        """A stable resource name suffix: ``default`` or ``user-<name>`` (never the same; principal names
        are URN-safe by validation)."""
        return "default" if self.user is None else f"user-{self.user}"


def user_quotas(topology: Topology) -> list[UserQuota]:
    """The default user quota (when declared) first, then each application's own, by name."""
    found = [UserQuota(app.name, app.quota.configs()) for app in topology.principals.applications if app.quota]
    default = topology.principals.default_quota
    head = [UserQuota(None, default.configs())] if default is not None else []
    return head + sorted(found, key=lambda q: q.user or "")
