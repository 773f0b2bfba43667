"""The difference classes a verification reports, in report order, with what each means."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CLASSES", "COUNTED", "MEANING", "totals_of"]

#: Difference classes, in report order.
CLASSES = ("missing", "unexpected", "duplicated", "corrupted")

#: One line per class, for people.
MEANING = {
    "missing": "on the source, never reached the target",
    "unexpected": "on the target before the cut-off with a key the source never had",
    "duplicated": "extra copies on the target of a record the source has",
    "corrupted": "on the target with a key the source has, but content the source never had",
}

#: What a summary's per-topic entry counts and its ``totals`` add up: reads, cut-off split, classes.
COUNTED = (
    "source_read",
    "target_read",
    "source_after_cutoff",
    "target_after_cutoff",
    "source_compared",
    "target_compared",
    *CLASSES,
)


def totals_of(per_topic: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The summary's ``totals``: each of :data:`COUNTED` summed over the topics."""
    return {k: sum(int(v[k]) for v in per_topic.values()) for k in COUNTED}
