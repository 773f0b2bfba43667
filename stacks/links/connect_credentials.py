"""Do the workers of an external Connect cluster resolve the replicator's credentials?

The MirrorMaker 2 connectors on an external Connect cluster reference the replicator's username
and password through a config provider the platform team sets up on every worker (a file, a
directory or environment variables; :class:`dr.topology.ConnectCredentials`). Connect resolves
such references when it validates a config, and echoes the values of the fields it knows: this
check validates a MirrorHeartbeatConnector config whose two cluster aliases are the two
references, and compares what comes back with the stack's replicator and password — in memory,
never printed. Run before anything is created, it names exactly what a worker lacks.
"""

from __future__ import annotations

import re
from secrets import compare_digest
from typing import Any

from dr.base.errors import ConfigError
from dr.kafka.connect_rest import ConnectRest
from dr.topology import ConnectCluster

__all__ = ["check_worker_credentials"]

_HEARTBEAT = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"


def _where(connect: ConnectCluster) -> str:
    creds = connect.replicator_credentials
    if creds is None:
        return "no config provider"
    alias = creds.provider_alias
    cls = {
        "file": "FileConfigProvider",
        "directory": "DirectoryConfigProvider",
        "env": "EnvVarConfigProvider",
    }[creds.provider]
    setup = f"`config.providers={alias}` with `config.providers.{alias}.class=org.apache.kafka.common.config.provider.{cls}`"
    if creds.provider == "file":
        return f"{setup} and a file {creds.path} (readable by the worker; inside its allowed.paths) with `username=` and `password=` lines"
    if creds.provider == "directory":
        return (
            f"{setup} and a directory {creds.path} holding files `username` and `password` (inside its allowed.paths)"
        )
    return f"{setup} and the environment variables {creds.username_variable} and {creds.password_variable}"


def check_worker_credentials(
    rest: ConnectRest,
    connect: ConnectCluster,
    username: str,
    password: str,
    *,
    secret_field: str = "principals.replicatorPassword",
) -> None:
    """Raise :class:`ConfigError` naming what the Connect cluster's worker lacks to log the replicator
    in (unresolved reference, another username, another password); return when it resolves both.
    ``secret_field`` is where the stack holds ``password`` (under ``kafka-dr:``), named when they differ."""
    creds = connect.replicator_credentials
    if creds is None:
        raise ConfigError(
            f"Connect cluster {connect.name!r} declares no replicator_credentials.",
            "declare the config provider its workers use (docs/production/index.md)",
        )
    user_ref, password_ref = creds.references()
    body = {"connector.class": _HEARTBEAT, "source.cluster.alias": user_ref, "target.cluster.alias": password_ref}
    values = _echoed(rest, body)
    got_user, got_password = values.get("source.cluster.alias"), values.get("target.cluster.alias")
    url = rest.url
    lacks = f"the worker at {url} lacks {_where(connect)}"
    if got_user is None or got_user == user_ref:
        raise ConfigError(
            f"Connect cluster {connect.name!r} cannot resolve the replicator's username {user_ref}: {lacks}.",
            "set it up on every worker of the Connect cluster (and restart them), then run again; nothing was created",
        )
    if got_user != username:
        raise ConfigError(
            f"Connect cluster {connect.name!r}: the worker at {url} resolves {user_ref} to {got_user!r}, but the "
            f"stack's replicator is {username!r}.",
            "write the replicator's username there (or correct principals.replicator), then run again; "
            "nothing was created",
        )
    if got_password is None or got_password == password_ref:
        raise ConfigError(
            f"Connect cluster {connect.name!r} cannot resolve the replicator's password {password_ref}: {lacks}.",
            "set it up on every worker of the Connect cluster (and restart them), then run again; nothing was created",
        )
    if not compare_digest(got_password.encode(), password.encode()):
        raise ConfigError(
            f"Connect cluster {connect.name!r}: the password the worker at {url} resolves from {password_ref} is "
            f"not the stack's {_snake(secret_field)}.",
            f"put the stack's {'replicator client secret' if 'oauth' in secret_field else 'replicator password'} "
            f"there (`pulumi config get --path 'kafka-dr:{secret_field}'` shows it), then run again; "
            "nothing was created",
        )


def _snake(field: str) -> str:
    """``principals.replicatorPassword`` → ``principals.replicator_password`` (the model's spelling)."""
    return re.sub(r"(?<=[a-z])([A-Z])", lambda m: "_" + m.group(1).lower(), field)


def _echoed(rest: ConnectRest, body: dict[str, str]) -> dict[str, str]:
    """Connect's validation of ``body``: the (resolved) value of each field it reports."""
    result: Any = rest.validate_raw(body)
    values: dict[str, str] = {}
    for item in result.get("configs", []) if isinstance(result, dict) else []:
        value = item.get("value", {})
        if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("value"), str):
            values[value["name"]] = value["value"]
    return values
