"""The verification report in ``--out``: ``summary.json``, ``report.html``, ``offending.parquet``.

* ``summary.json`` — the verdict, counts per class per topic, the exact offset bounds read on both
  sides, the cut-off, timings and how the comparison ran. Machine-readable; ``drctl recover``
  starts from it. It never holds a password (sides are described by bootstrap and user name only).
* ``report.html`` — one self-contained page for a person: verdict, per-topic table, a chart of the
  missing messages over time (PNG embedded in base64, also written as ``missing_over_time.png``),
  samples of each class, offset bounds and timings.
* ``offending.parquet`` — every offending record with its coordinates (written by the job with
  Spark; columns class, side, topic, partition, offset, timestamp, key, key_hash, checksum).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dr.errors import ConfigError
from verification.classes import CLASSES

__all__ = [
    "CHART_FILE",
    "HTML_FILE",
    "OFFENDING_DIR",
    "OFFENDING_SCHEMA",
    "SUMMARY_FILE",
    "TimelineBin",
    "load_summary",
    "read_offending",
    "render_html",
    "render_missing_chart",
    "write_empty_offending",
    "write_report",
]

SUMMARY_FILE = "summary.json"
HTML_FILE = "report.html"
CHART_FILE = "missing_over_time.png"
OFFENDING_DIR = "offending.parquet"

#: Schema of the offending-records Parquet.
OFFENDING_SCHEMA = pa.schema([
    ("class", pa.string()), ("side", pa.string()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()),
    ("key", pa.binary()), ("key_hash", pa.int64()), ("checksum", pa.int64()),
])

#: (topic, bin start in epoch ms, count) — one bar segment of the timeline chart.
TimelineBin = tuple[str, int, int]

_CLASSES = CLASSES


# ----------------------------------------------------------------------------- helpers
def iso(ms: int | None) -> str:
    """Epoch milliseconds as an ISO-8601 UTC string ('' for None/negative)."""
    if ms is None or ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


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


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- chart
def render_missing_chart(bins: Iterable[TimelineBin], *, bin_ms: int, start_ms: int | None = None,
                         end_ms: int | None = None, title: str = "Missing messages over time") -> bytes:
    """A PNG bar chart of missing records per time bin, stacked by topic."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    bins = [b for b in bins if b[2] > 0]
    fig, ax = plt.subplots(figsize=(10, 3.4), dpi=100)
    try:
        width_days = max(bin_ms, 1) / 86_400_000
        if bins:
            topics = sorted({b[0] for b in bins})
            starts = sorted({b[1] for b in bins})
            bottom = {s: 0 for s in starts}
            colors = plt.get_cmap("tab10")
            for i, topic in enumerate(topics):
                xs = [s for t, s, _ in bins if t == topic]
                ys = [n for t, _, n in bins if t == topic]
                dates = [datetime.fromtimestamp(s / 1000, tz=timezone.utc) for s in xs]
                ax.bar(dates, ys, width=width_days, align="edge", bottom=[bottom[s] for s in xs],
                       color=colors(i % 10), label=topic, edgecolor="none")
                for s, n in zip(xs, ys):
                    bottom[s] += n
            ax.legend(loc="upper left", fontsize=8, frameon=False, ncols=min(4, len(topics)))
            ax.set_ylabel("missing records")
        else:
            ax.text(0.5, 0.5, "No missing messages", ha="center", va="center", transform=ax.transAxes,
                    fontsize=14, color="#2e7d32")
            ax.set_yticks([])
        if start_ms is not None and end_ms is not None and end_ms > start_ms:
            ax.set_xlim(datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc),
                        datetime.fromtimestamp((end_ms + bin_ms) / 1000, tz=timezone.utc))
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator(), tz=timezone.utc))
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


# ----------------------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
 color:#1d2430;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #e3e6ea;padding-bottom:.3rem}
