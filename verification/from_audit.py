"""The failover's integrity check, started from the last audit of the link A→B.

When ``drctl audit`` keeps a state file for the link (:mod:`verification.audit_state`), every
source record below its source bounds was either matched with a copy below its target bounds or
kept in the residue, and every target record below the target bounds was either matched or kept
in the residue. So the records still to compare are exactly

* source: the source residue (in flight or missing at the audit) + ``[source bound, end)``;
* target: the target residue + ``[target bound, end)``,

and the audited-and-matched pairs, equal on both sides, cannot change a multiset difference: the
missing records found on these sets are, identity by identity, those the full verification finds
(:func:`compare`). Records after the cut-off are left out on both sides, as in the full job; so are,
as there, target records at or beyond :attr:`~verification.sides.KafkaSide.until` (B's end offsets at
the promotion) that match no source record.

**Mechanism.** The audit's own increment, read up to the end offsets fixed now, with the cut-off
applied and every unmatched source record counted as *missing* — the link is stopped at the
integrity step, so nothing is in flight any more. Chosen over running the Spark job from per-partition
starting offsets with the residue fed in because (1) the residue is scattered below the bounds (a
record missing since long ago stays in it): Spark's Kafka source reads one contiguous range per
partition, so feeding it in means either re-reading from the oldest residue offset or building
DataFrames from records fetched elsewhere; (2) after an audit the increment is small, and reading it
with one confluent-kafka consumer costs less than starting a Spark session; (3) the audit's
fingerprints are the Spark job's numbers (:func:`verification.fingerprint.key_hash` /
:func:`~verification.fingerprint.checksum`), so nothing new decides what matches.

Measured (``benchmarks/verify_bench.py --records 300000 --profiles audit``; 2 CPUs, load average 11):
after 1% new data the check started from the audit took 2.2 s against 42.5 s for the full
verification of the same topic (5.3%); the audit itself 2.1 s (5.0%).

The report directory has the full job's files (``summary.json`` with ``method.from_audit``,
``report.html``, ``offending.parquet`` with the missing records' keys fetched back from the source
by their coordinates), so ``drctl recover --report DIR`` replays it unchanged.

The full verification runs instead (``FromAudit.result`` is None, ``started_from`` says why) when
no audit state exists, when the file is damaged, foreign or from a re-created cluster or topic,
when the audits read records stamped after the cut-off (:func:`audited_after_cutoff`),
when the increment is too large to be worth reading in one process (:func:`worth_it`), and when
target records past the audit match nothing read now: telling a duplicate from a corrupted or
unexpected record needs the whole source, which only the full job reads.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dr.base.errors import ConfigError
from verification.audit_state import AuditState, Fingerprint, Offsets, StateIdentity, load_state, match_increment
from verification.classes import CLASSES
from verification.link_ref import LinkRef
from verification.progress import Reporter, quiet
from verification.report import (
    OFFENDING_DIR,
    OFFENDING_SCHEMA,
    OffendingRow,
    utc_text,
    write_empty_offending,
    write_report,
)
from verification.result import StartedFrom, TopicRow, VerificationResult, safe_context, summary_document
from verification.route import FromAuditRequest, FullVerificationNeeded
from verification.sides import KafkaSide, Until, beyond

__all__ = [
    "Comparison",
    "FromAudit",
    "Plan",
    "audited_after_cutoff",
    "compare",
    "plan",
    "run",
    "verify_from_audit",
    "worth_it",
]

#: An increment up to this many offsets (both sides) is always read in one process (~25 s).
SMALL_INCREMENT = 1_000_000
#: One confluent-kafka process fingerprints about a quarter as fast as the Spark job reads on this
#: class of machine: beyond SMALL_INCREMENT, start from the audit while the increment is under a
#: quarter of everything the full verification would read.
FULL_READ_FACTOR = 4

Ranges = dict[str, dict[int, tuple[int, int]]]


@dataclass(frozen=True)
class Plan:
    """What to read when starting from an audit, and what the audit spares."""

    source_ranges: Ranges
    target_ranges: Ranges
    source_residue: list[Fingerprint]
    target_residue: list[Fingerprint]
    skipped_source: int
    """Source offsets below the audit's bounds, not read again (matched by the audit, or residue)."""
    skipped_target: int
    lost_source: int
    """Offsets retention removed from the source after the audit and before it read them."""
    lost_target: int

    @property
    def to_read(self) -> int:
        """Offsets to read on both sides."""
        return sum(e - s for r in (self.source_ranges, self.target_ranges) for ps in r.values() for s, e in ps.values())


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing what is left after the audit."""

    matched: int
    missing: list[Fingerprint]
    target_unmatched: list[Fingerprint]
    compared: dict[str, dict[str, int]]
    """topic → ``source``/``target`` → records compared (read now or residue, before the cut-off)."""
    after_cutoff: dict[str, dict[str, int]]


@dataclass(frozen=True)
class FromAudit:
    """What :func:`verify_from_audit` did: a result, or None and why the full verification must run."""

    result: VerificationResult | None
    started_from: StartedFrom


def _restrict(o: Offsets, topics: set[str]) -> Offsets:
    return {t: dict(ps) for t, ps in o.items() if t in topics}


def plan(
    state: AuditState,
    source_now: dict[tuple[str, int], tuple[int, int]],
    target_now: dict[tuple[str, int], tuple[int, int]],
    *,
    topics: Iterable[str],
    state_file: Path,
) -> Plan:
    """The ranges ``[audited bound, end)`` of ``topics`` on each side and the residue to re-check.

    ``*_now`` map ``(topic, partition) → (earliest, end)`` as fixed now. A partition the audit never
    saw is read from its earliest offset. A bound past a partition's end (topic re-created) is a
    :class:`ConfigError`, as for the audit itself.
    """
    from verification.audit import plan_ranges

    chosen = set(topics)
    src_prev, dst_prev = _restrict(state.source_bounds, chosen), _restrict(state.target_bounds, chosen)
    src_now = {k: v for k, v in source_now.items() if k[0] in chosen}
    dst_now = {k: v for k, v in target_now.items() if k[0] in chosen}
    src_ranges, _b, lost_s = plan_ranges(
        src_prev, src_now, side="source", state_file=state_file, stack=state.stack, link=state.link
    )
    dst_ranges, _b, lost_t = plan_ranges(
        dst_prev, dst_now, side="target", state_file=state_file, stack=state.stack, link=state.link
    )

    def skipped(ranges: Ranges, now: dict[tuple[str, int], tuple[int, int]]) -> int:
        return sum(max(0, ranges[t][p][0] - early) for (t, p), (early, _e) in now.items())

    return Plan(
        source_ranges=src_ranges,
        target_ranges=dst_ranges,
        source_residue=[f for f in state.source_residue if f.topic in chosen],
        target_residue=[f for f in state.target_residue if f.topic in chosen],
        skipped_source=skipped(src_ranges, src_now),
        skipped_target=skipped(dst_ranges, dst_now),
        lost_source=lost_s,
        lost_target=lost_t,
    )


def audited_after_cutoff(state: AuditState, cutoff_ms: int | None) -> str | None:
    """Why the audit cannot be the start when records it matched may lie after ``cutoff_ms``, else None.

    The full verification leaves out records after the cut-off on both sides; a pair the audit
    matched across the cut-off (a source record before it, the copy of an equal record after it)
    would hide a record the full verification finds missing. When every audited timestamp is at or
    before the cut-off, every audited pair is compared by the full verification too.
    """
    if cutoff_ms is None:
        return None
    if state.max_ts is None:
        return (
            f"the audit state of link {state.link} does not record the latest timestamp it read (written by an "
            f"older drctl); `drctl audit --link {state.link} --reset` records it"
        )
    latest = max(state.max_ts.values())
    if latest > cutoff_ms:
        return (
            f"the audits of link {state.link} read records stamped {utc_text(latest)}, after the cut-off "
            f"{utc_text(cutoff_ms)}"
        )
    return None


def worth_it(to_read: int, full_read: int) -> bool:
    """True when reading ``to_read`` offsets in one process beats the full job reading ``full_read``."""
    return to_read <= SMALL_INCREMENT or to_read * FULL_READ_FACTOR < full_read


def compare(
    source: Iterable[Fingerprint], target: Iterable[Fingerprint], cutoff_ms: int | None, until: Until | None = None
) -> Comparison:
    """Match source against target records (residue + read now), records after ``cutoff_ms`` left out.

    Every unmatched source record is missing: the integrity step runs with the link stopped. A target
    record at or beyond ``until`` (:attr:`~verification.sides.KafkaSide.until`) may match a source record
    (a copy recovery wrote after the promotion); left unmatched it is counted after the cut-off, never
    offending.
    """
    compared: dict[str, dict[str, int]] = defaultdict(lambda: {"source": 0, "target": 0})
    late: dict[str, dict[str, int]] = defaultdict(lambda: {"source": 0, "target": 0})
    kept: dict[str, list[Fingerprint]] = {"source": [], "target": []}
    for side, fps in (("source", source), ("target", target)):
        for f in fps:
            if cutoff_ms is not None and f.ts > cutoff_ms:
                late[f.topic][side] += 1
                compared.setdefault(f.topic, {"source": 0, "target": 0})
            else:
                compared[f.topic][side] += 1
                kept[side].append(f)
    inc = match_increment(kept["source"], kept["target"], {})
    unmatched = []
    for f in inc.target_unmatched:
        if beyond(until, f.topic, f.partition, f.offset):
            late[f.topic]["target"] += 1
            compared[f.topic]["target"] -= 1
        else:
            unmatched.append(f)
    return Comparison(
        matched=inc.matched,
        missing=sorted([*inc.in_flight, *inc.missing]),
        target_unmatched=unmatched,
        compared=dict(compared),
        after_cutoff=dict(late),
    )


def offending_rows(
    missing: list[Fingerprint], fetched: dict[tuple[str, int, int], Any]
) -> tuple[list[OffendingRow], int, Fingerprint | None]:
    """``offending.parquet`` rows for the missing records, from the source records read back by
    coordinates; also how many are gone from the source (retention, compaction), and the first
    whose content no longer matches its fingerprint (the topic was re-created), if any."""
    from verification.fingerprint import checksum, key_hash

    rows: list[OffendingRow] = []
    gone = 0
    for f in missing:
        rec = fetched.get((f.topic, f.partition, f.offset))
        if rec is None:
            gone += 1
            continue
        if key_hash(f.topic, rec.key) != f.key_hash or checksum(rec.value, rec.headers or []) != f.checksum:
            return [], gone, f
        rows.append(
            {
                "class": "missing",
                "side": "source",
                "topic": f.topic,
                "partition": f.partition,
                "offset": f.offset,
                "timestamp": f.ts,
                "key": rec.key,
                "key_hash": f.key_hash,
                "checksum": f.checksum,
            }
        )
    rows.sort(key=lambda r: (r["topic"], r["timestamp"], r["partition"], r["offset"]))
    return rows, gone, None


def started_from(state: AuditState, state_file: Path, p: Plan) -> StartedFrom:
    """What the journal and the report say about the audit the check started from."""
    return {
        "audit": True,
        "state_file": str(state_file),
        "link": state.link,
        "audit_runs": state.runs,
        "audited_at_ms": state.updated_ms,
        "audited_at_utc": utc_text(state.updated_ms),
        "verified_by_audits": state.verified_total,
        "skipped_source": p.skipped_source,
        "skipped_target": p.skipped_target,
        "residue_source": len(p.source_residue),
        "residue_target": len(p.target_residue),
        "read_source": sum(e - s for ps in p.source_ranges.values() for s, e in ps.values()),
        "read_target": sum(e - s for ps in p.target_ranges.values() for s, e in ps.values()),
        "lost_source": p.lost_source,
        "lost_target": p.lost_target,
        "bounds": {
            side: {
                t: {str(q): b for q, b in sorted(ps.items())}
                for t, ps in sorted(bounds.items())
                if t in p.source_ranges or t in p.target_ranges
            }
            for side, bounds in (("source", state.source_bounds), ("target", state.target_bounds))
        },
    }


def _fallback(reason: str, say: Reporter) -> FromAudit:
    say(f"full verification: {reason}")
    return FromAudit(None, {"audit": False, "reason": reason})


class _Fallback(Exception):
    """Why this check cannot start from the audit: the caller runs the full verification instead."""


@dataclass(frozen=True)
class _Planned:
    """The audit state, the offsets fixed now and what is left to read between them."""

    state: AuditState
    p: Plan
    src_topics: dict[str, int]
    src_now: dict[tuple[str, int], tuple[int, int]]
    dst_now: dict[tuple[str, int], tuple[int, int]]


@dataclass(frozen=True)
class _Read:
    """The records read past the audit, compared with the residue, and the offending rows."""

    new_src: list[Fingerprint]
    new_dst: list[Fingerprint]
    cmp: Comparison
    rows: list[OffendingRow]
    gone: int
    timings: dict[str, float]


def verify_from_audit(
    *,
    source: KafkaSide,
    target: KafkaSide,
    out_dir: Path | str,
    topics: list[str],
    cutoff_ms: int | None,
    state_file: Path,
    stack: str,
    link: str,
    source_cluster: str,
    target_cluster: str,
    progress: Reporter | None = None,
    context: dict[str, Any] | None = None,
    sample_size: int = 20,
) -> FromAudit:
    """Verify ``source`` vs ``target`` from the audit state in ``state_file`` (see the module docstring).

    Returns the result (report written to ``out_dir``), or no result and the reason the caller must
    run the full verification — a damaged state file is such a reason, never an error. The steps:
    load the state and plan the ranges past it (:func:`_plan_from_state`), say what the audit spares
    (:func:`_announce`), read and compare the rest (:func:`_read_and_compare`), write the report
    (:func:`_report`).
    """
    say = progress or quiet
    t0 = time.monotonic()
    started_at = datetime.now(UTC)
    try:
        planned = _plan_from_state(
            source=source,
            target=target,
            topics=topics,
            cutoff_ms=cutoff_ms,
            state_file=Path(state_file),
            stack=stack,
            link=link,
            clusters=(source_cluster, target_cluster),
        )
        origin = _announce(planned, Path(state_file), link, say)
        read = _read_and_compare(source, target, planned.p, cutoff_ms)
    except _Fallback as reason:
        return _fallback(str(reason), say)
    origin["missing_gone_from_source"] = read.gone
    result = _report(
        planned,
        read,
        origin,
        source=source,
        target=target,
        out=Path(out_dir).resolve(),
        requested=list(topics),
        cutoff_ms=cutoff_ms,
        context=context,
        started_at=started_at,
        sample_size=sample_size,
        t0=t0,
    )
    tot = result.summary["totals"]
    say(
        f"verdict: {result.summary['verdict']} — "
        + ", ".join(f"{tot[c]:,} {c}" for c in CLASSES)
        + f"; report in {result.out_dir}"
    )
    return FromAudit(result, origin)


def run(request: FromAuditRequest, *, progress: Reporter | None = None) -> VerificationResult:
    """The route started from an audit (:mod:`verification.route`): :func:`verify_from_audit` of ``request``;
    the result's ``started_from`` describes the audit. Raises :class:`FullVerificationNeeded` (saying why)
    when the audit state cannot be used."""
    started = verify_from_audit(
        source=request.source,
        target=request.target,
        out_dir=request.out_dir,
        topics=request.topics,
        cutoff_ms=request.cutoff_ms,
        state_file=request.state_file,
        **request.ref.fields(),
        progress=progress,
        context=request.context,
        sample_size=request.sample_size,
    )
    if started.result is None:
        raise FullVerificationNeeded(str(started.started_from["reason"]))
    return replace(started.result, started_from=started.started_from)


def _plan_from_state(
    *,
    source: KafkaSide,
    target: KafkaSide,
    topics: list[str],
    cutoff_ms: int | None,
    state_file: Path,
    stack: str,
    link: str,
    clusters: tuple[str, str],
) -> _Planned:
    """Load the audit state of both clusters, fix the offsets now and plan the ranges past the audit.

    Raises :class:`_Fallback` when there is no usable state, it was audited after the cut-off, or
    reading everything again is faster.
    """
    from dr.kafka import client as kafka_client
    from verification.audit import _offsets, _topics, cluster_id

    if not state_file.exists():
        raise _Fallback(f"no audit of link {link} ({state_file} does not exist)")
    src_admin, src_md = kafka_client.connected_admin(source.endpoint, 30.0, attempt=2.0)
    dst_admin, dst_md = kafka_client.connected_admin(target.endpoint, 30.0, attempt=2.0)
    try:
        state = load_state(
            state_file,
            StateIdentity(
                ref=LinkRef(stack=stack, link=link, source=clusters[0], target=clusters[1]),
                source_id=cluster_id(src_admin, source.endpoint),
                target_id=cluster_id(dst_admin, target.endpoint),
            ),
        )
    except (ConfigError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _Fallback(f"the audit state cannot be used: {exc}") from exc
    if state is None:
        raise _Fallback(f"no audit of link {link} ({state_file} does not exist)")
    late = audited_after_cutoff(state, cutoff_ms)
    if late:
        raise _Fallback(late)
    wanted = set(topics)
    src_topics = _topics(src_md, lambda t: t in wanted)
    src_now = _offsets(src_admin, source.endpoint, src_topics)
    dst_now = _offsets(dst_admin, target.endpoint, {t: n for t, n in _topics(dst_md).items() if t in wanted})
    try:
        p = plan(state, src_now, dst_now, topics=sorted(wanted), state_file=state_file)
    except ConfigError as exc:
        raise _Fallback(f"the audit state cannot be used: {exc}") from exc
    full_read = sum(e - s for side in (src_now, dst_now) for s, e in side.values())
    if not worth_it(p.to_read, full_read):
        raise _Fallback(
            f"{p.to_read:,} offsets arrived since the last audit of {link} (of {full_read:,}): "
            "the Spark job reads them faster"
        )
    return _Planned(state, p, src_topics, src_now, dst_now)


def _announce(planned: _Planned, state_file: Path, link: str, say: Reporter) -> StartedFrom:
    """What the audit spares (:func:`started_from`), said before reading."""
    p, state = planned.p, planned.state
    origin = started_from(state, state_file, p)
    say(
        f"starting from audit run {state.runs} of {link} ({origin['audited_at_utc']}): "
        f"{p.skipped_source:,} source + {p.skipped_target:,} target records already verified are not read; "
        f"reading {origin['read_source']:,} + {origin['read_target']:,} new, re-checking a residue of "
        f"{len(p.source_residue):,} + {len(p.target_residue):,}"
    )
    return origin


def _read_and_compare(source: KafkaSide, target: KafkaSide, p: Plan, cutoff_ms: int | None) -> _Read:
    """Read the ranges past the audit, compare them with the residue, fetch the missing source records.

    Raises :class:`_Fallback` when a target record matches nothing read now, or a missing source
    record no longer matches the audit's fingerprint.
    """
    from verification.audit import read_fingerprints
    from verification.recover import _fetch_kafka

    t = time.monotonic()
    new_src = read_fingerprints(source.endpoint, p.source_ranges)
    new_dst = read_fingerprints(target.endpoint, p.target_ranges)
    read_s = time.monotonic() - t
    t = time.monotonic()
    cmp = compare([*p.source_residue, *new_src], [*p.target_residue, *new_dst], cutoff_ms, target.until)
    match_s = time.monotonic() - t
    if cmp.target_unmatched:
        raise _Fallback(
            f"{len(cmp.target_unmatched):,} target records past the audit match no source record read "
            "now; telling duplicated from corrupted or unexpected needs the whole source"
        )
    t = time.monotonic()
    wanted_offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for f in cmp.missing:
        wanted_offsets[(f.topic, f.partition)].append(f.offset)
    fetched = _fetch_kafka(source.endpoint, {k: sorted(v) for k, v in wanted_offsets.items()}) if cmp.missing else {}
    rows, gone, changed = offending_rows(cmp.missing, fetched)
    if changed is not None:
        raise _Fallback(
            f"source record {changed.topic}-{changed.partition}@{changed.offset} no longer matches the "
            "audit's fingerprint (topic re-created?)"
        )
    fetch_s = time.monotonic() - t
    timings = {"read_s": round(read_s, 3), "match_s": round(match_s, 3), "fetch_missing_s": round(fetch_s, 3)}
    return _Read(new_src, new_dst, cmp, rows, gone, timings)


def _report(
    planned: _Planned,
    read: _Read,
    origin: StartedFrom,
    *,
    source: KafkaSide,
    target: KafkaSide,
    out: Path,
    requested: list[str],
    cutoff_ms: int | None,
    context: dict[str, Any] | None,
    started_at: datetime,
    sample_size: int,
    t0: float,
) -> VerificationResult:
    """Write the report directory of a check started from the audit."""
    p = planned.p
    read_counts = {
        "source": Counter((f.topic, f.partition) for f in read.new_src),
        "target": Counter((f.topic, f.partition) for f in read.new_dst),
    }
    fps = (read.new_src, read.new_dst, p.source_residue, p.target_residue)
    stamps = [f.ts for side in fps for f in side if f.ts >= 0]
    return _write(
        out=out,
        source=source,
        target=target,
        topics=sorted(planned.src_topics),
        requested=requested,
        p=p,
        cmp=read.cmp,
        rows=read.rows,
        origin=origin,
        read_counts=read_counts,
        src_now=planned.src_now,
        dst_now=planned.dst_now,
        cutoff_ms=cutoff_ms,
        context=context,
        ts_range=(min(stamps), max(stamps)) if stamps else None,
        started_at=started_at,
        sample_size=sample_size,
        timings=read.timings,
        t0=t0,
    )


def _per_topic(
    topics: list[str],
    cmp: Comparison,
    rows: list[OffendingRow],
    src_now: dict[tuple[str, int], tuple[int, int]],
    dst_now: dict[tuple[str, int], tuple[int, int]],
) -> dict[str, TopicRow]:
    """``summary["topics"]``: per topic, records read, after the cut-off, compared, and the counts per class."""
    missing_by_topic = Counter(r["topic"] for r in rows)
    per_topic: dict[str, TopicRow] = {}
    for tp in topics:
        c, late = cmp.compared.get(tp, {"source": 0, "target": 0}), cmp.after_cutoff.get(tp, {"source": 0, "target": 0})
        per_topic[tp] = {
            "source_read": c["source"] + late["source"],
            "target_read": c["target"] + late["target"],
            "source_after_cutoff": late["source"],
            "target_after_cutoff": late["target"],
            "source_compared": c["source"],
            "target_compared": c["target"],
            "missing": missing_by_topic.get(tp, 0),
            "unexpected": 0,
            "duplicated": 0,
            "corrupted": 0,
            "target_absent": not any(k[0] == tp for k in dst_now),
            "source_partitions": sum(1 for k in src_now if k[0] == tp),
            "target_partitions": sum(1 for k in dst_now if k[0] == tp),
        }
    return per_topic


def _partitions(rows: list[OffendingRow]) -> dict[str, dict[str, dict[str, int]]]:
    """``summary["partitions"]``: missing records per topic-partition (the only class found here)."""
    partitions: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        per = partitions.setdefault(r["topic"], {}).setdefault(str(r["partition"]), {c: 0 for c in CLASSES})
        per["missing"] += 1
    return partitions


def _offsets_read(ranges: Ranges, read: Counter[tuple[str, int]]) -> dict[str, dict[str, dict[str, int]]]:
    """``summary["offsets"][side]``: per partition the range read now and how many records it held."""
    return {
        tp: {str(q): {"start": s, "end": e, "read": read.get((tp, q), 0)} for q, (s, e) in sorted(ps.items())}
        for tp, ps in sorted(ranges.items())
    }


def _method(p: Plan, origin: StartedFrom, read_counts: dict[str, Counter[tuple[str, int]]]) -> dict[str, Any]:
    """``summary["method"]`` of a check started from the audit: no windows, no Spark pass."""
    return {
        "identity": "(topic, key_hash, checksum), compared as multisets",
        "windows": 0,
        "window_counts": {
            "per_topic": {},
            "windows": 0,
            "with_records": 0,
            "differing": 0,
            "reread_source": 0,
            "reread_target": 0,
        },
        "pass1_records": sum(sum(c.values()) for c in read_counts.values()),
        "differing_windows": 0,
        "kafka_reads_per_side": 1,
        "fingerprints": None,
        "pass2_offsets": 0,
        "pass2_compared_records": len(p.source_residue) + len(p.target_residue),
        "pass2b": False,
        "from_audit": origin,
    }


def _write_offending(out: Path, rows: list[OffendingRow]) -> None:
    """``offending.parquet``: the missing records, replacing what an earlier run left there."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for old in (out / OFFENDING_DIR).glob("*.parquet"):
        old.unlink()
    if not rows:
        write_empty_offending(out)
        return
    (out / OFFENDING_DIR).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OFFENDING_SCHEMA), out / OFFENDING_DIR / "part-00000.parquet")


