"""The Pulumi CLI's workspace files keep no backend password.

The CLI records the stack selected in a project as ``<PULUMI_HOME>/workspaces/<project>-<hash>-workspace.json``:
``{"stacks": {"<backend URL>": "<stack>"}}``, the backend URL as given — with a ``postgres://user:password@…``
backend, the team database's password, in the toolchain cache shared by every clone, long after
``drctl estate down --destroy``. ``drctl`` always names its stack, so it needs no selection: after it
opened a stack, :func:`forget_backend_passwords` drops every selection whose backend URL carries a password.
"""

from __future__ import annotations

import json
from pathlib import Path

from dr.base.files import write_atomic
from dr.base.pulumi_env import mask_url

__all__ = ["forget_backend_passwords"]


def forget_backend_passwords(pulumi_home: Path) -> list[Path]:
    """Remove, from every workspace file under ``pulumi_home``, the selections keyed by a backend URL with
    a password; return the files changed. A file that does not read as the CLI writes it is left alone."""
    changed: list[Path] = []
    for path in sorted((Path(pulumi_home) / "workspaces").glob("*-workspace.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stacks = doc.get("stacks") if isinstance(doc, dict) else None
        if not isinstance(stacks, dict):
            continue
        kept = {url: stack for url, stack in stacks.items() if mask_url(url) == url}
        if kept == stacks:
            continue
        doc["stacks"] = kept
        write_atomic(path, json.dumps(doc, indent=4) + "\n", mode=None)
        changed.append(path)
    return changed
