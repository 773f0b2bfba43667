"""Pure computations of the failover: partition keys, lag, RPO estimate, re-reads, RTO, cut-off.

Nothing here talks to a cluster, so every rule is unit-tested on plain dictionaries. Offsets are
keyed ``(topic, partition)`` in memory and ``"topic:partition"`` in JSON (``:`` cannot appear in a
Kafka topic name, so the key is unambiguous).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime

from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on Python 3.11

__all__ = [
    "GroupPositions",
    "Offsets",
    "RpoEstimate",
    "cutoff_ms",
    "decode_offsets",
    "encode_offsets",
    "group_positions",
    "lag",
    "rpo_estimate",
    "seconds_between",
    "utc_text",
]

Offsets = Mapping[tuple[str, int], int]


def encode_offsets(offsets: Offsets) -> dict[str, int]:
    """``{(topic, partition): n}`` → ``{"topic:partition": n}`` (sorted), for JSON."""
    return {f"{t}:{p}": int(n) for (t, p), n in sorted(offsets.items())}


def decode_offsets(encoded: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """The inverse of :func:`encode_offsets`."""
    out: dict[tuple[str, int], int] = {}
    for key, n in encoded.items():
        topic, _, partition = key.rpartition(":")
        out[(topic, int(partition))] = int(n)
    return out


def lag(source_end: Offsets, target_end: Offsets) -> dict[tuple[str, int], int]:
    """Per partition of the source: records it holds beyond the target (never negative)."""
    return {tp: max(0, n - target_end.get(tp, 0)) for tp, n in source_end.items()}


class RpoEstimate(TypedDict, total=False):
    """The records B lacks when A was lost, estimated (:func:`rpo_estimate`; after a drain, its residual lag)."""

    records: int | None
    upper_bound: int | None
    basis: str
    per_partition: dict[str, int]
    """``{"topic:partition": records}``"""
    snapshot_at: float | None
    snapshot_age_s: float | None
    write_rate_per_s: float | None


def rpo_estimate(
    last_known_source: Offsets | None,
    target_end: Offsets,
    *,
    snapshot_at: float | None = None,
    failed_at: float | None = None,
    write_rate: float | None = None,
    copied: Offsets | None = None,
) -> RpoEstimate:
    """The records the target lacks, estimated from the source's last known end offsets.

    ``copied``: the source positions the link committed with its copies (read on the target,
    :mod:`dr.kafka.copied`); the gap is then measured from them, in records. Without them it is measured
    from ``target_end``, which also counts an exactly-once link's commit markers (offsets, not records:
    "44" for 50 records lost).

    ``records`` is a lower bound: records the source accepted after the snapshot are not counted.
    ``upper_bound`` adds what the source could have accepted since, at its last measured write
    rate, until ``failed_at`` (the failover's start: the source died somewhere in between). The
    verification, once the source is readable again, gives the exact list.
    """
    if not last_known_source:
        return {
            "records": None,
            "upper_bound": None,
            "basis": "no snapshot of the source's end offsets was ever taken",
            "per_partition": {},
            "snapshot_at": None,
            "snapshot_age_s": None,
        }
    gaps = {tp: n for tp, n in lag(last_known_source, target_end if copied is None else copied).items() if n}
    age = None if snapshot_at is None or failed_at is None else round(max(0.0, failed_at - snapshot_at), 3)
    lower = sum(gaps.values())
    upper = None if age is None or write_rate is None else lower + math.ceil(write_rate * age)
    return {
        "records": lower,
        "upper_bound": upper,
        "basis": "source end offsets last seen minus "
        + ("the link's committed source positions" if copied is not None else "target end offsets")
        + " (a lower bound)"
        + ("; upper bound adds the source's last write rate over the snapshot's age" if upper is not None else ""),
        "per_partition": encode_offsets(gaps),
        "snapshot_at": snapshot_at,
        "snapshot_age_s": age,
        "write_rate_per_s": None if write_rate is None else round(write_rate, 1),
    }


class GroupPositions(TypedDict):
    """One group's committed offsets on the source against its translated ones on the target
    (:func:`group_positions`); ``"topic:partition"`` keys."""

    rereads: int | None
    rereads_per_partition: dict[str, int]
    would_skip: dict[str, int]
    missing_on_target: list[str]
    not_comparable: list[str]


def group_positions(
    source_committed: Offsets | None,
    target_committed: Offsets,
    source_end: Offsets | None,
    target_end: Offsets,
    *,
    aligned: bool = True,
) -> GroupPositions:
    """Compare one consumer group's committed offsets on the source and (translated) on the target.

    Offsets of the two clusters are only comparable on partitions whose end offsets match (the
    link copied everything; MirrorMaker 2 with identity naming then keeps offsets aligned). On
    those partitions ``source - target`` is what the group's consumers will read twice on the
    target; a target offset *ahead* of the source would skip records and is reported under
    ``would_skip`` (it must never happen). Other partitions are ``not_comparable``. A link that writes
    in transactions (``aligned=False``) never keeps offsets aligned — its target also holds commit
    markers, so equal ends do not even mean equal records: every partition is ``not_comparable``.
    """
    rereads: dict[tuple[str, int], int] = {}
    skips: dict[tuple[str, int], int] = {}
    not_comparable: list[tuple[str, int]] = []
    missing = sorted(tp for tp in (source_committed or {}) if tp not in target_committed)
    for tp, pos in (source_committed or {}).items():
        if tp not in target_committed:
            continue
        if not aligned or source_end is None or source_end.get(tp) != target_end.get(tp):
            not_comparable.append(tp)
            continue
        diff = pos - target_committed[tp]
        if diff > 0:
            rereads[tp] = diff
        elif diff < 0:
            skips[tp] = -diff
    return GroupPositions(
        rereads=sum(rereads.values()) if source_committed is not None else None,
        rereads_per_partition=encode_offsets(rereads),
        would_skip=encode_offsets(skips),
        missing_on_target=[f"{t}:{p}" for t, p in missing],
        not_comparable=[f"{t}:{p}" for t, p in sorted(not_comparable)],
    )


def cutoff_ms(writable_from_ms: int | None, first_target_write_ms: int | None) -> int | None:
    """The verification cut-off: the last millisecond before anything could be produced to the target.

    Records replicated from the source keep their original timestamps, all earlier than the
    moment application principals could write on the target; records written there since (the
    RTO probe, applications that moved) are later and must not count as "unexpected".
    """
    marks = [m for m in (writable_from_ms, first_target_write_ms) if m is not None]
    return min(marks) - 1 if marks else None


def seconds_between(start: float | None, end: float | None) -> float | None:
    """``end - start`` rounded to milliseconds, or None when either is unknown."""
    if start is None or end is None:
        return None
    return round(end - start, 3)


def utc_text(epoch_ms: int | None) -> str | None:
    """Epoch milliseconds as readable UTC (``2026-11-22 10:04:05.123 UTC``), or None."""
    if epoch_ms is None:
        return None

    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
