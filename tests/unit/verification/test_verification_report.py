"""The report without Spark: hand-built summaries check the page section by section (every section
an SRE reads after a failover, escaping, no secrets), the chart and the summary files.

The same page written by the job on in-memory archives (real Spark) is checked in
tests/spark/test_verification_report.py.
"""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar

import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dr.base.errors import ConfigError
from dr.kafka.client import Endpoint
from verification import KafkaSide
from verification.compare import LATE_WINDOW, SOURCE, TARGET, Differences, TimeGrid, find_differences
from verification.job import _drop_empty, _window_counts
from verification.report import (
    CUTOFF_COLOUR,
    load_summary,
    read_offending,
    render_html,
    render_missing_chart,
    show_key,
    timing_label,
    window_lines,
    write_empty_offending,
)
from verification.result import safe_context
from verification.sides import PartitionBounds

T0 = 1_760_000_000_000
CUTOFF = T0 + 400_000  # 2025-10-09 08:53:20 + 400 s
CUTOFF_UTC = "2025-10-09 09:00:00.000 UTC"
SCRIPT_TOPIC = '<script>alert("topic")</script>'
SCRIPT_KEY = b"<script>alert('key')</script>"
SECRET = "hunter2-very-secret"


def png_image(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def cutoff_pixels(img: Image.Image) -> int:
    want = tuple(int(CUTOFF_COLOUR[i : i + 2], 16) for i in (1, 3, 5))
    return sum(n for n, rgb in img.convert("RGB").getcolors(maxcolors=1 << 20) if rgb == want)


# ----------------------------------------------------------------------------- chart
def test_chart_is_a_png_with_bars():
    bins = [("orders", T0 + i * 60_000, 5 + i) for i in range(10)] + [("events", T0 + 120_000, 7)]
    img = png_image(render_missing_chart(bins, bin_ms=60_000, start_ms=T0, end_ms=T0 + 600_000))
    assert img.format == "PNG" and img.size == (1000, 340)
    colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 20  # not a blank canvas


def test_chart_without_missing_records_says_so():
    img = png_image(render_missing_chart([], bin_ms=1000))
    assert img.format == "PNG" and img.size == (1000, 340)


def test_chart_marks_the_cutoff_with_a_line():
    kw = {"bin_ms": 60_000, "start_ms": T0, "end_ms": T0 + 600_000}
    without = png_image(render_missing_chart([], **kw))
    with_cut = png_image(render_missing_chart([], cutoff_ms=T0 + 300_000, **kw))
    assert cutoff_pixels(without) == 0 and cutoff_pixels(with_cut) > 100  # a dashed line across the plot
    beyond = png_image(render_missing_chart([("t", T0, 3)], cutoff_ms=T0 + 3_600_000, **kw))
    assert cutoff_pixels(beyond) > 100  # a cut-off after the last record widens the axis to show it


def test_keys_are_shown_as_text_or_hex():
    assert show_key(b"order-1") == "order-1"
    assert show_key(b"\xff\x00") == "0xff00"
    assert show_key(None) == "(null)"
    assert show_key(b"k" * 100) == "k" * 48 + "…"


# ----------------------------------------------------------------------------- hand-built summaries
def hand_summary(**over):
    """A summary as the job writes it: two topics, differences in three partitions."""
    counts = {
        "orders": {"missing": 3, "unexpected": 1, "duplicated": 0, "corrupted": 1},
        SCRIPT_TOPIC: {"missing": 0, "unexpected": 0, "duplicated": 2, "corrupted": 0},
    }
    topics = {
        t: {
            "source_read": 100,
            "target_read": 99,
            "source_after_cutoff": 0,
            "target_after_cutoff": 2,
            "source_compared": 100,
            "target_compared": 97,
            **c,
            "target_absent": False,
            "source_partitions": 2,
            "target_partitions": 2,
        }
        for t, c in counts.items()
    }
    totals = {
        k: sum(t[k] for t in topics.values())
        for k in (
            "source_read",
            "target_read",
            "source_after_cutoff",
            "target_after_cutoff",
            "source_compared",
            "target_compared",
            "missing",
            "unexpected",
            "duplicated",
            "corrupted",
        )
    }
    zero = {"missing": 0, "unexpected": 0, "duplicated": 0, "corrupted": 0}
    per_topic_windows = {
        t: {
            "windows": 512,
            "width_ms": 10,
            "with_records": 100,
            "differing": 2,
            "reread_source": 40,
            "reread_target": 41,
        }
        for t in counts
    }
    summary = {
        "verdict": "differences",
        "exit_code": 1,
        "generated_at": "2025-10-09T09:10:00Z",
        "out_dir": "/r",
        "source": {"kind": "kafka", "cluster": "A", "bootstrap": "a:9092", "username": "admin"},
        "target": {"kind": "kafka", "cluster": "B", "bootstrap": "b:9092", "username": "admin"},
        "failover": None,
        "topics_requested": sorted(counts),
        "topics_compared": sorted(counts),
        "topics_left_out": {
            "__consumer_offsets": {
                "reason": "internal",
                "on": "source and target",
                "why": "internal topic (Kafka, Connect or MirrorMaker 2 bookkeeping)",
            },
            "<img src=x onerror=alert(1)>": {
                "reason": "only_on_target",
                "on": "target",
                "why": "only on the target: the source has no such topic",
            },
        },
        "cutoff": {"ms": CUTOFF, "iso": "2025-10-09T09:00:00.000Z", "utc": CUTOFF_UTC, "applies_to": "both sides"},
        "totals": totals,
        "topics": topics,
        "partitions": {
            "orders": {"0": {**zero, "missing": 2, "corrupted": 1}, "1": {**zero, "missing": 1, "unexpected": 1}},
            SCRIPT_TOPIC: {"1": {**zero, "duplicated": 2}},
        },
        "offsets": {
            side: {
                t: {"0": {"start": 0, "end": 50, "read": 50}, "1": {"start": 0, "end": 50, "read": 50}} for t in counts
            }
            for side in ("source", "target")
        },
        "method": {
            "checksum": "xxhash64",
            "windows": 512,
            "pass1_records": 400,
            "differing_windows": 4,
            "pass2_offsets": 162,
            "pass2_compared_records": 80,
            "pass2b": False,
            "window_counts": {
                "per_topic": per_topic_windows,
                "windows": 1024,
                "with_records": 200,
                "differing": 4,
                "reread_source": 80,
                "reread_target": 82,
            },
        },
        "spark": {"master": "local[2]", "version": "4.0.0"},
        "timings": {
            "spark_start_s": 3.2,
            "bounds_s": 0.4,
            "pass1_s": 5.0,
            "pass2_s": 2.0,
            "write_s": 0.3,
            "total_s": 11.0,
            "records_per_s": 36,
        },
    }
    summary.update(over)
    return summary


FAILOVER = {
    "failover_id": "20251009T090000-abc123",
    "mode": "unplanned",
    "stack": "local",
    "source": "A",
    "target": "B",
    "rto_s": 4.25,
    "write_outage_s": 1.5,
    "journal": "/state/failover/journal.json",
    "rpo_estimate": {
        "records": 3,
        "upper_bound": 9,
        "basis": "source end offsets last seen minus target",
        "snapshot_age_s": 2.0,
    },
}


def samples():
    row = {"topic": "orders", "partition": 0, "timestamp": T0 + 5000, "key_hash": 1}
    return {
        "missing": [{**row, "class": "missing", "side": "source", "offset": 17, "key": SCRIPT_KEY, "checksum": -1}],
        "unexpected": [
            {
                **row,
                "class": "unexpected",
                "side": "target",
                "partition": 1,
                "offset": 1017,
                "key": b"ghost",
                "checksum": 2,
            }
        ],
        "duplicated": [
            {
                **row,
                "class": "duplicated",
                "side": "target",
                "topic": SCRIPT_TOPIC,
                "partition": 1,
                "offset": 999,
                "key": b"k4",
                "checksum": 255,
            }
        ],
        "corrupted": [
            {
                **row,
                "class": "corrupted",
                "side": "target",
                "offset": 1020,
                "key": b"k8",
                "checksum": 3,
                "source": {"partition": 0, "offset": 20, "checksum": 4, "timestamp": T0 + 5000},
            }
        ],
    }


def test_failover_box_only_when_the_run_came_from_a_failover():
    plain = render_html(hand_summary(), chart_png=b"\x89PNG")
    assert "Failover" not in plain and "RPO" not in plain
    page = render_html(hand_summary(failover=FAILOVER), chart_png=b"\x89PNG")
    box = page[page.index("<div class='box'>") : page.index("<div class='verdict")]
    for text in (
        "20251009T090000-abc123",
        "unplanned",
        "A → B",
        "4.25 s",
        "writes refused everywhere",
        "1.5 s",
        "3–9 records",
        "records never replicated",
        "/state/failover/journal.json",
        CUTOFF_UTC,
    ):
        assert text in box, text
    assert "<td class='l'>3 — this verification" in box  # never replicated: the missing records found


def test_header_shows_the_cutoff_as_utc_and_epoch_ms():
    page = render_html(hand_summary(), chart_png=b"\x89PNG")
    header = page[page.index("<h1>") : page.index("<div class='verdict")]
    assert f"cut-off: <b>{CUTOFF_UTC} ({CUTOFF} ms)" in header
    assert "dashed line marks the cut-off" in page
    assert "cut-off: <b>none" in render_html(hand_summary(cutoff=None), chart_png=b"")


def test_per_partition_table_has_the_counts_of_each_class():
    page = render_html(hand_summary(), chart_png=b"")
    section = page[page.index("<h2>Per partition") : page.index("<h2>Missing messages")]
    assert (
        "<tr><td class='l'><code>orders</code></td><td>0</td><td>50</td><td>50</td><td class='bad'>2</td>"
        "<td class='ok'>0</td><td class='ok'>0</td><td class='bad'>1</td></tr>" in section
    )
    assert "<td>1</td><td>50</td><td>50</td><td class='bad'>1</td><td class='bad'>1</td>" in section
    assert section.count("<tr>") == 4  # header + the three partitions with differences
    clean = render_html(hand_summary(partitions={}), chart_png=b"")
    assert "No partition has differences" in clean


def test_every_class_has_a_sample_table_with_both_sides():
    page = render_html(hand_summary(), chart_png=b"", samples=samples())
    for c in ("missing", "unexpected", "duplicated", "corrupted"):
        assert f"<h2>Sample of {c} records</h2>" in page
    corrupted = page[page.index("<h2>Sample of corrupted") : page.index("<h2>Offset bounds")]
    # source offset 20 and checksum of the unreplicated source version, target offset 1020, readable time
    assert "<td>20</td><td>1020</td><td class='l'>2025-10-09 08:53:25.000 UTC</td>" in corrupted
    assert "<code>0000000000000004</code>" in corrupted and "<code>0000000000000003</code>" in corrupted
    missing = page[page.index("<h2>Sample of missing") : page.index("<h2>Sample of unexpected")]
    assert "<td>17</td><td>—</td>" in missing and "<code>ffffffffffffffff</code>" in missing
    # a class with records but no sample rows (a page rendered from summary.json alone) still says so
    alone = render_html(hand_summary(), chart_png=b"")
    assert "<h2>Sample of duplicated records</h2>" in alone and "no sample with this page" in alone


def test_topics_compared_and_left_out_with_the_reason():
    page = render_html(hand_summary(), chart_png=b"")
    left = page[page.index("<h2>Topics left out") : page.index("<h2>Per partition")]
    assert (
        "<code>__consumer_offsets</code></td><td class='l'>source and target</td><td class='l'>internal topic"
    ) in left
    assert "only on the target: the source has no such topic" in left
    compared = page[page.index("<h2>Topics compared") : page.index("<h2>Topics left out")]
    assert "<code>orders</code>" in compared and "2 / 2" in compared
    none = render_html(hand_summary(topics_left_out={}), chart_png=b"")
    assert "every topic on either side was compared" in none


def test_everything_is_escaped():
    page = render_html(
        hand_summary(failover={**FAILOVER, "journal": "<script>j</script>"}), chart_png=b"", samples=samples()
    )
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;topic&quot;)&lt;/script&gt;" in page  # topic: tables and samples
    assert "&lt;script&gt;alert(&#x27;key&#x27;)&lt;/script&gt;" in page  # key
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;script&gt;j&lt;/script&gt;" in page


