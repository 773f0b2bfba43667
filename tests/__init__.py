"""The test suite. ``REPO_ROOT`` is the clone the tests run from: its example stack files are test data."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
