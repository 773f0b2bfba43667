"""Replay the records a verification found missing from the source into the target, idempotently.

``recover(report_dir, source=..., target=...)``:

1. reads the ``missing`` rows of ``offending.parquet`` (source coordinates, key, checksum);
2. scans what the target received *after* the offsets the verification read (the report's target
   end offsets) — copies that MirrorMaker 2 delivered late or that an earlier recovery wrote — and
   counts, per (topic, key, checksum), the copies already there (checksums computed with the
   Python reference of the Spark checksum; only records with a wanted key are hashed);
3. fetches the still-missing records from the source by their coordinates (Kafka or Parquet
   archive) and checks each against the report's key and checksum;
4. produces them to the target with an idempotent producer, keeping key, value, headers (in order),
   timestamp and partition number, and appends every delivery to ``recovery-ledger.jsonl``.

Because step 2 sees everything written since the report, a second run writes nothing, and a run
that crashed half-way resumes where it stopped. Stop the replication link (or make sure it is not
replaying the same range) while recovering, so both do not deliver the same record at once.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from dr.base.errors import ClusterError, ConfigError
from dr.kafka.client import SILENT, Endpoint, admin_client, kafka_errors
from dr.kafka.records import consume_while, range_consumer
from verification.cluster import cluster_metadata, offset_ranges
from verification.fingerprint import checksum
from verification.progress import Reporter, quiet
from verification.report import load_summary, read_offending
from verification.route import RecoverRequest, RouteResult

__all__ = ["LEDGER_FILE", "RecoveryResult", "SourceRecord", "recover", "run"]

LEDGER_FILE = "recovery-ledger.jsonl"
RUNS_FILE = "recovery-runs.json"

Identity = tuple[str, bytes | None, int]  # (topic, key, checksum)


@dataclass(frozen=True)
class SourceRecord:
    """One record to replay, as read back from the source."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


@dataclass
class RecoveryResult(RouteResult):
    """What one recovery run found and did."""

    report_dir: Path
    dry_run: bool
    missing: int = 0
    already_present: int = 0
    to_write: int = 0
    written: int = 0
    per_topic: dict[str, dict[str, int]] = field(default_factory=dict)
    ledger: Path | None = None
    run_id: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for ``--json``)."""
        d = asdict(self)
        d["report_dir"] = str(self.report_dir)
        d["ledger"] = str(self.ledger) if self.ledger else None
        return d

    @property
    def verdict(self) -> str:
        """``done``, or ``planned`` for a dry run."""
        return "planned" if self.dry_run else "done"

    @property
    def report(self) -> Path:
        """The report directory the records were replayed from."""
        return self.report_dir

    def counts(self) -> dict[str, int]:
        """Records missing in the report, already in the target, to write, and written."""
        return {
            "missing": self.missing,
            "already_present": self.already_present,
            "to_write": self.to_write,
            "written": self.written,
        }


# ----------------------------------------------------------------------------- Kafka helpers


def _offset_ranges(endpoint: Endpoint, tps: list[TopicPartition]) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) → (earliest, end)`` of every partition in ``tps``."""
    return offset_ranges(admin_client(endpoint), endpoint, tps, 30.0) if tps else {}


def _partitions(endpoint: Endpoint, topics: Iterable[str]) -> dict[str, int]:
    md = cluster_metadata(endpoint)
    return {t: len(md.topics[t].partitions) for t in topics if t in md.topics and md.topics[t].error is None}


def _scan(
    endpoint: Endpoint, ranges: dict[tuple[str, int], tuple[int, int]], *, idle_timeout: float = 30.0
) -> Iterable[Any]:
    """Yield every message of ``ranges[(topic, partition)] = (start, end)``: a partition is done at its
    last record or once the consumer's position reaches ``end`` (a range that ends in transaction commit
    markers — an exactly-once link's copies — has no record at ``end - 1``)."""
    todo = {k: r for k, r in ranges.items() if r[1] > r[0]}
    if not todo:
        return
    left = {k: r[1] for k, r in todo.items()}
    consumer = range_consumer(endpoint, "recover", **{"socket.timeout.ms": 15000})
    try:
        consumer.assign([TopicPartition(t, p, r[0]) for (t, p), r in todo.items()])
        for m in consume_while(consumer, endpoint, left, idle_timeout, stalled=_stalled(endpoint, left), ends=left):
            k = (m.topic(), m.partition())
            r = todo.get(k)
            if r is None or k not in left or m.offset() >= r[1]:
                continue
            yield m
            if m.offset() >= r[1] - 1:
                del left[k]
                consumer.incremental_unassign([TopicPartition(k[0], k[1])])
    finally:
        consumer.close()


