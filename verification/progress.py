"""Progress lines on stderr for the long steps (stdout stays for the result / ``--json``): the printer
and the callback type live in :mod:`dr.base.types`, named here for the verification's modules."""

from __future__ import annotations

from dr.base.types import Progress, Reporter, quiet

__all__ = ["Progress", "Reporter", "quiet"]
