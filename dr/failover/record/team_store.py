"""The failover's state in the team's PostgreSQL database, when the Pulumi backend is ``postgres://``.

One database holds the Pulumi state (the CLI's ``pkg/backend/diy/postgres``) and, in tables of its own
(``kdr_*``), what the failover needs to be resumed from any machine with the URL and the passphrase:

``kdr_failover``  one row per failover of a stack: the :class:`~dr.failover.frame.journal.JournalRecord` as
                  JSON, its status, a version bumped by every write; ``current`` marks the stack's live one.
                  Each write is one transaction, so a crash leaves the previous or the new record.
``kdr_lease``     the lock that serialises failovers of a stack, as a lease: holder, host, pid, since,
                  heartbeat, the holder's staleness threshold and the database's identity of the holder's
                  session (``session_user``, ``inet_client_addr()``, ``pg_backend_pid()``). A lease whose
                  heartbeat is older than the threshold its *holder* recorded (its ``KDR_LEASE_STALE_S``,
                  :func:`stale_after_s`) is stale — the taker's own setting plays no part; it is taken over
                  only when asked for (``KDR_TAKE_OVER_STALE_LEASE=1``), and the take-over is recorded in
                  ``kdr_event``. A live lease is never taken.
``kdr_event``     an append-only log: lease taken, released, taken over, reclaimed; each event carries the
                  database's identity of the session that wrote it beside the self-declared operator name.
``kdr_audit_state`` each link's audit state (:mod:`verification.audit_state`: verified bounds, frontier,
                  residue), so ``drctl audit`` on any machine continues at the bounds the last one reached.
``kdr_verification`` each failover run's verification summary: its verdict and the SHA-256 of its report
                  files (the reports themselves stay in the state directory of the machine that wrote them).
``kdr_witness``   the per-site controller's lease when this database is its witness
                  (:mod:`dr.controller.pg_witness`): holder, fencing token, expiry.
``kdr_observer``  each controller's (observer's) verdict about each cluster, with an expiry; and
``kdr_automatic`` the stack's last automatic failover (its cooldown), for the same witness.

Every row is keyed by the Pulumi project and the stack (``project``: ``name:`` of ``Pulumi.yaml``).

**Fencing.** Each lease taken gets a new ``epoch`` (a sequence). A journal write by a lease holder is
made in one transaction with a check that the stack's lease still carries the writer's epoch: an
operator whose stale lease was taken over (its process frozen, cut off, then back) writes nothing and
is refused (:class:`~dr.base.errors.LockHeld`, exit 7) with the name of the operator who took over.

**The database going away mid-run.** A write retries for :data:`WAIT_S` seconds (the step in flight
finishes meanwhile: it does not need the database), then the run stops with
:class:`~dr.base.errors.StateStoreError` (exit 8); the journal holds every step finished before. The
lease left behind goes stale; the same operator on the same machine, logged in to the database as the
same user, takes it back without ``--take-over`` (the process that held it is gone), anybody else needs
``--take-over``. ``KDR_OPERATOR`` is only a name the operator gives; the database user is what proves who.

The schema is created on first use by versioned, idempotent migrations (``kdr_schema``), serialised
by a transaction-level advisory lock so two first users do not race. The URL's password is never in
a message: :func:`dr.base.pulumi_env.mask_url`.
"""

from __future__ import annotations

import functools
import getpass
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dr.base.errors import ConfigError, LockHeld, StateStoreError
from dr.base.project import project_dir_or_none
from dr.base.pulumi_env import mask_url
from dr.failover.record.journal_doc import JournalDocument, LeaseDetail, LeaseEvent, VerdictDocument, VerificationRow
from dr.runtime.process import pid_alive
from verification import audit_state

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "STALE_AFTER_S",
    "Lease",
    "LeaseHandle",
    "TeamStore",
    "finished_by",
    "is_team_url",
    "operator_identity",
    "project_name",
    "report_digest",
    "stale_after_s",
    "team_store",
]

STALE_AFTER_S = 30.0
"""The default staleness threshold: a lease whose heartbeat is older than its holder's threshold
belongs to a dead (or cut-off) operator."""


