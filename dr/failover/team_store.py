"""The failover's state in the team's PostgreSQL database, when the Pulumi backend is ``postgres://``.

One database holds the Pulumi state (the CLI's ``pkg/backend/diy/postgres``) and, in tables of its own
(``kdr_*``), what the failover needs to be resumed from any machine with the URL and the passphrase:

``kdr_failover``  one row per failover of a stack: the :class:`~dr.failover.frame.journal.JournalRecord` as
                  JSON, its status, a version bumped by every write; ``current`` marks the stack's live one.
                  Each write is one transaction, so a crash leaves the previous or the new record.
``kdr_lease``     the lock that serialises failovers of a stack, as a lease: holder, host, pid, since,
                  heartbeat. A lease whose heartbeat is older than :data:`STALE_AFTER_S` is stale; it is
                  taken over only when asked for (``KDR_TAKE_OVER_STALE_LEASE=1``), and the take-over is
                  recorded in ``kdr_event``. A live lease is never taken.
``kdr_event``     an append-only log: lease taken, released, taken over.

The schema is created on first use by versioned, idempotent migrations (``kdr_schema``), serialised
by a transaction-level advisory lock so two first users do not race. The URL's password is never in
a message: :func:`dr.base.pulumi_env.mask_url`.
"""

from __future__ import annotations

import functools
import getpass
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dr.base.errors import ConfigError, LockHeld, StateStoreError
from dr.base.pulumi_env import mask_url

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "STALE_AFTER_S",
    "Lease",
    "LeaseHandle",
    "TeamStore",
    "is_team_url",
    "operator_identity",
    "team_store",
]

STALE_AFTER_S = float(os.environ.get("KDR_LEASE_STALE_S", "30"))
"""A lease whose heartbeat is older than this many seconds belongs to a dead (or cut-off) operator."""

