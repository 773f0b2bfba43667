"""Long lists shortened for the people who read them (a 200-application stack's step lines)."""

from __future__ import annotations

__all__ = ["MANY", "names_text"]

#: Past this many names or alike lines, a list is shortened.
MANY = 6


def names_text(names: list[str]) -> str:
    """Names joined by commas; past :data:`MANY`, the first three, the last and how many in all."""
    if len(names) <= MANY:
        return ", ".join(names)
    return f"{', '.join(names[:3])}, …, {names[-1]} ({len(names)} in all)"