.muted{color:#5f6b7a;font-size:.9rem}
.verdict{padding:1rem 1.2rem;border-radius:8px;margin:1rem 0;font-size:1.1rem;font-weight:600}
.clean{background:#e8f5e9;color:#1b5e20;border:1px solid #a5d6a7}
.dirty{background:#ffebee;color:#b71c1c;border:1px solid #ef9a9a}
.cards{display:flex;gap:.8rem;flex-wrap:wrap}
.card{border:1px solid #e3e6ea;border-radius:8px;padding:.6rem 1rem;min-width:120px}
.card .n{font-size:1.5rem;font-weight:700} .card .l{color:#5f6b7a;font-size:.85rem}
.card.bad .n{color:#c62828}
table{border-collapse:collapse;width:100%;font-size:.88rem;margin:.5rem 0}
th,td{border-bottom:1px solid #eceff3;padding:.35rem .5rem;text-align:right}
th{background:#f6f8fa;font-weight:600} td.l,th.l{text-align:left}
td.bad{color:#c62828;font-weight:600} td.ok{color:#2e7d32}
code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px;font-size:.85rem}
img{max-width:100%;border:1px solid #eceff3;border-radius:6px}
details{margin:.5rem 0} summary{cursor:pointer;color:#1f5fbf}
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _fmt(n: int | float | None) -> str:
    if n is None:
        return ""
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def _side_text(side: Mapping[str, Any]) -> str:
    if side.get("kind") == "archive":
        return f"archive {side.get('path')}"
    name = side.get("cluster")
    who = f" as {side.get('username')}" if side.get("username") else ""
    return f"{name + ' — ' if name else ''}{side.get('bootstrap')}{who}"


def render_html(summary: Mapping[str, Any], *, chart_png: bytes,
                samples: Mapping[str, list[Mapping[str, Any]]] | None = None) -> str:
    """The report page (self-contained: CSS inline, chart embedded)."""
    totals = summary["totals"]
    clean = summary["verdict"] == "clean"
    parts: list[str] = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Integrity report — {_e(summary['verdict'])}</title><style>{_CSS}</style></head><body>",
        "<h1>Kafka replication integrity report</h1>",
        f"<div class='muted'>source <b>{_e(_side_text(summary['source']))}</b> → target "
        f"<b>{_e(_side_text(summary['target']))}</b><br>generated {_e(summary['generated_at'])}"
        f" · cut-off {_e(summary['cutoff']['iso'] if summary.get('cutoff') else 'none')}"
        f" · {_e(_fmt(summary['timings'].get('total_s')))} s</div>",
    ]
    if clean:
        parts.append(f"<div class='verdict clean'>CLEAN — every source record has exactly one copy in the "
                     f"target ({_fmt(totals['source_compared'])} records compared). Exit code 0.</div>")
    else:
        found = ", ".join(f"{_fmt(totals[c])} {c}" for c in _CLASSES if totals[c])
        parts.append(f"<div class='verdict dirty'>DIFFERENCES FOUND — {_e(found)}. Exit code 1.</div>")
    parts.append("<div class='cards'>")
    for label, key in (("source records compared", "source_compared"), ("target records compared", "target_compared")):
        parts.append(f"<div class='card'><div class='n'>{_fmt(totals[key])}</div><div class='l'>{label}</div></div>")
    for c in _CLASSES:
        bad = " bad" if totals[c] else ""
        parts.append(f"<div class='card{bad}'><div class='n'>{_fmt(totals[c])}</div><div class='l'>{c}</div></div>")
    parts.append(f"<div class='card'><div class='n'>{_fmt(totals['target_after_cutoff'])}</div>"
                 f"<div class='l'>target after cut-off (ignored)</div></div></div>")

    parts.append("<h2>Per topic</h2><table><tr><th class='l'>topic</th><th>source read</th><th>target read</th>"
                 "<th>after cut-off (src / tgt)</th>" + "".join(f"<th>{c}</th>" for c in _CLASSES)
                 + "<th class='l'>status</th></tr>")
    for topic, t in sorted(summary["topics"].items()):
        cells = "".join(f"<td class='{'bad' if t[c] else 'ok'}'>{_fmt(t[c])}</td>" for c in _CLASSES)
        status = "clean" if not any(t[c] for c in _CLASSES) else "differences"
        if t.get("target_absent"):
            status += " (topic absent on target)"
        parts.append(f"<tr><td class='l'><code>{_e(topic)}</code></td><td>{_fmt(t['source_read'])}</td>"
                     f"<td>{_fmt(t['target_read'])}</td><td>{_fmt(t['source_after_cutoff'])} / "
                     f"{_fmt(t['target_after_cutoff'])}</td>{cells}<td class='l'>{_e(status)}</td></tr>")
    parts.append("</table>")

    b64 = base64.b64encode(chart_png).decode()
    parts.append("<h2>Missing messages over time</h2>"
                 f"<img alt='missing messages over time' src='data:image/png;base64,{b64}'>"
                 "<div class='muted'>Record timestamps of the source copies that never reached the target, "
                 "stacked by topic.</div>")

    if not clean:
        parts.append("<h2>What to do next</h2><ul>")
        if totals["missing"]:
            parts.append(f"<li><b>{_fmt(totals['missing'])} missing</b>: replay them with "
                         f"<code>drctl recover --report {_e(summary.get('out_dir', '&lt;this directory&gt;'))}"
                         "</code> (try <code>--dry-run</code> first), then run the same "
                         "<code>drctl verify</code> again.</li>")
        if totals["duplicated"]:
            parts.append("<li><b>duplicated</b>: extra copies in the target (at-least-once replication). "
                         "Consumers must be idempotent for these keys; Kafka cannot delete single records.</li>")
        if totals["corrupted"]:
            parts.append("<li><b>corrupted</b>: target records whose key exists in the source but whose content "
                         "matches no source record. Inspect them in <code>offending.parquet</code> "
                         "(target coordinates) before clients read them.</li>")
        if totals["unexpected"]:
            parts.append("<li><b>unexpected</b>: target records the source never had, written before the "
                         "cut-off. Find the writer (ACLs should make passive topics read-only).</li>")
        parts.append("</ul>")

    for c in _CLASSES:
        rows = (samples or {}).get(c) or []
        if not rows:
            continue
        parts.append(f"<h2>Sample of {_e(c)} records</h2><div class='muted'>first {len(rows)} of "
                     f"{_fmt(totals[c])}; the full list with coordinates is in <code>offending.parquet</code>.</div>"
                     "<table><tr><th class='l'>side</th><th class='l'>topic</th><th>partition</th><th>offset</th>"
                     "<th class='l'>timestamp</th><th class='l'>key</th><th class='l'>checksum</th></tr>")
        for r in rows:
            parts.append(f"<tr><td class='l'>{_e(r['side'])}</td><td class='l'>{_e(r['topic'])}</td>"
                         f"<td>{r['partition']}</td><td>{r['offset']}</td><td class='l'>{_e(iso(r['timestamp']))}</td>"
                         f"<td class='l'><code>{_e(show_key(r['key']))}</code></td>"
                         f"<td class='l'><code>{show_checksum(r['checksum'])}</code></td></tr>")
        parts.append("</table>")

    parts.append("<h2>Offset bounds read</h2><div class='muted'>Fixed before reading; each side was read "
                 "exactly in <code>[start, end)</code>.</div>")
    for side in ("source", "target"):
        parts.append(f"<details><summary>{side}</summary><table><tr><th class='l'>topic</th><th>partition</th>"
                     "<th>start</th><th>end</th><th>records read</th></tr>")
        for topic, partsd in sorted(summary["offsets"][side].items()):
            for p, b in sorted(partsd.items(), key=lambda kv: int(kv[0])):
                parts.append(f"<tr><td class='l'>{_e(topic)}</td><td>{_e(p)}</td><td>{_fmt(b['start'])}</td>"
                             f"<td>{_fmt(b['end'])}</td><td>{_fmt(b.get('read'))}</td></tr>")
        parts.append("</table></details>")

    m = summary["method"]
    parts.append("<h2>Method and timings</h2><table>")
    rows_kv = [
        ("checksum", m["checksum"]),
        ("records matched by", "(topic, key, checksum) as multisets — offsets differ under MirrorMaker 2"),
        ("pass 1", f"{_fmt(m['pass1_records'])} records in {_fmt(m['windows'])} time windows per topic"),
        ("differing windows", _fmt(m["differing_windows"])),
        ("pass 2", f"{_fmt(m['pass2_offsets'])} offsets re-read, "
                   f"{_fmt(m.get('pass2_compared_records'))} records compared by identity"),
        ("key lookup on source", "yes" if m.get("pass2b") else "not needed"),
        ("spark", f"{summary['spark'].get('master')} (Spark {summary['spark'].get('version')})"),
    ] + [(k.replace("_s", " (s)"), _fmt(v)) for k, v in summary["timings"].items()]
    for k, v in rows_kv:
        parts.append(f"<tr><td class='l'>{_e(k)}</td><td class='l'>{_e(v)}</td></tr>")
    parts.append("</table></body></html>")
    return "".join(parts)


# ----------------------------------------------------------------------------- files
def write_empty_offending(out_dir: Path) -> Path:
    """Write an offending-records Parquet with the schema and no rows."""
    d = Path(out_dir) / OFFENDING_DIR
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(OFFENDING_SCHEMA.empty_table(), d / "part-00000.parquet")
    return d


def write_report(out_dir: Path, summary: dict[str, Any], *, timeline: list[TimelineBin], bin_ms: int,
                 samples: Mapping[str, list[Mapping[str, Any]]] | None = None,
                 range_ms: tuple[int, int] | None = None) -> dict[str, Path]:
    """Write ``summary.json``, the chart PNG and ``report.html``; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = render_missing_chart(timeline, bin_ms=bin_ms, start_ms=range_ms[0] if range_ms else None,
                               end_ms=range_ms[1] if range_ms else None)
    paths = {"summary": out_dir / SUMMARY_FILE, "html": out_dir / HTML_FILE, "chart": out_dir / CHART_FILE,
             "offending": out_dir / OFFENDING_DIR}
    _write_atomic(paths["chart"], png)
    _write_atomic(paths["summary"], (json.dumps(summary, indent=2, sort_keys=False) + "\n").encode())
    _write_atomic(paths["html"], render_html(summary, chart_png=png, samples=samples).encode())
    return paths


def load_summary(report_dir: Path) -> dict[str, Any]:
    """Read ``summary.json`` of a report directory (:class:`ConfigError` when absent or invalid)."""
    path = Path(report_dir) / SUMMARY_FILE
    try:
        return json.loads(path.read_text())
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
