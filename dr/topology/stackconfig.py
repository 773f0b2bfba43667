"""Reading a topology from Pulumi stack config, and writing the desired state back.

A stack file ``Pulumi.<stack>.yaml`` carries the topology under namespaced keys::

    config:
      kafka-dr:profile: dev
      kafka-dr:failoverDone: false
      kafka-dr:clusters: [...]
      kafka-dr:topics: [...]
      kafka-dr:principals: {...}
      kafka-dr:links: [...]

Secrets in the raw file are ``{secure: v1:...}`` ciphertext; they load as encrypted
:class:`~dr.topology.secret.StackSecret` values and are written back unchanged. Plaintext secrets
(as the Pulumi engine hands them to the program) are never written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import yaml
from pydantic.alias_generators import to_camel, to_snake

from dr.errors import ConfigError
from dr.topology.model import Topology

__all__ = ["NAMESPACE", "dump_stack_config", "load_stack_file", "load_topology"]

NAMESPACE = "kafka-dr"
"""The Pulumi config namespace (project name) holding the topology."""

_STRUCTURED = ("clusters", "topics", "principals", "links")
_FIELDS = ("profile", "failover_done", *_STRUCTURED)
_STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/\\]+)\.ya?ml")


def _key(field: str) -> str:
    return f"{NAMESPACE}:{to_camel(field)}"


def _decode(key: str, field: str, value: Any) -> Any:
    if field not in _STRUCTURED:
        return value
    if isinstance(value, Mapping) and set(value) == {"secure"}:
        raise ConfigError(
            f"`{key}` is stored as one encrypted value, which cannot be read without the Pulumi engine",
            "store it in plain form and mark only the passwords secret (`pulumi config set --path --secret`)",
        )
    if isinstance(value, str):  # the Pulumi engine hands structured config over as JSON text
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"`{key}` is text that is not valid JSON ({exc.msg} at position {exc.pos})",
                f"set `{key}` as a YAML list/mapping in the stack file, or as JSON with `pulumi config set --path`",
            ) from None
    return value


def load_topology(stack_name: str, config: Mapping[str, Any]) -> Topology:
    """Build and validate the topology of ``stack_name`` from its parsed ``config:`` mapping.

    Keys outside the ``kafka-dr:`` namespace are ignored; unknown ``kafka-dr:`` keys are refused.
    Raises ConfigError for malformed values and TopologyError for broken rules.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"the config of stack '{stack_name}' is a {type(config).__name__}, not a mapping",
            f"put the settings under `config:` in Pulumi.{stack_name}.yaml as `{NAMESPACE}:<key>: <value>`",
        )
    data: dict[str, Any] = {}
    for key, value in config.items():
        namespace, sep, short = str(key).partition(":")
        if namespace != NAMESPACE or not sep:
            continue
        field = to_snake(short)
        if field not in _FIELDS:
            allowed = ", ".join(_key(f) for f in _FIELDS)
            raise ConfigError(
                f"unknown setting `{key}` in stack '{stack_name}'",
                f"remove it or correct its spelling; the settings are: {allowed}",
            )
        if field in data:
            raise ConfigError(
                f"`{key}` is given twice in stack '{stack_name}' (snake_case and camelCase)",
                f"keep only `{_key(field)}`",
            )
        data[field] = _decode(key, field, value)
    return Topology.model_validate({"name": stack_name, **data})


def load_stack_file(path: str | PathLike[str]) -> Topology:
    """Load and validate the topology in a ``Pulumi.<stack>.yaml`` file (stack name from the file name)."""
    path = Path(path)
    match = _STACK_FILE.fullmatch(path.name)
    if match is None:
        raise ConfigError(
            f"{path} is not named Pulumi.<stack>.yaml, so its stack is unknown",
            "pass a stack file such as Pulumi.local.yaml",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"stack file {path} does not exist",
            "create it (Pulumi.local.yaml is a complete example) or check the --stack name",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read stack file {path}: {exc.strerror}", "check the path and its permissions"
        ) from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"stack file {path} is not valid YAML ({problem}{where})", "fix the YAML there") from None
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"stack file {path} is not a YAML mapping", "start it with a `config:` mapping")
    return load_topology(match["stack"], document.get("config") or {})


def _plaintext_secrets(topology: Topology) -> list[str]:
    found = [
        f"clusters[{i}].admin_password"
        for i, c in enumerate(topology.clusters)
        if c.admin_password is not None and not c.admin_password.is_encrypted
    ]
    found += [
        f"clusters[{i}].confluent.api_secret"
        for i, c in enumerate(topology.clusters)
        if c.confluent is not None and c.confluent.api_secret is not None and not c.confluent.api_secret.is_encrypted
    ]
    found += [
        f"principals.applications[{i}].password"
        for i, app in enumerate(topology.principals.applications)
        if app.password is not None and not app.password.is_encrypted
    ]
    return found


def dump_stack_config(topology: Topology) -> dict[str, Any]:
    """The ``kafka-dr:`` entries of a stack file's ``config:`` for ``topology`` (inverse of load).

    Values equal to their defaults are left out. Encrypted secrets are written back as
    ``{"secure": ...}``; a plaintext secret raises ConfigError rather than being written.
    """
    plaintext = _plaintext_secrets(topology)
    if plaintext:
        raise ConfigError(
            "refusing to write plaintext secrets to a stack file: " + ", ".join(plaintext),
            "dump a topology loaded from the stack file itself (load_stack_file), whose secrets stay "
            "encrypted, or set them with `pulumi config set --path --secret`",
        )
    body = topology.model_dump(mode="json", exclude_defaults=True, exclude={"name"})
    config: dict[str, Any] = {
        _key("profile"): topology.profile.value,
        _key("failover_done"): topology.failover_done,
    }
    for field in _STRUCTURED:
        config[_key(field)] = body.get(field, {} if field == "principals" else [])
    return config
