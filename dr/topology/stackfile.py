"""Writing a desired topology into the user's ``Pulumi.<stack>.yaml`` while keeping the file theirs.

:func:`write_stack_config` changes only the ``kafka-dr:`` values that differ from
:func:`~dr.topology.stackconfig.dump_stack_config` of the desired topology. "Differ" is decided on
values normalised through the model, so ``base_port`` and ``basePort``, ``6`` and ``"6"`` in a topic
config, or a field spelled out at its default all count as unchanged and are left as written.

The file is edited as a round-trip YAML tree (ruamel.yaml), so comments, key order, quoting, flow
or block style and the file's own indentation survive:

* a changed scalar is replaced in place (``role: passive`` -> ``role: active``), keeping the
  comments around it and its quoting;
* lists of named items (clusters, topics, applications, links) are matched by ``name``: an
  unchanged item is not touched; a new item is a copy of an existing one (comments stripped)
  edited into the new one, so it is formatted like its neighbours. The list is reordered to the
  desired order only when its set of names changed;
* a field reset to its default is removed; a ``kafka-dr:`` key that is new and not at its default
  is added at the end of the ``kafka-dr:`` section;
* comment lines that follow a changed value (ruamel stores them on the last scalar before them)
  are moved along so that they stay where they were in the text;
* encrypted secrets (``{secure: v1:...}``) that did not change are not re-emitted, byte for byte.

ruamel re-emits the whole document, and a few spellings do not survive that (``True`` becomes
``true``, a ``---`` line is dropped, odd indentation is made uniform). Only the lines of the
re-emitted text that carry a change are therefore copied into the original text; where that is not
possible the re-emitted text is used. Every result is read back with the product's own loader and
must give the desired topology, otherwise nothing is written.
"""

from __future__ import annotations

import copy
import difflib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from inspect import isclass
from os import PathLike
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.alias_generators import to_camel, to_snake
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarfloat import ScalarFloat
from ruamel.yaml.scalarint import ScalarInt
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString
from ruamel.yaml.tokens import CommentToken

from dr.base.errors import ConfigError
from dr.base.files import write_atomic
from dr.topology.model import Topology
from dr.topology.stackconfig import NAMESPACE, StackConfig, dump_stack_config, load_stack_file, load_topology

__all__ = ["render_stack_config", "stack_file_diff", "write_stack_config"]

_ABSENT: Any = object()
"""Marks a field missing from a normalised mapping (at its default)."""

_Probe = Callable[[Any], Any]
"""Normalises a raw file value of one field through its model (``_ABSENT`` when at its default)."""


# -- public API ---------------------------------------------------------------------------------


def render_stack_config(path: str | PathLike[str], topology: Topology) -> str:
    """The text the stack file at ``path`` should have so that it declares ``topology``.

    Equal to the current text when nothing differs. Raises ConfigError for plaintext secrets in
    ``topology`` (as :func:`dump_stack_config` does) and for a stack file that cannot be read.
    """
    return _render(Path(path), topology)[1]


def stack_file_diff(path: str | PathLike[str], topology: Topology) -> str:
    """The unified diff :func:`write_stack_config` would apply to ``path``; ``""`` when none."""
    path = Path(path)
    old, new = _render(path, topology)
    if old == new:
        return ""
    return "".join(difflib.unified_diff(_diff_lines(old), _diff_lines(new), f"a/{path.name}", f"b/{path.name}"))


def write_stack_config(path: str | PathLike[str], topology: Topology) -> bool:
    """Make the stack file at ``path`` declare ``topology``; return True when it changed.

    Only differing ``kafka-dr:`` values change (see the module doc); everything else in the file
    stays as the user wrote it. When nothing differs the file is not touched at all (not even its
    mtime) and False is returned. A list whose names are the same but in another order counts as
    unchanged. The write is atomic (a temporary file in the same directory, then ``os.replace``)
    and keeps the file's mode. Plaintext secrets raise ConfigError and leave the file unchanged.
    """
    path = Path(path)
    old, new = _render(path, topology)
    if old == new:
        return False
    _replace_file(path, new)
    return True


# -- rendering ----------------------------------------------------------------------------------