def stale_after_s() -> float:
    """This operator's staleness threshold, recorded with every lease it takes or renews:
    ``$KDR_LEASE_STALE_S`` (seconds, at least 1), else :data:`STALE_AFTER_S`; :class:`ConfigError` otherwise."""
    text = os.environ.get("KDR_LEASE_STALE_S", "").strip()
    if not text:
        return STALE_AFTER_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1 or value == float("inf"):
        raise ConfigError(
            f"KDR_LEASE_STALE_S={text!r} is not a number of seconds of at least 1.",
            "set it to how long this operator's lease may go without a heartbeat before others may take it "
            "over (default 30), or unset it",
        )
    return value


def heartbeat_s(stale_after: float) -> float:
    """How often a holder renews a lease it recorded with ``stale_after``: six heartbeats per threshold."""
    return max(0.5, stale_after / 6)


_SESSION = "session_user::text, coalesce(host(inet_client_addr()), 'local socket'), pg_backend_pid()"
"""The database's own identity of the session (not the operator's word): user, client address, backend pid."""

WAIT_S = float(os.environ.get("KDR_TEAM_DB_WAIT_S", "20"))
"""How long a journal write waits for the database to answer again before the run stops (exit 8)."""

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
    (
        2,
        # rows keyed by (project, stack); rows of version 1 belong to the project of the default name
        """
        ALTER TABLE kdr_failover ADD COLUMN IF NOT EXISTS project text NOT NULL DEFAULT 'kafka-dr';
        ALTER TABLE kdr_failover ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0;
        ALTER TABLE kdr_failover DROP CONSTRAINT IF EXISTS kdr_failover_pkey;
        ALTER TABLE kdr_failover ADD PRIMARY KEY (project, stack, failover_id);
        DROP INDEX IF EXISTS kdr_failover_current;
        CREATE UNIQUE INDEX kdr_failover_current ON kdr_failover (project, stack) WHERE current;
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS project text NOT NULL DEFAULT 'kafka-dr';
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0;
        ALTER TABLE kdr_lease DROP CONSTRAINT IF EXISTS kdr_lease_pkey;
        ALTER TABLE kdr_lease ADD PRIMARY KEY (project, stack);
        ALTER TABLE kdr_event ADD COLUMN IF NOT EXISTS project text NOT NULL DEFAULT 'kafka-dr';
        CREATE SEQUENCE IF NOT EXISTS kdr_lease_epoch;
        CREATE TABLE IF NOT EXISTS kdr_audit_state (
            project    text        NOT NULL,
            stack      text        NOT NULL,
            link       text        NOT NULL,
            runs       integer     NOT NULL,
            state      jsonb       NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project, stack, link)
        );
        CREATE TABLE IF NOT EXISTS kdr_verification (
            project       text        NOT NULL,
            stack         text        NOT NULL,
            failover_id   text        NOT NULL,
            run           integer     NOT NULL,
            at            timestamptz NOT NULL DEFAULT now(),
            operator      text        NOT NULL,
            clean         boolean     NOT NULL,
            verdict       jsonb       NOT NULL,
            report_dir    text        NOT NULL,
            report_digest text        NOT NULL,
            PRIMARY KEY (project, stack, failover_id, run)
        );
        """,
    ),
    (
        3,
        # staleness decided by the holder's recorded threshold; the database's identity of the holder's session
        """
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS stale_after_s double precision NOT NULL DEFAULT 30;
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS db_user text NOT NULL DEFAULT '';
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS db_client text NOT NULL DEFAULT '';
        ALTER TABLE kdr_lease ADD COLUMN IF NOT EXISTS db_pid integer NOT NULL DEFAULT 0;
        """,
    ),
    (
        4,
        # the per-site controller's lease when the team database is its witness (dr.controller.pg_witness):
        # expiry in the database's clock, a token from a sequence that grows with every holder
        """
        CREATE SEQUENCE IF NOT EXISTS kdr_witness_token;
        CREATE TABLE IF NOT EXISTS kdr_witness (
            project     text        NOT NULL,
            stack       text        NOT NULL,
            holder      text        NOT NULL,
            token       bigint      NOT NULL,
            acquired_at timestamptz NOT NULL DEFAULT now(),
            expires_at  timestamptz NOT NULL,
            PRIMARY KEY (project, stack)
        );
        """,
    ),
    (
        5,
        # the automatic failover's inputs when the team database is the witness (dr.controller.pg_witness):
        # each observer's verdict with an expiry, and the stack's last automatic failover (the cooldown)
        """
        CREATE TABLE IF NOT EXISTS kdr_observer (
            project    text        NOT NULL,
            stack      text        NOT NULL,
            observer   text        NOT NULL,
            states     jsonb       NOT NULL,
            at         timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (project, stack, observer)
        );
        CREATE TABLE IF NOT EXISTS kdr_automatic (
            project text        NOT NULL,
            stack   text        NOT NULL,
            at      timestamptz NOT NULL DEFAULT now(),
            holder  text        NOT NULL,
            token   bigint      NOT NULL,
            PRIMARY KEY (project, stack)
        );
        """,
    ),
]
"""(version, SQL) in order; each is applied once, in its own transaction, and recorded in ``kdr_schema``."""

