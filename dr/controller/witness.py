"""One protocol for the stack's lease, whatever consensus store holds it (etcd v3, the team's PostgreSQL).

The lease says which site's controller may act: at most one holder at a time, a time to live the holder
renews, and a **fencing token** that grows with every new holder (etcd: the leader key's create revision;
PostgreSQL: a sequence). Whatever a holder does to the clusters carries its token, so an act of an
earlier holder (frozen, cut off, then back) is recognised as older and refused. Shaped like etcd's
``concurrency`` package (a session's lease, an election key whose revision orders the holders), read,
not copied.

Beside the lease the witness keeps what the automatic failover needs from every site (:mod:`.decide`):
each observer's **verdict** about each cluster (``up``/``suspect``/``down``), published every pass with a
time to live, so a site reads what the others see and a dead observer's verdict disappears by itself; and
the time of the stack's **last automatic failover** (the cooldown), never kept in a controller's memory.

A store that cannot answer raises :class:`~dr.base.errors.ClusterError` naming it: the controller never
reads "no answer" as "free".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Holding", "Witness"]


@dataclass(frozen=True)
class Holding:
    """A lease as the witness holds it: who, the fencing token, and when it was taken."""

    holder: str
    token: int
    """Grows with every new holder: the fencing token every act of this holder carries."""
    acquired_at: float
    """Seconds since the epoch when the holder took it (the holder's clock)."""
    lease_id: int = 0
    """etcd: the lease's id (0 for a store without one)."""


class Witness(Protocol):
    """A lease with a TTL in a consensus store (see the module doc)."""

    ttl_s: float
    """The lease's time to live: a holder that stops renewing loses it after this long."""

    def describe(self) -> str:
        """Where the witness is, for messages (never a password)."""
        ...

    def acquire(self, holder: str) -> Holding | None:
        """Take the lease for ``holder`` if nobody holds it: the holding, or None when another does."""
        ...

    def renew(self, holding: Holding) -> bool:
        """Extend ``holding`` by the TTL; False when it is no longer held (expired, or taken by another)."""
        ...

    def current(self) -> Holding | None:
        """Who holds the lease now, or None."""
        ...

    def release(self, holding: Holding) -> None:
        """Give ``holding`` back (a no-op when it is no longer held)."""
        ...

    def close(self) -> None:
        """Let go of connections (not the lease)."""
        ...

    def publish(self, observer: str, states: dict[str, str], ttl_s: float) -> None:
        """Publish ``observer``'s verdict (cluster → ``up``/``suspect``/``down``), live for ``ttl_s`` seconds."""
        ...

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Every observer's live verdict: observer → (cluster → state)."""
        ...

    def mark_automatic(self, holder: str, token: int) -> None:
        """Record that ``holder`` (with fencing token ``token``) starts an automatic failover now."""
        ...

    def last_automatic(self) -> float | None:
        """When the stack's last automatic failover was started (seconds since the epoch), or None."""
        ...
