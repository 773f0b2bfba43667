"""The difference classes a verification reports, in report order, with what each means."""

from __future__ import annotations

__all__ = ["CLASSES", "MEANING"]

#: Difference classes, in report order.
CLASSES = ("missing", "unexpected", "duplicated", "corrupted")

#: One line per class, for people.
MEANING = {
    "missing": "on the source, never reached the target",
    "unexpected": "on the target before the cut-off with a key the source never had",
    "duplicated": "extra copies on the target of a record the source has",
    "corrupted": "on the target with a key the source has, but content the source never had",
}
