"""Multiset comparison of two sides in one read and one shuffle.

Records are matched by content, never by offset (MirrorMaker 2 does not keep offsets): the
identity of a record is (topic, key, checksum) and each side is a multiset of identities.

:func:`identity_differences` shuffles the fingerprinted rows of both sides once by (topic, key),
counts the copies of every identity on each side and keeps, with their classes, only identities
whose counts differ — together with the coordinates of up to two copies on the surplus side, so
the offending records come out of the same aggregation (:func:`surplus_copies`). Identities held
three times or more with a differing count are rare; :func:`ranked_copies` ranks their copies
over a second read. The classes, per identity:

* ``missing``     — source copies without a target copy (count in source minus count in target);
* ``duplicated``  — extra target copies of a record the source has (wherever in time the original is);
* ``corrupted``   — target records whose key exists in the source but whose checksum does not;
* ``unexpected``  — target records whose key the source does not have at all.

Records with a timestamp after the cut-off are left out on both sides (MM2 preserves timestamps,
so a replica of a post-cut-off record is itself post-cut-off; excluding one side only would call
it missing and recovery would duplicate it). They are counted apart as ``after_cutoff``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from verification.classes import CLASSES

__all__ = [
    "CLASSES",
    "SOURCE",
    "TARGET",
    "after_cutoff",
    "classify",
    "identity_differences",
    "ranked_copies",
    "surplus_copies",
]

#: Side markers in the ``side`` column.
SOURCE, TARGET = 0, 1


def after_cutoff(cutoff_ms: int | None) -> Column:
    """True for records with a timestamp after ``cutoff_ms`` (never, without a cut-off)."""
    return F.lit(False) if cutoff_ms is None else F.col("ts") > F.lit(int(cutoff_ms))


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
    return [F.sum(F.when(on, 1).otherwise(0)).alias(f"n_{suffix}"),
            F.min(coord).alias(f"c0_{suffix}"), F.max(coord).alias(f"c1_{suffix}"),
            F.min_by(ts, coord).alias(f"t0_{suffix}"), F.max_by(ts, coord).alias(f"t1_{suffix}")]


def identity_differences(rows: DataFrame, *, partitions: int | None = None) -> DataFrame:
    """Every identity (topic, key, checksum) whose copy counts differ between the sides, classified.

    ``rows``: side, topic, partition, offset, ts, key, key_hash, checksum. One shuffle by
    (topic, key) serves both the identity aggregation and the per-key question "does the source
    have this key at all" (a window over the aggregated rows). Returns topic, key, key_hash,
    checksum, class, side, d (how many copies are surplus), n (copies on that side) and the first
    and last copy's coordinates (c0, t0, c1, t1) on that side. ``rows`` must hold every record
    of the compared range of both sides: whether the source has a key is decided from them.
    """
    parted = rows.repartition(partitions, "topic", "key") if partitions else rows.repartition("topic", "key")
    agg = (parted.groupBy("topic", "key", "key_hash", "checksum")
           .agg(*_per_side(SOURCE, "s"), *_per_side(TARGET, "t"))
           .withColumn("key_in_source", F.max(F.col("n_s") > 0).over(Window.partitionBy("topic", "key")))
           .where(F.col("n_s") != F.col("n_t")))
    n_s, n_t = F.col("n_s"), F.col("n_t")
    src = n_s > n_t
    cls = (F.when(src, F.lit("missing"))
           .when(n_s > 0, F.lit("duplicated"))
           .when(F.col("key_in_source"), F.lit("corrupted"))
           .otherwise(F.lit("unexpected")))

    def pick(name: str) -> Column:
        return F.when(src, F.col(f"{name}_s")).otherwise(F.col(f"{name}_t")).alias(name)

    return agg.select("topic", "key", "key_hash", "checksum", cls.alias("class"),
                      F.when(src, F.lit("source")).otherwise(F.lit("target")).alias("side"),
                      F.abs(n_s - n_t).alias("d"), pick("n"), pick("c0"), pick("t0"), pick("c1"), pick("t1"))


def _copy(c: str, t: str) -> Column:
    return F.struct(F.col(t).alias("ts"), F.col(c).bitwiseAND(F.lit(_OFFSET_MASK)).alias("offset"),
                    F.shiftright(F.col(c), _OFFSET_BITS).cast("int").alias("partition"))


def surplus_copies(ident: DataFrame) -> DataFrame:
    """Offending records of the identities with at most two copies on the surplus side.

    Their coordinates come straight from :func:`identity_differences`: the surplus copies are the
    latest ones (timestamp, then offset, then partition). Output columns: class, side, topic,
    partition, offset, timestamp, key, key_hash, checksum.
    """
    copies = F.when(F.col("n") == 1, F.array(_copy("c0", "t0"))).otherwise(
        F.array(_copy("c0", "t0"), _copy("c1", "t1")))
    latest = F.slice(F.sort_array(copies, asc=False), 1, F.col("d").cast("int"))
    return (ident.where(F.col("n") <= 2)
            .select("class", "side", "topic", "key", "key_hash", "checksum", F.explode(latest).alias("c"))
            .select("class", "side", "topic", F.col("c.partition").alias("partition"),
                    F.col("c.offset").alias("offset"), F.col("c.ts").alias("timestamp"),
                    "key", "key_hash", "checksum"))


def ranked_copies(rows: DataFrame, ident: DataFrame) -> DataFrame:
    """Offending records of the identities with more than two copies on the surplus side.

    Rare (the same content written three times or more, with a differing count): their copies
    are found again in ``rows`` and ranked, latest first; same output columns as
    :func:`surplus_copies`.
    """
    many = ident.where(F.col("n") > 2).select(
        "topic", "key_hash", "checksum", "class", F.col("side").alias("copy_side"), "d",
        F.when(F.col("side") == "source", F.lit(SOURCE)).otherwise(F.lit(TARGET)).alias("want"))
    by_copy = Window.partitionBy("topic", "key_hash", "checksum").orderBy(
        F.col("ts").desc(), F.col("offset").desc(), F.col("partition").desc())
    return (rows.join(F.broadcast(many), ["topic", "key_hash", "checksum"])
            .where(F.col("side") == F.col("want"))
            .withColumn("rn", F.row_number().over(by_copy))
            .where(F.col("rn") <= F.col("d"))
            .select("class", F.col("copy_side").alias("side"), "topic", "partition", "offset",
                    F.col("ts").alias("timestamp"), "key", "key_hash", "checksum"))


def classify(rows: DataFrame, *, partitions: int | None = None) -> DataFrame:
    """Full multiset comparison of fingerprinted rows of both sides: one row per offending record.

    ``rows``: side, topic, partition, offset, ts, key, key_hash, checksum. Output columns: class,
    side ('source'/'target'), topic, partition, offset, timestamp, key, key_hash, checksum.
    :func:`identity_differences` + :func:`surplus_copies` + :func:`ranked_copies` in one plan
    (which reads ``rows`` twice); the job runs the steps apart and skips the last when no
    identity needs it.
    """
    ident = identity_differences(rows, partitions=partitions)
    return surplus_copies(ident).unionByName(ranked_copies(rows, ident))