def test_timing_labels_are_readable():
    page = render_html(hand_summary(), chart_png=b"")
    for label in (
        "Spark start (s)",
        "topics and offset bounds (s)",
        "pass 1: read and fingerprint both sides (s)",
        "total (s)",
        "records per second",
    ):
        assert label in page, label
    assert "(s)tart" not in page and "record (s)" not in page and "_s" not in page.split("<h2>Method")[1]
    assert timing_label("pass2b_s").startswith("pass 2b") and timing_label("new_step_s") == "new step (s)"


def test_window_counts_read_the_same_everywhere():
    lines = dict(window_lines(hand_summary()["method"]["window_counts"]))
    assert lines == {
        "windows per topic": "512 (1,024 in all over 2 topics, 200 holding records)",
        "windows that differ": "4 of 1,024",
        "records re-read": "80 source + 82 target (the offset spans of the differing windows)",
    }
    page = render_html(hand_summary(), chart_png=b"")
    for k, v in lines.items():
        assert f"<td class='l'>{k}</td><td class='l'>{v}</td>" in page


def test_window_counts_come_from_the_grid_and_the_differences():
    grid = TimeGrid.spanning({"a": (0, 999), "b": (0, 99)}, 512)
    diff = Differences(
        windows={"a": [3, 4]},
        total_windows={"a": 300, "b": 100},
        spans={SOURCE: {"a": {0: (10, 20), 1: (0, 5)}}, TARGET: {"a": {0: (12, 22)}}},
    )
    counts = _window_counts(["a", "b", "empty"], grid, {"a": (0, 999), "b": (0, 99)}, diff)
    assert counts["per_topic"]["a"]["windows"] == 500 and counts["per_topic"]["b"]["windows"] == 100
    assert counts["per_topic"]["empty"]["windows"] == 0
    assert (counts["windows"], counts["with_records"], counts["differing"]) == (600, 400, 2)
    assert (counts["reread_source"], counts["reread_target"]) == (15, 10)
    assert window_lines(counts)[0][1].startswith("100–500 (600 in all over 3 topics")


