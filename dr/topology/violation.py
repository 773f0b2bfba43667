"""One broken topology rule, as every rule module reports it and :mod:`dr.topology.validation` lists it.

A module of its own, below the rules, so a rule module can name what it yields without importing the
catalogue of every rule.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Violation"]


@dataclass(frozen=True)
class Violation:
    """One broken rule: the offending field's path, what is wrong, and how to fix it."""

    path: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem} — {self.fix}"