def _render(path: Path, topology: Topology) -> tuple[str, str]:
    """(current text, new text) of the stack file; ConfigError before anything is read for plaintext secrets."""
    desired = dump_stack_config(topology)
    current = load_stack_file(path)
    raw = path.read_bytes().decode("utf-8")
    wanted, have = _fields(desired), _fields(dump_stack_config(current))
    new = None if wanted == have else _edited(path, raw.replace("\r\n", "\n"), wanted, have)
    if new is None:
        return raw, raw
    _check(path, current.name, new, desired)
    return raw, new.replace("\n", "\r\n") if "\r\n" in raw else new


def _edited(path: Path, text: str, desired: dict[str, Any], current: dict[str, Any]) -> str | None:
    """The edited text, or None when the edit changes nothing in the text."""
    yaml_rt = _round_trip_yaml()
    document = _load(yaml_rt, text, path)
    mapping, sequence, offset = _indentation(document)
    yaml_rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    baseline = _emit(yaml_rt, _load(yaml_rt, text, path))
    config = _config_section(document, path)
    _Merge.for_section(config).section(config, desired, current)
    new = _emit(yaml_rt, document)
    if new == baseline:
        return None
    if baseline == text:
        return new
    transplanted = _transplant(text, baseline, new)
    return transplanted if _loads_as(transplanted, new) else new


def _round_trip_yaml() -> YAML:
    yaml_rt = YAML(typ="rt")
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096  # never fold a long value onto a second line
    return yaml_rt


def _indentation(document: Any) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) as the file uses them, for ``YAML.indent``.

    Measured on the loaded tree (ruamel records where each node starts), relative to the column of
    the key: the mapping indent from the first block mapping that is the value of a key, the
    sequence indent (to the item's content) and the dash offset from the first block sequence that
    is. ``key:`` / ``    - name: A`` (Pulumi.local.yaml) is sequence 4, offset 2; ``key:`` /
    ``- name: A``, the dash at the key's column (PyYAML's default style), is sequence 2, offset 0.
    A file without one of them gets ``mapping 2`` and a sequence style of ``mapping + 2, mapping``.
    """
    mapping = sequence = offset = None
    for key_column, value in _block_values(document):
        if isinstance(value, CommentedMap) and mapping is None:
            mapping = value.lc.col - key_column
        elif isinstance(value, CommentedSeq) and offset is None:
            item = value.lc.data.get(0) if isinstance(value.lc.data, dict) else None
            if item is not None and item[0] == value.lc.line:  # the first item starts on its dash's line
                offset, sequence = value.lc.col - key_column, item[1] - key_column
        if mapping is not None and offset is not None:
            break
    mapping = mapping if mapping and mapping > 0 else 2
    if offset is None or sequence is None or offset < 0 or sequence < offset + 2:
        offset, sequence = mapping, mapping + 2
    return mapping, sequence, offset


def _block_values(node: Any) -> Iterator[tuple[int, CommentedMap | CommentedSeq]]:
    """(column of the key, value) for the non-empty block collections that are values of mapping keys, in text order."""
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            if _is_block(value):
                position = node.lc.data.get(key) if isinstance(node.lc.data, dict) else None
                if position is not None:
                    yield position[1], value
            yield from _block_values(value)
    elif isinstance(node, CommentedSeq):
        for value in node:
            yield from _block_values(value)


def _load(yaml_rt: YAML, text: str, path: Path) -> Any:
    try:
        return yaml_rt.load(text)
    except YAMLError as exc:
        raise ConfigError(f"stack file {path} cannot be edited: {exc}", "fix the YAML there") from None


def _emit(yaml_rt: YAML, document: Any) -> str:
    out = io.StringIO()
    yaml_rt.dump(document, out)
    return out.getvalue()


def _config_section(document: Any, path: Path) -> CommentedMap:
    if not isinstance(document, CommentedMap):
        raise ConfigError(f"stack file {path} is not a YAML mapping", "start it with a `config:` mapping")
    if document.get("config") is None:
        document["config"] = CommentedMap()
    config = document["config"]
    if not isinstance(config, CommentedMap):
        raise ConfigError(f"`config:` in stack file {path} is not a mapping", "put `kafka-dr:<key>: <value>` under it")
    return config


def _fields(config: dict[str, Any]) -> dict[str, Any]:
    """``dump_stack_config`` output keyed by model field name (``failover_done``)."""
    return {to_snake(key.partition(":")[2]): value for key, value in config.items()}


# -- normalising through the model --------------------------------------------------------------


def _plain(node: Any) -> Any:
    """A ruamel value as plain Python data (dict, list, str, int, float, bool, None)."""
    if isinstance(node, dict):
        return {str(k) if isinstance(k, str) else k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, ScalarBoolean):
        return bool(node)
    if isinstance(node, ScalarInt):
        return int(node)
    if isinstance(node, ScalarFloat):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def _normalise(model: type[BaseModel], raw: Any) -> dict[str, Any] | None:
    """``raw`` as ``dump_stack_config`` would write it (defaults left out), or None if it is invalid."""
    try:
        return model.model_validate(_plain(raw)).model_dump(mode="json", exclude_defaults=True)
    except (ConfigError, ValueError, TypeError):
        return None


def _probe(model: type[BaseModel], want: dict[str, Any], field: str) -> _Probe:
    """Normalises a raw value of ``field`` by putting it into the desired item ``want``."""

    def probe(raw: Any) -> Any:
        normalised = _normalise(model, {**want, field: raw})
        return _ABSENT if normalised is None else normalised.get(field, _ABSENT)

    return probe


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(model, is a list of it) for a field annotation (``X | None`` counts as ``X``); (None, False) otherwise."""
    if get_origin(annotation) in (Union, UnionType):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _model_of(options[0]) if len(options) == 1 else (None, False)
    if isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, False
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if isclass(item) and issubclass(item, BaseModel):
            return item, True
    return None, False