def test_window_counts_span_records_that_fall_outside_the_planned_grid():
    # a partition's first record is not always its earliest: a record older than it falls in window -1,
    # one newer than the planned range past the last window — "holding records" must not exceed "windows"
    grid = TimeGrid.spanning({"a": (0, 999)}, 100)
    planned = _window_counts(["a"], grid, {"a": (0, 999)})["per_topic"]["a"]["windows"]
    diff = Differences(total_windows={"a": planned + 2}, window_range={"a": (-1, planned)})
    row = _window_counts(["a"], grid, {"a": (0, 999)}, diff)["per_topic"]["a"]
    assert (row["windows"], row["with_records"]) == (planned + 2, planned + 2)
    inside = Differences(total_windows={"a": 3}, window_range={"a": (2, 40)})
    assert _window_counts(["a"], grid, {"a": (0, 999)}, inside)["per_topic"]["a"]["windows"] == planned


def test_find_differences_records_the_windows_records_fell_in():
    rows = [
        (SOURCE, "a", 0, -1, 1, 5, 0, 10, 10),
        (SOURCE, "a", 0, 7, 1, 5, 0, 11, 11),
        (TARGET, "a", 0, -1, 1, 5, 0, 3, 3),
        (TARGET, "a", 0, LATE_WINDOW, 1, 9, 0, 4, 4),
    ]
    cols = ["side", "topic", "partition", "window", "n", "lo", "hi", "omin", "omax"]
    d = find_differences(pd.DataFrame(rows, columns=cols))
    assert d.window_range == {"a": (-1, 7)} and d.windows == {"a": [7]}


