"""The verification job: ``run_verification(...)`` in Python, or ``spark-submit verification/job.py``.

Steps (progress on stderr):

1. fix the offset bounds of every partition on both sides (confluent-kafka, before any read);
2. pass 1 — read both sides once with Spark's Kafka source (or the archive), fingerprint every
   record with JVM built-ins and keep per time window (count, sum of hashes, offset span);
3. pass 2 — re-read only the offset spans of differing time windows and compare their records
   as multisets of (topic, key, checksum): one shuffle, an aggregation per identity;
4. (only when the target holds keys the pass-2 rows cannot place) look those keys up in the source;
5. write ``summary.json``, ``report.html`` and ``offending.parquet`` to the output directory.

Under ``spark-submit`` the executors need no Python code (no UDF): only the spark-sql-kafka jars
(``--jars $(python -m verification.job --print-jars)``). The driver needs this repository.
"""

from __future__ import annotations

import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # pragma: no cover - spark-submit runs this file as a script
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dr.errors import ConfigError, DRError, VerificationFailed
from verification.compare import (
    CLASSES,
    SOURCE,
    TARGET,
    Differences,
    TimeGrid,
    bucket_summary,
    find_differences,
    identity_differences,
    ranked_copies,
    records_in_differing_windows,
    resolve_target_only,
    select_differing,
    surplus_copies,
    with_window,
)
from verification.fingerprint import fingerprint
from verification.progress import Reporter, quiet
from verification.report import OFFENDING_DIR, OFFENDING_SCHEMA, iso, write_empty_offending, write_report
from verification.session import DEFAULT_MASTER, prefer_kafka_v2, spark_session
from verification.sources import (
    KafkaSide,
    Side,
    SideBounds,
    archive_bounds,
    archive_topics,
    bounds_to_ranges,
    kafka_bounds,
    kafka_topics,
    read_side,
    translate_spark_error,
)

__all__ = ["CHECKSUM_DESCRIPTION", "VerificationResult", "main", "run_verification"]

CHECKSUM_DESCRIPTION = ("xxhash64(value IS NULL, value, size(headers), "
                        "transform(headers, h -> struct(h.key, h.value IS NULL, h.value))) — Spark built-in, seed 42")


@dataclass(frozen=True)
class VerificationResult:
    """The outcome of one verification: the summary (as written) and where the report is."""

    summary: dict[str, Any]
    out_dir: Path

    @property
    def clean(self) -> bool:
        """True when no record is missing, unexpected, duplicated or corrupted."""
        return self.summary["verdict"] == "clean"

    @property
    def exit_code(self) -> int:
        """0 when clean, 1 (:class:`VerificationFailed`) otherwise."""
        return 0 if self.clean else VerificationFailed.exit_code

    def counts(self, topic: str | None = None) -> dict[str, int]:
        """Counts per class, for one topic or in total."""
        src = self.summary["topics"][topic] if topic else self.summary["totals"]
        return {c: int(src[c]) for c in CLASSES}

    def raise_for_verdict(self) -> None:
        """Raise :class:`VerificationFailed` (exit code 1) unless the verdict is clean."""
        if not self.clean:
            t = self.summary["totals"]
            found = ", ".join(f"{t[c]} {c}" for c in CLASSES if t[c])
            raise VerificationFailed(f"verification found differences: {found} (report in {self.out_dir}).",
                                     f"open {self.out_dir / 'report.html'}; replay missing records with "
                                     f"`drctl recover --report {self.out_dir}`")


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


def _choose_topics(spark_fn: Any, source: Side, target: Side, topics: list[str] | None) -> list[str]:
    if isinstance(source, KafkaSide):
        available = set(kafka_topics(source.endpoint))
    else:
        available = set(archive_topics(spark_fn(), source.path))
    if isinstance(target, KafkaSide):
        kafka_topics(target.endpoint)  # reachable and credentials accepted, before any long step
    if topics:
        unknown = sorted(set(topics) - available)
        if unknown:
            raise ConfigError(f"topics {unknown} do not exist on the source.",
                              f"choose among: {', '.join(sorted(available)) or '(none)'}")
        return sorted(set(topics))
    if not available:
        raise ConfigError("the source has no topics to verify.", "check --source, or pass --topics")
    return sorted(available)


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


