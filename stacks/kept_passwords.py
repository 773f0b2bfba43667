"""Passwords the program generated are kept across clones: a bare ``pulumi up`` (or ``preview``)
from a fresh clone reads them back from the stack's own last deployment instead of generating new
ones that the clusters would not know.

The stack exports the passwords it generated as one secret output, ``credentials``
(:func:`stacks.program.build`). When the running clone's ``<state>/credentials.json`` lacks one of
them, :func:`keep_generated` asks the Pulumi CLI for the stack's outputs (``pulumi stack output
--show-secrets``: the stack's backend and secrets provider, as for the ``pulumi`` command that runs
this program) and stores what it finds there (0600) before any resource is registered. A stack never
deployed has no such output: its passwords are generated. ``drctl`` restores them the same way
before it runs the program (:meth:`dr.estate.stack.EstateStack.restore_credentials`). No value is
ever logged or put in a message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

from dr.base.errors import ConfigError
from dr.base.toolchain import toolchain
from dr.topology import Topology
from dr.topology.access import CONNECT_USER
from dr.topology.oauth_login import uses_oauth

__all__ = ["generated_users", "keep_generated", "previous_outputs", "replicator_password_used"]


def replicator_password_used(topology: Topology) -> bool:
    """Whether anything logs the stack's replicator in with a password: a cluster that is not OAUTHBEARER (the
    replicator's SCRAM user there, the links' logins to it). Where every cluster accepts only OAUTHBEARER tokens
    the replicator logs in with its client id and secret (``oauth.replicator``), and no password is generated."""
    return any(not uses_oauth(c) for c in topology.clusters)


def generated_users(topology: Topology) -> list[str]:
    """The principals whose passwords the program generates (none declared in the stack; the replicator's only
    where a password logs it in, :func:`replicator_password_used`)."""
    principals = topology.principals
    generate = principals.replicator_password is None and replicator_password_used(topology)
    users = [principals.replicator] if generate else []
    users += [app.name for app in principals.applications if app.password is None]
    if any(cc.is_local for cc in topology.connect_clusters):
        users.append(CONNECT_USER)
    return sorted(users)


def _pulumi() -> str:
    built = toolchain().pulumi_bin / "pulumi"
    return str(built) if built.is_file() else (shutil.which("pulumi") or "pulumi")


def _previous_outputs(stack: str) -> dict[str, Any]:
    """The stack's outputs from its last deployment, secrets decrypted ({} when never deployed)."""
    try:
        res = subprocess.run(
            [_pulumi(), "stack", "output", "--json", "--show-secrets", "--stack", stack, "--non-interactive"],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ.copy(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"stack {stack!r}: could not read its last outputs to keep the passwords it generated ({type(exc).__name__}).",
            "run `pulumi stack output --stack " + stack + "` to see why, then run `pulumi up` again",
        ) from None
    if res.returncode != 0:
        reason = next((line.strip() for line in res.stderr.splitlines() if line.strip()), f"exit {res.returncode}")
        raise ConfigError(
            f"stack {stack!r}: could not read its last outputs to keep the passwords it generated: {reason}",
            "set the stack's backend and passphrase as for `pulumi stack output` (PULUMI_BACKEND_URL, "
            "PULUMI_CONFIG_PASSPHRASE[_FILE]), then run `pulumi up` again; nothing was changed",
        )
    try:
        outputs = json.loads(res.stdout or "{}")
    except json.JSONDecodeError:
        return {}
    return outputs if isinstance(outputs, dict) else {}


def previous_outputs(stack: str) -> dict[str, Any]:
    """The stack's outputs from its last deployment, secrets decrypted ({} when never deployed)."""
    return _previous_outputs(stack)


def keep_generated(topology: Topology, credentials: Any) -> list[str]:
    """Store in ``credentials`` (:class:`dr.runtime.credentials.Credentials`) every generated password
    it lacks that the stack's last deployment holds; return those users (no values)."""
    have = set(credentials.users())
    missing = [u for u in generated_users(topology) if u not in have]
    if not missing:
        return []
    previous = _previous_outputs(topology.name).get("credentials") or {}
    kept = [u for u in missing if isinstance(previous.get(u), str) and previous[u]]
    for user in kept:
        credentials.set_password(user, previous[user])
    return kept
