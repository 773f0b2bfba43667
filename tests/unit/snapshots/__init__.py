"""Snapshots of the text ``drctl`` prints: one readable ``<name>.txt`` per case in this directory.

A test renders a command's text from a real result object and calls :func:`assert_snapshot`.
When the text changes on purpose, regenerate the files and read the diff before committing::

    KDR_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit/cli/test_command_text.py
    git diff tests/unit/snapshots/

Paths that differ from run to run (pytest's temporary directory) are replaced by ``<tmp>`` first.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

__all__ = ["SNAPSHOTS", "assert_snapshot"]

SNAPSHOTS = Path(__file__).resolve().parent
UPDATE = "KDR_UPDATE_SNAPSHOTS"


def assert_snapshot(name: str, text: str, *, tmp: Path | None = None) -> None:
    """Fail unless ``text`` (with ``tmp`` written as ``<tmp>``) equals ``snapshots/<name>.txt``;
    with ``KDR_UPDATE_SNAPSHOTS=1`` write the file instead."""
    if tmp is not None:
        text = text.replace(str(tmp), "<tmp>")
    text = text.rstrip("\n") + "\n"
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get(UPDATE) == "1":
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"no snapshot {path}: run the test with {UPDATE}=1 to write it, then read it")
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "now"))
        raise AssertionError(f"the text differs from {path.name} ({UPDATE}=1 rewrites it):\n{diff}")
