"""The verification job: ``run_verification(...)`` in Python, or ``spark-submit verification/job.py``.

Steps (progress on stderr):

1. fix the offset bounds of every partition on both sides (confluent-kafka, before any read);
2. pass 1 — read both sides once with Spark's Kafka source (or the archive), fingerprint every
   record with JVM built-ins, (``fingerprints`` design) keep its compact fingerprint (side, topic, partition, offset,
   timestamp, key, key_hash, checksum, window — no value, no headers) on the executors' local
   disks (``StorageLevel.DISK_ONLY``, written while pass 1 runs) and sum per time window
   (count, sum of hashes, offset span);
3. pass 2 — take the persisted fingerprints (``kafka`` design: re-read the offset spans) of the
   differing windows and compare them as
   multisets of (topic, key, checksum): one shuffle, an aggregation per identity;
4. (only when the target holds keys the pass-2 rows cannot place) look those keys up in the
   persisted source fingerprints;
5. write ``summary.json``, ``report.html`` and ``offending.parquet`` to the output directory, and
   drop the persisted fingerprints.

With ``pass2_from="fingerprints"`` (or ``KDR_VERIFY_PASS2=fingerprints``) Kafka is read once per
side whatever the loss pattern. The key bytes are persisted with the fingerprints (identities are
exact keys, not key hashes; offending records and samples carry them);
``summary["method"]["fingerprints"]`` gives the disk they took (about 21 B per record). Until the
benchmark shows it at least as fast as the former design on both loss profiles, the default is
still the former one (``kafka``): pass 2 and the lookup re-read the differing spans from Kafka.

Under ``spark-submit`` the executors need no Python code (no UDF): only the spark-sql-kafka jars
(``--jars $(python -m verification.job --print-jars)``). The driver needs this repository.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

if __name__ == "__main__" and not __package__:  # pragma: no cover - spark-submit runs this file as a script
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import click
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dr.base.errors import ConfigError, DRError, exit_codes_by_code
from verification.command import (
    NAME_OPTIONS,
    RUN_OPTIONS,
    SIDE_OPTIONS,
    cutoff_option,
    exit_codes,
    print_result,
    resolve_sides,
    run_arguments,
    with_options,
)
from verification.compare import (
    CLASSES,
    LATE_WINDOW,
    SOURCE,
    TARGET,
    Differences,
    TimeGrid,
    bucket_summary,
    compact_fingerprints,
    find_differences,
    identity_differences,
    ranked_copies,
    records_in_differing_windows,
    resolve_target_only,
    select_differing,
    surplus_copies,
    with_window,
)
from verification.endpoints import parse_cutoff
from verification.fingerprint import fingerprint
from verification.progress import Reporter, quiet
from verification.report import (
    OFFENDING_DIR,
    OFFENDING_SCHEMA,
    window_lines,
    windows_per_topic,
    write_empty_offending,
    write_report,
)
from verification.result import CHECKSUM_DESCRIPTION, TopicRow, VerificationResult, safe_context, summary_document
from verification.route import VerifyRequest
from verification.session import DEFAULT_MASTER, kafka_jars, prefer_kafka_v2, spark_session
from verification.sources import (
    KafkaSide,
    Side,
    SideBounds,
    archive_bounds,
    bounds_to_ranges,
    cluster_metadata,
    is_internal_topic,
    kafka_bounds,
    read_archive,
    read_side,
    translate_spark_error,
)

__all__ = ["CHECKSUM_DESCRIPTION", "LEFT_OUT", "VerificationResult", "main", "run", "run_verification"]

#: Why a topic was not compared: ``summary["topics_left_out"][topic]["reason"]`` → the words the report shows.
LEFT_OUT = {
    "internal": "internal topic (Kafka, Connect or MirrorMaker 2 bookkeeping)",
    "only_on_target": "only on the target: the source has no such topic",
    "not_requested": "not in the topics requested (--topics)",
    "empty": "no records on either side: nothing to compare",
}

#: Where pass 2 takes its records: ``kafka`` (re-read the differing windows' offset spans; still the
#: default: at 1M + 1M records the one-read design measured 0.84x of it on tail loss, 1.01x on
#: scattered loss — see benchmarks/verify_bench.py) or ``fingerprints`` (persisted in pass 1, Kafka
#: read once per side). The environment variable sets the default, so ``drctl verify`` can run either.
PASS2_FROM = ("kafka", "fingerprints")
PASS2_FROM_ENV = "KDR_VERIFY_PASS2"
#: How the fingerprints are kept: ``DISK_ONLY`` (default: the JVM heap does not grow with the data)
#: or ``MEMORY_AND_DISK`` (in the storage memory while it fits, the rest on disk); the environment
#: variable chooses, for the benchmark.
STORAGE_LEVELS = ("DISK_ONLY", "MEMORY_AND_DISK")
STORAGE_ENV = "KDR_VERIFY_STORAGE"


class _Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}

    def lap(self, name: str, since: float) -> float:
        self.marks[name] = round(time.monotonic() - since, 3)
        return time.monotonic()


def _spark_action(fn: Any, source: Side, target: Side) -> Any:
    try:
        return fn()
    except DRError:
        raise
    except Exception as exc:  # py4j / pyspark errors carry the JVM exception text
        if type(exc).__module__.startswith(("py4j", "pyspark")):
            text = str(exc)
            side = target if isinstance(target, KafkaSide) and target.endpoint.bootstrap in text else source
            raise translate_spark_error(exc, side) from None
        raise


def _side_topics(spark_fn: Any, side: Side) -> set[str]:
    """Every topic of a side, internal ones included (a Kafka side: reachable and credentials accepted)."""
    if isinstance(side, KafkaSide):
        return {name for name, t in cluster_metadata(side.endpoint).topics.items() if t.error is None}
    df = read_archive(spark_fn(), side.path).select("topic").distinct()
    return {r.topic for r in df.collect() if r.topic is not None}


def _left_out(reason: str, topic: str, on_source: set[str], on_target: set[str]) -> dict[str, str]:
    on = (
        "source and target"
        if topic in on_source and topic in on_target
        else ("source" if topic in on_source else "target")
    )
    return {"reason": reason, "why": LEFT_OUT[reason], "on": on}


def _choose_topics(
    spark_fn: Any, source: Side, target: Side, topics: list[str] | None
) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The topics to compare (``topics``, else every non-internal topic of the source) and, for every
    other topic of either side, why it is left out."""
    on_source, on_target = _side_topics(spark_fn, source), _side_topics(spark_fn, target)
    available = {t for t in on_source if not is_internal_topic(t)}
    if topics:
        unknown = sorted(set(topics) - available)
        if unknown:
            raise ConfigError(
                f"topics {unknown} do not exist on the source.",
                f"choose among: {', '.join(sorted(available)) or '(none)'}",
            )
        chosen = sorted(set(topics))
    elif not available:
        raise ConfigError("the source has no topics to verify.", "check --source, or pass --topics")
    else:
        chosen = sorted(available)
    left_out = {}
    for t in sorted((on_source | on_target) - set(chosen)):
        reason = "internal" if is_internal_topic(t) else "only_on_target" if t not in on_source else "not_requested"
        left_out[t] = _left_out(reason, t, on_source, on_target)
    return chosen, left_out


