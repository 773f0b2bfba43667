"""A throwaway PostgreSQL server for tests: Debian's binaries from the cache (``scripts/setup.sh
postgresql``), ``initdb`` in a temporary directory, listening on 127.0.0.1 only at a free port below
32768, password (SCRAM) authentication, stopped and removed at the end.

``with pg_server() as url:`` yields ``postgres://kdr:<password>@127.0.0.1:<port>/kdr?sslmode=disable``.

PostgreSQL refuses to run as root (CI and these machines run as root): then the server runs as
``nobody`` from a hard-linked copy of the cached tree in a world-readable temporary directory (the
cache under ``/root`` is not reachable by ``nobody``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dr.base.toolchain import kdr_home, versions

__all__ = ["pg_server"]

_NOBODY = 65534


def _cached_root() -> tuple[Path, str]:
    major = versions().get("POSTGRESQL_VERSION", "15")
    root = kdr_home() / "postgresql" / major / "root"
    if not (root / "usr" / "lib" / "postgresql" / major / "bin" / "postgres").is_file():
        # A required part: the team backend's tests fail without it, never skip (set-up fails first).
        pytest.fail(f"PostgreSQL {major} is not in the cache ({root}): run `make setup`", pytrace=False)
    return root, major


def _free_port() -> int:
    for _ in range(200):
        port = 20000 + secrets.randbelow(12000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")


def _link_tree(src: Path, dst: Path) -> None:
    try:
        shutil.copytree(src, dst, symlinks=True, copy_function=os.link)
    except OSError:  # another file system: copy
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)


class PgUrl(str):
    """The server's URL; :meth:`stop` and :meth:`start` stop it (``pg_ctl stop -m fast``) and start it
    again on the same port and data directory (the database going away mid-failover)."""

    ctl: list[str]
    env: dict[str, str]

    def stop(self) -> None:
        """Stop the server (clients are disconnected; it stays down until :meth:`start`)."""
        subprocess.run([*self.ctl, "-m", "fast", "-w", "stop"], env=self.env, check=True, capture_output=True)

    def start(self) -> None:
        """Start the stopped server again."""
        subprocess.run([*self.ctl, "-w", "-t", "60", "start"], env=self.env, check=True, capture_output=True)


@contextmanager
def pg_server() -> Iterator[PgUrl]:
    """Start a PostgreSQL server in a temporary directory and yield its URL; stop it and remove it at the end."""
    cached, major = _cached_root()
    work = Path(tempfile.mkdtemp(prefix="kdr-pg-"))
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    root = cached
    if as_root:
        work.chmod(0o755)
        root = work / "root"
        _link_tree(cached / "usr" / "lib" / "postgresql", root / "usr" / "lib" / "postgresql")
        _link_tree(cached / "usr" / "share" / "postgresql", root / "usr" / "share" / "postgresql")
        prefix = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
    bin_dir = root / "usr" / "lib" / "postgresql" / major / "bin"
    env = {**os.environ, "LD_LIBRARY_PATH": str(cached / "usr" / "lib" / "x86_64-linux-gnu"), "LC_ALL": "C"}
    if as_root:  # libraries the server links (libpq, libicu...) must be readable by nobody too
        _link_tree(cached / "usr" / "lib" / "x86_64-linux-gnu", work / "lib")
        env["LD_LIBRARY_PATH"] = str(work / "lib")
    data, sock = work / "data", work / "sock"
    sock.mkdir()
    password = secrets.token_urlsafe(16)
    pwfile = work / "pgpass"
    pwfile.write_text(password + "\n")
    if as_root:
        for p in (sock, pwfile, work):
            os.chown(p, _NOBODY, _NOBODY)
    port = _free_port()
    try:
        subprocess.run(
            [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "kdr", "--pwfile", str(pwfile),
             "-A", "scram-sha-256", "--no-sync", "-E", "UTF8"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        pwfile.unlink()
        opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={sock} -c fsync=off -c jit=off"
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(work / "pg.log"), "-o", opts,
             "-w", "-t", "60", "start"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        try:
            import psycopg

            with psycopg.connect(f"postgresql://kdr:{password}@127.0.0.1:{port}/postgres", autocommit=True) as conn:
                conn.execute("CREATE DATABASE kdr")
            url = PgUrl(f"postgres://kdr:{password}@127.0.0.1:{port}/kdr?sslmode=disable")
            url.ctl = [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(work / "pg.log"), "-o", opts]
            url.env = env
            yield url
        finally:
            subprocess.run(
                [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                env=env, capture_output=True,
            )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
