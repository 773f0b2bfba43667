"""``--stack``: the one place a stack name becomes a :class:`~dr.base.stackref.StackRef` (its project
directory, stack file, state directory and backend), which every command then passes down."""

from __future__ import annotations

import click

from dr.base.stackref import StackRef

__all__ = ["STACK"]


class _Stack(click.ParamType):
    """A stack name, resolved once against the current project (``--help`` shows it as TEXT)."""

    name = "text"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> StackRef:
        return value if isinstance(value, StackRef) else StackRef.resolve(str(value))


STACK = _Stack()
"""The click type of every ``--stack`` option."""