def _field_of(model: type[BaseModel], key: Any) -> str | None:
    field = to_snake(str(key))
    return field if field in model.model_fields else None


def _section_field(key: Any) -> str | None:
    namespace, sep, short = str(key).partition(":")
    return to_snake(short) if namespace == NAMESPACE and sep else None


# -- comments that follow a value ---------------------------------------------------------------
# ruamel keeps the comment lines after a value on the last scalar before them (slot 2 of a mapping
# entry, slot 0 of a sequence entry), together with that scalar's end-of-line comment.


_T = TypeVar("_T")

#: A block or flow collection of the round-trip document.
_Collection = CommentedMap | CommentedSeq


def _is_block(value: Any) -> bool:
    return isinstance(value, CommentedMap | CommentedSeq) and len(value) > 0 and not value.fa.flow_style()


def _slot(container: _Collection, key: Any) -> tuple[_Collection, Any, int]:
    """Where the comments after entry ``key`` of ``container`` are kept."""
    value = container[key]
    while _is_block(value):
        container, key = value, (list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1)
        value = container[key]
    return container, key, 2 if isinstance(container, CommentedMap) else 0


def _collections(container: _Collection, key: Any) -> list[_Collection]:
    """The collections from the value of entry ``key`` down to its last scalar, outermost first."""
    found: list[_Collection] = []
    value = container[key]
    while isinstance(value, CommentedMap | CommentedSeq):
        found.append(value)
        if not _is_block(value):
            break
        value = value[list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1]
    return found


def _take(container: _Collection, key: Any) -> str:
    """Detach and return the comment lines after entry ``key`` (its end-of-line comment stays).

    They are on the last scalar, or (after a flow-style value) at the end of the enclosing collections.
    """
    ends = ""
    for node in reversed(_collections(container, key)):
        ends += "".join(" " * t.column + t.value for t in node.ca.end or [] if isinstance(t, CommentToken))
        node.ca.end = []
    node, k, index = _slot(container, key)
    entry = node.ca.items.get(k)
    token = entry[index] if entry and len(entry) > index else None
    if not isinstance(token, CommentToken):
        return ends
    eol, _, following = token.value.partition("\n")
    if eol:
        token.value = eol + "\n"
    else:
        entry[index] = None
    return following + ends


def _put(container: _Collection, key: Any, following: str) -> None:
    """Attach comment lines (as returned by :func:`_take`) after entry ``key`` of ``container``."""
    if not following:
        return
    node, k, index = _slot(container, key)
    entry = node.ca.items.setdefault(k, [None, None, None, None])
    token = entry[index]
    if isinstance(token, CommentToken):
        token.value = token.value + following if token.value.endswith("\n") else f"{token.value}\n{following}"
    else:
        entry[index] = CommentToken("\n" + following, CommentMark(0), None)


def _pre_comments(node: CommentedMap, key: Any) -> str:
    """Comment lines ruamel keeps *before* ``key`` (after a flow-style value), as text."""
    entry = node.ca.items.get(key)
    tokens = entry[1] if entry and isinstance(entry[1], list) else []
    return "".join(" " * t.column + t.value for t in tokens if isinstance(t, CommentToken))