def test_empty_topics_are_left_out_with_the_reason():
    bs = {"full": {0: PartitionBounds(0, 5)}, "empty": {0: PartitionBounds(7, 7)}, "gone": {0: PartitionBounds(0, 0)}}
    bt = {"full": {0: PartitionBounds(0, 5)}, "empty": {0: PartitionBounds(3, 3)}}
    left: dict = {}
    assert _drop_empty(["empty", "full", "gone"], bs, bt, left) == ["full"]
    assert set(bs) == set(bt) == {"full"}
    assert left["empty"] == {
        "reason": "empty",
        "on": "source and target",
        "why": "no records on either side: nothing to compare",
    }
    assert left["gone"]["on"] == "source"


def test_context_never_carries_a_secret_and_must_be_json():
    ctx = safe_context({**FAILOVER, "password": SECRET, "rpo_estimate": {"sasl_password": SECRET, "records": 1}})
    assert SECRET not in json.dumps(ctx) and ctx["rpo_estimate"] == {"records": 1}
    assert safe_context(None) is None
    with pytest.raises(ConfigError, match=r"context\.source is of type Endpoint"):
        safe_context({"source": Endpoint("a:9092", "admin", SECRET)})


def test_summary_sides_never_hold_a_password():
    side = KafkaSide(endpoint=Endpoint("h:9092", "admin", SECRET), name="A")
    text = json.dumps(side.describe())
    assert SECRET not in text and "password" not in text and "admin" in text


