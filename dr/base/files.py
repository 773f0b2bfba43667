"""Atomic file writes (the one way the product replaces a file a crash must not leave half-written)
and private directories (the one way it makes a directory for its state)."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from dr.base.errors import ConfigError

_warned: set[Path] = set()


def private_dir(path: Path) -> Path:
    """``path`` as a directory, each missing part created 0700 by this call.

    A directory that already exists keeps its mode — the product changes only what it made (an
    operator's ``KDR_STATE_DIR`` may be a shared, sticky directory) — and one writable by its group
    or by others is named on stderr once. A file in the way is bad input (:class:`ConfigError`).
    """
    path = Path(path)
    for part in [*reversed(path.parents), path]:
        try:
            os.mkdir(part, 0o700)
        except FileExistsError:
            if not part.is_dir():
                raise ConfigError(
                    f"{part} is a file, not a directory: the state directory {path} cannot be made there.",
                    "point KDR_STATE_DIR (or the project's .state) at a directory, or move the file away",
                ) from None
            continue
        except NotADirectoryError:
            continue  # a file higher up: reported when the loop reaches it
        except PermissionError as exc:
            if part.is_dir():
                continue  # an existing directory we may not list (e.g. /): nothing to make there
            raise ConfigError(
                f"cannot create the directory {part}: {exc.strerror}.",
                "point KDR_STATE_DIR at a directory you may write, or create it yourself (mode 0700)",
            ) from None
        os.chmod(part, 0o700)  # made here: exactly 0700 whatever the umask
    mode = path.stat().st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and path not in _warned:
        _warned.add(path)
        print(
            f"warning: {path} is writable by {'others' if mode & stat.S_IWOTH else 'its group'} "
            f"(mode {stat.S_IMODE(mode):04o}); drctl keeps its state there and leaves the mode as it is — "
            "use a directory only you can write (chmod 700) or another KDR_STATE_DIR",
            file=sys.stderr,
        )
    return path


def write_atomic(path: Path, text: str | bytes, mode: int | None = 0o600) -> None:
    """Write ``text`` (or bytes) to ``path`` so a reader sees the old file or the new one, never a part.

    The text goes to a temporary file in the same directory (created 0600, so a secret is never
    readable by others on the way), is flushed to disk and moved over ``path`` with ``os.replace``.
    ``mode`` is the new file's mode; ``None`` keeps the mode of the file it replaces. A symbolic
    link at ``path`` keeps pointing at the (replaced) file. Missing parent directories are created.
    """
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = target.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode() if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any, mode: int | None = 0o600) -> None:
    """Write ``data`` as indented JSON (values JSON does not know as their ``str``) with :func:`write_atomic`."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", mode)