HEARTBEAT_S = max(0.5, STALE_AFTER_S / 6)

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE IF NOT EXISTS kdr_failover (
            stack        text        NOT NULL,
            failover_id  text        NOT NULL,
            version      integer     NOT NULL DEFAULT 1,
            status       text        NOT NULL,
            current      boolean     NOT NULL DEFAULT true,
            record       jsonb       NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (stack, failover_id)
        );
        CREATE UNIQUE INDEX IF NOT EXISTS kdr_failover_current ON kdr_failover (stack) WHERE current;
        CREATE TABLE IF NOT EXISTS kdr_lease (
            stack        text        PRIMARY KEY,
            holder       text        NOT NULL,
            host         text        NOT NULL,
            pid          integer     NOT NULL,
            purpose      text        NOT NULL DEFAULT '',
            acquired_at  timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS kdr_event (
            id     bigserial   PRIMARY KEY,
            stack  text        NOT NULL,
            at     timestamptz NOT NULL DEFAULT now(),
            kind   text        NOT NULL,
            actor  text        NOT NULL,
            detail jsonb       NOT NULL DEFAULT '{}'
        );
        """,
    ),
]
"""(version, SQL) in order; each is applied once, in its own transaction, and recorded in ``kdr_schema``."""

_MIGRATION_LOCK = 0x6B6472  # "kdr": the advisory lock that serialises first-use migrations


def is_team_url(url: str | None) -> bool:
    """True for a PostgreSQL backend URL (``postgres://`` or ``postgresql://``)."""
    return bool(url) and str(url).startswith(("postgres://", "postgresql://"))


def operator_identity() -> str:
    """Who holds a lease: ``$KDR_OPERATOR``, else ``<user>@<host>``."""
    return os.environ.get("KDR_OPERATOR") or f"{getpass.getuser()}@{socket.gethostname()}"


@dataclass(frozen=True)
class Lease:
    """A stack's lease as the database holds it."""

    holder: str
    host: str
    pid: int
    purpose: str
    acquired_at: float
    heartbeat_age_s: float

    @property
    def stale(self) -> bool:
        """True when the holder stopped renewing it (dead or cut off)."""
        return self.heartbeat_age_s > STALE_AFTER_S


class TeamStore:
    """Journal rows, leases and events of the stacks in one PostgreSQL database (``url``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = mask_url(url)
        self._ready = False
        self._local = threading.local()

    # ------------------------------------------------------------------ connection and schema
    def connect(self) -> psycopg.Connection[Any]:
        """A new connection; :class:`StateStoreError` (exit 8) naming the masked URL when unreachable."""
        import psycopg

        try:
            conn = psycopg.connect(_libpq_url(self.url), connect_timeout=5, autocommit=True)
        except psycopg.OperationalError as exc:
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise StateStoreError(
                f"the team database {self.shown} is unreachable: {reason.replace(self.url, self.shown)}.",
                "check that PostgreSQL runs and the URL, user and password in PULUMI_BACKEND_URL are right; "
                "nothing was changed",
            ) from None
        if not self._ready:
            self._migrate(conn)
            self._ready = True
        return conn

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's connection (opened once, autocommit: a write is one ``conn.transaction()``); a
        connection lost meanwhile is dropped and reported as :class:`StateStoreError`, the next call reconnects."""
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = self._local.conn = self.connect()
        try:
            yield conn
        except psycopg.OperationalError as exc:
            self._local.conn = None
            conn.close()
            raise StateStoreError(
                f"the team database {self.shown} went away: {str(exc).strip().replace(self.url, self.shown)}.",
                "rerun when PostgreSQL answers again: the journal holds every step finished so far",
            ) from None

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS kdr_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT coalesce(max(version), 0) FROM kdr_schema").fetchone()
            have = int(row[0]) if row else 0
            newest = MIGRATIONS[-1][0]
            if have > newest:
                raise ConfigError(
                    f"the team database {self.shown} has kdr schema version {have}; this drctl knows up to {newest}.",
                    "use the drctl version that upgraded the database",
                )
            for version, sql in MIGRATIONS:
                if version > have:
                    conn.execute(sql)
                    conn.execute("INSERT INTO kdr_schema (version) VALUES (%s)", (version,))

    def schema_version(self) -> int:
        """The newest migration applied."""
        with self.session() as conn:
            row = conn.execute("SELECT max(version) FROM kdr_schema").fetchone()
            return int(row[0]) if row and row[0] is not None else 0

    # ------------------------------------------------------------------ journal rows
    def load(self, stack: str) -> dict[str, Any] | None:
        """The stack's current journal record, or None."""
        with self.session() as conn:
            row = conn.execute("SELECT record FROM kdr_failover WHERE stack = %s AND current", (stack,)).fetchone()
            return dict(row[0]) if row else None

    def version(self, stack: str) -> int | None:
        """The write count of the stack's current journal row (None: no current failover)."""
        with self.session() as conn:
            row = conn.execute("SELECT version FROM kdr_failover WHERE stack = %s AND current", (stack,)).fetchone()
            return int(row[0]) if row else None

    def create(self, stack: str, record: dict[str, Any]) -> None:
        """Make ``record`` the stack's current failover (the previous one stays, no longer current); one transaction."""
        with self.session() as conn, conn.transaction():
            conn.execute("UPDATE kdr_failover SET current = false WHERE stack = %s AND current", (stack,))
            conn.execute(
                "INSERT INTO kdr_failover (stack, failover_id, status, record) VALUES (%s, %s, %s, %s)",
                (stack, record["failover_id"], record["status"], json.dumps(record, default=str)),
            )

    def save(self, stack: str, record: dict[str, Any], *, current: bool = True) -> None:
        """Write ``record`` over its row (version + 1) in one transaction."""
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "UPDATE kdr_failover SET record = %s, status = %s, current = %s, version = version + 1, "
                "updated_at = now() WHERE stack = %s AND failover_id = %s",
                (json.dumps(record, default=str), record["status"], current, stack, record["failover_id"]),
            )
            if cur.rowcount != 1:
                raise StateStoreError(
                    f"failover {record['failover_id']} of stack '{stack}' is not in the team database {self.shown}.",
                    "run `drctl status` to see the stack's current failover",
                )

    def history(self, stack: str) -> list[dict[str, Any]]:
        """Every failover of the stack, the newest first."""
        with self.session() as conn:
            rows = conn.execute(
                "SELECT record FROM kdr_failover WHERE stack = %s ORDER BY created_at DESC", (stack,)
            ).fetchall()
            return [dict(r[0]) for r in rows]

    # ------------------------------------------------------------------ lease
    def lease(self, stack: str) -> Lease | None:
        """The stack's lease, if anybody holds one."""
        with self.session() as conn:
            row = conn.execute(
                "SELECT holder, host, pid, purpose, extract(epoch FROM acquired_at), "
                "extract(epoch FROM now() - heartbeat_at) FROM kdr_lease WHERE stack = %s",
                (stack,),
            ).fetchone()
        if row is None:
            return None
        return Lease(str(row[0]), str(row[1]), int(row[2]), str(row[3]), float(row[4]), float(row[5]))

    def acquire(self, stack: str, purpose: str = "failover", *, take_over: bool = False) -> LeaseHandle:
        """Take the stack's lease (one transaction): free → taken; stale and ``take_over`` → taken over
        and journaled; otherwise :class:`LockHeld` naming the holder."""
        me, host, pid = operator_identity(), socket.gethostname(), os.getpid()
        for _ in range(3):
            with self.session() as conn, conn.transaction():
                # the insert decides between simultaneous starts: the primary key admits exactly one
                cur = conn.execute(
                    "INSERT INTO kdr_lease (stack, holder, host, pid, purpose) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (stack) DO NOTHING",
                    (stack, me, host, pid, purpose),
                )
                if cur.rowcount == 1:
                    self._event(conn, stack, "lease-taken", me, {"host": host, "pid": pid, "purpose": purpose})
                    return LeaseHandle(self, stack, me, pid)
                row = conn.execute(
                    "SELECT holder, host, pid, extract(epoch FROM now() - heartbeat_at), acquired_at "
                    "FROM kdr_lease WHERE stack = %s FOR UPDATE",
                    (stack,),
                ).fetchone()
                if row is None:  # released between the two statements: try again
                    continue
                self._refuse_unless_stale(stack, row, take_over)
                conn.execute(
                    "UPDATE kdr_lease SET holder = %s, host = %s, pid = %s, purpose = %s, acquired_at = now(), "
                    "heartbeat_at = now() WHERE stack = %s",
                    (me, host, pid, purpose, stack),
                )
                detail = {"from": row[0], "host": row[1], "pid": row[2], "age_s": round(float(row[3]), 1)}
                self._event(conn, stack, "lease-taken-over", me, detail)
                return LeaseHandle(self, stack, me, pid)
        raise LockHeld(
            f"the lease on stack '{stack}' changed hands three times while this run tried to take it.",
            f"rerun; `drctl status --stack {stack}` shows who holds it",
        )

    @staticmethod
    def _refuse_unless_stale(stack: str, row: Any, take_over: bool) -> None:
        holder, age = f"{row[0]} (pid {row[2]} on {row[1]})", float(row[3])
        if age <= STALE_AFTER_S:
            raise LockHeld(
                f"a failover of stack '{stack}' is held by {holder}, alive {age:.0f} s ago, "
                f"since {row[4]:%Y-%m-%d %H:%M:%S %Z}.",
                f"wait for it to finish (`drctl status --stack {stack}` shows its progress); "
                "a live lease is never taken over",
            )
        if not take_over:
            raise LockHeld(
                f"the lease on stack '{stack}' is stale: {holder} last renewed it {age:.0f} s ago "
                f"(stale after {STALE_AFTER_S:.0f} s).",
                "make sure that operator is gone, then rerun with --take-over (or KDR_TAKE_OVER_STALE_LEASE=1) to take it "
                f"over (recorded); `drctl status --stack {stack}` shows where the failover stopped",
            )

    def renew(self, stack: str, holder: str, pid: int) -> bool:
        """Renew the heartbeat; False when the lease is no longer ours."""
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "UPDATE kdr_lease SET heartbeat_at = now() WHERE stack = %s AND holder = %s AND pid = %s",
                (stack, holder, pid),
            )
            return cur.rowcount == 1

    def release(self, stack: str, holder: str, pid: int) -> None:
        """Give the lease back (a no-op when it was taken over meanwhile)."""
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "DELETE FROM kdr_lease WHERE stack = %s AND holder = %s AND pid = %s", (stack, holder, pid)
            )
            if cur.rowcount:
                self._event(conn, stack, "lease-released", holder, {"pid": pid})

    def events(self, stack: str) -> list[dict[str, Any]]:
        """The stack's lease events, oldest first."""
        with self.session() as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM at), kind, actor, detail FROM kdr_event WHERE stack = %s ORDER BY id",
                (stack,),
            ).fetchall()
        return [{"at": float(r[0]), "kind": r[1], "actor": r[2], "detail": r[3]} for r in rows]

    @staticmethod
    def _event(conn: psycopg.Connection[Any], stack: str, kind: str, actor: str, detail: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO kdr_event (stack, kind, actor, detail) VALUES (%s, %s, %s, %s)",
            (stack, kind, actor, json.dumps(detail, default=str)),
        )


class LeaseHandle:
    """A held lease, renewed by a daemon thread every :data:`HEARTBEAT_S` until :meth:`release`."""

    def __init__(self, store: TeamStore, stack: str, holder: str, pid: int) -> None:
        self.store, self.stack, self.holder, self.pid = store, stack, holder, pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"kdr-lease-{stack}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if not self.store.renew(self.stack, self.holder, self.pid):
                    return
            except Exception:  # noqa: BLE001 — the database is away: the lease goes stale if it stays away; the run goes on
                continue

    def release(self) -> None:
        """Stop renewing and give the lease back."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.store.release(self.stack, self.holder, self.pid)


def _libpq_url(url: str) -> str:
    # libpq knows postgres:// and postgresql://, but not the Pulumi-only query keys
    base, _, query = url.partition("?")
    keep = [kv for kv in query.split("&") if kv and kv.split("=", 1)[0] in _LIBPQ_KEYS]
    return base + ("?" + "&".join(keep) if keep else "")


_LIBPQ_KEYS = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options"}
)


@functools.cache
def team_store(url: str) -> TeamStore:
    """The store of the database ``url`` (one per URL per process)."""
    return TeamStore(url)
