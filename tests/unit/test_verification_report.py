"""The report writes all three outputs; the chart is a real image; nothing secret is written."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest
from PIL import Image

from dr.errors import ConfigError
from dr.kafka_client import Endpoint
from verification import ArchiveSide, KafkaSide, run_verification
from verification.archive import write_records
from verification.report import (
    load_summary,
    read_offending,
    render_html,
    render_missing_chart,
    show_key,
    write_empty_offending,
)
from verification.session import spark_session

T0 = 1_760_000_000_000


def png_image(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def test_chart_is_a_png_with_bars():
    bins = [("orders", T0 + i * 60_000, 5 + i) for i in range(10)] + [("events", T0 + 120_000, 7)]
    img = png_image(render_missing_chart(bins, bin_ms=60_000, start_ms=T0, end_ms=T0 + 600_000))
    assert img.format == "PNG" and img.size == (1000, 340)
    colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 20  # not a blank canvas


def test_chart_without_missing_records_says_so():
    img = png_image(render_missing_chart([], bin_ms=1000))
    assert img.format == "PNG" and img.size == (1000, 340)


def test_keys_are_shown_as_text_or_hex():
    assert show_key(b"order-1") == "order-1"
    assert show_key(b"\xff\x00") == "0xff00"
    assert show_key(None) == "(null)"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    spark = spark_session()
    d = tmp_path_factory.mktemp("report")
    src = [{"topic": "<b>orders</b>", "partition": i % 3, "offset": i // 3, "timestamp": T0 + i * 1000,
            "key": b"k%d" % i, "value": b"v%d" % i, "headers": [("h", b"1")]} for i in range(300)]
    tgt = [{**r, "offset": r["offset"] + 2} for r in src if r["offset"] % 17 != 5]
    tgt.append({**src[4], "offset": 999})
    write_records(src, d / "s.parquet")
    write_records(tgt, d / "t.parquet")
    return run_verification(source=ArchiveSide(path=d / "s.parquet"), target=ArchiveSide(path=d / "t.parquet"),
                            out_dir=d / "out", spark=spark)


def test_report_writes_summary_html_chart_and_parquet(report):
    out = report.out_dir
    summary = load_summary(out)
    assert summary["totals"]["missing"] == 18 and summary["totals"]["duplicated"] == 1
    assert set(summary["timings"]) >= {"bounds_s", "pass1_s", "pass2_s", "write_s", "total_s"}
    assert summary["offsets"]["source"]["<b>orders</b>"]["0"] == {"start": 0, "end": 100, "read": 100}
    html = (out / "report.html").read_text()
    assert "&lt;b&gt;orders&lt;/b&gt;" in html and "<b>orders</b>" not in html  # escaped
    assert "data:image/png;base64," in html and "Sample of missing records" in html
    assert "drctl recover --report" in html
    assert png_image((out / "missing_over_time.png").read_bytes()).size == (1000, 340)
    table = read_offending(out)
    assert table.num_rows == 19 and set(table.column_names) >= {"class", "side", "topic", "partition", "offset",
                                                                "timestamp", "key", "checksum"}
    assert read_offending(out, ["duplicated"]).to_pylist()[0]["offset"] == 999


def test_summary_sides_never_hold_a_password():
    side = KafkaSide(endpoint=Endpoint("h:9092", "admin", "hunter2-secret"), name="A")
    text = json.dumps(side.describe())
    assert "hunter2-secret" not in text and "password" not in text and "admin" in text


def test_html_renders_from_a_summary_alone(report):
    html = render_html(report.summary, chart_png=b"\x89PNG", samples={})
    assert "DIFFERENCES FOUND" in html and "18 missing" in html


def test_empty_offending_parquet_has_the_schema(tmp_path):
    write_empty_offending(tmp_path)
    table = pq.read_table(tmp_path / "offending.parquet")
    assert table.num_rows == 0 and "checksum" in table.column_names


def test_loading_a_missing_report_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        load_summary(tmp_path)
    with pytest.raises(ConfigError):
        read_offending(tmp_path)