_MIGRATION_LOCK = 0x6B6472  # "kdr": the advisory lock that serialises first-use migrations


def is_team_url(url: str | None) -> bool:
    """True for a PostgreSQL backend URL (``postgres://`` or ``postgresql://``)."""
    return bool(url) and str(url).startswith(("postgres://", "postgresql://"))


def project_name() -> str:
    """The Pulumi project's name (``name:`` of the project's ``Pulumi.yaml``), ``kafka-dr`` when there is none."""
    import yaml

    directory = project_dir_or_none()
    path = directory / "Pulumi.yaml" if directory is not None else None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None
    except (OSError, yaml.YAMLError):
        doc = None
    name = doc.get("name") if isinstance(doc, dict) else None
    return str(name) if name else "kafka-dr"


def report_digest(report_dir: str | os.PathLike[str]) -> str:
    """SHA-256 over a report directory's files (relative name and content, in name order); ``""`` when absent."""
    from pathlib import Path

    root = Path(report_dir)
    if not str(report_dir) or not root.is_dir():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


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
    epoch: int = 0
    """Bumped by every take: the journal writes of an older epoch are refused (fencing)."""
    stale_after_s: float = STALE_AFTER_S
    """The threshold its holder recorded (:func:`stale_after_s` of the holder, not of the reader)."""
    db_user: str = ""
    """The database user of the holder's session (``session_user``), as the database knows it."""
    db_client: str = ""
    """The client address of the holder's session (``inet_client_addr()``; ``local socket`` over a socket)."""
    db_pid: int = 0
    """The server process of the holder's session (``pg_backend_pid()``)."""

    @property
    def stale(self) -> bool:
        """True when the holder stopped renewing it (dead or cut off) for longer than its own threshold."""
        return self.heartbeat_age_s > self.stale_after_s


STEP_ORDER = "step_order"
"""The key under which a journal row keeps its steps' order: ``jsonb`` stores an object's keys sorted by
length, then bytes, so the steps would come back as clients, promote, integrity, preflight, …"""


def to_row(record: JournalDocument) -> str:
    """``record`` as the JSON of its ``kdr_failover`` row, with its steps' order beside it."""
    return json.dumps({**record, STEP_ORDER: list(record.get("steps") or {})}, default=str)


def from_row(doc: Mapping[str, Any]) -> JournalDocument:
    """A journal record read from its row, its steps in the order they were written."""
    record = dict(doc)
    order = record.pop(STEP_ORDER, None) or []
    steps = record.get("steps")
    if isinstance(steps, dict):
        record["steps"] = {**{n: steps[n] for n in order if n in steps}, **steps}
    return cast(JournalDocument, record)