def _strip_comments(node: _T) -> _T:
    """``node`` without any comment (used on copies that serve as templates)."""
    if isinstance(node, CommentedMap | CommentedSeq):
        node.ca.items.clear()
        node.ca.comment = None
        for child in node.values() if isinstance(node, CommentedMap) else node:
            _strip_comments(child)
    return node


# -- editing entries ----------------------------------------------------------------------------


def _insert(node: CommentedMap, position: int, key: Any, value: Any) -> None:
    """Insert ``key`` at ``position``; comment lines after the previous entry move after the new one."""
    keys = list(node)
    following = _take(node, keys[position - 1]) if position > 0 else ""
    node.insert(position, key, value)
    _put(node, key, following)


def _remove(node: CommentedMap, key: Any) -> None:
    """Delete ``key``; comment lines before and after it stay where they were in the text."""
    keys = list(node)
    position = keys.index(key)
    following = _pre_comments(node, key) + _take(node, key)
    del node[key]
    node.ca.items.pop(key, None)
    if node:
        _put(node, keys[position - 1] if position > 0 else list(node)[-1], following)


def _set_items(seq: CommentedSeq, picks: list[tuple[int | None, Any]]) -> None:
    """Make ``picks`` (old index or None, value) the items of ``seq``, keeping full-line comments."""
    kept = {old for old, _ in picks if old is not None}
    following = [_take(seq, i) for i in range(len(seq))]
    end = following.pop() if following else ""
    for i, text in enumerate(following):
        if i not in kept and text:
            earlier = [k for k in range(i) if k in kept]
            if earlier:
                following[earlier[-1]] += text
            else:
                end = text + end
    items = dict(seq.ca.items)
    seq.ca.items.clear()
    list.clear(seq)
    for new, (old, value) in enumerate(picks):
        list.append(seq, value)
        if old is not None and old in items:
            seq.ca.items[new] = items[old]
        if old is not None and old < len(following):
            _put(seq, new, following[old])
    if seq:
        _put(seq, len(seq) - 1, end)


def _reads_back(text: str) -> bool:
    """True when the product's loader (PyYAML, YAML 1.1) reads ``text`` unquoted as this string."""
    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


def _scalar_like(old: Any, new: Any) -> Any:
    """``new`` in the quoting style of ``old``; quoted when it would not read back as a string."""
    if not isinstance(new, str):
        return new
    if isinstance(old, ScalarString):
        return type(old)(new)
    return new if _reads_back(new) else DoubleQuotedScalarString(new)


# -- merging the desired values into the file ---------------------------------------------------


