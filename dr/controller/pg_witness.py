"""The lease in the team's PostgreSQL database: a single witness for teams without a third etcd site.

It reuses the team store's connection handling (:class:`~dr.failover.record.team_store.TeamStore`: the URL of the
``postgres://`` backend, its migrations, its masked messages). The row ``kdr_witness`` of the stack holds
the holder, a fencing token from a sequence (it grows with every new holder) and an expiry in the
database's own clock (``now() + ttl``), so the holders' clocks never decide who holds it. Taking the lease
is one statement that inserts the row, or replaces it only when it has expired.

Observers' verdicts are rows of ``kdr_observer`` (one per observer, with an expiry in the database's
clock), the last automatic failover the row of ``kdr_automatic``.

One server is one point of failure: while it is down nobody takes or renews the lease (automatic failover
is off, and the active site fences itself), which is the safe side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dr.base.errors import ClusterError, StateStoreError
from dr.controller.witness import Holding
from dr.failover.record.team_store import TeamStore

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresWitness"]


class PostgresWitness:
    """The lease of ``stack`` in ``store``'s database (see the module doc)."""

    def __init__(self, store: TeamStore, stack: str, ttl_s: float) -> None:
        self.store, self.stack, self.ttl_s = store, stack, ttl_s

    def describe(self) -> str:
        """``postgres <masked url> stack <stack>``."""
        return f"postgres {self.store.shown} stack {self.stack}"

    def acquire(self, holder: str) -> Holding | None:
        """Insert the stack's row, or replace an expired one; None when a live holder has it."""
        with self._session() as conn:
            row = conn.execute(
                "INSERT INTO kdr_witness AS w (project, stack, holder, token, expires_at) "
                "VALUES (%s, %s, %s, nextval('kdr_witness_token'), now() + make_interval(secs => %s)) "
                "ON CONFLICT (project, stack) DO UPDATE SET holder = excluded.holder, token = excluded.token, "
                "acquired_at = now(), expires_at = excluded.expires_at WHERE w.expires_at < now() "
                "RETURNING token, extract(epoch FROM acquired_at)",
                (self.store.project, self.stack, holder, self.ttl_s),
            ).fetchone()
        return None if row is None else Holding(holder=holder, token=int(row[0]), acquired_at=float(row[1]))

    def renew(self, holding: Holding) -> bool:
        """Push the expiry out by the TTL, only while the row is this holding's and not expired."""
        with self._session() as conn:
            cur = conn.execute(
                "UPDATE kdr_witness SET expires_at = now() + make_interval(secs => %s) "
                "WHERE project = %s AND stack = %s AND token = %s AND expires_at >= now()",
                (self.ttl_s, self.store.project, self.stack, holding.token),
            )
            return cur.rowcount == 1

    def current(self) -> Holding | None:
        """The live holder, or None (no row, or an expired one)."""
        with self._session() as conn:
            row = conn.execute(
                "SELECT holder, token, extract(epoch FROM acquired_at) FROM kdr_witness "
                "WHERE project = %s AND stack = %s AND expires_at >= now()",
                (self.store.project, self.stack),
            ).fetchone()
        return None if row is None else Holding(holder=str(row[0]), token=int(row[1]), acquired_at=float(row[2]))

    def release(self, holding: Holding) -> None:
        """Delete the row if it is still this holding's."""
        with self._session() as conn:
            conn.execute(
                "DELETE FROM kdr_witness WHERE project = %s AND stack = %s AND token = %s",
                (self.store.project, self.stack, holding.token),
            )

    def close(self) -> None:
        """The store keeps one connection per thread; nothing of the lease is let go."""

    def publish(self, observer: str, states: dict[str, str], ttl_s: float) -> None:
        """Upsert ``observer``'s row, live for ``ttl_s`` in the database's clock."""
        with self._session() as conn:
            conn.execute(
                "INSERT INTO kdr_observer (project, stack, observer, states, expires_at) "
                "VALUES (%s, %s, %s, %s::jsonb, now() + make_interval(secs => %s)) "
                "ON CONFLICT (project, stack, observer) DO UPDATE SET states = excluded.states, at = now(), "
                "expires_at = excluded.expires_at",
                (self.store.project, self.stack, observer, json.dumps(states), ttl_s),
            )

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Every row not expired."""
        with self._session() as conn:
            rows = conn.execute(
                "SELECT observer, states FROM kdr_observer WHERE project = %s AND stack = %s AND expires_at >= now()",
                (self.store.project, self.stack),
            ).fetchall()
        return {str(r[0]): {str(k): str(v) for k, v in dict(r[1]).items()} for r in rows}

    def mark_automatic(self, holder: str, token: int) -> None:
        """Upsert the stack's ``kdr_automatic`` row (now, in the database's clock)."""
        with self._session() as conn:
            conn.execute(
                "INSERT INTO kdr_automatic (project, stack, holder, token) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (project, stack) DO UPDATE SET at = now(), holder = excluded.holder, token = excluded.token",
                (self.store.project, self.stack, holder, token),
            )

    def last_automatic(self) -> float | None:
        """The row's time, or None."""
        with self._session() as conn:
            row = conn.execute(
                "SELECT extract(epoch FROM at) FROM kdr_automatic WHERE project = %s AND stack = %s",
                (self.store.project, self.stack),
            ).fetchone()
        return None if row is None else float(row[0])

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        """The store's session; its :class:`StateStoreError` is the witness not answering."""
        try:
            with self.store.session() as conn:
                yield conn
        except StateStoreError as exc:
            raise _unreachable(exc) from None


def _unreachable(exc: StateStoreError) -> ClusterError:
    return ClusterError(
        f"the witness (the team database) does not answer: {exc.problem}",
        "start PostgreSQL or restore the network to it; until then no controller takes or renews the lease, "
        "and automatic failover is off",
    )