def _timeline(
    rows: list[OffendingRow], ts_range: tuple[int, int] | None
) -> tuple[list[tuple[str, int, int]], int, tuple[int, int]]:
    """The missing records per topic and time bin (about 120 bins), the bin width and the chart's range."""
    now = int(time.time() * 1000)
    t_lo, t_hi = ts_range or (now - 3_600_000, now)
    t_hi = max(t_hi, t_lo + 1)
    bin_ms = max(1, -(-(t_hi - t_lo) // 120))
    bins = Counter((r["topic"], t_lo + (r["timestamp"] - t_lo) // bin_ms * bin_ms) for r in rows)
    return [(tp, b, n) for (tp, b), n in sorted(bins.items())], bin_ms, (t_lo, t_hi)


def _write(
    *,
    out: Path,
    source: KafkaSide,
    target: KafkaSide,
    topics: list[str],
    requested: list[str],
    p: Plan,
    cmp: Comparison,
    rows: list[OffendingRow],
    origin: StartedFrom,
    read_counts: dict[str, Counter[tuple[str, int]]],
    src_now: dict[tuple[str, int], tuple[int, int]],
    dst_now: dict[tuple[str, int], tuple[int, int]],
    cutoff_ms: int | None,
    context: dict[str, Any] | None,
    ts_range: tuple[int, int] | None,
    started_at: datetime,
    sample_size: int,
    timings: dict[str, float],
    t0: float,
) -> VerificationResult:
    """Write the report directory (the full job's files) and return the result."""
    out.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    _write_offending(out, rows)
    summary = summary_document(
        source=source,
        target=target,
        out=out,
        started_at=started_at,
        failover=safe_context(context),
        requested=requested,
        topics=topics,
        left_out={},
        cutoff_ms=cutoff_ms,
        per_topic=_per_topic(topics, cmp, rows, src_now, dst_now),
        partitions=_partitions(rows),
        offsets={
            "source": _offsets_read(p.source_ranges, read_counts["source"]),
            "target": _offsets_read(p.target_ranges, read_counts["target"]),
        },
        method=_method(p, origin, read_counts),
        spark={"master": "none: the increment since the audit was read with confluent-kafka", "version": "-"},
    )
    timings["write_s"] = round(time.monotonic() - t, 3)
    timings["total_s"] = round(time.monotonic() - t0, 3)
    summary["timings"] = timings
    timeline, bin_ms, range_ms = _timeline(rows, ts_range)
    samples = {"missing": rows[:sample_size]} if rows else {}
    write_report(out, summary, timeline=timeline, bin_ms=bin_ms, samples=samples, range_ms=range_ms)
    return VerificationResult(summary, out)