@dataclass(frozen=True)
class _Merge:
    """Edits a ruamel tree so that it normalises to the desired values; ``camel`` spells new keys."""

    camel: bool
    camel_section: bool

    @classmethod
    def for_section(cls, config: CommentedMap) -> _Merge:
        """The key spelling the file's ``kafka-dr:`` section already uses (snake_case when unsure)."""
        section = [str(k).partition(":")[2] for k in config if _section_field(k)]
        keys = _keys_in([value for key, value in config.items() if _section_field(key)])
        camel = sum(1 for k in keys if _is_camel(k)) > sum(1 for k in keys if "_" in k)
        return cls(camel=camel, camel_section=not any("_" in k for k in section))

    def key(self, field: str) -> str:
        """A model field spelled for a new key."""
        return to_camel(field) if self.camel else field

    def section(self, config: CommentedMap, desired: dict[str, Any], current: dict[str, Any]) -> None:
        """Bring the ``kafka-dr:`` keys of ``config`` to ``desired`` (``current`` is the file, normalised)."""
        keys = {field: key for key in config if (field := _section_field(key))}
        for field, want in desired.items():
            annotation = Topology.model_fields[field].annotation
            key = keys.get(field)
            if key is None:
                if want not in ([], {}):
                    name = f"{NAMESPACE}:{to_camel(field) if self.camel_section else field}"
                    _insert(config, _section_end(config), name, self.fresh(want, annotation))
            elif current.get(field, _ABSENT) != want:
                if want in ([], {}):
                    _remove(config, key)
                else:
                    self.replace(config, key, want, annotation, _no_probe)

    def replace(self, node: CommentedMap, key: Any, want: Any, annotation: Any, probe: _Probe) -> None:
        """Set entry ``key`` to ``want``, editing the old value in place where possible."""
        following = _take(node, key)
        node[key] = self.value(node[key], want, annotation, probe)
        _put(node, key, following)

    def value(self, old: Any, want: Any, annotation: Any, probe: _Probe) -> Any:
        """``old`` edited into ``want`` (the same object for collections that could be kept)."""
        model, many = _model_of(annotation)
        if model is not None and not many and isinstance(old, CommentedMap) and isinstance(want, dict):
            self.mapping(old, want, model)
        elif model is not None and many and _named(old, model) and isinstance(want, list):
            self.named_list(old, want, model)
        elif model is None and isinstance(old, CommentedMap) and isinstance(want, dict):
            self.plain_mapping(old, want, probe)
        elif isinstance(old, CommentedSeq) and isinstance(want, list) and not any(_is_collection(v) for v in want):
            self.scalar_list(old, want)
        elif _is_collection(want):
            return self.fresh(want, annotation)
        else:
            return _scalar_like(old, want)
        return old

    def mapping(self, node: CommentedMap, want: dict[str, Any], model: type[BaseModel]) -> None:
        """Edit the file form of one ``model`` so it normalises to ``want``; unchanged fields stay as written."""
        have = _normalise(model, node)
        for key in list(node):
            field = _field_of(model, key)
            if field is None or (have is not None and have.get(field, _ABSENT) == want.get(field, _ABSENT)):
                continue
            if field in want:
                annotation = model.model_fields[field].annotation
                self.replace(node, key, want[field], annotation, _probe(model, want, field))
            else:
                _remove(node, key)
        have = _normalise(model, node)
        present = {_field_of(model, key) for key in node}
        for field, value in want.items():
            if field not in present and (have is None or have.get(field, _ABSENT) != value):
                _insert(node, len(node), self.key(field), self.fresh(value, model.model_fields[field].annotation))

    def named_list(self, seq: CommentedSeq, want: list[dict[str, Any]], model: type[BaseModel]) -> None:
        """Match items by name; reorder to ``want`` only when the set of names changed."""
        names = [str(item["name"]) for item in seq]
        wanted = {item["name"]: item for item in want}
        if sorted(names) == sorted(wanted):
            for name, item in zip(names, seq, strict=True):
                self.mapping(item, wanted[name], model)
            return
        picks: list[tuple[int | None, Any]] = []
        for i, item in enumerate(want):
            old = names.index(item["name"]) if item["name"] in names else None
            node = seq[old] if old is not None else _template(seq, i)
            self.mapping(node, item, model)
            picks.append((old, node))
        _set_items(seq, picks)

    def plain_mapping(self, node: CommentedMap, want: dict[str, Any], probe: _Probe) -> None:
        """A mapping that is not a model (topic configs, ``{secure: ...}``): compared key by key."""
        for key in list(node):
            normalised = probe({key: _plain(node[key])})
            if isinstance(normalised, dict) and key in want and normalised.get(key, _ABSENT) == want[key]:
                continue
            if key in want:
                self.replace(node, key, want[key], Any, _no_probe)
            else:
                _remove(node, key)
        for key, value in want.items():
            if key not in node:
                _insert(node, len(node), key, self.fresh(value, Any))

    def scalar_list(self, seq: CommentedSeq, want: list[Any]) -> None:
        """A list of scalars: equal items are kept with their quoting, new ones quoted like the first."""
        old = [_plain(v) for v in seq]
        if old == want:
            return
        unused = list(range(len(seq)))
        picks: list[tuple[int | None, Any]] = []
        for value in want:
            match = next((i for i in unused if old[i] == value), None)
            if match is None:
                picks.append((None, _scalar_like(seq[0] if len(seq) else None, value)))
            else:
                unused.remove(match)
                picks.append((match, seq[match]))
        _set_items(seq, picks)

    def fresh(self, want: Any, annotation: Any) -> Any:
        """A new value: block mappings, flow lists of scalars (as in the example stacks)."""
        model, many = _model_of(annotation)
        if isinstance(want, dict):
            node = CommentedMap()
            if model is not None and not many:
                self.mapping(node, want, model)
            else:
                for key, value in want.items():
                    node[key] = self.fresh(value, Any)
            return node
        if isinstance(want, list):
            seq = CommentedSeq(self.fresh(v, model if many else Any) for v in want)
            if not any(_is_collection(v) for v in want):
                seq.fa.set_flow_style()
            return seq
        return _scalar_like(None, want)