def _fingerprinted(spark: SparkSession, side: Side, ranges: dict[str, dict[int, tuple[int, int]]],
                   marker: int, side_options: dict[int, dict[str, str]]) -> DataFrame:
    return fingerprint(read_side(spark, side, ranges, kafka_options=side_options[marker])).withColumn(
        "side", F.lit(marker))


def run_verification(*, source: Side, target: Side, out_dir: Path | str, topics: list[str] | None = None,
                     cutoff_ms: int | None = None, spark: SparkSession | None = None,
                     master: str | None = DEFAULT_MASTER, windows: int | None = None,
                     kafka_options: dict[str, str] | None = None, progress: Reporter | None = None,
                     sample_size: int = 20, collect_limit: int = 500_000) -> VerificationResult:
    """Compare ``source`` and ``target`` and write the report to ``out_dir``.

    ``topics`` defaults to every non-internal topic of the source. Records with a timestamp after
    ``cutoff_ms`` (epoch ms) are left out on both sides and counted as ``after_cutoff``. ``spark``
    reuses a session; otherwise one is built for ``master`` (ignored under ``spark-submit``).
    Returns the result whatever the verdict; call :meth:`VerificationResult.raise_for_verdict`
    (the CLI does) to turn differences into exit code 1. Up to ``collect_limit`` offending records
    are written from the driver in one step; more are written by Spark.
    """
    say = progress or quiet
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock = _Clock()
    # One consumer group per side for the whole run: Spark pools its consumers by (group, partition),
    # so pass 2 reuses the connections of pass 1 instead of logging in again for every partition.
    # Groups must differ per side: both clusters have the same topic-partitions. Nothing is committed.
    run_id = uuid.uuid4().hex[:12]
    side_options = {marker: {"kafka.group.id": f"kdr-verify-{run_id}-{marker}", **(kafka_options or {})}
                    for marker in (SOURCE, TARGET)}
    started_at = datetime.now(timezone.utc)
    session: list[SparkSession] = [spark] if spark is not None else []

    def get_spark() -> SparkSession:
        if not session:
            t = time.monotonic()
            say(f"starting Spark ({master or 'from spark-submit'})")
            session.append(spark_session(master=master))
            clock.lap("spark_start_s", t)
        return session[0]

    # 1. topics and offset bounds, fixed before reading anything
    t = time.monotonic()
    say("fixing offset bounds on both sides")
    topics = _choose_topics(get_spark, source, target, topics)
    bounds_s = _bounds(get_spark, source, topics)
    bounds_t = _bounds(get_spark, target, topics)
    _print_bounds(say, "source", bounds_s, topics)
    _print_bounds(say, "target", bounds_t, topics)
    t = clock.lap("bounds_s", t)
    total = sum(b.size for bs in (bounds_s, bounds_t) for parts in bs.values() for b in parts.values())
    windows = windows or auto_windows(total)
    grid = _grid(topics, bounds_s, bounds_t, windows=windows)
    spark = get_spark()
    prefer_kafka_v2(spark)
    t = time.monotonic()

    # 2. pass 1: one read of everything, per time window (count, sum of hashes, offset span)
    say(f"pass 1: reading and fingerprinting {total:,} records on both sides ({windows:,} windows per topic)")
    fp = (_fingerprinted(spark, source, bounds_to_ranges(bounds_s), SOURCE, side_options)
          .unionByName(_fingerprinted(spark, target, bounds_to_ranges(bounds_t), TARGET, side_options)))
    summary_pdf = _spark_action(lambda: bucket_summary(fp, grid=grid, cutoff_ms=cutoff_ms).toPandas(),
                                source, target)
    diff = find_differences(summary_pdf)
    pass1_records = sum(n for side in diff.read.values() for parts in side.values() for n in parts.values())
    n_dw = sum(len(v) for v in diff.windows.values())
    say(f"pass 1 done: {pass1_records:,} records; {n_dw:,} of {sum(diff.total_windows.values()):,} windows differ")
    t = clock.lap("pass1_s", t)

    # 3. pass 2: exact comparison of the differing windows only
    offending: DataFrame | None = None
    did_pass2b = False
    pass2_rows = 0
    persisted: list[DataFrame] = []
    counts: dict[str, dict[str, int]] = {tp: {c: 0 for c in CLASSES} for tp in topics}
    if diff.any:
        say(f"pass 2: re-reading {diff.span_records(SOURCE):,} source and {diff.span_records(TARGET):,} "
            "target offsets of the differing windows")
        rows = (_fingerprinted(spark, source, diff.spans.get(SOURCE, {}), SOURCE, side_options)
                .unionByName(_fingerprinted(spark, target, diff.spans.get(TARGET, {}), TARGET, side_options)))
        rows = select_differing(spark, with_window(rows, grid, cutoff_ms).where(~F.col("late")), diff)
        complete = {tp for tp in topics if diff.complete(tp)}
        ident = identity_differences(rows, complete=complete,
                                     partitions=_shuffle_partitions(spark, total)).persist()
        persisted.append(ident)
        # one action: offending records per (topic, class) — d surplus copies per identity — and how
        # many identities have more than two copies to rank
        per_class = _spark_action(lambda: ident.groupBy("topic", "class").agg(
            F.sum("d").alias("records"), F.sum(F.when(F.col("n") > 2, 1).otherwise(0)).alias("many")).collect(),
            source, target)
        found = {(r["topic"], r["class"]): int(r["records"]) for r in per_class}
        n_many = sum(int(r["many"]) for r in per_class)
        offending = surplus_copies(ident)
        if n_many:  # identities written three times or more: rank their copies over a re-read
            say(f"pass 2: ranking the copies of {n_many:,} identities held more than twice")
            offending = offending.unionByName(ranked_copies(rows, ident))
        offending = offending.persist()
        persisted.append(offending)
        pass2_rows = records_in_differing_windows(summary_pdf, diff)
        t = clock.lap("pass2_s", t)
        # 4. target records whose identity has no source copy in the re-read windows of a topic
        #    whose source was not wholly re-read: is the identity, or its key, anywhere in the source?
        incomplete = sorted({tp for (tp, c), n in found.items() if c == "target_only" and n})
        if incomplete:
            did_pass2b = True
            n_only = sum(n for (tp, c), n in found.items() if c == "target_only")
            say(f"pass 2b: looking up {n_only:,} target-only records in the whole source of {incomplete}")
            cand = (offending.where(F.col("class") == "target_only").select("topic", "key_hash").distinct())
            full = {tp: bounds_to_ranges(bounds_s)[tp] for tp in incomplete if tp in bounds_s}
            src_all = with_window(_fingerprinted(spark, source, full, SOURCE, side_options),
                                  grid, cutoff_ms).where(~F.col("late"))
            lookup = src_all.join(F.broadcast(cand), ["topic", "key_hash"], "left_semi")
            offending = resolve_target_only(offending, lookup.select("topic", "key", "checksum")).persist()
            persisted.append(offending)
            found = _class_counts(offending, source, target)
            t = clock.lap("pass2b_s", t)
        for (tp, c), n in found.items():
            counts.setdefault(tp, {k: 0 for k in CLASSES})[c] = n

    # 5. outputs
    say("writing the report")
    t_lo, t_hi = _time_range(topics, bounds_s, bounds_t)
    bin_ms = max(1, -(-(t_hi - t_lo) // 120))
    n_offending = sum(sum(v.values()) for v in counts.values())
    off_dir = out / OFFENDING_DIR
    shutil.rmtree(off_dir, ignore_errors=True)
    if offending is None or n_offending == 0:
        write_empty_offending(out)
        samples, timeline = {}, []
    elif n_offending <= collect_limit:
        pdf = _spark_action(offending.toPandas, source, target)
        samples, timeline = _outputs_from_pandas(pdf, off_dir, sample_size, t_lo, bin_ms)
    else:
        samples, timeline = _outputs_with_spark(offending, off_dir, sample_size, t_lo, bin_ms, source, target)
    for df in persisted:
        df.unpersist()

    summary = _summary(source=source, target=target, topics=topics, bounds_s=bounds_s, bounds_t=bounds_t,
                       diff=diff, counts=counts, cutoff_ms=cutoff_ms, grid=grid, windows=windows,
                       pass1_records=pass1_records, pass2_rows=pass2_rows, did_pass2b=did_pass2b,
                       spark=spark, out=out, started_at=started_at)
    t = clock.lap("write_s", t)
    clock.marks["total_s"] = round(time.monotonic() - clock.t0, 3)
    summary["timings"] = dict(clock.marks)
    summary["timings"]["records_per_s"] = round(pass1_records / max(clock.marks["total_s"], 1e-9))
    write_report(out, summary, timeline=timeline, bin_ms=bin_ms, samples=samples, range_ms=(t_lo, t_hi))
    tot = summary["totals"]
    say(f"verdict: {summary['verdict']} — " + ", ".join(f"{tot[c]:,} {c}" for c in CLASSES)
        + f"; report in {out}")
    return VerificationResult(summary, out)


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


def _outputs_from_pandas(pdf: Any, off_dir: Path, sample_size: int, t_lo: int, bin_ms: int
                         ) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, int, int]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    off_dir.mkdir(parents=True, exist_ok=True)
    pdf = pdf.sort_values(["class", "topic", "timestamp", "partition", "offset"], kind="stable")
    pq.write_table(pa.Table.from_pandas(pdf, schema=OFFENDING_SCHEMA, preserve_index=False),
                   off_dir / "part-00000.parquet")
    samples = {str(c): grp.head(sample_size).to_dict("records") for c, grp in pdf.groupby("class", sort=False)}
    for rows in samples.values():
        for r in rows:
            r["partition"], r["offset"], r["timestamp"] = int(r["partition"]), int(r["offset"]), int(r["timestamp"])
            r["checksum"] = int(r["checksum"])
    missing = pdf[pdf["class"] == "missing"]
    bins = ((missing["timestamp"] - t_lo) // bin_ms).astype("int64")
    timeline = [(str(tp), t_lo + int(b) * bin_ms, int(n))
                for (tp, b), n in missing.groupby([missing["topic"], bins]).size().items()]
    return samples, timeline


def _outputs_with_spark(offending: DataFrame, off_dir: Path, sample_size: int, t_lo: int, bin_ms: int,
                        source: Side, target: Side
                        ) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, int, int]]]:
    _spark_action(lambda: offending.write.mode("overwrite").parquet(str(off_dir)), source, target)
    ranked = offending.withColumn("rn", F.row_number().over(
        Window.partitionBy("class").orderBy("topic", "timestamp", "partition", "offset")))
    samples: dict[str, list[dict[str, Any]]] = {}
    for r in _spark_action(lambda: ranked.where(F.col("rn") <= sample_size).drop("rn").collect(), source, target):
        samples.setdefault(r["class"], []).append(r.asDict())
    for rows in samples.values():
        rows.sort(key=lambda r: (r["topic"], r["timestamp"], r["partition"], r["offset"]))
    binned = (offending.where(F.col("class") == "missing")
              .groupBy("topic", F.floor((F.col("timestamp") - F.lit(t_lo)) / F.lit(bin_ms)).alias("b")).count())
    timeline = [(r["topic"], t_lo + int(r["b"]) * bin_ms, int(r["count"]))
                for r in _spark_action(binned.collect, source, target)]
    return samples, timeline


