"""A drill's ownership of the stack it runs on: a rehearsal never touches what it rehearses.

A drill copies the stack file and runs it on a backend of its own, ``file://<out>/pulumi``, created
empty by :func:`claim`, which writes a random token into ``<backend>/.kdr-drill-owner`` (0600) and pins
backend and token to the drill's :class:`~dr.base.stackref.StackRef`. Before every Pulumi operation
:class:`~dr.estate.stack.EstateStack` calls :func:`require_owned`: the backend it is about to use must be
that ``file://`` backend and carry that token — so whatever ``$PULUMI_BACKEND_URL`` or the project's
``backend.url`` says, a drill never updates, refreshes or destroys a stack it did not create.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from dr.base.errors import ConfigError
from dr.base.files import private_dir
from dr.base.pulumi_env import mask_url
from dr.base.stackref import StackRef

__all__ = ["OWNER_FILE", "claim", "require_owned"]

OWNER_FILE = ".kdr-drill-owner"
"""The file of a drill's backend directory holding the token of the drill that created it."""


def claim(backend_dir: Path) -> str:
    """Make ``backend_dir`` a new, empty backend owned by a drill (0700); return its token.

    Refused (:class:`ConfigError`) when it already holds anything: a drill creates its stack, it never adopts one."""
    backend_dir = Path(backend_dir)
    if backend_dir.exists() and any(backend_dir.iterdir()):
        raise ConfigError(
            f"{backend_dir} is not empty: a drill runs only on a backend it creates.",
            "pass --out with a new or empty directory (or an earlier drill's, torn down)",
        )
    private_dir(backend_dir)
    token = secrets.token_hex(16)
    fd = os.open(backend_dir / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def require_owned(ref: StackRef, url: str) -> None:
    """Nothing when ``ref`` is no drill's, or ``url`` is the ``file://`` backend its drill created; else
    :class:`ConfigError` (exit 2), before anything changes."""
    if ref.owner is None:
        return
    refusal = ConfigError(
        f"refusing to touch stack {ref.name!r} in backend {mask_url(url)}: the drill did not create it "
        f"(its own backend is {ref.backend}).",
        "nothing was changed; a drill runs only on the backend under its --out directory — rerun the drill "
        "with a new --out",
    )
    if url != ref.backend or not url.startswith("file://"):
        raise refusal
    try:
        found = (Path(url.removeprefix("file://")) / OWNER_FILE).read_text().strip()
    except OSError:
        raise refusal from None
    if not hmac.compare_digest(found, ref.owner):
        raise refusal
