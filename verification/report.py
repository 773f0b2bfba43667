"""The verification report in ``--out``: ``summary.json``, ``report.html``, ``offending.parquet``.

* ``summary.json`` — the verdict, counts per class per topic and per topic-partition, the topics
  compared and why the others were left out, the exact offset bounds read on both sides, the
  cut-off, the failover it belongs to (when the run was given a context), window counts, timings
  and how the comparison ran. Machine-readable; ``drctl recover`` starts from it. It never holds a
  password (sides are described by bootstrap and user name only; secret-looking context keys are
  dropped).
* ``report.html`` — one self-contained page for a person, every value HTML-escaped: the failover
  box, verdict, topics compared and left out, per-partition counts, a chart of the missing
  messages over time with the cut-off marked (PNG embedded in base64, also written as
  ``missing_over_time.png``), a sample table per class, offset bounds, method and timings.
* ``offending.parquet`` — every offending record with its coordinates (written by the job with
  Spark; columns class, side, topic, partition, offset, timestamp, key, key_hash, checksum).
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
import string
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

from dr.base.errors import ConfigError
from dr.base.files import write_atomic
from verification.classes import CLASSES

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn
    from matplotlib.axes import Axes

__all__ = [
    "CHART_FILE",
    "CUTOFF_COLOUR",
    "HTML_FILE",
    "OFFENDING_DIR",
    "OFFENDING_SCHEMA",
    "SUMMARY_FILE",
    "TIMING_LABELS",
    "OffendingRow",
    "TimelineBin",
    "load_summary",
    "read_offending",
    "render_html",
    "render_missing_chart",
    "timing_label",
    "utc_text",
    "window_lines",
    "windows_per_topic",
    "write_empty_offending",
    "write_report",
]

SUMMARY_FILE = "summary.json"
HTML_FILE = "report.html"
CHART_FILE = "missing_over_time.png"
OFFENDING_DIR = "offending.parquet"

#: Schema of the offending-records Parquet.
OFFENDING_SCHEMA = pa.schema(
    [
        ("class", pa.string()),
        ("side", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("key_hash", pa.int64()),
        ("checksum", pa.int64()),
    ]
)

OffendingRow = TypedDict(
    "OffendingRow",
    {
        "class": str,
        "side": str,
        "topic": str,
        "partition": int,
        "offset": int,
        "timestamp": int,
        "key": bytes | None,
        "key_hash": int,
        "checksum": int,
    },
)
"""One row of :data:`OFFENDING_SCHEMA` as Python builds it ("class" is a keyword: the functional form)."""

#: Colour of the cut-off line on the chart.
CUTOFF_COLOUR = "#c62828"

#: (topic, bin start in epoch ms, count) — one bar segment of the timeline chart.
TimelineBin = tuple[str, int, int]


# ----------------------------------------------------------------------------- helpers
def iso(ms: int | None) -> str:
    """Epoch milliseconds as an ISO-8601 UTC string ('' for None/negative)."""
    if ms is None or ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_text(ms: int | None) -> str:
    """Epoch milliseconds as readable UTC (``2025-10-09 08:53:20.000 UTC``; '' for None/negative)."""
    if ms is None or ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def show_key(key: bytes | None, limit: int = 48) -> str:
    """A key for people: UTF-8 text when printable, else hex; ``(null)`` for a null key."""
    if key is None:
        return "(null)"
    try:
        text = bytes(key).decode("utf-8")
        if text.isprintable():
            return text if len(text) <= limit else text[:limit] + "…"
    except UnicodeDecodeError:
        pass
    hexed = bytes(key).hex()
    return "0x" + (hexed if len(hexed) <= limit else hexed[:limit] + "…")


def show_checksum(value: int) -> str:
    """A signed 64-bit checksum as 16 hex digits."""
    return f"{value & ((1 << 64) - 1):016x}"


# ----------------------------------------------------------------------------- chart
def render_missing_chart(
    bins: Iterable[TimelineBin],
    *,
    bin_ms: int,
    start_ms: int | None = None,
    end_ms: int | None = None,
    title: str = "Missing messages over time",
    cutoff_ms: int | None = None,
) -> bytes:
    """A PNG bar chart of missing records per time bin, stacked by topic; the cut-off as a dashed
    vertical line marked "cut-off" (the time axis is widened to show it).

    The steps: the bars (:func:`_draw_bars`, or a "No missing messages" note), the time range
    (:func:`_set_time_range`), the cut-off (:func:`_mark_cutoff`), then axes and labels."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    bins = [b for b in bins if b[2] > 0]
    fig, ax = plt.subplots(figsize=(10, 3.4), dpi=100)
    try:
        if bins:
            _draw_bars(ax, bins, bin_ms)
        else:
            ax.text(
                0.5,
                0.5,
                "No missing messages",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=14,
                color="#2e7d32",
            )
            ax.set_yticks([])
        if start_ms is not None and end_ms is not None and end_ms > start_ms:
            _set_time_range(ax, start_ms, end_ms, bin_ms=bin_ms, cutoff_ms=cutoff_ms)
        if cutoff_ms is not None:
            _mark_cutoff(ax, cutoff_ms)
        formatter = mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(formatter)
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_xlabel("record timestamp (UTC)", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def _draw_bars(ax: Axes, bins: list[TimelineBin], bin_ms: int) -> None:
    """One bar per bin, the topics stacked in colours of their own, with a legend."""
    import matplotlib.pyplot as plt

    width_days = max(bin_ms, 1) / 86_400_000
    topics = sorted({b[0] for b in bins})
    bottom = {s: 0 for s in sorted({b[1] for b in bins})}
    colors = plt.get_cmap("tab10")
    for i, topic in enumerate(topics):
        xs = [s for t, s, _ in bins if t == topic]
        ys = [n for t, _, n in bins if t == topic]
        dates = [datetime.fromtimestamp(s / 1000, tz=UTC) for s in xs]
        ax.bar(
            dates,  # type: ignore[arg-type]  # matplotlib's stubs take no datetimes (its units do)
            ys,
            width=width_days,
            align="edge",
            bottom=[bottom[s] for s in xs],
            color=colors(i % 10),
            label=topic,
            edgecolor="none",
        )
        for s, n in zip(xs, ys, strict=True):
            bottom[s] += n
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncols=min(4, len(topics)))
    ax.set_ylabel("missing records")