def _stalled(endpoint: Endpoint, unfinished: dict[tuple[str, int], Any]) -> Callable[[], tuple[str, str]]:
    """The stall's message and next step for :func:`~dr.kafka.records.consume_while` (read when it stalls)."""
    return lambda: (
        f"reading {endpoint.bootstrap} stalled with {len(unfinished)} partitions unfinished "
        f"({sorted(unfinished)[:5]}...).",
        "check the cluster is healthy and re-run",
    )


def _fetch_kafka(
    endpoint: Endpoint, wanted: dict[tuple[str, int], list[int]], *, idle_timeout: float = 30.0
) -> dict[tuple[str, int, int], SourceRecord]:
    """Read the records at ``wanted[(topic, partition)] = [sorted offsets]`` with one consumer.

    Gaps of more than 1000 offsets are skipped by re-assigning the partition at the next wanted
    offset; an offset that no longer exists (compaction, retention) is simply not returned.
    """
    out: dict[tuple[str, int, int], SourceRecord] = {}
    consumer = range_consumer(endpoint, "recover", **{"socket.timeout.ms": 15000})
    try:
        pending: dict[tuple[str, int], deque[int]] = {}
        bounds = _offset_ranges(endpoint, [TopicPartition(t, p) for t, p in wanted])
        for (t, p), offs in wanted.items():
            low, high = bounds[(t, p)]
            keep = deque(o for o in offs if low <= o < high)
            if keep:
                pending[(t, p)] = keep
        if not pending:
            return out
        consumer.assign([TopicPartition(t, p, q[0]) for (t, p), q in pending.items()])
        skip_below: dict[tuple[str, int], int] = {}
        for m in consume_while(consumer, endpoint, pending, idle_timeout, stalled=_stalled(endpoint, pending)):
            k = (m.topic(), m.partition())
            q = pending.get(k)
            off = m.offset()
            if q is None or off < skip_below.get(k, -1):  # done, or fetched before a re-assign
                continue
            while q and q[0] < off:  # gone from the log
                q.popleft()
            if q and q[0] == off:
                q.popleft()
                out[(k[0], k[1], off)] = SourceRecord(
                    k[0], k[1], off, m.timestamp()[1], m.key(), m.value(), list(m.headers()) if m.headers() else None
                )
            if not q:
                del pending[k]
                consumer.incremental_unassign([TopicPartition(*k)])
            elif q[0] - off > 1000:
                skip_below[k] = q[0]
                consumer.incremental_unassign([TopicPartition(*k)])
                consumer.incremental_assign([TopicPartition(k[0], k[1], q[0])])
    finally:
        consumer.close()
    return out


def _fetch_archive(path: Path, wanted: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int, int], SourceRecord]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(path), format="parquet")
    out: dict[tuple[str, int, int], SourceRecord] = {}
    for (topic, part), offs in wanted.items():
        flt = (ds.field("topic") == topic) & (ds.field("partition") == part) & ds.field("offset").isin(offs)
        table = dataset.to_table(filter=flt)
        if pa.types.is_timestamp(table.schema.field("timestamp").type):
            ts = pc.cast(pc.cast(table["timestamp"], pa.timestamp("ms")), pa.int64()).to_pylist()
        else:
            ts = table["timestamp"].to_pylist()
        has_headers = "headers" in table.column_names
        for i, row in enumerate(
            table.select([c for c in ("offset", "key", "value", "headers") if c in table.column_names]).to_pylist()
        ):
            hdrs = row.get("headers") if has_headers else None
            hdrs = [(h["key"], h["value"]) for h in hdrs] if hdrs else None
            key = row["key"].encode() if isinstance(row["key"], str) else row["key"]
            value = row["value"].encode() if isinstance(row["value"], str) else row["value"]
            out[(topic, part, int(row["offset"]))] = SourceRecord(
                topic, part, int(row["offset"]), int(ts[i]), key, value, hdrs
            )
    return out


