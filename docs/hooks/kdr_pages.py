"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

Three things the site shows are not kept as Markdown in ``docs/``, so that none of them is a second copy that
can go stale:

- the runbooks (``runbooks/*.md``) and the Pulumi program's notes (``stacks/README.md``) stay where the tests
  and commands point; :func:`on_files` serves them in place as pages of the site;
- the CLI reference is rendered from ``drctl``'s click commands (``dr.cli.cli``), and the stack-file reference
  from the pydantic model of a stack's ``kafka-dr:`` config (``dr.topology.model.Topology``): a page holding
  the marker ``<!-- generated: cli -->`` or ``<!-- generated: stack-file -->`` gets the rendering in its place
  (:func:`on_page_markdown`).

The exit-code table is not generated here: ``docs/reference/exit-codes.md`` holds it between markers, and
``tests/unit/base/test_errors.py`` checks it against ``dr.base.errors.EXIT_CODES``.
"""

from __future__ import annotations

import ast
import enum
import inspect
import itertools
import re
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `mkdocs build` from the clone: the product's packages come from its tree
    sys.path.insert(0, str(ROOT))

#: Files outside docs/ served in place as pages: site path → file in the repository.
SERVED_IN_PLACE: dict[str, Path] = {
    **{f"runbooks/{path.name}": path for path in sorted((ROOT / "runbooks").glob("*.md"))},
    "development/pulumi-program.md": ROOT / "stacks" / "README.md",
}


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Adds the runbooks and ``stacks/README.md`` to the site, read from where they are."""
    for src_uri, path in SERVED_IN_PLACE.items():
        files.append(File.generated(config, src_uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replaces a ``<!-- generated: ... -->`` marker with its rendering. A file served in place links to a page as
    the repository holds it (``../docs/production/tls.md``, as a reader of the repository follows it); on the site
    that page is one level up from it (every file served in place sits one folder deep)."""
    if page.file.src_uri in SERVED_IN_PLACE:
        markdown = markdown.replace("](../docs/", "](../")
    for name, render in _GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


# -- the CLI ------------------------------------------------------------------------------------------------


def cli_markdown() -> str:
    """Every ``drctl`` command, in order, with the help text ``drctl <command> --help`` prints."""
    import dr.cli

    sections: list[str] = []

    def walk(command: click.Command, ctx: click.Context, level: int) -> None:
        path = ctx.command_path
        sections.append(f"{'#' * level} `{path}`\n\n```text\n{command.get_help(ctx).rstrip()}\n```")
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                walk(sub, click.Context(sub, info_name=name, parent=ctx, terminal_width=100), min(level + 1, 4))

    walk(dr.cli.cli, click.Context(dr.cli.cli, info_name="drctl", terminal_width=100), 2)
    return "\n\n".join(sections)


# -- the stack file -----------------------------------------------------------------------------------------


def _attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written under a class's fields (``name: T = ...`` then a string), by field name."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith(("pydantic", "builtins")) or klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[node.target.id] = _prose(after.value.value)
    return found


def _prose(docstring: str) -> str:
    """A docstring as one Markdown line: Sphinx roles (``:class:`Tls```) reduced to their code."""
    return re.sub(r":(?:mod|class|func|meth|attr|data):", "", " ".join(inspect.cleandoc(docstring).split()))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f'`"{member.value}"`' for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if isinstance(annotation, type):
        return annotation.__name__
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping {_type_name(args[0])} → {_type_name(args[1])}" if args else "mapping"
    return str(annotation).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "its defaults"
        return f"`{value!r}`" if value not in ([], {}) else "empty"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "—"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value!r}`".replace("|", "\\|")


def _constraints(field: FieldInfo) -> str:
    shown: list[str] = []
    for item in field.metadata:
        for name in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(item, name, None)
            if value is not None:
                shown.append(f"{name} `{value}`".replace("|", "\\|"))
    return "; ".join(shown)


def stack_file_markdown() -> str:
    """A table per model reachable from ``Topology``: each field as the stack file writes it, its type, default,
    constraints and the docstring written under it in the model."""
    from dr.topology.model import Topology
    from dr.topology.stackconfig import NAMESPACE

    seen: list[type[BaseModel]] = []
    queue: list[type[BaseModel]] = [Topology]
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            queue.extend(_models_in(field.annotation))

    sections: list[str] = []
    for model in seen:
        docs = _attribute_docs(model)
        top = model is Topology
        intro = _prose(model.__doc__ or "")
        rows = ["| field | type | default | constraints | what it is |", "|---|---|---|---|---|"]
        for name, field in model.model_fields.items():
            if top and name == "name":
                continue  # the stack's name, taken from the file name, not a config key
            alias = field.alias or name
            shown = f"`{NAMESPACE}:{alias}`" if top else (f"`{name}`" if alias == name else f"`{name}` / `{alias}`")
            doc = (docs.get(name) or field.description or "").replace("|", "\\|")
            rows.append(
                f"| {shown} | {_type_name(field.annotation)} | {_default(field)} | {_constraints(field)} | {doc} |"
            )
        sections.append(f"## {model.__name__}\n\n{intro}\n\n" + "\n".join(rows))
    return "\n\n".join(sections)


_GENERATED = {"cli": cli_markdown, "stack-file": stack_file_markdown}