def _drop_empty(
    topics: list[str], bounds_s: SideBounds, bounds_t: SideBounds, left_out: dict[str, dict[str, str]]
) -> list[str]:
    """``topics`` without those holding no record on either side (recorded in ``left_out``)."""
    keep = []
    for t in topics:
        if any(b.size for bounds in (bounds_s, bounds_t) for b in bounds.get(t, {}).values()):
            keep.append(t)
        else:
            left_out[t] = _left_out("empty", t, set(bounds_s), set(bounds_t))
    for bounds in (bounds_s, bounds_t):
        for t in set(bounds) - set(keep):
            del bounds[t]
    return keep


def _bounds(spark_fn: Any, side: Side, topics: list[str]) -> SideBounds:
    if isinstance(side, KafkaSide):
        return kafka_bounds(side.endpoint, topics)
    return archive_bounds(spark_fn(), side.path, topics)


def _print_bounds(say: Reporter, label: str, bounds: SideBounds, topics: list[str]) -> None:
    for t in topics:
        if t not in bounds:
            say(f"  {label} {t}: topic absent")
            continue
        parts = bounds[t]
        total = sum(b.size for b in parts.values())
        ranges = " ".join(f"{p}:[{b.start},{b.end})" for p, b in sorted(parts.items())[:12])
        more = " …" if len(parts) > 12 else ""
        say(f"  {label} {t}: {total:,} records in {len(parts)} partitions {ranges}{more}")


def _ts_ranges(topics: list[str], *bounds: SideBounds) -> dict[str, tuple[int, int]]:
    """Per topic with records on either side: (earliest first timestamp, latest max timestamp) in ms."""
    ranges: dict[str, tuple[int, int]] = {}
    for t in topics:
        firsts = [b.first_ts for side in bounds for b in side.get(t, {}).values() if b.size and b.first_ts >= 0]
        lasts = [b.max_ts for side in bounds for b in side.get(t, {}).values() if b.size and b.max_ts >= 0]
        if firsts and lasts:
            ranges[t] = (min(firsts), max(lasts))
    return ranges


def _grid(topics: list[str], *bounds: SideBounds, windows: int) -> TimeGrid:
    ranges = _ts_ranges(topics, *bounds)
    return TimeGrid.spanning({t: ranges.get(t, (-1, -1)) for t in topics}, windows)


def _window_counts(
    topics: list[str],
    grid: TimeGrid,
    ranges: dict[str, tuple[int, int]],
    diff: Differences | None = None,
    *,
    reread: bool = True,
) -> dict[str, Any]:
    """Windows per topic (the grid over the topic's time range), windows holding records, windows
    that differ and records re-read from Kafka (none when ``reread`` is false: pass 2 works on the
    persisted fingerprints) — the one source of the numbers in the progress lines and the report.

    Before pass 1 the grid is planned from the offset bounds (each partition's first record and
    newest timestamp); once ``diff`` is known it also spans the windows that records fell in, so
    "windows holding records" never exceeds "windows" (records older than a partition's first
    one fall before the planned grid)."""
    per_topic = {}
    for t in topics:
        lo, hi = ranges.get(t, (-1, -1))
        width = grid.width.get(t, 1)
        planned = (hi - lo) // width + 1 if 0 <= lo <= hi else 0
        seen = diff.window_range.get(t) if diff is not None else None
        if seen is not None:
            first, last = (min(0, seen[0]), max(planned - 1, seen[1])) if planned else seen
            planned = last - first + 1
        row = {
            "windows": planned,
            "width_ms": width,
            "with_records": 0,
            "differing": 0,
            "reread_source": 0,
            "reread_target": 0,
        }
        if diff is not None:
            row.update(with_records=diff.total_windows.get(t, 0), differing=len(diff.windows.get(t, ())))
        if diff is not None and reread:
            row.update(
                reread_source=sum(e - s for s, e in diff.spans.get(SOURCE, {}).get(t, {}).values()),
                reread_target=sum(e - s for s, e in diff.spans.get(TARGET, {}).get(t, {}).values()),
            )
        per_topic[t] = row
    totals = {
        k: sum(r[k] for r in per_topic.values())
        for k in ("windows", "with_records", "differing", "reread_source", "reread_target")
    }
    return {"per_topic": per_topic, **totals}