def _set_time_range(ax: Axes, start_ms: int, end_ms: int, *, bin_ms: int, cutoff_ms: int | None) -> None:
    """The time axis spans the records read, widened to show the cut-off."""
    lo, hi = start_ms, end_ms + bin_ms
    if cutoff_ms is not None:
        lo, hi = min(lo, cutoff_ms - bin_ms), max(hi, cutoff_ms + bin_ms)
    left, right = datetime.fromtimestamp(lo / 1000, tz=UTC), datetime.fromtimestamp(hi / 1000, tz=UTC)
    ax.set_xlim(left, right)  # type: ignore[arg-type]  # datetimes: see ax.bar in _draw_bars


def _mark_cutoff(ax: Axes, cutoff_ms: int) -> None:
    """The cut-off as a dashed vertical line, labelled on the side with more room."""
    import matplotlib.dates as mdates

    at = datetime.fromtimestamp(cutoff_ms / 1000, tz=UTC)
    ax.axvline(at, color=CUTOFF_COLOUR, linestyle="--", linewidth=2)  # type: ignore[arg-type]
    x0, x1 = ax.get_xlim()
    right_half = mdates.date2num(at) > (x0 + x1) / 2  # type: ignore[no-untyped-call]  # unannotated in the stubs
    ax.text(
        at,  # type: ignore[arg-type]
        0.97,
        "cut-off " if right_half else " cut-off",
        transform=ax.get_xaxis_transform(),
        ha="right" if right_half else "left",
        va="top",
        fontsize=9,
        color=CUTOFF_COLOUR,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
    )


# ----------------------------------------------------------------------------- HTML
# The page is templates/report.html (string.Template, shipped as package data). Every value put in
# goes through _e (html.escape, quotes included): plain strings are escaped there, and the sections
# are _Html, markup these small functions built from escaped parts (_e, _fmt for numbers). The only
# markup not built here is the chart, a base64 data URI.
_TEMPLATE = ("templates", "report.html")

#: Readable names of the job's timings (``summary["timings"]``); others get :func:`timing_label`'s fallback.
TIMING_LABELS = {
    "spark_start_s": "Spark start (s)",
    "bounds_s": "topics and offset bounds (s)",
    "pass1_s": "pass 1: read and fingerprint both sides (s)",
    "pass2_s": "pass 2: re-read and compare the differing windows (s)",
    "pass2b_s": "pass 2b: look target-only keys up in the whole source (s)",
    "write_s": "offending records and samples (s)",
    "total_s": "total (s)",
    "records_per_s": "records per second (pass 1 records / total)",
}

