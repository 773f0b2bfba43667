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

:func:`load_stack_file` reads the raw file and is stricter than YAML itself: the file must be UTF-8
(a BOM is fine), a mapping key given twice is refused (PyYAML would silently keep the last one, the
Pulumi CLI refuses it), and a password written in plain text is refused (it belongs in the file only
as ``{secure: ...}``). :func:`load_topology` does not refuse plaintext passwords: the Pulumi program
calls it with the config the engine has already decrypted.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import yaml
from pydantic.alias_generators import to_camel, to_snake

from dr.base.errors import ConfigError
from dr.topology.model import Architecture, Topology

__all__ = [
    "NAMESPACE",
    "StackConfig",
    "StackFile",
    "architecture_of",
    "dump_stack_config",
    "load_stack_file",
    "load_topology",
    "read_stack_file",
]

NAMESPACE = "kafka-dr"

StackConfig = dict[str, Any]
"""The ``kafka-dr:`` entries of a stack file's ``config:`` (``kafka-dr:<key>`` → the value the operator
wrote in YAML, the topology model's JSON of that field): a document from outside, read only through
:func:`load_topology`, written only by :func:`dump_stack_config`."""
"""The Pulumi config namespace (project name) holding the topology."""

_MAX_STACK_FILE_BYTES = 10 * 1024 * 1024
"""Stack files are a few kilobytes; anything this large is not one."""

_STRUCTURED = ("clusters", "topics", "principals", "links", "connect_clusters", "endpoint", "failover_policy")
_FIELDS = ("profile", "architecture", "failover_done", "provisioning", *_STRUCTURED)
_STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/\\]+)\.ya?ml")


def _key(field: str) -> str:
    return f"{NAMESPACE}:{to_camel(field)}"


CONFIG_KEYS = tuple(_key(field) for field in _FIELDS)
"""Every ``kafka-dr:`` key a stack's config may hold (what the Pulumi program asks the engine for)."""


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


_DEFAULT_ARCHITECTURE: Architecture = Topology.model_fields["architecture"].default
"""The architecture of a stack file without ``kafka-dr:architecture`` (the model's default), never written."""


def architecture_of(config: Mapping[str, Any]) -> Architecture:
    """The architecture a stack's ``kafka-dr:`` entries declare (as :func:`dump_stack_config` writes them, a
    failover journal's copies included): the model's default when they name none."""
    return Architecture(config.get(_key("architecture"), _DEFAULT_ARCHITECTURE))


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


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first: yaml.Node, again: yaml.Node) -> None:
        super().__init__(f"duplicate key {_key_text(key)}")
        self.key, self.first_line, self.again_line = key, first.start_mark.line + 1, again.start_mark.line + 1