def _time_range(topics: list[str], *bounds: SideBounds) -> tuple[int, int]:
    """Earliest and latest record timestamp (ms) of ``topics`` on either side, for the chart's axis.

    Topics without records do not count; when no topic has any, the last hour before now.
    """
    ranges = _ts_ranges(topics, *bounds).values()
    if not ranges:
        now = int(time.time() * 1000)
        return now - 3_600_000, now
    lo = min(r[0] for r in ranges)
    return lo, max(max(r[1] for r in ranges), lo + 1)


def _fingerprinted(
    spark: SparkSession,
    side: Side,
    ranges: dict[str, dict[int, tuple[int, int]]],
    marker: int,
    side_options: dict[int, dict[str, str]],
) -> DataFrame:
    return fingerprint(read_side(spark, side, ranges, kafka_options=side_options[marker])).withColumn(
        "side", F.lit(marker)
    )


def _persisted_rdds(spark: SparkSession) -> dict[int, tuple[int, int]]:
    """RDD id → (bytes on disk, bytes in memory) of every persisted RDD of the session."""
    try:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        return {int(i.id()): (int(i.diskSize()), int(i.memSize())) for i in infos}
    except Exception:  # pragma: no cover - storage figures are informative only
        return {}


def _storage_level() -> str:
    chosen = os.environ.get(STORAGE_ENV) or STORAGE_LEVELS[0]
    if chosen not in STORAGE_LEVELS:
        raise ConfigError(
            f"{STORAGE_ENV}={chosen!r} is not a storage level for the fingerprints.",
            f"choose one of {', '.join(STORAGE_LEVELS)}",
        )
    return chosen


def _pass2_from(pass2_from: str | None) -> str:
    chosen = pass2_from or os.environ.get(PASS2_FROM_ENV) or PASS2_FROM[0]
    if chosen not in PASS2_FROM:
        raise ConfigError(
            f"pass 2 cannot read from {chosen!r}.",
            f"choose one of {', '.join(PASS2_FROM)} (argument pass2_from or {PASS2_FROM_ENV})",
        )
    return chosen