def _no_probe(raw: Any) -> Any:
    return _ABSENT


def _is_collection(value: Any) -> bool:
    return isinstance(value, dict | list)


def _is_camel(key: str) -> bool:
    return key[:1].islower() and any(c.isupper() for c in key) and "_" not in key


def _keys_in(node: Any) -> list[str]:
    """Every mapping key below ``node``."""
    if isinstance(node, dict):
        return [str(k) for k in node] + [k for v in node.values() for k in _keys_in(v)]
    if isinstance(node, list):
        return [k for v in node for k in _keys_in(v)]
    return []


def _named(node: Any, model: type[BaseModel]) -> bool:
    """True for a list of mappings with distinct string names (of a model that has a name)."""
    if not isinstance(node, CommentedSeq) or "name" not in model.model_fields:
        return False
    names = [item.get("name") if isinstance(item, CommentedMap) else None for item in node]
    return all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _template(seq: CommentedSeq, index: int) -> CommentedMap:
    """A comment-free copy of the item at ``index`` (or the last one) to edit into a new item."""
    if not len(seq):
        return CommentedMap()
    item = seq[min(index, len(seq) - 1)]
    if not isinstance(item, CommentedMap):
        raise ConfigError(
            f"item {index} of a list in the stack file is not a mapping.", "write each entry as `key: value` lines"
        )
    return _strip_comments(copy.deepcopy(item))


def _section_end(config: CommentedMap) -> int:
    """The position after the last ``kafka-dr:`` key (the end of ``config`` when there is none)."""
    positions = [i for i, key in enumerate(config) if _section_field(key)]
    return positions[-1] + 1 if positions else len(config)


# -- keeping untouched lines byte for byte, and checking the result -----------------------------


def _transplant(original: str, baseline: str, new: str) -> str:
    """Carry the changes from ``baseline`` (ruamel's re-emission of ``original``) to ``new`` over to ``original``.

    Lines that are the same in all three texts anchor them to each other; between two anchors the
    original lines are kept unless the edit changed something there.
    """
    orig, base, edited = (t.splitlines(keepends=True) for t in (original, baseline, new))
    to_orig, to_edited = _same_lines(base, orig), _same_lines(base, edited)
    anchors = [(b, to_orig[b], to_edited[b]) for b in range(len(base)) if b in to_orig and b in to_edited]
    out: list[str] = []
    previous = (-1, -1, -1)
    for anchor in [*anchors, (len(base), len(orig), len(edited))]:
        (b0, o0, e0), (b1, o1, e1) = previous, anchor
        segment = edited[e0 + 1 : e1]
        out += orig[o0 + 1 : o1] if segment == base[b0 + 1 : b1] else segment
        out += orig[o1 : o1 + 1]
        previous = anchor
    return "".join(out)


def _same_lines(a: list[str], b: list[str]) -> dict[int, int]:
    """Line ``i`` of ``a`` -> its line in ``b``, for the lines a line diff leaves unchanged."""
    same: dict[int, int] = {}
    for tag, a1, a2, b1, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            same.update((a1 + k, b1 + k) for k in range(a2 - a1))
    return same


def _loads_as(text: str, reference: str) -> bool:
    try:
        return bool(yaml.safe_load(text) == yaml.safe_load(reference))
    except yaml.YAMLError:
        return False


def _canonical(value: Any) -> Any:
    """Named lists in name order: the order of an unchanged set of names is the user's."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        if items and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in items):
            return sorted(items, key=lambda v: v["name"])
        return items
    return value


def _check(path: Path, stack: str, text: str, desired: StackConfig) -> None:
    """Refuse (ConfigError) a new text that would not load as the desired topology."""
    document = yaml.safe_load(text) or {}
    written = dump_stack_config(load_topology(stack, document.get("config") or {}))
    if _canonical(written) != _canonical(desired):
        raise ConfigError(
            f"editing {path} in place would not give the desired topology; the file was left unchanged",
            "report this as a bug, with the stack file; meanwhile set the values by hand",
        )


# -- files --------------------------------------------------------------------------------------


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping its mode (a symlink keeps pointing at it)."""
    write_atomic(path, text, mode=None)
