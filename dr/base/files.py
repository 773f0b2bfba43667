"""Atomic file writes: the one way the product replaces a file a crash must not leave half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, mode: int | None = 0o600) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part.

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
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