class _StrictLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's parser when PyYAML has it: ~10× faster), refusing a mapping that gives the same
    key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` — explicit keys may override merged ones
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = seen.get(key)
                except TypeError:
                    continue  # unhashable: construct_mapping below reports it
                if earlier is not None:
                    raise _DuplicateKey(key, earlier, key_node)
                seen[key] = key_node
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _key_text(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _decode_text(path: Path, data: bytes) -> str:
    """The text of a stack file: UTF-8 with or without a BOM, else ConfigError naming the first bad byte."""
    for bom, encoding in (
        (b"\xff\xfe\x00\x00", "UTF-32"),
        (b"\x00\x00\xfe\xff", "UTF-32"),
        (b"\xff\xfe", "UTF-16"),
        (b"\xfe\xff", "UTF-16"),
    ):
        if data.startswith(bom):
            raise ConfigError(
                f"stack file {path} is {encoding} text (byte order mark at byte offset 0), not UTF-8",
                "save it as UTF-8 (a UTF-8 byte order mark is fine)",
            )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"stack file {path} is not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
            f"(line {line}) {exc.reason}",
            "save the file as UTF-8 (a UTF-8 byte order mark is fine)",
        ) from None


def _parse_yaml(path: Path, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 — a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(
            f"stack file {path} gives the key {_key_text(exc.key)} twice (lines {exc.first_line} and "
            f"{exc.again_line}); YAML readers disagree on which one counts (PyYAML keeps the last, Pulumi refuses)",
            f"keep one entry for {_key_text(exc.key)}: merge the two and delete the other",
        ) from None
    except yaml.reader.ReaderError as exc:
        raise ConfigError(
            f"stack file {path} is not valid YAML (character #x{exc.character:04x} at position {exc.position} "
            "is not allowed in YAML)",
            "remove the control character there",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"stack file {path} is not valid YAML ({problem}{where})", "fix the YAML there") from None
    except RecursionError:
        raise ConfigError(f"stack file {path} is nested too deeply to read", "flatten the YAML") from None


def _is_plaintext(value: Any) -> bool:
    """True for a secret written as a scalar (not ``{secure: ...}``; other shapes fail validation)."""
    return value is not None and not isinstance(value, Mapping | list)


def _items(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def _fields(item: Any, field: str) -> list[tuple[str, Any]]:
    """The (key as written, value) pairs of ``item`` whose key is ``field`` in snake or camel case."""
    if not isinstance(item, Mapping):
        return []
    return [(str(key), value) for key, value in item.items() if to_snake(str(key)) == field]


def _plaintext_passwords(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(Pulumi config path, what to do) of every secret written in plain text in a raw stack file."""
    found: list[tuple[str, str]] = []
    for key, value in config.items():
        namespace, sep, short = str(key).partition(":")
        if namespace != NAMESPACE or not sep or to_snake(short) not in ("clusters", "principals", "connect_clusters"):
            continue
        value = _decode(str(key), to_snake(short), value)
        if to_snake(short) == "connect_clusters":
            for i, connect in _items(value):
                for name, secret in _fields(connect, "password"):
                    if _is_plaintext(secret):
                        found.append((f"{key}[{i}].{name}", "encrypt"))
        elif to_snake(short) == "clusters":
            for i, cluster in _items(value):
                local = not isinstance(cluster, Mapping) or cluster.get("kind", "local") == "local"
                for name, secret in _fields(cluster, "admin_password"):
                    if _is_plaintext(secret):
                        found.append(
                            (
                                f"{key}[{i}].{name}",
                                "remove it (local clusters generate their passwords)" if local else "encrypt",
                            )
                        )
                for tname, tls in _fields(cluster, "tls"):
                    for name, secret in _fields(tls, "client_key_pem"):
                        if _is_plaintext(secret):
                            found.append((f"{key}[{i}].{tname}.{name}", "encrypt"))
                for cname, settings in _fields(cluster, "confluent"):
                    for name, secret in _fields(settings, "api_secret"):
                        if _is_plaintext(secret):
                            found.append((f"{key}[{i}].{cname}.{name}", "encrypt"))
        else:
            for name, secret in _fields(value, "replicator_password"):
                if _is_plaintext(secret):
                    found.append((f"{key}.{name}", "encrypt"))
            for apps_key, apps in _fields(value, "applications"):
                for i, app in _items(apps):
                    for name, secret in _fields(app, "password"):
                        if _is_plaintext(secret):
                            found.append((f"{key}.{apps_key}[{i}].{name}", "encrypt"))
    return found


def _refuse_plaintext(path: Path, stack: str, config: Mapping[str, Any]) -> None:
    found = _plaintext_passwords(config)
    if not found:
        return
    fixes = [
        f"`pulumi config set --stack {stack} --path --secret '{field}' <password>`"
        if todo == "encrypt"
        else f"{field}: {todo}"
        for field, todo in found
    ]
    count = len(found)
    raise ConfigError(
        f"stack file {path} holds {count} password{'s' if count != 1 else ''} in plain text: "
        + ", ".join(field for field, _ in found),
        "; ".join(fixes) + " (in the project directory; Pulumi replaces the plain text with {secure: ...}). "
        "Treat a password that was in the file as exposed and change it.",
    )


@dataclass(frozen=True)
class StackFile:
    """A stack file read once (:func:`read_stack_file`): what a command and every layer under it take
    instead of reading the file again — its path, its topology and the SHA-256 of the bytes read."""

    path: Path
    """The ``Pulumi.<stack>.yaml`` read."""
    topology: Topology
    """Its topology, validated."""
    digest: str
    """SHA-256 (hex) of its bytes as read."""

    @property
    def config(self) -> StackConfig:
        """Its ``kafka-dr:`` entries, normalised through the model (:func:`dump_stack_config`)."""
        return dump_stack_config(self.topology)


def load_stack_file(path: str | PathLike[str]) -> Topology:
    """Load and validate the topology in a ``Pulumi.<stack>.yaml`` file (stack name from the file name).

    Besides every rule of the topology, the raw file must be UTF-8, give no mapping key twice and
    hold every password encrypted (``{secure: ...}``); each refusal is a ConfigError naming the place.
    """
    return read_stack_file(path).topology


def read_stack_file(path: str | PathLike[str]) -> StackFile:
    """The stack file at ``path`` read once: its topology (as :func:`load_stack_file` loads it) and the
    digest of the very bytes it was loaded from."""
    path = Path(path)
    match = _STACK_FILE.fullmatch(path.name)
    if match is None:
        raise ConfigError(
            f"{path} is not named Pulumi.<stack>.yaml, so its stack is unknown",
            "pass a stack file such as Pulumi.local.yaml",
        )
    try:
        if path.is_file() and path.stat().st_size > _MAX_STACK_FILE_BYTES:
            raise ConfigError(
                f"stack file {path} is {path.stat().st_size} bytes, more than a stack file can be "
                f"({_MAX_STACK_FILE_BYTES} bytes)",
                "check that --stack names the right file",
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"stack file {path} does not exist",
            "create it (Pulumi.local.yaml is a complete example) or check the --stack name",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read stack file {path}: {exc.strerror}", "check the path and its permissions"
        ) from None
    document = _parse_yaml(path, _decode_text(path, data))
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"stack file {path} is not a YAML mapping", "start it with a `config:` mapping")
    config = document.get("config") or {}
    if isinstance(config, Mapping):
        _refuse_plaintext(path, match["stack"], config)
    topology = load_topology(match["stack"], config)
    _say_insecure(topology)
    return StackFile(path, topology, hashlib.sha256(data).hexdigest())


_SAID: set[str] = set()


def _say_insecure(topology: Topology) -> None:
    """Every protection the stack switches off, on stderr, once per process (:mod:`dr.topology.insecure`)."""
    from dr.topology.insecure import insecure_warnings

    for line in insecure_warnings(topology):
        if line not in _SAID:
            _SAID.add(line)
            sys.stderr.write(f"warning: stack {topology.name!r}: {line}\n")


def _plaintext_secrets(topology: Topology) -> list[str]:
    return [path for path, _key, secret in topology.secret_fields() if not secret.is_encrypted]


def dump_stack_config(topology: Topology) -> StackConfig:
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
    config: StackConfig = {
        _key("profile"): topology.profile.value,
        _key("failover_done"): topology.failover_done,
    }
    if topology.architecture != _DEFAULT_ARCHITECTURE:  # stack files without it stay as they were
        config[_key("architecture")] = topology.architecture.value
    if topology.provisioning != "individual":  # likewise
        config[_key("provisioning")] = topology.provisioning
    for field in _STRUCTURED:
        if field in ("connect_clusters", "endpoint", "failover_policy") and not body.get(field):
            continue  # optional: stacks without Connect clusters keep their files as they were
        config[_key(field)] = body.get(field, {} if field == "principals" else [])
    return config
