"""The stack's Pulumi state file in a ``file://`` backend, read without the engine: is it there, can it be read.

The Pulumi CLI keeps a stack's state (its *checkpoint*) at
``<backend>/.pulumi/stacks/<project>/<stack>.json`` (or ``.json.gz`` when compressed). A failover
needs it whole: its desired-state step runs ``pulumi up`` on it, and a damaged one would stop the run
half-way, after A was fenced and B promoted. :func:`state_problem` reads it up front (a JSON parse, no
engine, no lock), so ``drctl status`` and ``drctl failover`` (``--dry-run`` too) refuse at once, naming
the file. Other backends (``s3://``, Pulumi Cloud, ``postgres://``) are not read here: the engine
reports their damage itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dr.base.stackref import StackRef

__all__ = ["checkpoint_file", "drop_damaged_sidecars", "file_backend_stacks", "state_fix", "state_problem"]

_PROJECT = "kafka-dr"


def file_backend_stacks(ref: StackRef) -> Path | None:
    """``<backend>/.pulumi/stacks/<project>`` when the stack's backend is a ``file://`` one, else None."""
    url = ref.pulumi_backend
    if not url.startswith("file://"):
        return None
    return Path(url.removeprefix("file://")).expanduser() / ".pulumi" / "stacks" / _PROJECT


def checkpoint_file(ref: StackRef) -> Path | None:
    """The stack's state file in its ``file://`` backend, when it exists (None: never provisioned,
    removed, or another kind of backend)."""
    stacks = file_backend_stacks(ref)
    if stacks is None:
        return None
    return next((p for p in (stacks / f"{ref.name}.json", stacks / f"{ref.name}.json.gz") if p.is_file()), None)


def state_problem(ref: StackRef) -> str | None:
    """Why the stack's Pulumi state file cannot be read, naming the file; None when it reads (or when
    there is none, or the backend is not a ``file://`` one)."""
    path = checkpoint_file(ref)
    if path is None:
        return None
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw) if path.suffix == ".gz" else raw
        doc = json.loads(text)
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, ValueError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else (getattr(exc, "strerror", None) or str(exc))
        return f"the Pulumi state of stack {ref.name!r}, {path}, cannot be read ({why})"
    checkpoint = doc.get("checkpoint") if isinstance(doc, dict) else None
    if not isinstance(checkpoint, dict):
        return f"the Pulumi state of stack {ref.name!r}, {path}, is not a Pulumi checkpoint (no `checkpoint` object)"
    latest = checkpoint.get("latest")
    if latest is not None and not isinstance(latest, dict):
        return f"the Pulumi state of stack {ref.name!r}, {path}, is damaged (`checkpoint.latest` is not an object)"
    return None


def _damaged(sidecar: Path) -> bool:
    try:
        return not isinstance(json.loads(sidecar.read_bytes() or b"null"), dict)
    except (OSError, UnicodeDecodeError, ValueError):
        return True


def drop_damaged_sidecars(ref: StackRef) -> list[Path]:
    """Remove the unreadable metadata *sidecars* of the stack's files in its ``file://`` backend; return them.

    The backend's blob layer writes each file to a temporary name and renames it into place (atomic),
    but first writes its metadata beside it, ``<file>.attrs`` (content type, MD5), in place: an engine
    killed in between leaves an empty ``.attrs`` next to a whole checkpoint, and every later operation
    stops with ``failed to load checkpoint: EOF``. A missing sidecar is read as default metadata, so
    removing a damaged one loses nothing; the checkpoint itself is not touched (:func:`state_problem`
    judges it). Covers the checkpoint, its ``.bak`` and the stack's locks.
    """
    stacks = file_backend_stacks(ref)
    if stacks is None:
        return []
    root = stacks.parent.parent  # <backend>/.pulumi
    candidates = [
        *stacks.glob(f"{ref.name}.json*.attrs"),
        *root.glob(f"locks/*/{_PROJECT}/{ref.name}/*.attrs"),
        *root.glob(f"locks/{ref.name}/*.attrs"),
    ]
    dropped = []
    for sidecar in sorted(set(candidates)):
        if _damaged(sidecar):
            sidecar.unlink(missing_ok=True)
            dropped.append(sidecar)
    return dropped


def state_fix(stack: str) -> str:
    """What to do about a damaged state file of ``stack``."""
    return (
        f"restore the file from the backend's backups (`<backend>/.pulumi/backups/{_PROJECT}/{stack}/`, or the "
        f"`.bak` beside it) or from a `pulumi stack export` taken earlier (`pulumi stack import --file ...`); "
        f"`drctl estate preview --stack {stack}` must then run cleanly before a failover; nothing was changed"
    )
