"""The product's shared vocabulary, declared once: the progress callback, its stderr printer, and the
pydantic base of every model the product reads or writes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from pydantic import BaseModel, ConfigDict

__all__ = ["Model", "Progress", "Reporter", "quiet"]

Reporter = Callable[[str], None]
"""What a long operation calls with one line of progress (stdout stays for the result / ``--json``)."""


def quiet(_message: str) -> None:
    """A reporter that prints nothing."""


class Progress:
    """Prints ``[<label> +12.3s] message`` to ``stream`` (stderr by default); call it with a message."""

    def __init__(self, label: str = "verify", stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"[{self.label} +{time.monotonic() - self.t0:6.1f}s] {message}", file=self.stream, flush=True)


class Model(BaseModel):
    """The base of the product's pydantic models: an unknown field is refused, never dropped.
    A subclass adds to :attr:`model_config` (pydantic merges it with this one)."""

    model_config = ConfigDict(extra="forbid")