_NOTES = {  # what a sample row of each class means
    "missing": "no copy in the target",
    "unexpected": "the source never had this key",
    "duplicated": "extra copy of a source record (same content)",
    "corrupted": "the source has this key with other content",
}


class _Html(str):
    """Markup built in this module from escaped parts: :func:`_e` leaves it as is."""


def _e(x: object) -> str:
    return x if isinstance(x, _Html) else html.escape(str(x), quote=True)


def _fmt(n: int | float | None) -> str:
    if n is None:
        return ""
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def _code(x: object) -> _Html:
    return _Html(f"<code>{_e(x)}</code>")


def _td(value: object, *, left: bool = False, cls: str = "") -> _Html:
    text = _fmt(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    classes = " ".join(c for c in ("l" if left else "", cls) if c)
    return _Html(f"<td class='{classes}'>{_e(text)}</td>" if classes else f"<td>{_e(text)}</td>")


def _count(n: int) -> _Html:
    return _td(n, cls="bad" if n else "ok")


def _table(head: list[str], rows: Iterable[Iterable[_Html]], *, left: int = 1) -> str:
    """A table; the first ``left`` header cells are left-aligned; cells come from :func:`_td`."""
    ths = "".join(f"<th class='l'>{_e(h)}</th>" if i < left else f"<th>{_e(h)}</th>" for i, h in enumerate(head))
    trs = "".join("<tr>" + "".join(_e(c) for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{ths}</tr>{trs}</table>"


def _kv_table(rows: Iterable[tuple[str, object]]) -> str:
    return "<table>" + "".join(f"<tr>{_td(k, left=True)}{_td(v, left=True)}</tr>" for k, v in rows) + "</table>"


def _side_text(side: Mapping[str, Any]) -> str:
    if side.get("kind") == "archive":
        return f"archive {side.get('path')}"
    name = side.get("cluster")
    who = f" as {side.get('username')}" if side.get("username") else ""
    return f"{name + ' — ' if name else ''}{side.get('bootstrap')}{who}"


def timing_label(name: str) -> str:
    """A timing's readable label: ``pass1_s`` → ``pass 1: read and fingerprint both sides (s)``."""
    if name in TIMING_LABELS:
        return TIMING_LABELS[name]
    if name.endswith("_per_s"):
        return name.removesuffix("_per_s").replace("_", " ") + " per second"
    if name.endswith("_s"):
        return name.removesuffix("_s").replace("_", " ") + " (s)"
    return name.replace("_", " ")


def windows_per_topic(counts: Mapping[str, Any]) -> str:
    """How many time windows each topic was cut into (``512``, or ``500–512`` when topics differ)."""
    ns = sorted({int(v["windows"]) for v in counts.get("per_topic", {}).values() if v.get("windows")})
    if not ns:
        return "0"
    return f"{ns[0]:,}" if len(ns) == 1 else f"{ns[0]:,}–{ns[-1]:,}"


def window_lines(counts: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The window counts in words, the same in the progress lines and in the report.

    ``counts`` is ``summary["method"]["window_counts"]``: per topic ``windows`` (the time grid),
    ``with_records``, ``differing``, ``reread_source``/``reread_target``, and their totals.
    """
    topics = len(counts.get("per_topic", {}))
    total = int(counts.get("windows", 0))
    return [
        (
            "windows per topic",
            f"{windows_per_topic(counts)} ({total:,} in all over {topics:,} "
            f"topic{'s' if topics != 1 else ''}, {int(counts.get('with_records', 0)):,} "
            "holding records)",
        ),
        ("windows that differ", f"{int(counts.get('differing', 0)):,} of {total:,}"),
        (
            "records re-read",
            f"{int(counts.get('reread_source', 0)):,} source + "
            f"{int(counts.get('reread_target', 0)):,} target (the offset spans of the "
            "differing windows)",
        ),
    ]


def _cutoff_text(summary: Mapping[str, Any]) -> str:
    cutoff = summary.get("cutoff")
    until = (summary.get("target") or {}).get("read_until")
    bound = (
        "; on the target, records at or beyond its end offsets at the promotion (written after it) that match "
        "no source record are counted after the cut-off too, whatever their timestamps"
        if until is not None
        else ""
    )
    if not cutoff:
        return "none — every record read was compared" + bound
    return (
        f"{utc_text(cutoff['ms'])} ({cutoff['ms']} ms) — records after it are not compared, "
        f"on {cutoff.get('applies_to', 'both sides')}" + bound
    )


def _rpo_text(rpo: Mapping[str, Any] | None) -> str:
    if not rpo:
        return "not estimated"
    n, hi = rpo.get("records"), rpo.get("upper_bound")
    span = "unknown" if n is None else (f"{n:,} records" if hi is None or hi == n else f"{n:,}–{hi:,} records")
    age = f"; snapshot {rpo['snapshot_age_s']} s old" if rpo.get("snapshot_age_s") is not None else ""
    return f"{span} ({rpo.get('basis') or 'no basis recorded'}{age})"


def _failover_box(summary: Mapping[str, Any]) -> _Html:
    """The failover this verification belongs to (only when the run was given a context)."""
    f = summary.get("failover")
    if not f:
        return _Html()
    rto = f.get("rto_s")
    missing = summary["totals"]["missing"]
    never = f.get("never_replicated")
    rows: list[tuple[str, object]] = [
        ("mode", f"{f.get('mode') or 'unknown'}" + (f" (stack {f['stack']})" if f.get("stack") else "")),
        ("clusters", f"{f.get('source', '?')} → {f.get('target', '?')}"),
        (
            "RTO",
            "not measured yet"
            if rto is None
            else f"{rto} s (first start → first write acknowledged by {f.get('target', 'the target')})",
        ),
        *(
            (("writes refused everywhere", f"{f['write_outage_s']} s (fence → first acknowledged write)"),)
            if f.get("write_outage_s") is not None
            else ()
        ),
        ("RPO estimate", _rpo_text(f.get("rpo_estimate"))),
        (
            "records never replicated",
            f"{never:,} (measured by the caller)"
            if isinstance(never, int)
            else f"{missing:,} — this verification's missing records: source records before the cut-off that "
            "have no copy on the target",
        ),
        ("cut-off", _cutoff_text(summary)),
        ("journal", _code(f.get("journal") or "unknown")),
    ]
    return _Html(f"<div class='box'><h2>Failover {_e(f.get('failover_id', ''))}</h2>{_kv_table(rows)}</div>")


def _verdict(summary: Mapping[str, Any]) -> _Html:
    totals = summary["totals"]
    if summary["verdict"] == "clean":
        audit = summary.get("method", {}).get("from_audit")
        audited = (
            f" now, {_fmt(audit.get('skipped_source'))} verified by the audits of link {audit.get('link')}"
            if audit
            else ""
        )
        return _Html(
            f"<div class='verdict clean'>CLEAN — every source record has exactly one copy in the target "
            f"({_fmt(totals['source_compared'])} records compared{_e(audited)}). Exit code 0.</div>"
        )
    found = ", ".join(f"{_fmt(totals[c])} {c}" for c in CLASSES if totals[c])
    return _Html(f"<div class='verdict dirty'>DIFFERENCES FOUND — {_e(found)}. Exit code 1.</div>")


def _cards(summary: Mapping[str, Any]) -> _Html:
    totals = summary["totals"]

    def card(n: int, label: str, bad: bool = False) -> str:
        return (
            f"<div class='card{' bad' if bad else ''}'><div class='n'>{_fmt(n)}</div>"
            f"<div class='l'>{_e(label)}</div></div>"
        )

    return _Html(
        "<div class='cards'>"
        + card(totals["source_compared"], "source records compared")
        + card(totals["target_compared"], "target records compared")
        + "".join(card(totals[c], c, bool(totals[c])) for c in CLASSES)
        + card(totals["target_after_cutoff"], "target after cut-off (ignored)")
        + "</div>"
    )


def _topics(summary: Mapping[str, Any]) -> _Html:
    rows = []
    for topic, t in sorted(summary["topics"].items()):
        status = "clean" if not any(t[c] for c in CLASSES) else "differences"
        if t.get("target_absent"):
            status += " (topic absent on the target)"
        rows.append(
            [
                _td(_code(topic), left=True),
                _td(f"{t.get('source_partitions', '')} / {t.get('target_partitions', '')}"),
                _td(t["source_read"]),
                _td(t["target_read"]),
                _td(f"{_fmt(t['source_after_cutoff'])} / {_fmt(t['target_after_cutoff'])}"),
                *(_count(t[c]) for c in CLASSES),
                _td(status, left=True),
            ]
        )
    out = (
        "<h2>Topics compared</h2>"
        + _table(
            [
                "topic",
                "partitions (src / tgt)",
                "source read",
                "target read",
                "after cut-off (src / tgt)",
                *CLASSES,
                "status",
            ],
            rows,
        )
        + "<h2>Topics left out</h2>"
    )
    left_out = summary.get("topics_left_out") or {}
    if not left_out:
        return _Html(out + "<div class='muted'>None: every topic on either side was compared.</div>")
    return _Html(
        out
        + _table(
            ["topic", "on", "why"],
            (
                [
                    _td(_code(t), left=True),
                    _td(v.get("on", ""), left=True),
                    _td(v.get("why", v.get("reason", "")), left=True),
                ]
                for t, v in sorted(left_out.items())
            ),
            left=3,
        )
    )


def _partitions(summary: Mapping[str, Any]) -> _Html:
    out = (
        "<h2>Per partition</h2><div class='muted'>Offending records per topic-partition: <i>missing</i> in "
        "the source partition, the other classes in the target partition (where the offending copy is). "
        "Partitions without differences are not listed.</div>"
    )
    parts = summary.get("partitions") or {}
    if not any(parts.values()):
        return _Html(out + "<div class='muted'>No partition has differences.</div>")
    read = summary.get("offsets", {})

    def n_read(side: str, topic: str, p: str) -> int | str:
        n = read.get(side, {}).get(topic, {}).get(p, {}).get("read")
        return "" if n is None else int(n)

    rows = [
        [
            _td(_code(topic), left=True),
            _td(p),
            _td(n_read("source", topic, p)),
            _td(n_read("target", topic, p)),
            *(_count(int(c.get(k, 0))) for k in CLASSES),
        ]
        for topic, per in sorted(parts.items())
        for p, c in sorted(per.items(), key=lambda kv: int(kv[0]))
    ]
    return _Html(out + _table(["topic", "partition", "source read", "target read", *CLASSES], rows))


def _next_steps(summary: Mapping[str, Any]) -> _Html:
    totals = summary["totals"]
    if summary["verdict"] == "clean":
        return _Html()
    items = []
    if totals["missing"]:
        items.append(
            f"<li><b>{_fmt(totals['missing'])} missing</b>: replay them with "
            f"{_code('drctl recover --report ' + str(summary.get('out_dir') or '<this directory>'))} "
            f"(try {_code('--dry-run')} first), then run the same {_code('drctl verify')} again.</li>"
        )
    if totals["duplicated"]:
        items.append(
            "<li><b>duplicated</b>: extra copies in the target (at-least-once replication). "
            "Consumers must be idempotent for these keys; Kafka cannot delete single records.</li>"
        )
    if totals["corrupted"]:
        items.append(
            "<li><b>corrupted</b>: target records whose key exists in the source but whose content "
            f"matches no source record. Inspect them in {_code(OFFENDING_DIR)} "
            "(target coordinates) before clients read them.</li>"
        )
    if totals["unexpected"]:
        items.append(
            "<li><b>unexpected</b>: target records the source never had, written before the "
            "cut-off. Find the writer (ACLs should make passive topics read-only).</li>"
        )
    return _Html("<h2>What to do next</h2><ul>" + "".join(items) + "</ul>")


def _sample_row(r: Mapping[str, Any]) -> list[_Html]:
    """One offending record: coordinates on each side, readable time, key, checksums."""
    cls, p = r["class"], r["partition"]
    here, ck = str(r["offset"]), show_checksum(r["checksum"])
    src = r.get("source") or {}  # a corrupted record's unmatched source version of the same key, if any
    if r["side"] == "source":
        src_off, tgt_off, src_ck, tgt_ck = here, "—", ck, "—"
    else:
        src_off = "matched" if cls == "duplicated" else "—"
        if src:
            src_off = (
                str(src["offset"])
                if src["partition"] == p
                else f"{src['partition']}:{src['offset']} (partition:offset)"
            )
        src_ck = ck if cls == "duplicated" else (show_checksum(src["checksum"]) if src else "—")
        tgt_off, tgt_ck = here, ck
    note = _NOTES.get(cls, "")
    if src and cls == "corrupted":
        note = "changed in transit: the source record with this key (source offset) has no copy"

    def checksum(text: str) -> _Html:
        return _td(_code(text) if text != "—" else text, left=True)

    return [
        _td(_code(r["topic"]), left=True),
        _td(p),
        _td(src_off),
        _td(tgt_off),
        _td(utc_text(r["timestamp"]) or "", left=True),
        _td(_code(show_key(r["key"])), left=True),
        checksum(src_ck),
        checksum(tgt_ck),
        _td(note, left=True),
    ]


def _samples(summary: Mapping[str, Any], samples: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> _Html:
    totals = summary["totals"]
    out = []
    for c in CLASSES:
        if not totals[c]:
            continue
        rows = (samples or {}).get(c) or []
        out.append(
            f"<h2>Sample of {_e(c)} records</h2><div class='muted'>"
            + (
                f"first {len(rows):,} of {_fmt(totals[c])} (by topic, then time)"
                if rows
                else f"{_fmt(totals[c])} records; no sample with this page"
            )
            + f"; the full list with coordinates is in {_code(OFFENDING_DIR)}.</div>"
        )
        if rows:
            out.append(
                _table(
                    [
                        "topic",
                        "partition",
                        "source offset",
                        "target offset",
                        "timestamp (UTC)",
                        "key",
                        "source checksum",
                        "target checksum",
                        "note",
                    ],
                    (_sample_row(r) for r in rows),
                )
            )
    return _Html("".join(out))


def _offsets(summary: Mapping[str, Any]) -> _Html:
    out = [
        "<h2>Offset bounds read</h2><div class='muted'>Fixed before reading; each side was read exactly in "
        f"{_code('[start, end)')}.</div>"
    ]
    for side in ("source", "target"):
        rows = [
            [_td(_code(topic), left=True), _td(p), _td(b["start"]), _td(b["end"]), _td(b.get("read"))]
            for topic, per in sorted(summary["offsets"][side].items())
            for p, b in sorted(per.items(), key=lambda kv: int(kv[0]))
        ]
        out.append(
            f"<details><summary>{side}</summary>"
            + _table(["topic", "partition", "start", "end", "records read"], rows)
            + "</details>"
        )
    return _Html("".join(out))


def _from_audit_rows(a: Mapping[str, Any]) -> list[tuple[str, object]]:
    """The method rows of a check started from the last audit of the link (``method.from_audit``)."""
    return [
        (
            "started from",
            f"audit run {a.get('audit_runs')} of link {a.get('link')} "
            f"({a.get('audited_at_utc') or 'time unknown'}), state file {a.get('state_file')}",
        ),
        (
            "not read again",
            f"{_fmt(a.get('skipped_source'))} source + {_fmt(a.get('skipped_target'))} target "
            "offsets below the audited bounds (matched by the audits, or in the residue)",
        ),
        (
            "read now",
            f"{_fmt(a.get('read_source'))} source + {_fmt(a.get('read_target'))} target offsets "
            "from the audited bounds to the ends fixed now",
        ),
        (
            "residue re-checked",
            f"{_fmt(a.get('residue_source'))} source + {_fmt(a.get('residue_target'))} target "
            "records unmatched at the audit (in flight, missing or early copies)",
        ),
        (
            "removed by retention",
            f"{_fmt(a.get('lost_source'))} source + {_fmt(a.get('lost_target'))} target offsets "
            f"after the audit, before this check; {_fmt(a.get('missing_gone_from_source', 0))} "
            "missing records gone from the source",
        ),
    ]


def _method(summary: Mapping[str, Any]) -> _Html:
    m = summary["method"]
    spark = summary.get("spark", {})
    rows: list[tuple[str, object]]
    if m.get("from_audit"):
        rows = [
            ("checksum", m["checksum"]),
            ("records matched by", "(topic, key hash, checksum) as multisets — offsets differ under MirrorMaker 2"),
            *_from_audit_rows(m["from_audit"]),
            *((timing_label(k), _fmt(v)) for k, v in summary.get("timings", {}).items()),
        ]
        return _Html("<h2>Method and timings</h2>" + _kv_table(rows))
    rows = [
        ("checksum", m["checksum"]),
        ("records matched by", "(topic, key, checksum) as multisets — offsets differ under MirrorMaker 2"),
        ("pass 1", f"{_fmt(m['pass1_records'])} records read once, summed per time window"),
        *window_lines(m.get("window_counts") or {}),
        ("pass 2", f"{_fmt(m.get('pass2_compared_records'))} records of the differing windows compared by identity"),
        ("key lookup on source", "yes" if m.get("pass2b") else "not needed"),
        ("spark", f"{spark.get('master')} (Spark {spark.get('version')})"),
        *((timing_label(k), _fmt(v)) for k, v in summary.get("timings", {}).items()),
    ]
    return _Html("<h2>Method and timings</h2>" + _kv_table(rows))


@functools.cache
def _page() -> string.Template:
    """The page template shipped in the package (``verification/templates/report.html``)."""
    return string.Template(resources.files("verification").joinpath(*_TEMPLATE).read_text(encoding="utf-8"))


def render_html(
    summary: Mapping[str, Any], *, chart_png: bytes, samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
) -> str:
    """The report page (self-contained: CSS inline, chart embedded); every value HTML-escaped."""
    took = summary.get("timings", {}).get("total_s")
    values: dict[str, object] = {
        "verdict": summary["verdict"],
        "source": _side_text(summary["source"]),
        "target": _side_text(summary["target"]),
        "generated_at": summary["generated_at"],
        "took": f" · took {_fmt(took)} s" if took is not None else "",
        "cutoff": _cutoff_text(summary),
        "failover_box": _failover_box(summary),
        "verdict_box": _verdict(summary),
        "cards": _cards(summary),
        "topics": _topics(summary),
        "partitions": _partitions(summary),
        "chart_png": base64.b64encode(chart_png).decode(),
        "chart_note": " The dashed line marks the cut-off: records after it are not compared."
        if summary.get("cutoff")
        else "",
        "next_steps": _next_steps(summary),
        "samples": _samples(summary, samples),
        "offsets": _offsets(summary),
        "method": _method(summary),
    }
    return _page().substitute({name: _e(value) for name, value in values.items()})


# ----------------------------------------------------------------------------- files
def write_empty_offending(out_dir: Path) -> Path:
    """Write an offending-records Parquet with the schema and no rows."""
    d = Path(out_dir) / OFFENDING_DIR
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(OFFENDING_SCHEMA.empty_table(), d / "part-00000.parquet")
    return d


def write_report(
    out_dir: Path,
    summary: dict[str, Any],
    *,
    timeline: list[TimelineBin],
    bin_ms: int,
    samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    range_ms: tuple[int, int] | None = None,
) -> dict[str, Path]:
    """Write ``summary.json``, the chart PNG and ``report.html``; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cutoff = (summary.get("cutoff") or {}).get("ms")
    png = render_missing_chart(
        timeline,
        bin_ms=bin_ms,
        start_ms=range_ms[0] if range_ms else None,
        end_ms=range_ms[1] if range_ms else None,
        cutoff_ms=cutoff,
    )
    paths = {
        "summary": out_dir / SUMMARY_FILE,
        "html": out_dir / HTML_FILE,
        "chart": out_dir / CHART_FILE,
        "offending": out_dir / OFFENDING_DIR,
    }
    write_atomic(paths["chart"], png, 0o644)
    write_atomic(paths["summary"], json.dumps(summary, indent=2, sort_keys=False) + "\n", 0o644)
    write_atomic(paths["html"], render_html(summary, chart_png=png, samples=samples), 0o644)
    return paths


def load_summary(report_dir: Path) -> dict[str, Any]:
    """Read ``summary.json`` of a report directory (:class:`ConfigError` when absent or invalid)."""
    path = Path(report_dir) / SUMMARY_FILE
    try:
        summary: dict[str, Any] = json.loads(path.read_text())
        return summary
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} does not exist.", "pass the --out directory of a `drctl verify` run") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg}).", "re-run `drctl verify` to rebuild it") from exc


def read_offending(report_dir: Path, classes: Iterable[str] | None = None) -> pa.Table:
    """The offending records of a report, optionally only some classes."""
    path = Path(report_dir) / OFFENDING_DIR
    if not path.exists():
        raise ConfigError(f"{path} does not exist.", "pass the --out directory of a `drctl verify` run")
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(path), format="parquet", schema=OFFENDING_SCHEMA)
    flt = ds.field("class").isin(list(classes)) if classes is not None else None
    return dataset.to_table(filter=flt)
