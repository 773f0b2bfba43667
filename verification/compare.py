"""Multiset comparison of two sides, in two passes so that the cost stays near one read.

Records are matched by content, never by offset (MirrorMaker 2 does not keep offsets): the
identity of a record is (topic, key, checksum) and each side is a multiset of identities.

Pass 1 (:func:`bucket_summary`) reads every record once and keeps, per bucket, the count and the
sum of ``record_hash`` — two grouping sets in one scan:

* time windows ``(side, topic, partition, window)``, with min/max offset: where in each partition
  the differences lie (MM2 keeps record timestamps, so windows line up across clusters);
* key buckets ``(side, topic, key_bucket)`` with ``key_bucket = pmod(key_hash, B)``: which keys
  differ (all records of one key share a bucket).

:func:`find_differences` compares the buckets of the two sides. Only differing windows are read
again (pass 2, exact offset spans per partition) and only rows in differing windows *and* key
buckets enter :func:`classify`, the full multiset comparison (non-differing buckets hold equal
multisets, so count *differences* per identity are exact from those rows alone; whether the source
has an identity or key elsewhere is settled by :func:`resolve_target_only`):

* ``missing``     — source copies without a target copy (count in source minus count in target);
* ``duplicated``  — extra target copies of a record the source has (wherever in time the original is);
* ``corrupted``   — target records whose key exists in the source but whose checksum does not;
* ``unexpected``  — target records whose key the source does not have at all.

Records with a timestamp after the cut-off are left out on both sides (MM2 preserves timestamps,
so a replica of a post-cut-off record is itself post-cut-off; excluding one side only would call
it missing and recovery would duplicate it). They are counted apart as ``after_cutoff``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from verification.classes import CLASSES

__all__ = [
    "CLASSES",
    "Differences",
    "LATE_WINDOW",
    "SOURCE",
    "TARGET",
    "TimeGrid",
    "bucket_summary",
    "classify",
    "find_differences",
    "resolve_target_only",
    "select_differing",
    "with_buckets",
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
    return F.lit(False) if cutoff_ms is None else F.col("ts") > F.lit(int(cutoff_ms))


def with_buckets(fp: DataFrame, grid: TimeGrid, key_buckets: int, cutoff_ms: int | None) -> DataFrame:
    """Add ``late``, ``window`` (``LATE_WINDOW`` when late) and ``key_bucket`` (-1 when late)."""
    late = _late(cutoff_ms)
    return (fp.withColumn("late", late)
            .withColumn("window", F.when(F.col("late"), F.lit(LATE_WINDOW)).otherwise(_window_col(grid)))
            .withColumn("key_bucket", F.when(F.col("late"), F.lit(-1))
                        .otherwise(F.pmod(F.col("key_hash"), F.lit(key_buckets)).cast("int"))))


def bucket_summary(fp: DataFrame, *, grid: TimeGrid, key_buckets: int, cutoff_ms: int | None) -> DataFrame:
    """Pass 1: both grouping sets over fingerprinted rows of both sides (``side`` column).

    Topics are grouped by their index in the grid (integer keys keep the hash aggregation fast)
    and named again on the few aggregated rows.
    """
    rows = with_buckets(fp, grid, key_buckets, cutoff_ms)
    names = sorted(grid.origin)
    if len(names) == 1:
        rows = rows.withColumn("topic_id", F.when(F.col("topic") == names[0], F.lit(0)).otherwise(F.lit(-1)))
    elif names:
        index = F.create_map(*[x for i, t in enumerate(names) for x in (F.lit(t), F.lit(i))])
        rows = rows.withColumn("topic_id", F.coalesce(index[F.col("topic")], F.lit(-1)))
    else:
        rows = rows.withColumn("topic_id", F.lit(-1))
    rh = F.col("record_hash")
    agg = (rows.groupingSets([["side", "topic_id", "partition", "window"], ["side", "topic_id", "key_bucket"]],
                             "side", "topic_id", "partition", "window", "key_bucket")
           .agg(F.count(F.lit(1)).alias("n"),
                F.sum(rh.bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
                F.sum(F.shiftright(rh, 32)).alias("hi"),
                F.min("offset").alias("omin"),
                F.max("offset").alias("omax"),
                F.grouping_id().alias("gid")))
    topic = (F.element_at(F.array(*[F.lit(t) for t in names]), F.col("topic_id") + 1) if names
             else F.lit(None).cast("string"))
    return agg.select("side", F.when(F.col("topic_id") >= 0, topic).alias("topic"), "partition", "window",
                      "key_bucket", "n", "lo", "hi", "omin", "omax", "gid")


@dataclass
class Differences:
    """What pass 1 found: differing buckets, spans to read again, and the per-partition counts."""

    windows: dict[str, list[int]] = field(default_factory=dict)
    key_buckets: dict[str, list[int]] = field(default_factory=dict)
    #: side → topic → partition → (start, end) offsets to read in pass 2
    spans: dict[int, dict[str, dict[int, tuple[int, int]]]] = field(default_factory=dict)
    #: side → topic → partition → records read in pass 1
    read: dict[int, dict[str, dict[int, int]]] = field(default_factory=dict)
    #: side → topic → records after the cut-off
    after_cutoff: dict[int, dict[str, int]] = field(default_factory=dict)
    total_windows: dict[str, int] = field(default_factory=dict)
    total_key_buckets: dict[str, int] = field(default_factory=dict)
    #: topic → windows holding source records (before the cut-off)
    source_windows: dict[str, set[int]] = field(default_factory=dict)

    def complete(self, topic: str) -> bool:
        """True when pass 2 re-reads every source window of ``topic`` (no whole-source lookup needed)."""
        return self.source_windows.get(topic, set()) <= set(self.windows.get(topic, ()))

    @property
    def any(self) -> bool:
        """True when at least one bucket differs."""
        return any(self.windows.values()) or any(self.key_buckets.values())

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
    mask = ((both["n_s"] != both["n_t"]) | (both["lo_s"] != both["lo_t"]) | (both["hi_s"] != both["hi_t"]))
    return both.loc[mask, keys].reset_index(drop=True)


def find_differences(summary: pd.DataFrame) -> Differences:
    """Compare the pass-1 buckets of the two sides (``summary`` = collected :func:`bucket_summary`)."""
    d = Differences()
    # grouping_id bit order follows the grouping columns: side, topic, partition, window, key_bucket
    wrows = summary[summary["gid"] == 0b00001]
    krows = summary[summary["gid"] == 0b00110]
    for r in wrows.groupby(["side", "topic", "partition"])["n"].sum().reset_index().itertuples():
        d.read.setdefault(int(r.side), {}).setdefault(r.topic, {})[int(r.partition)] = int(r.n)
    late = wrows[wrows["window"] == LATE_WINDOW]
    for r in late.groupby(["side", "topic"])["n"].sum().reset_index().itertuples():
        d.after_cutoff.setdefault(int(r.side), {})[r.topic] = int(r.n)
    inwin = wrows[wrows["window"] != LATE_WINDOW]
    inkey = krows[krows["key_bucket"] != -1]
    for t, n in inwin.groupby("topic")["window"].nunique().items():
        d.total_windows[t] = int(n)
    for t, grp in inwin[inwin["side"] == SOURCE].groupby("topic"):
        d.source_windows[t] = {int(w) for w in grp["window"]}
    for t, n in inkey.groupby("topic")["key_bucket"].nunique().items():
        d.total_key_buckets[t] = int(n)
    dw = _differing(inwin, ["topic", "window"])
    dk = _differing(inkey, ["topic", "key_bucket"])
    for t, grp in dw.groupby("topic"):
        d.windows[t] = sorted(int(w) for w in grp["window"])
    for t, grp in dk.groupby("topic"):
        d.key_buckets[t] = sorted(int(k) for k in grp["key_bucket"])
    if not dw.empty:
        sel = inwin.merge(dw, on=["topic", "window"])
        spans = sel.groupby(["side", "topic", "partition"]).agg(lo=("omin", "min"), hi=("omax", "max")).reset_index()
        for r in spans.itertuples():
            d.spans.setdefault(int(r.side), {}).setdefault(r.topic, {})[int(r.partition)] = (int(r.lo), int(r.hi) + 1)
    return d


def select_differing(spark: SparkSession, rows: DataFrame, diff: Differences) -> DataFrame:
    """Keep the pass-2 rows that lie in a differing window *and* a differing key bucket."""
    wins = [(t, w) for t, ws in diff.windows.items() for w in ws]
    kbs = [(t, k) for t, ks in diff.key_buckets.items() for k in ks]
    wdf = spark.createDataFrame(wins or [("", 0)], "topic string, window long")
    kdf = spark.createDataFrame(kbs or [("", 0)], "topic string, key_bucket int")
    return (rows.join(F.broadcast(wdf), ["topic", "window"], "left_semi")
            .join(F.broadcast(kdf), ["topic", "key_bucket"], "left_semi"))


def classify(rows: DataFrame, *, complete: bool = True) -> DataFrame:
    """Full multiset comparison of fingerprinted rows of both sides.

    ``rows``: side, topic, partition, offset, ts, key, key_hash, checksum. Returns one row per
    offending record: class, side ('source'/'target'), topic, partition, offset, timestamp, key,
    key_hash, checksum.

    Count *differences* per (topic, key, checksum) are exact even when ``rows`` hold only the
    differing buckets (the other buckets hold equal multisets). Whether the source has an identity
    or a key *at all* is not: with ``complete=False`` target records whose identity has no source
    copy in ``rows`` get the class ``target_only``, for :func:`resolve_target_only` to settle
    against the whole source. With ``complete=True`` (``rows`` hold every record) they are settled
    here: ``corrupted`` when the source has the key, else ``unexpected``.
    """
    is_s = F.when(F.col("side") == SOURCE, 1).otherwise(0)
    is_t = F.when(F.col("side") == TARGET, 1).otherwise(0)
    # One shuffle: every window below is clustered by (topic, key) or finer.
    by_key = Window.partitionBy("topic", "key")
    by_identity = Window.partitionBy("topic", "key", "checksum")
    # which copies are the surplus ones: the latest (timestamp, then offset within a partition)
    by_copy = Window.partitionBy("topic", "key", "checksum", "side").orderBy(
        F.col("ts").desc(), F.col("offset").desc(), F.col("partition").desc())
    r = rows
    if complete:
        r = r.withColumn("key_in_source", F.max(is_s).over(by_key) > 0)
    r = (r.withColumn("n_s", F.sum(is_s).over(by_identity))
         .withColumn("n_t", F.sum(is_t).over(by_identity))
         .where(F.col("n_s") != F.col("n_t"))
         .withColumn("rn", F.row_number().over(by_copy)))
    n_s, n_t, rn = F.col("n_s"), F.col("n_t"), F.col("rn")
    src, tgt = F.col("side") == SOURCE, F.col("side") == TARGET
    target_only = (F.lit("target_only") if not complete
                   else F.when(F.col("key_in_source"), F.lit("corrupted")).otherwise(F.lit("unexpected")))
    cls = (F.when(src & (n_s > n_t) & (rn <= n_s - n_t), F.lit("missing"))
           .when(tgt & (n_s > 0) & (n_t > n_s) & (rn <= n_t - n_s), F.lit("duplicated"))
           .when(tgt & (n_s == 0), target_only))
    return (r.withColumn("class", cls)
            .where(F.col("class").isNotNull())
            .select("class",
                    F.when(src, F.lit("source")).otherwise(F.lit("target")).alias("side"),
                    "topic", "partition", "offset", F.col("ts").alias("timestamp"),
                    "key", "key_hash", "checksum"))


def resolve_target_only(offending: DataFrame, source_rows: DataFrame) -> DataFrame:
    """Settle ``target_only`` rows against fingerprinted ``source_rows`` (topic, key, checksum).

    The identity exists in the source → ``duplicated`` (an extra copy written at another time);
    only the key exists → ``corrupted``; neither → ``unexpected``.
    """
    cand = offending.where(F.col("class") == "target_only")
    ident = (source_rows.select(F.col("topic").alias("i_topic"), F.col("key").alias("i_key"),
                                F.col("checksum").alias("i_checksum"))
             .join(cand.select("topic", "key", "checksum").distinct(),
                   (F.col("i_topic") == F.col("topic")) & F.col("i_key").eqNullSafe(F.col("key"))
                   & (F.col("i_checksum") == F.col("checksum")), "left_semi")
             .distinct().withColumn("has_identity", F.lit(True)))
    keys = (source_rows.select(F.col("topic").alias("k_topic"), F.col("key").alias("k_key"))
            .join(cand.select("topic", "key").distinct(),
                  (F.col("k_topic") == F.col("topic")) & F.col("k_key").eqNullSafe(F.col("key")), "left_semi")
            .distinct().withColumn("has_key", F.lit(True)))
    j = (offending
         .join(ident, (offending["topic"] == ident["i_topic"]) & offending["key"].eqNullSafe(ident["i_key"])
               & (offending["checksum"] == ident["i_checksum"]), "left")
         .join(keys, (offending["topic"] == keys["k_topic"]) & offending["key"].eqNullSafe(keys["k_key"]), "left"))
    resolved = (F.when(F.col("class") != "target_only", F.col("class"))
                .when(F.col("has_identity").isNotNull(), F.lit("duplicated"))
                .when(F.col("has_key").isNotNull(), F.lit("corrupted"))
                .otherwise(F.lit("unexpected")))
    return j.withColumn("class", resolved).select(*offending.columns)