class TeamStore:
    """Journal rows, leases, events, audit states and verification summaries of one project's stacks in
    one PostgreSQL database (``url``)."""

    def __init__(self, url: str, project: str | None = None) -> None:
        self.url = url
        self.shown = mask_url(url)
        self.project = project or project_name()
        self._ready = False
        self._local = threading.local()
        self._epochs: dict[str, int] = {}
        """stack → epoch of the lease this process holds on it: its journal writes are fenced by it."""
        self._gave_up = False

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

    def _waiting(self, write: Any) -> Any:
        """``write()``, retried while the database is away, for :data:`WAIT_S` seconds (once only after a
        write of this process already gave up: the run is stopping)."""
        deadline = time.monotonic() + (0 if self._gave_up else WAIT_S)
        while True:
            try:
                result = write()
            except StateStoreError:
                if time.monotonic() >= deadline:
                    self._gave_up = True
                    raise
                time.sleep(1)
                continue
            self._gave_up = False
            return result

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
    def load(self, stack: str) -> JournalDocument | None:
        """The stack's current journal record, or None."""
        with self.session() as conn:
            row = conn.execute(
                "SELECT record FROM kdr_failover WHERE project = %s AND stack = %s AND current", (self.project, stack)
            ).fetchone()
            return from_row(row[0]) if row else None

    def version(self, stack: str) -> int | None:
        """The write count of the stack's current journal row (None: no current failover)."""
        with self.session() as conn:
            row = conn.execute(
                "SELECT version FROM kdr_failover WHERE project = %s AND stack = %s AND current", (self.project, stack)
            ).fetchone()
            return int(row[0]) if row else None

    def create(self, stack: str, record: JournalDocument) -> None:
        """Make ``record`` the stack's current failover (the previous one stays, no longer current); one
        transaction, fenced by this process's lease on the stack."""

        def write() -> None:
            with self.session() as conn, conn.transaction():
                epoch = self._fence(conn, stack)
                conn.execute(
                    "UPDATE kdr_failover SET current = false WHERE project = %s AND stack = %s AND current",
                    (self.project, stack),
                )
                conn.execute(
                    "INSERT INTO kdr_failover (project, stack, failover_id, status, record, epoch) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (
                        self.project,
                        stack,
                        record["failover_id"],
                        record["status"],
                        to_row(record),
                        epoch,
                    ),
                )

        self._waiting(write)

    def save(self, stack: str, record: JournalDocument, *, current: bool = True) -> None:
        """Write ``record`` over its row (version + 1) in one transaction, fenced by this process's lease."""

        def write() -> int:
            with self.session() as conn, conn.transaction():
                epoch = self._fence(conn, stack)
                cur = conn.execute(
                    "UPDATE kdr_failover SET record = %s, status = %s, current = %s, version = version + 1, "
                    "epoch = %s, updated_at = now() WHERE project = %s AND stack = %s AND failover_id = %s",
                    (to_row(record), record["status"], current, epoch, self.project, stack,
                     record["failover_id"]),
                )  # fmt: skip
                return int(cur.rowcount)

        if self._waiting(write) != 1:
            raise StateStoreError(
                f"failover {record['failover_id']} of stack '{stack}' is not in the team database {self.shown}.",
                "run `drctl status` to see the stack's current failover",
            )

    def _fence(self, conn: psycopg.Connection[Any], stack: str) -> int:
        """Inside a write's transaction: the epoch of this process's lease on ``stack``, checked still to be
        the lease's (row locked until the commit); :class:`LockHeld` naming who took it over otherwise.
        0 when this process holds no lease on the stack (``estate down`` archiving a journal)."""
        mine = self._epochs.get(stack)
        if mine is None:
            return 0
        row = conn.execute(
            "SELECT epoch, holder, host, pid FROM kdr_lease WHERE project = %s AND stack = %s FOR SHARE",
            (self.project, stack),
        ).fetchone()
        if row is not None and int(row[0]) == mine:
            return mine
        raise LockHeld(
            f"this run lost the lease on stack '{stack}': {self._taken_by(conn, stack, mine, row)}; "
            "nothing was written to the journal.",
            f"the failover is theirs now: `drctl status --stack {stack}` shows where it stands; "
            "do not rerun it from here unless they hand it back",
        )

    def _taken_by(self, conn: psycopg.Connection[Any], stack: str, epoch: int, lease: Any) -> str:
        """Who took the lease of ``epoch`` over, and what became of the failover since."""
        row = conn.execute(
            "SELECT actor, detail->>'host', detail->>'pid', at FROM kdr_event WHERE project = %s AND stack = %s "
            "AND kind = 'lease-taken-over' AND (detail->>'from_epoch')::bigint = %s ORDER BY id DESC LIMIT 1",
            (self.project, stack, epoch),
        ).fetchone()
        who = (
            f"{row[0]} took it over at {row[3]:%Y-%m-%d %H:%M:%S %Z}"
            if row
            else (f"{lease[1]} (pid {lease[3]} on {lease[2]}) holds it now" if lease else "it was released")
        )
        current = conn.execute(
            "SELECT record FROM kdr_failover WHERE project = %s AND stack = %s AND current", (self.project, stack)
        ).fetchone()
        record = from_row(current[0]) if current else {}
        if record.get("status") == "completed":
            who += f"; failover {record.get('failover_id')} was finished by {finished_by(record) or 'them'}"
        elif lease is not None and row is not None:
            who += f" and {lease[1]} holds it now"
        return who

    def history(self, stack: str) -> list[JournalDocument]:
        """Every failover of the stack, the newest first."""
        with self.session() as conn:
            rows = conn.execute(
                "SELECT record FROM kdr_failover WHERE project = %s AND stack = %s ORDER BY created_at DESC",
                (self.project, stack),
            ).fetchall()
            return [from_row(r[0]) for r in rows]

    # ------------------------------------------------------------------ lease
    def lease(self, stack: str) -> Lease | None:
        """The stack's lease, if anybody holds one."""
        with self.session() as conn:
            row = conn.execute(
                "SELECT holder, host, pid, purpose, extract(epoch FROM acquired_at), "
                "extract(epoch FROM now() - heartbeat_at), epoch, stale_after_s, db_user, db_client, db_pid "
                "FROM kdr_lease WHERE project = %s AND stack = %s",
                (self.project, stack),
            ).fetchone()
        if row is None:
            return None
        return Lease(
            str(row[0]), str(row[1]), int(row[2]), str(row[3]), float(row[4]), float(row[5]), int(row[6]),
            float(row[7]), str(row[8]), str(row[9]), int(row[10]),
        )  # fmt: skip

    def acquire(self, stack: str, purpose: str = "failover", *, take_over: bool = False) -> LeaseHandle:
        """Take the stack's lease (one transaction), with a new epoch: free → taken; stale and ``take_over``
        → taken over, or left by this operator's own process on this machine that is gone → reclaimed
        (both journaled); otherwise :class:`LockHeld` naming the holder. Staleness is the holder's recorded
        threshold's to decide; this operator's own (:func:`stale_after_s`) is recorded with the lease it takes."""
        me, host, pid = operator_identity(), socket.gethostname(), os.getpid()
        threshold = stale_after_s()
        key = (self.project, stack)
        for _ in range(3):
            with self.session() as conn, conn.transaction():
                # the insert decides between simultaneous starts: the primary key admits exactly one
                cur = conn.execute(
                    "INSERT INTO kdr_lease (project, stack, holder, host, pid, purpose, epoch, stale_after_s, "
                    f"db_user, db_client, db_pid) VALUES (%s, %s, %s, %s, %s, %s, nextval('kdr_lease_epoch'), %s, {_SESSION}) "
                    "ON CONFLICT (project, stack) DO NOTHING RETURNING epoch",
                    (*key, me, host, pid, purpose, threshold),
                )
                taken = cur.fetchone()
                if taken is not None:
                    epoch = int(taken[0])
                    self._event(
                        conn, stack, "lease-taken", me,
                        {"host": host, "pid": pid, "purpose": purpose, "epoch": epoch, "stale_after_s": threshold},
                    )  # fmt: skip
                    return self._held(stack, me, pid, epoch, threshold)
                row = conn.execute(
                    "SELECT holder, host, pid, extract(epoch FROM now() - heartbeat_at), acquired_at, epoch, "
                    "stale_after_s, db_user, db_user = session_user::text "
                    "FROM kdr_lease WHERE project = %s AND stack = %s FOR UPDATE",
                    key,
                ).fetchone()
                if row is None:  # released between the two statements: try again
                    continue
                # this operator's own run on this machine, as the same database user, gone (the database
                # went away under it): no wait. The name alone proves nothing (KDR_OPERATOR is self-declared).
                own = (row[0], row[1]) == (me, host) and bool(row[8]) and not pid_alive(int(row[2]))
                if not own:
                    self._refuse_unless_stale(stack, row, take_over)
                epoch = int(
                    conn.execute(
                        "UPDATE kdr_lease SET holder = %s, host = %s, pid = %s, purpose = %s, acquired_at = now(), "
                        "heartbeat_at = now(), epoch = nextval('kdr_lease_epoch'), stale_after_s = %s, "
                        f"(db_user, db_client, db_pid) = ({_SESSION}) WHERE project = %s AND stack = %s "
                        "RETURNING epoch",
                        (me, host, pid, purpose, threshold, *key),
                    ).fetchone()[0]  # type: ignore[index]
                )
                detail: LeaseDetail = {"from": row[0], "host": host, "pid": pid, "from_host": row[1], "from_pid": row[2],
                          "from_epoch": int(row[5]), "epoch": epoch, "age_s": round(float(row[3]), 1),
                          "from_stale_after_s": float(row[6]), "from_db_user": str(row[7]),
                          "stale_after_s": threshold}  # fmt: skip
                self._event(conn, stack, "lease-reclaimed" if own and not take_over else "lease-taken-over", me, detail)
                return self._held(stack, me, pid, epoch, threshold)
        raise LockHeld(
            f"the lease on stack '{stack}' changed hands three times while this run tried to take it.",
            f"rerun; `drctl status --stack {stack}` shows who holds it",
        )

    def _held(self, stack: str, holder: str, pid: int, epoch: int, stale_after: float) -> LeaseHandle:
        self._epochs[stack] = epoch
        return LeaseHandle(self, stack, holder, pid, epoch, stale_after)

    @staticmethod
    def _refuse_unless_stale(stack: str, row: Any, take_over: bool) -> None:
        holder, age, threshold = f"{row[0]} (pid {row[2]} on {row[1]})", float(row[3]), float(row[6])
        if age <= threshold:
            raise LockHeld(
                f"a failover of stack '{stack}' is held by {holder}, alive {age:.0f} s ago, "
                f"since {row[4]:%Y-%m-%d %H:%M:%S %Z} (stale only after the {threshold:g} s its holder recorded).",
                f"wait for it to finish (`drctl status --stack {stack}` shows its progress); "
                "a live lease is never taken over, whatever this side's KDR_LEASE_STALE_S",
            )
        if not take_over:
            raise LockHeld(
                f"the lease on stack '{stack}' is stale: {holder} last renewed it {age:.0f} s ago "
                f"(stale after the {threshold:g} s its holder recorded).",
                "make sure that operator is gone, then rerun with --take-over (or KDR_TAKE_OVER_STALE_LEASE=1) to take it "
                f"over (recorded); `drctl status --stack {stack}` shows where the failover stopped",
            )

    def renew(self, stack: str, epoch: int, stale_after: float | None = None) -> bool:
        """Renew the heartbeat (and, given, the holder's threshold); False when the lease is no longer ours."""
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "UPDATE kdr_lease SET heartbeat_at = now(), stale_after_s = coalesce(%s, stale_after_s) "
                "WHERE project = %s AND stack = %s AND epoch = %s",
                (stale_after, self.project, stack, epoch),
            )
            return cur.rowcount == 1

    def release(self, stack: str, holder: str, epoch: int) -> None:
        """Give the lease back (a no-op when it was taken over meanwhile)."""
        if self._epochs.get(stack) == epoch:
            del self._epochs[stack]
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "DELETE FROM kdr_lease WHERE project = %s AND stack = %s AND epoch = %s", (self.project, stack, epoch)
            )
            if cur.rowcount:
                self._event(conn, stack, "lease-released", holder, {"pid": os.getpid(), "epoch": epoch})

    def events(self, stack: str) -> list[LeaseEvent]:
        """The stack's lease events, oldest first."""
        with self.session() as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM at), kind, actor, detail FROM kdr_event WHERE project = %s AND stack = %s "
                "ORDER BY id",
                (self.project, stack),
            ).fetchall()
        return [LeaseEvent(at=float(r[0]), kind=r[1], actor=r[2], detail=r[3]) for r in rows]

    def record_event(self, stack: str, kind: str, actor: str, detail: LeaseDetail) -> None:
        """Append one event of the stack to ``kdr_event`` (e.g. the controller's ``self-fence``), in its own transaction."""
        with self.session() as conn:
            self._event(conn, stack, kind, actor, detail)

    def _event(self, conn: psycopg.Connection[Any], stack: str, kind: str, actor: str, detail: LeaseDetail) -> None:
        # the database's identity of the writing session, beside the operator's self-declared name
        conn.execute(
            "INSERT INTO kdr_event (project, stack, kind, actor, detail) VALUES (%s, %s, %s, %s, %s::jsonb || "
            "jsonb_build_object('db_user', session_user::text, 'db_client', "
            "coalesce(host(inet_client_addr()), 'local socket'), 'db_pid', pg_backend_pid()))",
            (self.project, stack, kind, actor, json.dumps(detail, default=str)),
        )

    # ------------------------------------------------------------------ audit state and verification summaries
    def load_audit(self, stack: str, link: str) -> audit_state.StateDocument | None:
        """The audit state document of ``link`` (:meth:`verification.audit_state.AuditState.to_dict`), or None."""
        with self.session() as conn:
            row = conn.execute(
                "SELECT state FROM kdr_audit_state WHERE project = %s AND stack = %s AND link = %s",
                (self.project, stack, link),
            ).fetchone()
            return cast(audit_state.StateDocument, dict(row[0])) if row else None

    def save_audit(self, stack: str, link: str, state: audit_state.StateDocument) -> None:
        """Write the audit state of ``link`` (one transaction). A run that continued run N is written only
        while the row still holds run N: an audit of the same link finished meanwhile on another machine
        is :class:`LockHeld` (its bounds stay)."""
        runs = int(state["runs"])
        with self.session() as conn, conn.transaction():
            cur = conn.execute(
                "INSERT INTO kdr_audit_state (project, stack, link, runs, state) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (project, stack, link) DO UPDATE SET runs = excluded.runs, state = excluded.state, "
                "updated_at = now() WHERE %s OR kdr_audit_state.runs = %s",
                (self.project, stack, link, runs, json.dumps(state), runs <= 1, runs - 1),
            )
            if cur.rowcount != 1:
                raise LockHeld(
                    f"another audit of link {link} (stack '{stack}') saved its run meanwhile in {self.shown}; "
                    "this run's bounds were not written.",
                    "run the audit again: it continues from the bounds the other one reached",
                )

    def record_verification(self, stack: str, failover_id: str, run: int, verdict: VerdictDocument) -> None:
        """Record a failover run's verification: its verdict and the digest of its report files."""
        digest = report_digest(str(verdict.get("report_dir") or ""))
        with self.session() as conn, conn.transaction():
            self._fence(conn, stack)
            conn.execute(
                "INSERT INTO kdr_verification (project, stack, failover_id, run, operator, clean, verdict, report_dir, "
                "report_digest) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (project, stack, failover_id, run) "
                "DO UPDATE SET at = now(), operator = excluded.operator, clean = excluded.clean, "
                "verdict = excluded.verdict, report_dir = excluded.report_dir, report_digest = excluded.report_digest",
                (self.project, stack, failover_id, run, operator_identity(), bool(verdict.get("clean")),
                 json.dumps(verdict, default=str), str(verdict.get("report_dir") or ""), digest),
            )  # fmt: skip

    def verifications(self, stack: str) -> list[VerificationRow]:
        """The stack's recorded verification summaries, oldest first."""
        with self.session() as conn:
            rows = conn.execute(
                "SELECT failover_id, run, operator, clean, verdict, report_dir, report_digest FROM kdr_verification "
                "WHERE project = %s AND stack = %s ORDER BY at",
                (self.project, stack),
            ).fetchall()
        return [
            VerificationRow(
                failover_id=r[0], run=r[1], operator=r[2], clean=r[3], verdict=r[4], report_dir=r[5], report_digest=r[6]
            )
            for r in rows
        ]


