"""Parquet archives of records — the format a verification side or a recovery source can be read from.

Columns: ``topic`` string, ``partition`` int32, ``offset`` int64, ``timestamp`` timestamp[ms, UTC],
``key`` binary, ``value`` binary, ``headers`` list<struct<key: string, value: binary>>.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dr.kafka.client import Endpoint
from verification.sources import bounds_to_ranges, kafka_bounds, read_kafka

__all__ = ["ARCHIVE_SCHEMA", "archive_kafka", "write_records"]

#: Arrow schema of an archive.
ARCHIVE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)


def write_records(records: Iterable[Mapping[str, Any]], path: Path | str) -> Path:
    """Write records (dicts with the archive's columns; ``timestamp`` in epoch ms) to one Parquet file.

    ``headers`` is a list of ``(key, value)`` pairs or None. Meant for small archives and tests;
    :func:`archive_kafka` archives whole topics with Spark.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{**r, "headers": [{"key": k, "value": v} for k, v in (r.get("headers") or [])] or None} for r in records]
    pq.write_table(pa.Table.from_pylist(rows, schema=ARCHIVE_SCHEMA), path)
    return path


def archive_kafka(spark: SparkSession, endpoint: Endpoint, topics: list[str], path: Path | str) -> dict[str, Any]:
    """Copy ``topics`` of a cluster, as they are now, into a Parquet archive at ``path``.

    Returns the offset bounds that were archived (fixed before reading).
    """
    bounds = kafka_bounds(endpoint, topics)
    df = read_kafka(spark, endpoint, bounds_to_ranges(bounds))
    (
        df.select(
            "topic", "partition", "offset", F.timestamp_millis("ts").alias("timestamp"), "key", "value", "headers"
        )
        .write.mode("overwrite")
        .parquet(str(path))
    )
    return {t: {str(p): {"start": b.start, "end": b.end} for p, b in parts.items()} for t, parts in bounds.items()}