def _check_target_topics(endpoint: Endpoint, topics: list[str], oldest_ts: dict[str, int]) -> None:
    present = _partitions(endpoint, topics)
    absent = sorted(set(topics) - set(present))
    if absent:
        raise ConfigError(
            f"topics {absent} do not exist on the target {endpoint.bootstrap}.",
            "create them with the source's partition count (`pulumi up`), then re-run recover",
        )
    admin = admin_client(endpoint)
    with kafka_errors("reading topic configs", endpoint):
        futs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics])
        configs = {res.name: fut.result(timeout=30) for res, fut in futs.items()}
    now = int(time.time() * 1000)
    for topic, cfg in configs.items():
        ts_type = cfg.get("message.timestamp.type")
        if ts_type is not None and ts_type.value == "LogAppendTime":
            raise ConfigError(
                f"target topic {topic!r} uses message.timestamp.type=LogAppendTime, so replayed "
                "records would not keep their timestamps.",
                f"set message.timestamp.type=CreateTime on {topic!r}, then re-run recover",
            )
        for name in ("retention.ms", "message.timestamp.before.max.ms"):
            entry = cfg.get(name)
            if entry is None or entry.value is None:
                continue
            limit = int(entry.value)
            if limit >= 0 and oldest_ts.get(topic, now) < now - limit:
                raise ConfigError(
                    f"target topic {topic!r}: the oldest record to replay is older than {name}={limit} ms; "
                    "the broker would reject it or delete it right after recovery.",
                    f"raise {name} on {topic!r} for the duration of the recovery, then re-run recover",
                )


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with os.fdopen(fd, "a") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


# ----------------------------------------------------------------------------- recover
Row = dict[str, Any]
Fetched = dict[tuple[str, int, int], SourceRecord]


def _elapsed(result: RecoveryResult, t0: float) -> RecoveryResult:
    result.seconds = round(time.monotonic() - t0, 3)
    return result


def _check_source(source: Endpoint | None, source_archive: Path | None) -> None:
    if (source is None) == (source_archive is None):
        raise ConfigError(
            "recover needs exactly one source: a cluster endpoint or an archive path.",
            "pass the source credentials, or --source-archive",
        )
    if source_archive is not None and not Path(source_archive).exists():
        raise ConfigError(f"archive {source_archive} does not exist.", "pass the archive the report was made from")


def _present_in_target(
    target: Endpoint, summary: dict[str, Any], rows: list[Row], parts: dict[str, int], say: Reporter
) -> Counter[Identity]:
    """Step 2: per identity, the copies the target received after the offsets the verification read
    (late replication, an earlier recovery); records after the report's cut-off do not count."""
    wanted_keys: dict[str, set[bytes | None]] = defaultdict(set)
    for r in rows:
        wanted_keys[r["topic"]].add(r["key"])
    cutoff = (summary.get("cutoff") or {}).get("ms")
    now = _offset_ranges(target, [TopicPartition(t, p) for t, n in parts.items() for p in range(n)])
    read_to = summary["offsets"]["target"]
    ranges = {}
    for (t, p), (early, end) in now.items():
        start = read_to.get(t, {}).get(str(p), {}).get("end", early)
        ranges[(t, p)] = (max(start, early), end)
    scanned = sum(e - s for s, e in ranges.values())
    say(f"scanning {scanned:,} target records written since the verification for copies already there")
    present: Counter[Identity] = Counter()
    for m in _scan(target, ranges):
        key = m.key()
        if key not in wanted_keys.get(m.topic(), ()):
            continue
        if cutoff is not None and m.timestamp()[1] > cutoff:
            continue
        present[(m.topic(), key, checksum(m.value(), m.headers()))] += 1
    return present


def _plan(rows: list[Row], present: Counter[Identity], result: RecoveryResult) -> list[Row]:
    """Step 3: per identity, the copies still missing (oldest first); counts go to ``result``."""
    groups: dict[Identity, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r["topic"], r["key"], int(r["checksum"]))].append(r)
    plan: list[Row] = []
    for ident, grp in groups.items():
        grp.sort(key=lambda r: (r["partition"], r["offset"]))
        have = present.get(ident, 0)
        result.already_present += min(have, len(grp))
        plan.extend(grp[min(have, len(grp)) :])
    plan.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    result.to_write = len(plan)
    for t in sorted({r["topic"] for r in rows}):
        result.per_topic[t] = {
            "missing": sum(1 for r in rows if r["topic"] == t),
            "to_write": sum(1 for r in plan if r["topic"] == t),
            "written": 0,
        }
    return plan


