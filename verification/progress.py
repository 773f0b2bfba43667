"""Progress lines on stderr for the long steps (stdout stays for the result / ``--json``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "Reporter"]

#: What the job and recovery call with one line of progress.
Reporter = Callable[[str], None]


class Progress:
    """Prints ``[verify +12.3s] message`` to ``stream`` (stderr by default); call it with a message."""

    def __init__(self, label: str = "verify", stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"[{self.label} +{time.monotonic() - self.t0:6.1f}s] {message}", file=self.stream, flush=True)


def quiet(_message: str) -> None:
    """A reporter that prints nothing."""
