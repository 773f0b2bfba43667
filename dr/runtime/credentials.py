"""Local-estate credentials: generated once, kept in a 0600 file, never logged."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.files import write_atomic

#: Principal used between brokers and controllers (PLAIN on the internal listeners).
BROKER_USER = "broker"
#: Super-user for administration over the client listener (SCRAM).
ADMIN_USER = "admin"
#: Principal MirrorMaker 2 runs as.
REPLICATOR_USER = "replicator"


class Credentials:
    """Passwords of the local estate's principals, stored in ``<state_dir>/credentials.json``.

    The file is created with mode 0600 inside a 0700 directory. ``repr`` never shows a password.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "credentials.json"

    def __repr__(self) -> str:
        return f"Credentials(path={str(self.path)!r})"

    def _load(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        mode = self.path.stat().st_mode & 0o777
        if mode & 0o077:
            raise ConfigError(
                f"{self.path} is readable by other users (mode {oct(mode)}).",
                f"run `chmod 600 {self.path}`",
            )
        try:
            users: dict[str, str] = json.loads(self.path.read_text())
            return users
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{self.path} is not valid JSON ({exc.msg}).",
                "restore it from backup, or delete the local estate's state directory",
            ) from exc

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise read-modify-write across threads and processes (the program and the
        provider processes of a Pulumi run generate passwords at the same time)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        fd = os.open(self.path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _save(self, data: dict[str, str]) -> None:
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True))

    def password(self, user: str) -> str:
        """The password of ``user``, generated and stored on first use."""
        data = self._load()
        if user in data:
            return data[user]
        with self._locked():
            data = self._load()
            if user not in data:
                data[user] = secrets.token_urlsafe(24)
                self._save(data)
            return data[user]

    def set_password(self, user: str, password: str) -> None:
        """Record a password (e.g. an external one) for ``user``."""
        with self._locked():
            data = self._load()
            data[user] = password
            self._save(data)

    def users(self) -> list[str]:
        """Every principal with a stored password."""
        return sorted(self._load())