def _wanted(plan: list[Row]) -> dict[tuple[str, int], list[int]]:
    wanted: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in plan:
        wanted[(r["topic"], r["partition"])].append(int(r["offset"]))
    for offs in wanted.values():
        offs.sort()
    return wanted


def _check_retention(source: Endpoint, wanted: dict[tuple[str, int], list[int]]) -> None:
    low = _offset_ranges(source, [TopicPartition(t, p) for t, p in wanted])
    gone = sum(1 for (t, p), offs in wanted.items() for o in offs if o < low[(t, p)][0])
    if gone:
        raise ClusterError(
            f"{gone:,} missing records are no longer in the source {source.bootstrap} "
            "(deleted by retention since the verification).",
            "recover them from a Parquet archive with --source-archive, or accept the loss (the report lists them)",
        )


def _read_back(source: Endpoint | None, source_archive: Path | None, plan: list[Row], say: Reporter) -> Fetched:
    """Step 4: the planned records from the source (a cluster or the archive), each checked against
    the report's key and checksum."""
    wanted = _wanted(plan)
    if source is not None:
        say(f"reading {len(plan):,} records back from the source {source.bootstrap}")
        fetched = _fetch_kafka(source, wanted)
    elif source_archive is not None:
        say(f"reading {len(plan):,} records back from the archive {source_archive}")
        fetched = _fetch_archive(Path(source_archive), wanted)
    else:  # _check_source refused this
        raise ConfigError("recover needs a source.", "pass the source credentials, or --source-archive")
    bad = []
    for r in plan:
        rec = fetched.get((r["topic"], r["partition"], int(r["offset"])))
        if rec is None or rec.key != r["key"] or checksum(rec.value, rec.headers) != int(r["checksum"]):
            bad.append(r)
    if bad:
        b = bad[0]
        raise ClusterError(
            f"{len(bad):,} source records no longer match the report (first: {b['topic']} "
            f"partition {b['partition']} offset {b['offset']}); the source changed since the "
            "verification.",
            "run `drctl verify` again and recover from the new report",
        )
    return fetched


@dataclass
class _Deliveries:
    """Delivery reports of one run: ledger rows not yet written, records written per topic, errors."""

    run_id: str
    at: str
    pending: list[Row] = field(default_factory=list)
    written: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def report(self, err: Any, msg: Any, r: Row) -> None:
        if err is not None:
            self.errors.append(f"{r['topic']}/{r['partition']}@{r['offset']}: {err}")
            return
        self.written[r["topic"]] += 1
        self.pending.append(
            {
                "run": self.run_id,
                "at": self.at,
                "topic": r["topic"],
                "source_partition": r["partition"],
                "source_offset": int(r["offset"]),
                "target_partition": msg.partition(),
                "target_offset": msg.offset(),
                "timestamp": int(r["timestamp"]),
                "checksum": int(r["checksum"]),
            }
        )

    def flush_to(self, ledger: Path) -> None:
        if self.pending:
            _write_jsonl(ledger, self.pending)
            self.pending.clear()


