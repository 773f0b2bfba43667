"""The two sides of a verification: a Kafka cluster or a Parquet archive, read as canonical records.

Canonical record columns (what every reader returns):
``topic`` string, ``partition`` int, ``offset`` long, ``ts`` long (epoch ms), ``key`` binary,
``value`` binary, ``headers`` array<struct<key: string, value: binary>>.

Kafka sides are read with Spark's own Kafka source in batch mode, bounded by per-partition offsets
fixed *before* reading (fetched with confluent-kafka), so the verdict is about an exact, recorded
range even while producers and MirrorMaker 2 keep writing.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dr.base.errors import AuthError, ClusterError, ConfigError
from dr.kafka.client import Endpoint
from verification.cluster import (
    cluster_metadata,
    is_internal_topic,
    kafka_bounds,
    kafka_topics,
)
from verification.login import spark_login_options
from verification.sides import ArchiveSide, KafkaSide, PartitionBounds, Side, SideBounds

__all__ = [
    "CANONICAL_SCHEMA",
    "ArchiveSide",
    "KafkaSide",
    "PartitionBounds",
    "Side",
    "SideBounds",
    "archive_bounds",
    "archive_topics",
    "bounds_to_ranges",
    "check_reachable",
    "cluster_metadata",
    "empty_records",
    "is_internal_topic",
    "kafka_bounds",
    "kafka_topics",
    "read_archive",
    "read_kafka",
    "read_side",
    "translate_spark_error",
]

HEADER_TYPE = T.ArrayType(
    T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("value", T.BinaryType()),
        ]
    )
)

#: Columns and types every reader returns.
CANONICAL_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("headers", HEADER_TYPE),
    ]
)

#: Consumer settings for Spark's Kafka source (overridable): batches of a few MB per fetch, small
#: enough that the consumers Spark keeps pooled between queries hold little memory; and no 500 ms
#: broker-side wait when a task's range ends at the end of the log (every task would pay it once).
#: Committed records only, on both sides: an exactly-once copy holds aborted records (a replicator
#: killed mid-transaction) and commit markers, neither of which is a record of the source; the
#: offsets they take are gaps Spark's source skips.
DEFAULT_KAFKA_OPTIONS: dict[str, str] = {
    "kafka.isolation.level": "read_committed",
    "kafka.fetch.max.wait.ms": "10",
    "kafka.max.partition.fetch.bytes": str(4 * 1024 * 1024),
    "kafka.fetch.max.bytes": str(8 * 1024 * 1024),
    "kafka.max.poll.records": "20000",
    "kafka.receive.buffer.bytes": str(2 * 1024 * 1024),
}


def _kafka_options(endpoint: Endpoint, extra: dict[str, str] | None) -> dict[str, str]:
    opts = spark_login_options(endpoint)
    opts.update(DEFAULT_KAFKA_OPTIONS)
    opts.update({"includeHeaders": "true", "failOnDataLoss": "true", "groupIdPrefix": "kdr-verify"})
    opts.update(extra or {})
    return opts


def empty_records(spark: SparkSession) -> DataFrame:
    """A DataFrame of canonical records with no rows."""
    return spark.createDataFrame([], CANONICAL_SCHEMA)


def read_kafka(
    spark: SparkSession,
    endpoint: Endpoint,
    ranges: dict[str, dict[int, tuple[int, int]]],
    *,
    options: dict[str, str] | None = None,
) -> DataFrame:
    """Read exactly the offsets ``ranges[topic][partition] = (start, end)`` with Spark's Kafka source."""
    ranges = {t: {p: r for p, r in parts.items() if r[1] > r[0]} for t, parts in ranges.items()}
    ranges = {t: parts for t, parts in ranges.items() if parts}
    if not ranges:
        return empty_records(spark)
    assign = {t: sorted(parts) for t, parts in ranges.items()}
    starting = {t: {str(p): r[0] for p, r in parts.items()} for t, parts in ranges.items()}
    ending = {t: {str(p): r[1] for p, r in parts.items()} for t, parts in ranges.items()}
    df = (
        spark.read.format("kafka")
        .options(**_kafka_options(endpoint, options))
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    return df.select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("ts"),
        "key",
        "value",
        F.col("headers").cast(HEADER_TYPE).alias("headers"),
    )


