"""Multiset comparison of two sides, near the cost of one read of each side.

Records are matched by content, never by offset (MirrorMaker 2 does not keep offsets): the
identity of a record is (topic, key, checksum) and each side is a multiset of identities.

Kafka is read once per side. That read fingerprints every record and keeps only compact columns
(:func:`compact_fingerprints`: side, topic, partition, offset, timestamp, key, key_hash, checksum
and the time window), which the job persists on the executors' local disks while pass 1 runs.

Pass 1 (:func:`bucket_summary`) keeps, per time window ``(side, topic, partition, window)``, the
count, the sum of ``record_hash`` and the offset span — one hash aggregation with few groups, at
nearly the speed of the read. MM2 keeps record timestamps, so windows line up across clusters.

:func:`find_differences` compares the windows of the two sides (per topic). Only the persisted
fingerprints of differing windows (:func:`select_differing`, never Kafka) enter :func:`classify`,
the full multiset comparison: one shuffle by (topic, key), an aggregation per identity, and the
surplus copies of each differing identity. Non-differing windows hold equal multisets, so count
*differences* per identity are exact from the differing windows alone; whether the source has an
identity or key elsewhere is settled by :func:`resolve_target_only` (on the persisted source
fingerprints):

* ``missing``     — source copies without a target copy (count in source minus count in target);
* ``duplicated``  — extra target copies of a record the source has (wherever in time the original is);
* ``corrupted``   — target records whose key exists in the source but whose checksum does not;
* ``unexpected``  — target records whose key the source does not have at all.

Records with a timestamp after the cut-off are left out on both sides (MM2 preserves timestamps,
so a replica of a post-cut-off record is itself post-cut-off; excluding one side only would call
it missing and recovery would duplicate it). They are counted apart as ``after_cutoff``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dr.kafka.client import PROBE_KEY
from verification.classes import CLASSES
from verification.fingerprint import record_hash_col

__all__ = [
    "CLASSES",
    "COMPACT_COLUMNS",
    "LATE_WINDOW",
    "SOURCE",
    "TARGET",
    "Differences",
    "TimeGrid",
    "bucket_summary",
    "classify",
    "compact_fingerprints",
    "find_differences",
    "identity_differences",
    "ranked_copies",
    "records_in_differing_windows",
    "resolve_target_only",
    "select_differing",
    "surplus_copies",
    "window_bounds",
    "with_window",
]

#: Side markers in the ``side`` column.
SOURCE, TARGET = 0, 1
#: Window number given to records after the cut-off (never compared).
LATE_WINDOW = -(1 << 62)


@dataclass(frozen=True)
class TimeGrid:
    """Per-topic time windows: ``window = (ts - origin) div width`` (ms)."""

    origin: dict[str, int]
    width: dict[str, int]

    @classmethod
    def spanning(cls, ranges: dict[str, tuple[int, int]], windows: int) -> TimeGrid:
        """About ``windows`` equal windows over each topic's ``(min_ts, max_ts)``."""
        origin, width = {}, {}
        for topic, (t0, t1) in ranges.items():
            if t0 < 0 or t1 < t0:
                origin[topic], width[topic] = 0, 1 << 40
                continue
            origin[topic] = t0
            width[topic] = max(1, -(-(t1 - t0 + 1) // max(1, windows)))
        return cls(origin, width)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """JSON form for the summary."""
        return {t: {"origin_ms": self.origin[t], "width_ms": self.width[t]} for t in self.origin}


def _window_col(grid: TimeGrid) -> Column:
    if not grid.origin:
        return F.lit(0).cast("long")
    if len(grid.origin) == 1:  # one topic: constants, no per-row map lookup
        ((topic, origin),) = grid.origin.items()
        diff = F.col("ts") - F.lit(origin).cast("long")
        width = F.lit(grid.width[topic]).cast("long")
        return ((diff - F.pmod(diff, width)) / width).cast("long")
    origins = F.create_map(*[x for t, o in grid.origin.items() for x in (F.lit(t), F.lit(o).cast("long"))])
    widths = F.create_map(*[x for t, w in grid.width.items() for x in (F.lit(t), F.lit(w).cast("long"))])
    o_col = F.coalesce(origins[F.col("topic")], F.lit(0).cast("long"))
    w_col = F.coalesce(widths[F.col("topic")], F.lit(1 << 40).cast("long"))
    diff = F.col("ts") - o_col
    # floor division, exact (the numerator is a multiple of the width) and right for negatives
    return ((diff - F.pmod(diff, w_col)) / w_col).cast("long")


def _late(cutoff_ms: int | None) -> Column:
    """Records not compared: after the cut-off, and the failover's RTO probe records (written on the
    new active cluster once per failover, so never part of what the link should have copied)."""
    probe = F.coalesce(F.col("key") == F.lit(bytearray(PROBE_KEY)), F.lit(False))
    return probe if cutoff_ms is None else probe | (F.col("ts") > F.lit(int(cutoff_ms)))


def with_window(fp: DataFrame, grid: TimeGrid, cutoff_ms: int | None) -> DataFrame:
    """Add ``late`` and ``window`` (``LATE_WINDOW`` for records after the cut-off)."""
    late = _late(cutoff_ms)
    return fp.withColumn("late", late).withColumn(
        "window", F.when(F.col("late"), F.lit(LATE_WINDOW)).otherwise(_window_col(grid))
    )


#: The columns kept per record after the read (no value, no headers): what pass 1 and pass 2 use.
COMPACT_COLUMNS = ("side", "topic", "partition", "offset", "ts", "key", "key_hash", "checksum", "window")


def compact_fingerprints(fp: DataFrame, grid: TimeGrid, cutoff_ms: int | None) -> DataFrame:
    """Fingerprinted rows (with ``side``) → :data:`COMPACT_COLUMNS`, the window already computed.

    Records after the cut-off (and RTO probes) keep their coordinates with ``window`` =
    :data:`LATE_WINDOW`, so pass 1 still counts them and no differing window ever holds them.
    The key bytes are kept: identities are (topic, key, checksum) exactly, not the 64-bit key hash,
    and the offending records and their samples carry keys.
    """
    return with_window(fp, grid, cutoff_ms).select(*COMPACT_COLUMNS)


def bucket_summary(fp: DataFrame, *, grid: TimeGrid, cutoff_ms: int | None) -> DataFrame:
    """Pass 1: per ``(side, topic, partition, window)`` the count, the sum of hashes and the offset span.

    One hash aggregation with few groups per task, so it runs at nearly the speed of the read.
    Topics are grouped by their index in the grid (integer keys keep the aggregation fast) and
    named again on the few aggregated rows. ``fp`` may be :func:`compact_fingerprints` (its
    ``window`` is used as is and ``record_hash`` computed here) or :func:`fingerprint` rows.
    """
    rows = fp if "window" in fp.columns else with_window(fp, grid, cutoff_ms)
    if "record_hash" not in rows.columns:
        rows = rows.withColumn("record_hash", record_hash_col())
    names = sorted(grid.origin)
    if len(names) == 1:
        rows = rows.withColumn("topic_id", F.when(F.col("topic") == names[0], F.lit(0)).otherwise(F.lit(-1)))
    elif names:
        index = F.create_map(*[x for i, t in enumerate(names) for x in (F.lit(t), F.lit(i))])
        rows = rows.withColumn("topic_id", F.coalesce(index[F.col("topic")], F.lit(-1)))
    else:
        rows = rows.withColumn("topic_id", F.lit(-1))
    rh = F.col("record_hash")
    agg = rows.groupBy("side", "topic_id", "partition", "window").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(rh.bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
        F.sum(F.shiftright(rh, 32)).alias("hi"),
        F.min("offset").alias("omin"),
        F.max("offset").alias("omax"),
    )
    topic = (
        F.element_at(F.array(*[F.lit(t) for t in names]), F.col("topic_id") + 1)
        if names
        else F.lit(None).cast("string")
    )
    return agg.select(
        "side",
        F.when(F.col("topic_id") >= 0, topic).alias("topic"),
        "partition",
        "window",
        "n",
        "lo",
        "hi",
        "omin",
        "omax",
    )


@dataclass
class Differences:
    """What pass 1 found: differing windows, spans to read again, and the per-partition counts."""

    windows: dict[str, list[int]] = field(default_factory=dict)
    #: side → topic → partition → (start, end) offsets to read in pass 2
    spans: dict[int, dict[str, dict[int, tuple[int, int]]]] = field(default_factory=dict)
    #: side → topic → partition → records read in pass 1
    read: dict[int, dict[str, dict[int, int]]] = field(default_factory=dict)
    #: side → topic → records after the cut-off
    after_cutoff: dict[int, dict[str, int]] = field(default_factory=dict)
    total_windows: dict[str, int] = field(default_factory=dict)
    #: topic → windows holding source records (before the cut-off)
    source_windows: dict[str, set[int]] = field(default_factory=dict)
    #: topic → (lowest, highest) window holding records before the cut-off: it can lie outside the
    #: grid planned from the offset bounds (a partition's first record is not always its earliest)
    window_range: dict[str, tuple[int, int]] = field(default_factory=dict)

    def complete(self, topic: str) -> bool:
        """True when pass 2 re-reads every source window of ``topic`` (no whole-source lookup needed)."""
        return self.source_windows.get(topic, set()) <= set(self.windows.get(topic, ()))

    @property
    def any(self) -> bool:
        """True when at least one window differs."""
        return any(self.windows.values())

    def span_records(self, side: int) -> int:
        """How many offsets pass 2 reads on ``side``."""
        return sum(e - s for parts in self.spans.get(side, {}).values() for s, e in parts.values())


def _differing(pdf: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows of ``keys`` whose (n, lo, hi) sums differ between the two sides."""
    if pdf.empty:
        return pd.DataFrame(columns=keys)
    sums = pdf.groupby([*keys, "side"], sort=False)[["n", "lo", "hi"]].sum().reset_index()
    src = sums[sums["side"] == SOURCE].drop(columns="side")
    tgt = sums[sums["side"] == TARGET].drop(columns="side")
    both = src.merge(tgt, on=keys, how="outer", suffixes=("_s", "_t")).fillna(0)
    mask = (both["n_s"] != both["n_t"]) | (both["lo_s"] != both["lo_t"]) | (both["hi_s"] != both["hi_t"])
    return both.loc[mask, keys].reset_index(drop=True)


def find_differences(summary: pd.DataFrame) -> Differences:
    """Compare the pass-1 windows of the two sides (``summary`` = collected :func:`bucket_summary`).

    Windows are compared per topic, summed over partitions, so a record replicated into another
    partition still matches; the spans to re-read are then taken per partition.
    """
    d = Differences()
    for r in summary.groupby(["side", "topic", "partition"])["n"].sum().reset_index().itertuples():
        d.read.setdefault(int(r.side), {}).setdefault(r.topic, {})[int(r.partition)] = int(r.n)
    late = summary[summary["window"] == LATE_WINDOW]
    for r in late.groupby(["side", "topic"])["n"].sum().reset_index().itertuples():
        d.after_cutoff.setdefault(int(r.side), {})[r.topic] = int(r.n)
    inwin = summary[summary["window"] != LATE_WINDOW]
    for t, n in inwin.groupby("topic")["window"].nunique().items():
        d.total_windows[t] = int(n)
    for r in inwin.groupby("topic")["window"].agg(["min", "max"]).itertuples():
        d.window_range[str(r.Index)] = (int(r.min), int(r.max))
    for t, grp in inwin[inwin["side"] == SOURCE].groupby("topic"):
        d.source_windows[t] = {int(w) for w in grp["window"]}
    dw = _differing(inwin, ["topic", "window"])
    for t, grp in dw.groupby("topic"):
        d.windows[t] = sorted(int(w) for w in grp["window"])
    if not dw.empty:
        sel = inwin.merge(dw, on=["topic", "window"])
        spans = sel.groupby(["side", "topic", "partition"]).agg(lo=("omin", "min"), hi=("omax", "max")).reset_index()
        for r in spans.itertuples():
            d.spans.setdefault(int(r.side), {}).setdefault(r.topic, {})[int(r.partition)] = (int(r.lo), int(r.hi) + 1)
    return d


def records_in_differing_windows(summary: pd.DataFrame, diff: Differences) -> int:
    """Records of both sides (before the cut-off) in the differing windows: what pass 2 compares."""
    wins = pd.DataFrame([(t, w) for t, ws in diff.windows.items() for w in ws], columns=["topic", "window"])
    if wins.empty or summary.empty:
        return 0
    return int(summary.merge(wins.astype({"window": summary["window"].dtype}), on=["topic", "window"])["n"].sum())


def window_bounds(diff: Differences) -> tuple[int, int] | None:
    """The lowest and highest differing window over all topics (None when none differs)."""
    every = [w for ws in diff.windows.values() for w in ws]
    return (min(every), max(every)) if every else None


def select_differing(spark: SparkSession, rows: DataFrame, diff: Differences) -> DataFrame:
    """Keep the pass-2 rows that lie in a differing window (``rows`` carry a ``window`` column).

    A range filter on ``window`` comes first: on persisted fingerprints Spark skips the cached
    batches whose window statistics lie outside it (a tail loss scans only the tail's batches);
    the semi-join against the differing windows then keeps exactly theirs.
    """
    wins = [(t, w) for t, ws in diff.windows.items() for w in ws] or [("", 0)]
    # from pandas through Arrow: a local relation, no job to turn pickled Python rows into Spark rows
    wdf = spark.createDataFrame(
        pd.DataFrame({"topic": [t for t, _ in wins], "window": pd.array([w for _, w in wins], dtype="int64")}),
        "topic string, window long",
    )
    span = window_bounds(diff)
    if span is not None:
        rows = rows.where(F.col("window").between(F.lit(span[0]).cast("long"), F.lit(span[1]).cast("long")))
    return rows.join(F.broadcast(wdf), ["topic", "window"], "left_semi")


# A record's coordinates packed in one long: partition in the high 16 bits, offset in the low 48.
_OFFSET_BITS = 48
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


def _per_side(marker: int, suffix: str) -> list[Column]:
    """Count of one side's copies of an identity, and the first and last copy (by coordinates).

    Coordinates are unique within a side, so with at most two copies the min and the max are
    both copies exactly, each with its own timestamp (``min_by``/``max_by``); all fixed-width
    buffers, so the aggregation stays a hash aggregation.
    """
    on = F.col("side") == marker
    coord = F.when(on, F.col("partition").cast("long") * F.lit(1 << _OFFSET_BITS) + F.col("offset"))
    ts = F.when(on, F.col("ts"))
    return [
        F.sum(F.when(on, 1).otherwise(0)).alias(f"n_{suffix}"),
        F.min(coord).alias(f"c0_{suffix}"),
        F.max(coord).alias(f"c1_{suffix}"),
        F.min_by(ts, coord).alias(f"t0_{suffix}"),
        F.max_by(ts, coord).alias(f"t1_{suffix}"),
    ]


def identity_differences(
    rows: DataFrame, *, complete: bool | Collection[str] = True, partitions: int | None = None
) -> DataFrame:
    """Every identity (topic, key, checksum) whose copy counts differ between the sides, classified.

    ``rows``: side, topic, partition, offset, ts, key, key_hash, checksum. One shuffle by
    (topic, key) serves both the identity aggregation and the per-key question "does the source
    have this key at all" (a window over the aggregated rows). Returns topic, key, key_hash,
    checksum, class, side, d (how many copies are surplus), n (copies on that side) and the first
    and last copy's coordinates (c0, t0, c1, t1) on that side.

    ``complete`` says for which topics ``rows`` hold every record (True: all, False: none).
    Target records whose identity has no source copy in ``rows`` are ``corrupted`` (the source has
    the key) or ``unexpected`` (it does not) in complete topics, ``target_only`` elsewhere, for
    :func:`resolve_target_only` to settle against the whole source.
    """
    parted = rows.repartition(partitions, "topic", "key") if partitions else rows.repartition("topic", "key")
    agg = (
        parted.groupBy("topic", "key", "key_hash", "checksum")
        .agg(*_per_side(SOURCE, "s"), *_per_side(TARGET, "t"))
        .withColumn("key_in_source", F.max(F.col("n_s") > 0).over(Window.partitionBy("topic", "key")))
        .where(F.col("n_s") != F.col("n_t"))
    )
    if complete is True:
        settled = F.lit(True)
    elif complete is False or not complete:
        settled = F.lit(False)
    else:
        settled = F.col("topic").isin(sorted(complete))
    n_s, n_t = F.col("n_s"), F.col("n_t")
    src = n_s > n_t
    cls = (
        F.when(src, F.lit("missing"))
        .when(n_s > 0, F.lit("duplicated"))
        .when(~settled, F.lit("target_only"))
        .when(F.col("key_in_source"), F.lit("corrupted"))
        .otherwise(F.lit("unexpected"))
    )

    def pick(name: str) -> Column:
        return F.when(src, F.col(f"{name}_s")).otherwise(F.col(f"{name}_t")).alias(name)

    return agg.select(
        "topic",
        "key",
        "key_hash",
        "checksum",
        cls.alias("class"),
        F.when(src, F.lit("source")).otherwise(F.lit("target")).alias("side"),
        F.abs(n_s - n_t).alias("d"),
        pick("n"),
        pick("c0"),
        pick("t0"),
        pick("c1"),
        pick("t1"),
    )


def _copy(c: str, t: str) -> Column:
    return F.struct(
        F.col(t).alias("ts"),
        F.col(c).bitwiseAND(F.lit(_OFFSET_MASK)).alias("offset"),
        F.shiftright(F.col(c), _OFFSET_BITS).cast("int").alias("partition"),
    )


def surplus_copies(ident: DataFrame) -> DataFrame:
    """Offending records of the identities with at most two copies on the surplus side.

    Their coordinates come straight from :func:`identity_differences`: the surplus copies are the
    latest ones (timestamp, then offset, then partition). Output columns: class, side, topic,
    partition, offset, timestamp, key, key_hash, checksum.
    """
    copies = F.when(F.col("n") == 1, F.array(_copy("c0", "t0"))).otherwise(
        F.array(_copy("c0", "t0"), _copy("c1", "t1"))
    )
    latest = F.slice(F.sort_array(copies, asc=False), 1, F.col("d").cast("int"))
    return (
        ident.where(F.col("n") <= 2)
        .select("class", "side", "topic", "key", "key_hash", "checksum", F.explode(latest).alias("c"))
        .select(
            "class",
            "side",
            "topic",
            F.col("c.partition").alias("partition"),
            F.col("c.offset").alias("offset"),
            F.col("c.ts").alias("timestamp"),
            "key",
            "key_hash",
            "checksum",
        )
    )


def ranked_copies(rows: DataFrame, ident: DataFrame) -> DataFrame:
    """Offending records of the identities with more than two copies on the surplus side.

    Rare (the same content written three times or more, with a differing count): their copies
    are found again in ``rows`` and ranked, latest first; same output columns as
    :func:`surplus_copies`.
    """
    many = ident.where(F.col("n") > 2).select(
        "topic",
        "key_hash",
        "checksum",
        "class",
        F.col("side").alias("copy_side"),
        "d",
        F.when(F.col("side") == "source", F.lit(SOURCE)).otherwise(F.lit(TARGET)).alias("want"),
    )
    by_copy = Window.partitionBy("topic", "key_hash", "checksum").orderBy(
        F.col("ts").desc(), F.col("offset").desc(), F.col("partition").desc()
    )
    return (
        rows.join(F.broadcast(many), ["topic", "key_hash", "checksum"])
        .where(F.col("side") == F.col("want"))
        .withColumn("rn", F.row_number().over(by_copy))
        .where(F.col("rn") <= F.col("d"))
        .select(
            "class",
            F.col("copy_side").alias("side"),
            "topic",
            "partition",
            "offset",
            F.col("ts").alias("timestamp"),
            "key",
            "key_hash",
            "checksum",
        )
    )


def classify(rows: DataFrame, *, complete: bool | Collection[str] = True, partitions: int | None = None) -> DataFrame:
    """Full multiset comparison of fingerprinted rows of both sides: one row per offending record.

    ``rows``: side, topic, partition, offset, ts, key, key_hash, checksum. Output columns: class,
    side ('source'/'target'), topic, partition, offset, timestamp, key, key_hash, checksum.
    :func:`identity_differences` + :func:`surplus_copies` + :func:`ranked_copies` in one plan
    (which reads ``rows`` twice); the job runs the steps apart and skips the last when no
    identity needs it. Count differences per identity are exact even when ``rows`` hold only the
    differing windows (the others hold equal multisets); see ``complete`` there.
    """
    ident = identity_differences(rows, complete=complete, partitions=partitions)
    return surplus_copies(ident).unionByName(ranked_copies(rows, ident))


def resolve_target_only(offending: DataFrame, source_rows: DataFrame) -> DataFrame:
    """Settle ``target_only`` rows against fingerprinted ``source_rows`` (topic, key, checksum).

    The identity exists in the source → ``duplicated`` (an extra copy written at another time);
    only the key exists → ``corrupted``; neither → ``unexpected``.
    """
    cand = offending.where(F.col("class") == "target_only")
    ident = (
        source_rows.select(
            F.col("topic").alias("i_topic"), F.col("key").alias("i_key"), F.col("checksum").alias("i_checksum")
        )
        .join(
            cand.select("topic", "key", "checksum").distinct(),
            (F.col("i_topic") == F.col("topic"))
            & F.col("i_key").eqNullSafe(F.col("key"))
            & (F.col("i_checksum") == F.col("checksum")),
            "left_semi",
        )
        .distinct()
        .withColumn("has_identity", F.lit(True))
    )
    keys = (
        source_rows.select(F.col("topic").alias("k_topic"), F.col("key").alias("k_key"))
        .join(
            cand.select("topic", "key").distinct(),
            (F.col("k_topic") == F.col("topic")) & F.col("k_key").eqNullSafe(F.col("key")),
            "left_semi",
        )
        .distinct()
        .withColumn("has_key", F.lit(True))
    )
    j = offending.join(
        ident,
        (offending["topic"] == ident["i_topic"])
        & offending["key"].eqNullSafe(ident["i_key"])
        & (offending["checksum"] == ident["i_checksum"]),
        "left",
    ).join(keys, (offending["topic"] == keys["k_topic"]) & offending["key"].eqNullSafe(keys["k_key"]), "left")
    resolved = (
        F.when(F.col("class") != "target_only", F.col("class"))
        .when(F.col("has_identity").isNotNull(), F.lit("duplicated"))
        .when(F.col("has_key").isNotNull(), F.lit("corrupted"))
        .otherwise(F.lit("unexpected"))
    )
    return j.withColumn("class", resolved).select(*offending.columns)