def _produce(
    target: Endpoint, plan: list[Row], fetched: Fetched, parts: dict[str, int], ledger: Path, log: _Deliveries
) -> int:
    """Step 5: produce the planned records, keeping key, value, headers, timestamp and partition;
    every delivery goes to the ledger. Returns how many deliveries were still outstanding at the end."""
    producer = Producer(
        target.config(
            **{
                **SILENT,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 20,
                "compression.type": "lz4",
                "message.timeout.ms": 120000,
            }
        )
    )
    for i, r in enumerate(plan):
        rec = fetched[(r["topic"], r["partition"], int(r["offset"]))]
        kwargs: dict[str, Any] = {
            "key": rec.key,
            "value": rec.value,
            "timestamp": rec.timestamp,
            "on_delivery": lambda err, msg, r=r: log.report(err, msg, r),
        }
        if rec.partition < parts[rec.topic]:
            kwargs["partition"] = rec.partition
        if rec.headers:
            kwargs["headers"] = rec.headers
        while True:
            try:
                producer.produce(rec.topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
            log.flush_to(ledger)
    remaining = producer.flush(120)
    log.flush_to(ledger)
    return remaining


def _record_run(result: RecoveryResult, log: _Deliveries, remaining: int) -> None:
    """Counts into ``result`` and one entry in ``recovery-runs.json``."""
    ledger = result.report_dir / LEDGER_FILE
    ledger_lines = 0
    if ledger.exists():
        with open(ledger) as f:
            ledger_lines = sum(1 for _ in f)
    result.ledger = ledger
    result.written = sum(log.written.values())
    for t in result.per_topic:
        result.per_topic[t]["written"] = log.written.get(t, 0)
    runs_path = result.report_dir / RUNS_FILE
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else []
    runs.append(
        {
            "run": result.run_id,
            "at": log.at,
            "to_write": result.to_write,
            "written": result.written,
            "already_present": result.already_present,
            "errors": len(log.errors) + remaining,
            "ledger_lines_total": ledger_lines,
        }
    )
    runs_path.write_text(json.dumps(runs, indent=2) + "\n")


def _replay(
    target: Endpoint,
    plan: list[Row],
    fetched: Fetched,
    parts: dict[str, int],
    result: RecoveryResult,
    say: Reporter,
    t0: float,
) -> None:
    log = _Deliveries(result.run_id, datetime.now(UTC).isoformat(timespec="seconds"))
    say(f"writing {len(plan):,} records to {target.bootstrap}")
    remaining = _produce(target, plan, fetched, parts, result.report_dir / LEDGER_FILE, log)
    _record_run(result, log, remaining)
    _elapsed(result, t0)
    if log.errors or remaining or result.written != len(plan):
        raise ClusterError(
            f"{len(plan) - result.written:,} of {len(plan):,} records were not written "
            f"(first: {log.errors[0] if log.errors else 'delivery timed out'}).",
            "fix the cause and re-run recover: it writes only what is still missing",
        )
    say(f"done: wrote {result.written:,} records in {result.seconds:.1f}s (ledger {LEDGER_FILE})")


def recover(
    report_dir: Path | str,
    *,
    target: Endpoint,
    source: Endpoint | None = None,
    source_archive: Path | None = None,
    dry_run: bool = False,
    progress: Reporter | None = None,
) -> RecoveryResult:
    """Replay the report's missing records from ``source`` (a cluster) or ``source_archive``.

    Idempotent: records whose copies the target already received after the verification (late
    replication, an earlier recovery) are not written again. ``dry_run`` plans without writing.
    """
    say = progress or quiet
    t0 = time.monotonic()
    report_dir = Path(report_dir).resolve()
    summary = load_summary(report_dir)
    result = RecoveryResult(report_dir=report_dir, dry_run=dry_run, run_id=uuid.uuid4().hex[:12])
    _check_source(source, source_archive)
    # 1. the missing rows of the report
    table = read_offending(report_dir, ["missing"])
    rows: list[Row] = table.select(["topic", "partition", "offset", "timestamp", "key", "checksum"]).to_pylist()
    result.missing = len(rows)
    if not rows:
        say("the report lists no missing records: nothing to do")
        return _elapsed(result, t0)
    topics = sorted({r["topic"] for r in rows})
    cluster_metadata(target)  # refused credentials fail here, before any work
    if source is not None:
        cluster_metadata(source)
    say(f"{len(rows):,} missing records in {len(topics)} topics: {', '.join(topics)}")
    parts = _partitions(target, topics)
    plan = _plan(rows, _present_in_target(target, summary, rows, parts, say), result)  # 2. and 3.
    say(f"{result.already_present:,} already present in the target; {result.to_write:,} to write")
    if not plan:
        return _elapsed(result, t0)
    oldest = {t: min(r["timestamp"] for r in plan if r["topic"] == t) for t in {r["topic"] for r in plan}}
    _check_target_topics(target, sorted(oldest), oldest)
    if source is not None:
        _check_retention(source, _wanted(plan))
    if dry_run:
        say(f"dry run: would write {len(plan):,} records; nothing written")
        return _elapsed(result, t0)
    fetched = _read_back(source, source_archive, plan, say)  # 4.
    _replay(target, plan, fetched, parts, result, say, t0)  # 5.
    return result


def run(request: RecoverRequest, *, progress: Reporter | None = None) -> RecoveryResult:
    """The recovery's route (:mod:`verification.route`): :func:`recover` of ``request``."""
    return recover(
        request.report_dir,
        target=request.target,
        source=request.source,
        source_archive=request.source_archive,
        dry_run=request.dry_run,
        progress=progress,
    )