def _normalise_archive(df: DataFrame, path: Path) -> DataFrame:
    cols = {f.name: f.dataType for f in df.schema.fields}
    required = {"topic", "partition", "offset", "timestamp", "key", "value"}
    if not required <= set(cols):
        raise ConfigError(
            f"archive {path} lacks columns {sorted(required - set(cols))}.",
            "an archive needs topic, partition, offset, timestamp, key, value (and headers)",
        )
    ts_type = cols["timestamp"]
    ts = (
        F.unix_millis(F.col("timestamp"))
        if isinstance(ts_type, (T.TimestampType, T.TimestampNTZType))
        else F.col("timestamp").cast("long")
    )
    headers = F.col("headers").cast(HEADER_TYPE) if "headers" in cols else F.lit(None).cast(HEADER_TYPE)
    return df.select(
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        ts.alias("ts"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        headers.alias("headers"),
    )


def read_archive(
    spark: SparkSession,
    path: Path,
    *,
    topics: list[str] | None = None,
    ranges: dict[str, dict[int, tuple[int, int]]] | None = None,
) -> DataFrame:
    """Read a Parquet archive as canonical records, optionally only ``topics`` or offset ``ranges``."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"archive {path} does not exist.", "pass the directory or file written by the archiver")
    df = _normalise_archive(spark.read.parquet(str(path)), path)
    if ranges is not None:
        conds = [
            (F.col("topic") == t) & (F.col("partition") == p) & F.col("offset").between(s, e - 1)
            for t, parts in ranges.items()
            for p, (s, e) in parts.items()
            if e > s
        ]
        if not conds:
            return empty_records(spark)
        cond = conds[0]
        for c in conds[1:]:
            cond = cond | c
        return df.where(cond)
    if topics is not None:
        df = df.where(F.col("topic").isin(topics))
    return df


def archive_topics(spark: SparkSession, path: Path) -> list[str]:
    """Distinct non-internal topics of an archive."""
    df = read_archive(spark, path).select("topic").distinct()
    return sorted(r.topic for r in df.collect() if r.topic is not None and not is_internal_topic(r.topic))


def archive_bounds(spark: SparkSession, path: Path, topics: list[str]) -> SideBounds:
    """The offsets an archive holds per partition (``[min, max + 1)``) with its timestamp range."""
    df = read_archive(spark, path, topics=topics)
    rows = (
        df.groupBy("topic", "partition")
        .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"), F.min("ts").alias("t0"), F.max("ts").alias("t1"))
        .collect()
    )
    out: SideBounds = {}
    for r in rows:
        out.setdefault(r.topic, {})[r.partition] = PartitionBounds(r.lo, r.hi + 1, r.t0, r.t1)
    return out


def read_side(
    spark: SparkSession,
    side: Side,
    ranges: dict[str, dict[int, tuple[int, int]]],
    *,
    kafka_options: dict[str, str] | None = None,
) -> DataFrame:
    """Canonical records of ``ranges`` from either kind of side."""
    if isinstance(side, KafkaSide):
        return read_kafka(spark, side.endpoint, ranges, options=kafka_options)
    return read_archive(spark, side.path, ranges=ranges)


def bounds_to_ranges(bounds: SideBounds) -> dict[str, dict[int, tuple[int, int]]]:
    """Whole bounds as ``(start, end)`` ranges for the readers."""
    return {t: {p: (b.start, b.end) for p, b in parts.items()} for t, parts in bounds.items()}


def check_reachable(side: Side) -> None:
    """Fail early with a clear message when a Kafka side cannot be reached."""
    if isinstance(side, KafkaSide):
        kafka_topics(side.endpoint)
    elif not Path(side.path).exists():
        raise ConfigError(f"archive {side.path} does not exist.", "check the --*-archive path")


def describe_error(exc: Exception) -> str:
    """Shorten a JVM error to its first meaningful line (no stack trace, no config dump)."""
    text = str(exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "py4j")):
            return line[:500]
    return text[:500]


def translate_spark_error(exc: Exception, side: Side) -> Exception:
    """Map a Spark read failure to the error family, naming the side (never its password)."""
    text = describe_error(exc)
    where = side.endpoint.bootstrap if isinstance(side, KafkaSide) else str(side.path)
    if "SaslAuthenticationException" in str(exc) or "Authentication failed" in str(exc):
        return AuthError(f"Spark could not authenticate to {where}: {text}", "check the credentials of this side")
    if "OffsetOutOfRange" in str(exc) or "data loss" in str(exc).lower() or "Cannot fetch offset" in str(exc):
        return ClusterError(
            f"records in the fixed offset range of {where} vanished while reading "
            f"(retention or compaction ran): {text}",
            "re-run the verification; if it repeats, raise retention during the check",
        )
    return ClusterError(
        f"reading {where} with Spark failed: {text}",
        "check the cluster is reachable from the Spark executors and the Kafka jars are on the classpath",
    )