def auto_windows(records: int) -> int:
    """Time windows per topic for ``records`` records: about 500 records per window, 512 to 65,536.

    Finer windows send fewer records to the exact comparison when losses are scattered; the
    pass-1 result (sides × partitions × windows rows) stays small enough for the driver.
    """
    return int(min(65_536, max(512, records // 500)))


def _shuffle_partitions(spark: SparkSession, records: int) -> int:
    """At least the session's setting, and about 2M records per shuffle partition."""
    configured = int(spark.conf.get("spark.sql.shuffle.partitions", "4") or 4)
    return max(configured, -(-records // 2_000_000))


def _class_counts(offending: DataFrame, source: Side, target: Side) -> dict[tuple[str, str], int]:
    rows = _spark_action(lambda: offending.groupBy("topic", "class").count().collect(), source, target)
    return {(r["topic"], r["class"]): int(r["count"]) for r in rows}


Samples = dict[str, list[dict[str, Any]]]
Timeline = list[tuple[str, int, int]]
#: topic → partition (as text) → class → offending records in that partition
PartitionCounts = dict[str, dict[str, dict[str, int]]]


def _partition_counts(rows: Any) -> PartitionCounts:
    """Per topic-partition counts per class from ``(topic, partition, class, count)`` rows."""
    out: PartitionCounts = {}
    for topic, partition, cls, n in rows:
        per = out.setdefault(str(topic), {}).setdefault(str(int(partition)), {c: 0 for c in CLASSES})
        per[str(cls)] = per.get(str(cls), 0) + int(n)
    return out


def _pair_corrupted(samples: Samples, missing: list[dict[str, Any]]) -> None:
    """Give each sampled corrupted record the unreplicated source record of the same key, when there is one.

    A record changed in transit shows up twice: its source version *missing*, the changed copy
    *corrupted*. ``missing`` holds the missing rows with the keys of the sampled corrupted ones;
    the nearest in time is taken as the source version (partition, offset, checksum, timestamp).
    """
    for r in samples.get("corrupted", []):
        same = [
            m
            for m in missing
            if m["topic"] == r["topic"]
            and m["key_hash"] == r["key_hash"]
            and (None if m["key"] is None else bytes(m["key"])) == (None if r["key"] is None else bytes(r["key"]))
        ]
        if same:
            m = min(same, key=lambda m: (abs(int(m["timestamp"]) - int(r["timestamp"])), m["partition"], m["offset"]))
            r["source"] = {k: int(m[k]) for k in ("partition", "offset", "checksum", "timestamp")}


def _outputs_from_pandas(
    pdf: Any, off_dir: Path, sample_size: int, t_lo: int, bin_ms: int
) -> tuple[Samples, Timeline, PartitionCounts]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    off_dir.mkdir(parents=True, exist_ok=True)
    pdf = pdf.sort_values(["class", "topic", "timestamp", "partition", "offset"], kind="stable")
    pq.write_table(
        pa.Table.from_pandas(pdf, schema=OFFENDING_SCHEMA, preserve_index=False), off_dir / "part-00000.parquet"
    )
    samples = {str(c): grp.head(sample_size).to_dict("records") for c, grp in pdf.groupby("class", sort=False)}
    for rows in samples.values():
        for r in rows:
            for k in ("partition", "offset", "timestamp", "checksum", "key_hash"):
                r[k] = int(r[k])
    missing = pdf[pdf["class"] == "missing"]
    hashes = {r["key_hash"] for r in samples.get("corrupted", [])}
    _pair_corrupted(samples, missing[missing["key_hash"].isin(hashes)].to_dict("records") if hashes else [])
    bins = ((missing["timestamp"] - t_lo) // bin_ms).astype("int64")
    timeline = [
        (str(tp), t_lo + int(b) * bin_ms, int(n))
        for (tp, b), n in missing.groupby([missing["topic"], bins]).size().items()
    ]
    partitions = _partition_counts(
        (tp, p, c, n) for (tp, p, c), n in pdf.groupby(["topic", "partition", "class"]).size().items()
    )
    return samples, timeline, partitions


def _outputs_with_spark(
    offending: DataFrame, off_dir: Path, sample_size: int, t_lo: int, bin_ms: int, source: Side, target: Side
) -> tuple[Samples, Timeline, PartitionCounts]:
    _spark_action(lambda: offending.write.mode("overwrite").parquet(str(off_dir)), source, target)
    ranked = offending.withColumn(
        "rn", F.row_number().over(Window.partitionBy("class").orderBy("topic", "timestamp", "partition", "offset"))
    )
    samples: Samples = {}
    for r in _spark_action(lambda: ranked.where(F.col("rn") <= sample_size).drop("rn").collect(), source, target):
        samples.setdefault(r["class"], []).append(r.asDict())
    for rows in samples.values():
        rows.sort(key=lambda r: (r["topic"], r["timestamp"], r["partition"], r["offset"]))
    hashes = sorted({r["key_hash"] for r in samples.get("corrupted", [])})
    if hashes:
        cand = offending.where((F.col("class") == "missing") & F.col("key_hash").isin(hashes))
        _pair_corrupted(samples, [r.asDict() for r in _spark_action(cand.collect, source, target)])
    binned = (
        offending.where(F.col("class") == "missing")
        .groupBy("topic", F.floor((F.col("timestamp") - F.lit(t_lo)) / F.lit(bin_ms)).alias("b"))
        .count()
    )
    timeline = [
        (r["topic"], t_lo + int(r["b"]) * bin_ms, int(r["count"]))
        for r in _spark_action(binned.collect, source, target)
    ]
    per_partition = offending.groupBy("topic", "partition", "class").count()
    partitions = _partition_counts(
        (r["topic"], r["partition"], r["class"], r["count"])
        for r in _spark_action(per_partition.collect, source, target)
    )
    return samples, timeline, partitions


@dataclass
class _Scope:
    """Step 1: the topics compared and the offset bounds of both sides, fixed before any read."""

    topics: list[str]
    requested: list[str]
    left_out: dict[str, dict[str, str]]
    bounds_s: SideBounds
    bounds_t: SideBounds
    total: int
    windows: int
    ranges: dict[str, tuple[int, int]]
    grid: TimeGrid


class StoredFingerprints(TypedDict):
    """What pass 1's persisted fingerprints take (``summary["method"]["fingerprints"]``)."""

    storage: str
    columns: list[str]
    disk_bytes: int
    memory_bytes: int
    bytes_per_record: float


@dataclass
class _Pass1:
    """Step 2: per-window sums of both sides, the windows that differ, the persisted fingerprints."""

    summary_pdf: Any
    diff: Differences
    records: int
    window_counts: dict[str, Any]
    kept: DataFrame | None
    stored: StoredFingerprints | None


@dataclass
class _Pass2:
    """Steps 3 and 4: the offending records (None when nothing differs) and their counts per class."""

    counts: dict[str, dict[str, int]]
    offending: DataFrame | None = None
    rows: int = 0
    did_pass2b: bool = False
    beyond: dict[str, int] = field(default_factory=dict)
    """Per topic: target records beyond the target's bound that matched nothing (:meth:`_Run.beyond_bound`)."""


@dataclass
class _Outputs:
    """Step 5: what the report shows besides the summary counts."""

    samples: Samples
    timeline: Timeline
    partitions: PartitionCounts
    range_ms: tuple[int, int]
    bin_ms: int


class _Run:
    """One verification run: its sides, options, Spark session, timings and persisted DataFrames."""

    def __init__(
        self,
        *,
        source: Side,
        target: Side,
        cutoff_ms: int | None,
        spark: SparkSession | None,
        master: str | None,
        kafka_options: dict[str, str] | None,
        say: Reporter,
        reuse: bool,
        storage: str,
    ) -> None:
        self.source, self.target, self.cutoff_ms, self.master, self.say = source, target, cutoff_ms, master, say
        self.reuse, self.storage = reuse, storage
        self.clock = _Clock()
        self.t = time.monotonic()
        self.session: SparkSession | None = spark
        self.persisted: list[DataFrame] = []
        # One consumer group per side for the whole run: Spark pools its consumers by (group, partition),
        # so pass 2 reuses the connections of pass 1 instead of logging in again for every partition.
        # Groups must differ per side: both clusters have the same topic-partitions. Nothing is committed.
        run_id = uuid.uuid4().hex[:12]
        self.side_options = {
            marker: {"kafka.group.id": f"kdr-verify-{run_id}-{marker}", **(kafka_options or {})}
            for marker in (SOURCE, TARGET)
        }

    def spark(self) -> SparkSession:
        """The session, started on first use (an archive-only run may not need it for its bounds)."""
        if self.session is None:
            t = time.monotonic()
            self.say(f"starting Spark ({self.master or 'from spark-submit'})")
            self.session = spark_session(master=self.master)
            self.clock.lap("spark_start_s", t)
        return self.session

    def lap(self, name: str) -> None:
        self.t = self.clock.lap(name, self.t)

    def action(self, fn: Callable[[], Any]) -> Any:
        return _spark_action(fn, self.source, self.target)

    def keep(self, df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
        """``df`` persisted until the run ends."""
        kept = df.persist() if level is None else df.persist(level)
        self.persisted.append(kept)
        return kept

    def unpersist(self) -> None:
        for df in reversed(self.persisted):
            df.unpersist()

    def fingerprinted(self, side: Side, ranges: dict[str, dict[int, tuple[int, int]]], marker: int) -> DataFrame:
        return _fingerprinted(self.spark(), side, ranges, marker, self.side_options)

    def windowed(self, spans: dict[int, dict[str, dict[int, tuple[int, int]]]], grid: TimeGrid) -> DataFrame:
        """Both sides' records in ``spans`` (per side marker), fingerprinted, with their window."""
        rows = self.fingerprinted(self.source, spans.get(SOURCE, {}), SOURCE).unionByName(
            self.fingerprinted(self.target, spans.get(TARGET, {}), TARGET)
        )
        return with_window(rows, grid, self.cutoff_ms)

    # -------------------------------------------------------------------------------- steps
    def scope(self, topics: list[str] | None, windows: int | None) -> _Scope:
        """1. topics and offset bounds, fixed before reading anything."""
        self.say("fixing offset bounds on both sides")
        chosen, left_out = _choose_topics(self.spark, self.source, self.target, topics)
        requested = list(chosen)
        bounds_s = _bounds(self.spark, self.source, chosen)
        bounds_t = _bounds(self.spark, self.target, chosen)
        _print_bounds(self.say, "source", bounds_s, chosen)
        _print_bounds(self.say, "target", bounds_t, chosen)
        chosen = _drop_empty(chosen, bounds_s, bounds_t, left_out)
        if left_out:
            reasons = Counter(v["reason"] for v in left_out.values())
            self.say(
                f"left out: {len(left_out):,} topics ("
                + ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in sorted(reasons.items()))
                + "; the report lists them)"
            )
        self.lap("bounds_s")
        total = sum(b.size for bs in (bounds_s, bounds_t) for parts in bs.values() for b in parts.values())
        windows = windows or auto_windows(total)
        ranges = _ts_ranges(chosen, bounds_s, bounds_t)
        grid = _grid(chosen, bounds_s, bounds_t, windows=windows)
        return _Scope(chosen, requested, left_out, bounds_s, bounds_t, total, windows, ranges, grid)

    def pass1(self, s: _Scope) -> _Pass1:
        """2. one read of everything, per time window (count, sum of hashes, offset span); the compact
        fingerprints are persisted by the same job, for pass 2 and the source lookup."""
        spark = self.spark()
        prefer_kafka_v2(spark)
        self.t = time.monotonic()
        self.say(
            f"pass 1: reading and fingerprinting {s.total:,} records on both sides "
            f"({windows_per_topic(_window_counts(s.topics, s.grid, s.ranges))} windows per topic)"
        )
        fp = self.fingerprinted(self.source, bounds_to_ranges(s.bounds_s), SOURCE).unionByName(
            self.fingerprinted(self.target, bounds_to_ranges(s.bounds_t), TARGET)
        )
        kept: DataFrame | None = None
        before = set(_persisted_rdds(spark)) if self.reuse else set()
        if self.reuse:
            kept = self.keep(compact_fingerprints(fp, s.grid, self.cutoff_ms), getattr(StorageLevel, self.storage))
        read = kept if kept is not None else fp
        summary_pdf = self.action(lambda: bucket_summary(read, grid=s.grid, cutoff_ms=self.cutoff_ms).toPandas())
        diff = find_differences(summary_pdf)
        records = sum(n for side in diff.read.values() for parts in side.values() for n in parts.values())
        stored = None if kept is None else self._stored(spark, kept, before, records)
        window_counts = _window_counts(s.topics, s.grid, s.ranges, diff, reread=kept is None)
        self.say(
            f"pass 1 done: {records:,} records; "
            + "; ".join(f"{k}: {v}" for k, v in window_lines(window_counts))
            + (
                f"; fingerprints kept: {stored['disk_bytes'] / 1e6:,.1f} MB on disk, "
                f"{stored['memory_bytes'] / 1e6:,.1f} MB in memory ({stored['bytes_per_record']:.0f} B per record)"
                if stored
                else ""
            )
        )
        self.lap("pass1_s")
        return _Pass1(summary_pdf, diff, records, window_counts, kept, stored)

    def _stored(self, spark: SparkSession, kept: DataFrame, before: set[int], records: int) -> StoredFingerprints:
        """What the persisted fingerprints take: the RDDs persisted since ``before``."""
        new = [v for k, v in _persisted_rdds(spark).items() if k not in before]
        disk, mem = sum(d for d, _ in new), sum(m for _, m in new)
        return StoredFingerprints(
            storage=self.storage,
            columns=list(kept.columns),
            disk_bytes=disk,
            memory_bytes=mem,
            bytes_per_record=round((disk + mem) / max(records, 1), 1),
        )

    def pass2(self, s: _Scope, p1: _Pass1) -> _Pass2:
        """3. exact comparison of the differing windows only (then 4., the source lookup, if needed)."""
        result = _Pass2(counts={tp: {c: 0 for c in CLASSES} for tp in s.topics})
        diff = p1.diff
        if not diff.any:
            return result
        differing = p1.window_counts["differing"]
        if p1.kept is not None:
            self.say(
                f"pass 2: re-reading 0 source + 0 target records from Kafka: the "
                f"{differing:,} differing windows are compared on pass 1's fingerprints"
            )
            rows = select_differing(self.spark(), p1.kept, diff)
        else:
            self.say(
                f"pass 2: re-reading {diff.span_records(SOURCE):,} source + {diff.span_records(TARGET):,} "
                f"target records (the offset spans of the {differing:,} differing windows)"
            )
            rows = select_differing(self.spark(), self.windowed(diff.spans, s.grid).where(~F.col("late")), diff)
        complete = {tp for tp in s.topics if diff.complete(tp)}
        shuffle = _shuffle_partitions(self.spark(), s.total)
        ident = self.keep(identity_differences(rows, complete=complete, partitions=shuffle))
        # one action: offending records per (topic, class) — d surplus copies per identity — and how
        # many identities have more than two copies to rank
        per_class = self.action(
            lambda: (
                ident.groupBy("topic", "class")
                .agg(F.sum("d").alias("records"), F.sum(F.when(F.col("n") > 2, 1).otherwise(0)).alias("many"))
                .collect()
            )
        )
        found = {(r["topic"], r["class"]): int(r["records"]) for r in per_class}
        n_many = sum(int(r["many"]) for r in per_class)
        offending = surplus_copies(ident)
        if n_many:  # identities written three times or more: rank their copies over the pass-2 rows
            self.say(f"pass 2: ranking the copies of {n_many:,} identities held more than twice")
            offending = offending.unionByName(ranked_copies(rows, ident))
        kept = result.offending = self.keep(offending)
        result.rows = records_in_differing_windows(p1.summary_pdf, diff)
        self.lap("pass2_s")
        incomplete = sorted({tp for (tp, c), n in found.items() if c == "target_only" and n})
        if incomplete:
            found = self.pass2b(s, p1, result, kept, found, incomplete)
        found = self.beyond_bound(s, result, found)
        for (tp, c), n in found.items():
            result.counts.setdefault(tp, {k: 0 for k in CLASSES})[c] = n
        return result

    def pass2b(
        self,
        s: _Scope,
        p1: _Pass1,
        p2: _Pass2,
        offending: DataFrame,
        found: dict[tuple[str, str], int],
        incomplete: list[str],
    ) -> dict[tuple[str, str], int]:
        """4. target records whose identity has no source copy in the differing windows of a topic whose
        source is not wholly in them: is the identity, or its key, anywhere in the source? ``offending``
        is pass 2's result; the resolved one replaces it in ``p2``."""
        p2.did_pass2b = True
        n_only = sum(n for (tp, c), n in found.items() if c == "target_only")
        where = "the persisted fingerprints of the whole source" if p1.kept is not None else "the whole source"
        self.say(f"pass 2b: looking up {n_only:,} target-only records in {where} of {incomplete}")
        cand = offending.where(F.col("class") == "target_only").select("topic", "key_hash").distinct()
        if p1.kept is not None:
            src_all = p1.kept.where(
                (F.col("side") == SOURCE) & (F.col("window") != F.lit(LATE_WINDOW)) & F.col("topic").isin(incomplete)
            )
        else:
            full = {tp: bounds_to_ranges(s.bounds_s)[tp] for tp in incomplete if tp in s.bounds_s}
            src_all = with_window(self.fingerprinted(self.source, full, SOURCE), s.grid, self.cutoff_ms).where(
                ~F.col("late")
            )
        lookup = src_all.join(F.broadcast(cand), ["topic", "key_hash"], "left_semi")
        p2.offending = self.keep(resolve_target_only(offending, lookup.select("topic", "key", "checksum")))
        found = _class_counts(p2.offending, self.source, self.target)
        self.lap("pass2b_s")
        return found

    def beyond_bound(self, s: _Scope, p2: _Pass2, found: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        """Target records left offending at or beyond the target's :attr:`~verification.sides.KafkaSide.until`
        (written after the failover's promotion: a client's late deliveries) leave the offending records and
        are counted after the cut-off (``p2.beyond``); a copy there that matched a source record (recovery's)
        was matched already. Returns the counts per (topic, class) left; nothing to do without a bound."""
        until = self.target.until if isinstance(self.target, KafkaSide) else None
        offending = p2.offending
        if until is None or offending is None or not any(n for (_t, c), n in found.items() if c != "missing"):
            return found
        bounds = [(t, p, until[t].get(p, 0)) for t, parts in s.bounds_t.items() if t in until for p in parts]
        if not bounds:
            return found
        spark = self.spark()
        bound = spark.createDataFrame(bounds, "b_topic string, b_partition int, b_until long")
        marked = offending.join(
            F.broadcast(bound),
            (offending["topic"] == F.col("b_topic")) & (offending["partition"] == F.col("b_partition")),
            "left",
        ).withColumn(
            "beyond",
            F.coalesce((F.col("side") == "target") & (F.col("offset") >= F.col("b_until")), F.lit(False)),
        )
        rows = self.action(lambda: marked.groupBy("topic", "class", "beyond").count().collect())
        left: dict[tuple[str, str], int] = {}
        for r in rows:
            if r["beyond"]:
                p2.beyond[r["topic"]] = p2.beyond.get(r["topic"], 0) + int(r["count"])
            else:
                left[(r["topic"], r["class"])] = int(r["count"])
        if p2.beyond:
            self.say(
                f"{sum(p2.beyond.values()):,} target records written after the promotion (beyond the target's "
                "bound) match no source record: counted after the cut-off, not compared"
            )
            p2.offending = self.keep(marked.where(~F.col("beyond")).select(*offending.columns))
        return left

    def outputs(self, s: _Scope, p2: _Pass2, out: Path, sample_size: int, collect_limit: int) -> _Outputs:
        """5. ``offending.parquet``, the samples, the timeline of missing records, the per-partition counts."""
        self.say("writing the report")
        t_lo, t_hi = _time_range(s.topics, s.bounds_s, s.bounds_t)
        bin_ms = max(1, -(-(t_hi - t_lo) // 120))
        n_offending = sum(sum(v.values()) for v in p2.counts.values())
        off_dir = out / OFFENDING_DIR
        shutil.rmtree(off_dir, ignore_errors=True)
        samples: Samples = {}
        timeline: Timeline = []
        partitions: PartitionCounts = {}
        offending = p2.offending
        if offending is None or n_offending == 0:
            write_empty_offending(out)
        elif n_offending <= collect_limit:
            pdf = self.action(offending.toPandas)
            samples, timeline, partitions = _outputs_from_pandas(pdf, off_dir, sample_size, t_lo, bin_ms)
        else:
            samples, timeline, partitions = _outputs_with_spark(
                offending, off_dir, sample_size, t_lo, bin_ms, self.source, self.target
            )
        return _Outputs(samples, timeline, partitions, (t_lo, t_hi), bin_ms)


def run_verification(
    *,
    source: Side,
    target: Side,
    out_dir: Path | str,
    topics: list[str] | None = None,
    cutoff_ms: int | None = None,
    spark: SparkSession | None = None,
    master: str | None = DEFAULT_MASTER,
    windows: int | None = None,
    kafka_options: dict[str, str] | None = None,
    progress: Reporter | None = None,
    sample_size: int = 20,
    collect_limit: int = 500_000,
    context: dict[str, Any] | None = None,
    pass2_from: str | None = None,
) -> VerificationResult:
    """Compare ``source`` and ``target`` and write the report to ``out_dir``.

    ``topics`` defaults to every non-internal topic of the source. Records with a timestamp after
    ``cutoff_ms`` (epoch ms) are left out on both sides and counted as ``after_cutoff``; so are target
    records at or beyond ``target.until`` (:attr:`~verification.sides.KafkaSide.until`, the failover's bound)
    that match no source record, taken out of pass 2's offending records (:meth:`_Run.beyond_bound`). ``spark``
    reuses a session; otherwise one is built for ``master`` (ignored under ``spark-submit``).
    Returns the result whatever the verdict; call :meth:`VerificationResult.raise_for_verdict`
    (the CLI does) to turn differences into exit code 1. Up to ``collect_limit`` offending records
    are written from the driver in one step; more are written by Spark.

    ``context`` (JSON values) says what the run belongs to — a failover's ``failover_id``, ``mode``,
    ``source``, ``target``, ``rto_s``, ``rpo_estimate``, ``journal`` — and is written to the summary
    as ``failover`` (keys that look like secrets are dropped) and shown at the top of the report.

    ``pass2_from``: ``"fingerprints"`` (Kafka is read once per side; pass 2 and the source lookup
    work on pass 1's persisted fingerprints) or ``"kafka"`` (the default until the benchmark shows
    the other at least as fast: they re-read Kafka); None takes ``$KDR_VERIFY_PASS2``, else ``kafka``.
    """
    say = progress or quiet
    reuse = _pass2_from(pass2_from) == "fingerprints"
    run = _Run(
        source=source,
        target=target,
        cutoff_ms=cutoff_ms,
        spark=spark,
        master=master,
        kafka_options=kafka_options,
        say=say,
        reuse=reuse,
        storage=_storage_level(),
    )
    failover = safe_context(context)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC)
    scope = run.scope(topics, windows)
    try:
        p1 = run.pass1(scope)
        p2 = run.pass2(scope, p1)
        outputs = run.outputs(scope, p2, out, sample_size, collect_limit)
    finally:
        run.unpersist()
    summary = _summary(run, scope, p1, p2, outputs.partitions, out=out, started_at=started_at, failover=failover)
    run.lap("write_s")
    clock = run.clock
    clock.marks["total_s"] = round(time.monotonic() - clock.t0, 3)
    summary["timings"] = dict(clock.marks)
    summary["timings"]["records_per_s"] = round(p1.records / max(clock.marks["total_s"], 1e-9))
    write_report(
        out,
        summary,
        timeline=outputs.timeline,
        bin_ms=outputs.bin_ms,
        samples=outputs.samples,
        range_ms=outputs.range_ms,
    )
    tot = summary["totals"]
    say(f"verdict: {summary['verdict']} — " + ", ".join(f"{tot[c]:,} {c}" for c in CLASSES) + f"; report in {out}")
    return VerificationResult(summary, out)


def run(request: VerifyRequest, *, progress: Reporter | None = None) -> VerificationResult:
    """The full verification's route (:mod:`verification.route`): :func:`run_verification` of ``request``."""
    return run_verification(
        source=request.source,
        target=request.target,
        out_dir=request.out_dir,
        topics=request.topics,
        cutoff_ms=request.cutoff_ms,
        master=request.master,
        windows=request.windows,
        progress=progress,
        context=request.context,
    )


def _topic_rows(
    s: _Scope, diff: Differences, counts: dict[str, dict[str, int]], beyond: dict[str, int] | None = None
) -> dict[str, TopicRow]:
    """``summary["topics"]``: per topic, records read, after the cut-off (``beyond``: target records past its
    bound that matched nothing, :meth:`_Run.beyond_bound`, included), compared, and the counts per class."""
    per_topic: dict[str, TopicRow] = {}
    for tp in s.topics:
        s_read = sum(diff.read.get(SOURCE, {}).get(tp, {}).values())
        t_read = sum(diff.read.get(TARGET, {}).get(tp, {}).values())
        s_late = diff.after_cutoff.get(SOURCE, {}).get(tp, 0)
        t_late = diff.after_cutoff.get(TARGET, {}).get(tp, 0) + (beyond or {}).get(tp, 0)
        found = counts.get(tp, {})
        per_topic[tp] = {
            "source_read": s_read,
            "target_read": t_read,
            "source_after_cutoff": s_late,
            "target_after_cutoff": t_late,
            "source_compared": s_read - s_late,
            "target_compared": t_read - t_late,
            "missing": found.get("missing", 0),
            "unexpected": found.get("unexpected", 0),
            "duplicated": found.get("duplicated", 0),
            "corrupted": found.get("corrupted", 0),
            "target_absent": tp not in s.bounds_t,
            "source_partitions": len(s.bounds_s.get(tp, {})),
            "target_partitions": len(s.bounds_t.get(tp, {})),
        }
    return per_topic


def _offsets_read(bounds: SideBounds, diff: Differences, marker: int) -> dict[str, dict[str, dict[str, int]]]:
    """``summary["offsets"][side]``: per partition the bounds fixed in step 1 and the records read."""
    return {
        tp: {
            str(p): {"start": b.start, "end": b.end, "read": diff.read.get(marker, {}).get(tp, {}).get(p, 0)}
            for p, b in sorted(parts.items())
        }
        for tp, parts in sorted(bounds.items())
    }


def _method(s: _Scope, p1: _Pass1, p2: _Pass2) -> dict[str, Any]:
    """``summary["method"]``: how the comparison ran (windows, passes, Kafka reads)."""
    diff = p1.diff
    return {
        "identity": "(topic, key, checksum), compared as multisets",
        "windows": s.windows,
        "grid": s.grid.to_dict(),
        "window_counts": p1.window_counts,
        "pass1_records": p1.records,
        "differing_windows": p1.window_counts["differing"],
        "kafka_reads_per_side": 1 if p1.stored is not None else 1 + bool(diff.any) + p2.did_pass2b,
        "fingerprints": p1.stored,
        "pass2_offsets": 0 if p1.stored is not None else diff.span_records(SOURCE) + diff.span_records(TARGET),
        "pass2_compared_records": p2.rows,
        "pass2b": p2.did_pass2b,
    }


def _summary(
    run: _Run,
    s: _Scope,
    p1: _Pass1,
    p2: _Pass2,
    partitions: PartitionCounts,
    *,
    out: Path,
    started_at: datetime,
    failover: dict[str, Any] | None,
) -> dict[str, Any]:
    spark = run.spark()
    summary = summary_document(
        source=run.source,
        target=run.target,
        out=out,
        started_at=started_at,
        failover=failover,
        requested=s.requested,
        topics=s.topics,
        left_out=s.left_out,
        cutoff_ms=run.cutoff_ms,
        per_topic=_topic_rows(s, p1.diff, p2.counts, p2.beyond),
        partitions={tp: partitions[tp] for tp in sorted(partitions)},
        offsets={
            "source": _offsets_read(s.bounds_s, p1.diff, SOURCE),
            "target": _offsets_read(s.bounds_t, p1.diff, TARGET),
        },
        method=_method(s, p1, p2),
        spark={"master": spark.sparkContext.master, "version": spark.version},
    )
    summary["exit_codes"] = exit_codes_by_code()
    return summary


@click.command("verify")
@with_options([*NAME_OPTIONS, *SIDE_OPTIONS, cutoff_option(), *RUN_OPTIONS])
@exit_codes
def submitted(
    topics: tuple[str, ...],
    cutoff: str | None,
    out: Path | None,
    as_json: bool,
    master: str,
    windows: int | None,
    quiet: bool,
    **sides: Any,
) -> None:
    """Compare SOURCE and TARGET record by record (key + checksum); exit 0 only when clean."""
    source, target = resolve_sides(**sides)
    cutoff_ms = None if cutoff is None or cutoff.strip().lower() == "none" else parse_cutoff(cutoff)
    run = run_arguments(topics=topics, out=out, windows=windows, quiet=quiet)
    print_result(
        run_verification(source=source, target=target, cutoff_ms=cutoff_ms, master=master, **run), as_json=as_json
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``spark-submit verification/job.py`` / ``python -m verification.job``.

    Accepts the options of ``drctl verify`` but ``--stack`` (explicit bootstrap + credentials
    file, or archives). ``--print-jars`` prints the connector jars to pass to ``spark-submit --jars``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--print-jars"]:
        print(",".join(kafka_jars()))
        return 0
    try:
        submitted.main(args=args, prog_name="verification/job.py", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