def _summary(*, source: Side, target: Side, topics: list[str], bounds_s: SideBounds, bounds_t: SideBounds,
             diff: Differences, counts: dict[str, dict[str, int]], cutoff_ms: int | None, grid: TimeGrid,
             windows: int, pass1_records: int, pass2_rows: int, did_pass2b: bool,
             spark: SparkSession, out: Path, started_at: datetime) -> dict[str, Any]:
    per_topic: dict[str, dict[str, Any]] = {}
    for tp in topics:
        s_read = sum(diff.read.get(SOURCE, {}).get(tp, {}).values())
        t_read = sum(diff.read.get(TARGET, {}).get(tp, {}).values())
        s_late = diff.after_cutoff.get(SOURCE, {}).get(tp, 0)
        t_late = diff.after_cutoff.get(TARGET, {}).get(tp, 0)
        per_topic[tp] = {
            "source_read": s_read, "target_read": t_read,
            "source_after_cutoff": s_late, "target_after_cutoff": t_late,
            "source_compared": s_read - s_late, "target_compared": t_read - t_late,
            **{c: counts.get(tp, {}).get(c, 0) for c in CLASSES},
            "target_absent": tp not in bounds_t,
            "source_partitions": len(bounds_s.get(tp, {})), "target_partitions": len(bounds_t.get(tp, {})),
        }
    totals = {k: sum(v[k] for v in per_topic.values())
              for k in ("source_read", "target_read", "source_after_cutoff", "target_after_cutoff",
                        "source_compared", "target_compared", *CLASSES)}
    clean = not any(totals[c] for c in CLASSES)

    def offsets(bounds: SideBounds, marker: int) -> dict[str, dict[str, dict[str, int]]]:
        return {tp: {str(p): {"start": b.start, "end": b.end,
                              "read": diff.read.get(marker, {}).get(tp, {}).get(p, 0)}
                     for p, b in sorted(parts.items())}
                for tp, parts in sorted(bounds.items())}

    return {
        "verdict": "clean" if clean else "differences",
        "exit_code": 0 if clean else VerificationFailed.exit_code,
        "generated_at": started_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "out_dir": str(out),
        "source": source.describe(),
        "target": target.describe(),
        "topics_requested": topics,
        "cutoff": None if cutoff_ms is None else {"ms": int(cutoff_ms), "iso": iso(int(cutoff_ms)),
                                                  "applies_to": "both sides"},
        "totals": totals,
        "topics": per_topic,
        "offsets": {"source": offsets(bounds_s, SOURCE), "target": offsets(bounds_t, TARGET)},
        "method": {
            "checksum": CHECKSUM_DESCRIPTION,
            "key_hash": "xxhash64(topic, key IS NULL, key)",
            "identity": "(topic, key, checksum), compared as multisets",
            "windows": windows, "grid": grid.to_dict(),
            "pass1_records": pass1_records,
            "differing_windows": sum(len(v) for v in diff.windows.values()),
            "pass2_offsets": diff.span_records(SOURCE) + diff.span_records(TARGET),
            "pass2_compared_records": pass2_rows,
            "pass2b": did_pass2b,
        },
        "spark": {"master": spark.sparkContext.master, "version": spark.version},
        "files": {"summary": "summary.json", "html": "report.html", "chart": "missing_over_time.png",
                  "offending": OFFENDING_DIR},
        "exit_codes": {"0": "clean", "1": "differences found (VerificationFailed)", "2": "bad input (ConfigError)",
                       "3": "toolchain missing", "4": "cluster unreachable or read failed (ClusterError)",
                       "5": "credentials refused (AuthError)"},
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``spark-submit verification/job.py`` / ``python -m verification.job``.

    Accepts the options of ``drctl verify`` (explicit bootstrap + credentials file, or archives).
    ``--print-jars`` prints the connector jars to pass to ``spark-submit --jars``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--print-jars"]:
        from verification.session import kafka_jars

        print(",".join(kafka_jars()))
        return 0
    from verification.cli import verify

    try:
        verify.main(args=args, prog_name="verification/job.py", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