def finished_by(record: JournalDocument) -> str | None:
    """The operator of a journal record's last run (``operator`` of :class:`~dr.failover.frame.journal.RunEntry`)."""
    runs = record.get("runs") or []
    last = runs[-1] if runs and isinstance(runs[-1], dict) else {}
    return str(last["operator"]) if last.get("operator") else None


class LeaseHandle:
    """A held lease, renewed by a daemon thread six times per its threshold (:func:`heartbeat_s`) until :meth:`release`."""

    def __init__(
        self, store: TeamStore, stack: str, holder: str, pid: int, epoch: int, stale_after: float = STALE_AFTER_S
    ) -> None:
        self.store, self.stack, self.holder, self.pid, self.epoch = store, stack, holder, pid, epoch
        self.stale_after = stale_after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"kdr-lease-{stack}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(heartbeat_s(self.stale_after)):
            try:
                if not self.store.renew(self.stack, self.epoch, self.stale_after):
                    return  # taken over: the next journal write of this run is refused (fenced)
            except Exception:  # noqa: BLE001 — the database is away: the lease goes stale if it stays away; the run goes on
                continue

    def release(self) -> None:
        """Stop renewing and give the lease back (with the database away: left to go stale, reclaimable)."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.store.release(self.stack, self.holder, self.epoch)
        except StateStoreError:
            self.store._epochs.pop(self.stack, None)


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


def _audit_store() -> TeamStore | None:
    """The team database of the stack's backend, when it is ``postgres://`` (the audit state's home)."""
    from dr.base.pulumi_env import project_backend_url

    url = os.environ.get("PULUMI_BACKEND_URL") or project_backend_url()
    return team_store(url) if url and is_team_url(url) else None


audit_state.team_store_hook = _audit_store