def test_empty_offending_parquet_has_the_schema(tmp_path):
    write_empty_offending(tmp_path)
    table = pq.read_table(tmp_path / "offending.parquet")
    assert table.num_rows == 0 and "checksum" in table.column_names


def test_loading_a_missing_report_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        load_summary(tmp_path)
    with pytest.raises(ConfigError):
        read_offending(tmp_path)


# ----------------------------------------------------------------------------- the failover's integrity step
def test_integrity_verify_passes_the_failover_context_and_the_empty_topics(monkeypatch, tmp_path):
    import dr.kafka.offsets as mm
    import verification.job as job
    from dr.failover.act import integrity

    a, b = Endpoint("a:9092", "admin", SECRET), Endpoint("b:9092", "admin", SECRET)
    ends = {a.bootstrap: {("orders", 0): 5, ("empty", 0): 0}, b.bootstrap: {("orders", 0): 4, ("late", 0): 2}}
    monkeypatch.setattr(mm, "end_offsets", lambda ep, topics: ends[ep.bootstrap])
    seen = {}

    class Result:
        clean, out_dir = True, tmp_path
        summary: ClassVar[dict[str, Any]] = {
            "topics": {"orders": {"missing": 0, "unexpected": 0, "duplicated": 0, "corrupted": 0}}
        }

        def counts(self):
            return self.summary["topics"]["orders"]

    def fake_run(**kw):
        seen.update(kw)
        return Result()

    monkeypatch.setattr(job, "run_verification", fake_run)
    integrity.verify(
        source=a,
        target=b,
        out_dir=tmp_path,
        topics=["orders", "empty", "late", "nowhere"],
        cutoff_ms=CUTOFF,
        context=FAILOVER,
    )
    assert seen["context"] == FAILOVER and seen["cutoff_ms"] == CUTOFF
    assert seen["topics"] == ["orders", "empty", "late"]  # the job leaves "empty" out and says why
    seen.clear()
    ends[a.bootstrap], ends[b.bootstrap] = {("empty", 0): 0}, {}
    verdict = integrity.verify(source=a, target=b, out_dir=tmp_path, topics=["empty"], cutoff_ms=None, context=FAILOVER)
    assert verdict.clean and not seen  # nothing to compare anywhere: no job
