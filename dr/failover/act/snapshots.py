"""Last known end offsets of each cluster, kept so an unplanned failover can estimate its RPO.

When the active cluster dies, its end offsets can no longer be read. Every ``drctl status``, every
failover preflight and the drill's traffic loop record the end offsets they see in
``<state>/snapshots/<cluster>.json``; the unplanned failover compares the latest one with the
new active cluster's end offsets. Run ``drctl status`` periodically (cron, a monitoring job) to
keep the estimate tight.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from dr.base.files import write_json as atomic_write_json
from dr.failover.record.metrics import Offsets, decode_offsets, encode_offsets

__all__ = ["kept_offsets", "last_offsets", "record_offsets", "write_rate"]


def _path(state: Path, cluster: str) -> Path:
    return Path(state) / "snapshots" / f"{cluster}.json"


def _read(state: Path, cluster: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(_path(state, cluster).read_text())
        return data
    except (OSError, json.JSONDecodeError):
        return {}


def record_offsets(state: Path, cluster: str, offsets: Offsets, *, at: float | None = None) -> None:
    """Save ``offsets`` as the latest known end offsets of ``cluster`` (the one before is kept too)."""
    if not offsets:
        return
    before = _read(state, cluster)
    previous = {"at": before["at"], "offsets": before["offsets"]} if before.get("offsets") else None
    atomic_write_json(
        _path(state, cluster),
        {
            "cluster": cluster,
            "at": round(at or time.time(), 3),
            "offsets": encode_offsets(offsets),
            "previous": previous,
        },
    )


def last_offsets(state: Path, cluster: str) -> tuple[float | None, dict[tuple[str, int], int] | None]:
    """``(taken_at, offsets)`` of the latest snapshot of ``cluster``, or ``(None, None)``."""
    data = _read(state, cluster)
    if not data.get("offsets"):
        return None, None
    return data.get("at"), decode_offsets(data["offsets"])


def kept_offsets(state: Path, cluster: str) -> list[tuple[float, dict[tuple[str, int], int]]]:
    """Both snapshots kept of ``cluster`` (the one before the latest, then the latest) as ``(taken_at, offsets)``."""
    data = _read(state, cluster)
    kept = [data.get("previous") or {}, data]
    return [(k["at"], decode_offsets(k["offsets"])) for k in kept if k.get("offsets") and k.get("at") is not None]


def write_rate(state: Path, cluster: str) -> float | None:
    """Records per second the cluster accepted between its last two snapshots (None if unknown)."""
    data = _read(state, cluster)
    prev = data.get("previous")
    if not prev or not data.get("offsets") or data["at"] <= prev["at"]:
        return None
    now, then = decode_offsets(data["offsets"]), decode_offsets(prev["offsets"])
    grown = sum(max(0, n - then.get(tp, 0)) for tp, n in now.items())
    return float(grown / (data["at"] - prev["at"]))
