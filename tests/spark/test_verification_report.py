"""The report written by the job: one small run on in-memory archives (real Spark, no Kafka) checks
that it feeds every section, the three outputs and the escaping with the right numbers.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.verification.test_verification_report import (
    CUTOFF,
    CUTOFF_UTC,
    FAILOVER,
    SCRIPT_KEY,
    SCRIPT_TOPIC,
    SECRET,
    T0,
    png_image,
)
from verification import ArchiveSide, run_verification
from verification.archive import write_records
from verification.report import (
    load_summary,
    read_offending,
    render_html,
    window_lines,
)
from verification.session import spark_session


# ----------------------------------------------------------------------------- the job feeds the report
def source_records():
    out = []
    for i in range(300):
        key = SCRIPT_KEY if i == 15 else b"k%d" % i  # i=15: offset 5 of partition 0, missing below
        out.append(
            {
                "topic": SCRIPT_TOPIC,
                "partition": i % 3,
                "offset": i // 3,
                "timestamp": T0 + i * 1000,
                "key": key,
                "value": b"v%d" % i,
                "headers": [("h", b"1")],
            }
        )
    out += [
        {
            "topic": "audit",
            "partition": 0,
            "offset": j,
            "timestamp": T0 + j,
            "key": b"a",
            "value": b"b",
            "headers": None,
        }
        for j in range(3)
    ]
    out.append(
        {
            "topic": "__consumer_offsets",
            "partition": 0,
            "offset": 0,
            "timestamp": T0,
            "key": b"g",
            "value": b"o",
            "headers": None,
        }
    )
    return out


def target_records(src):
    orders = [r for r in src if r["topic"] == SCRIPT_TOPIC]
    tgt = [{**r, "offset": r["offset"] + 2} for r in orders if r["offset"] % 17 != 5 and r["key"] != b"k8"]
    tgt.append({**orders[4], "offset": 999})  # duplicated (partition 1)
    tgt.append({**orders[8], "offset": 998, "value": b"tampered"})  # k8 changed: missing + corrupted
    tgt.append({**orders[0], "offset": 997, "key": b"ghost", "value": b"x"})  # unexpected (partition 0)
    tgt.append({**orders[0], "offset": 996, "timestamp": CUTOFF + 1, "value": b"app write"})  # after the cut-off
    for topic in ("only-here", "mm2-offset-syncs.A.internal"):
        tgt.append(
            {"topic": topic, "partition": 0, "offset": 0, "timestamp": T0, "key": b"a", "value": b"b", "headers": None}
        )
    return tgt


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    spark = spark_session()
    d = tmp_path_factory.mktemp("report")
    src = source_records()
    write_records(src, d / "s.parquet")
    write_records(target_records(src), d / "t.parquet")
    progress: list[str] = []
    result = run_verification(
        source=ArchiveSide(path=d / "s.parquet"),
        target=ArchiveSide(path=d / "t.parquet"),
        out_dir=d / "out",
        spark=spark,
        topics=[SCRIPT_TOPIC],
        cutoff_ms=CUTOFF,
        progress=progress.append,
        context={**FAILOVER, "credentials": {"password": SECRET}, "sasl_password": SECRET},
    )
    return result, progress


def test_report_writes_summary_html_chart_and_parquet(report):
    result, _ = report
    out = result.out_dir
    summary = load_summary(out)
    assert summary["totals"]["missing"] == 19 and summary["totals"]["duplicated"] == 1
    assert summary["totals"]["corrupted"] == 1 and summary["totals"]["unexpected"] == 1
    assert set(summary["timings"]) >= {"bounds_s", "pass1_s", "pass2_s", "write_s", "total_s"}
    assert summary["offsets"]["source"][SCRIPT_TOPIC]["0"] == {"start": 0, "end": 100, "read": 100}
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "drctl recover --report" in html
    assert png_image((out / "missing_over_time.png").read_bytes()).size == (1000, 340)
    table = read_offending(out)
    assert table.num_rows == 22 and set(table.column_names) >= {
        "class",
        "side",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "checksum",
    }
    assert read_offending(out, ["duplicated"]).to_pylist()[0]["offset"] == 999


def test_job_summary_has_the_failover_and_no_secret(report):
    result, _ = report
    summary_text = (result.out_dir / "summary.json").read_text()
    html = (result.out_dir / "report.html").read_text()
    assert SECRET not in summary_text and SECRET not in html and "password" not in summary_text + html
    failover = json.loads(summary_text)["failover"]
    assert "credentials" not in failover and "sasl_password" not in failover
    assert failover["failover_id"] == FAILOVER["failover_id"] and failover["rto_s"] == 4.25
    assert failover["journal"] == FAILOVER["journal"] and failover["rpo_estimate"]["records"] == 3
    assert result.summary["cutoff"]["utc"] == CUTOFF_UTC


def test_job_counts_each_class_per_partition(report):
    result, _ = report
    parts = result.summary["partitions"][SCRIPT_TOPIC]
    zero = {"missing": 0, "unexpected": 0, "duplicated": 0, "corrupted": 0}
    assert parts == {
        "0": {**zero, "missing": 6, "unexpected": 1},
        "1": {**zero, "missing": 6, "duplicated": 1},
        "2": {**zero, "missing": 7, "corrupted": 1},
    }
    for c in zero:
        assert sum(p[c] for p in parts.values()) == result.summary["topics"][SCRIPT_TOPIC][c]


def test_job_says_why_each_topic_was_left_out(report):
    result, _ = report
    assert result.summary["topics_compared"] == [SCRIPT_TOPIC]
    reasons = {t: (v["reason"], v["on"]) for t, v in result.summary["topics_left_out"].items()}
    assert reasons == {
        "audit": ("not_requested", "source"),
        "__consumer_offsets": ("internal", "source"),
        "only-here": ("only_on_target", "target"),
        "mm2-offset-syncs.A.internal": ("internal", "target"),
    }
    html = (result.out_dir / "report.html").read_text()
    assert "not in the topics requested (--topics)" in html


def test_job_samples_every_class_from_the_offending_records(report):
    result, _ = report
    html = (result.out_dir / "report.html").read_text()
    for c in ("missing", "unexpected", "duplicated", "corrupted"):
        assert f"<h2>Sample of {c} records</h2>" in html
    corrupted = html[html.index("<h2>Sample of corrupted") : html.index("<h2>Offset bounds")]
    # k8 was changed in transit: its source version (partition 2, offset 2) is paired with the copy at 998
    assert "<td>2</td><td>2</td><td>998</td><td class='l'>2025-10-09 08:53:28.000 UTC</td>" in corrupted
    assert "changed in transit" in corrupted


def test_job_report_escapes_topic_and_key(report):
    result, _ = report
    html = (result.out_dir / "report.html").read_text()
    assert "<script" not in html
    assert "&lt;script&gt;alert(&quot;topic&quot;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;key&#x27;)&lt;/script&gt;" in html
    assert "<h2>Failover 20251009T090000-abc123</h2>" in html


def test_job_window_counts_agree_between_progress_and_report(report):
    result, progress = report
    counts = result.summary["method"]["window_counts"]
    assert counts["differing"] == result.summary["method"]["differing_windows"] > 0
    assert counts["reread_source"] + counts["reread_target"] == result.summary["method"]["pass2_offsets"]
    lines = window_lines(counts)
    done = next(p for p in progress if p.startswith("pass 1 done"))
    started = next(p for p in progress if p.startswith("pass 1: reading"))
    html = (result.out_dir / "report.html").read_text()
    for k, v in lines:
        assert f"{k}: {v}" in done
        assert f"<td class='l'>{k}</td><td class='l'>{v}</td>" in html
    assert f"({counts['per_topic'][SCRIPT_TOPIC]['windows']:,} windows per topic)" in started
    assert f"{counts['reread_source']:,} source + {counts['reread_target']:,} target" in next(
        p for p in progress if p.startswith("pass 2: re-reading")
    )


def test_reports_written_by_spark_have_the_same_partitions_and_pairs(report, tmp_path):
    result, _ = report
    d = result.out_dir.parent
    big = run_verification(
        source=ArchiveSide(path=d / "s.parquet"),
        target=ArchiveSide(path=d / "t.parquet"),
        out_dir=tmp_path / "r",
        spark=spark_session(),
        topics=[SCRIPT_TOPIC],
        cutoff_ms=CUTOFF,
        collect_limit=0,
    )
    assert big.summary["partitions"] == result.summary["partitions"]
    html = (big.out_dir / "report.html").read_text()
    assert "<td>2</td><td>2</td><td>998</td>" in html  # the corrupted copy paired with its source version
    assert big.summary["failover"] is None and "<div class='box'>" not in html


def test_html_renders_from_a_summary_alone(report):
    result, _ = report
    html = render_html(result.summary, chart_png=b"\x89PNG", samples={})
    assert "DIFFERENCES FOUND" in html and "19 missing" in html
