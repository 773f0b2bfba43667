"""drctl verify / recover run on Parquet archives (real Spark): exit codes, table and JSON output, and
the job's --print-jars (the toolchain's connector jars)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dr.cli.verify import recover, verify
from tests import processes
from tests.unit.cli.test_verification_cli import T0
from verification.archive import write_records
from verification.session import spark_session


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    spark_session()
    d = tmp_path_factory.mktemp("cli")
    src = [
        {
            "topic": "orders",
            "partition": i % 2,
            "offset": i // 2,
            "timestamp": T0 + i,
            "key": b"k%d" % i,
            "value": b"v%d" % i,
            "headers": None,
        }
        for i in range(50)
    ]
    write_records(src, d / "src.parquet")
    write_records([{**r, "offset": r["offset"] + 9} for r in src], d / "same.parquet")
    write_records([{**r, "offset": r["offset"] + 9} for r in src[:-3]], d / "lossy.parquet")
    return d


def verify_archives(archives, target, out, *flags):
    """``drctl verify --quiet`` of the source archive against the ``target`` one (same or lossy)."""
    args = ["--source-archive", str(archives / "src.parquet"), "--target-archive", str(archives / f"{target}.parquet")]
    return CliRunner().invoke(verify, [*args, "--out", str(out), "--quiet", *flags])


def test_verify_clean_exits_0_and_prints_the_table(archives, tmp_path):
    result = verify_archives(archives, "same", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert "verdict: CLEAN" in result.output and "orders" in result.output


def test_verify_differences_exit_1_with_json_summary(archives, tmp_path):
    result = verify_archives(archives, "lossy", tmp_path / "o", "--json", "--topics", "orders")
    assert result.exit_code == 1
    summary = json.loads(result.output[: result.output.rindex("}") + 1])
    assert summary["totals"]["missing"] == 3 and summary["exit_code"] == 1
    assert "recover --report" in result.output  # the error line names the next step


def test_unknown_topic_is_a_config_error(archives, tmp_path):
    result = verify_archives(archives, "same", tmp_path / "o", "--topics", "nope")
    assert result.exit_code == 2 and "nope" in result.output


def test_recover_refuses_an_archive_target(archives, tmp_path):
    out = tmp_path / "o"
    verify_archives(archives, "lossy", out)
    result = CliRunner().invoke(recover, ["--report", str(out), "--dry-run"])
    assert result.exit_code == 2 and "archive" in result.output


def test_job_prints_the_connector_jars_for_spark_submit():
    out = (
        processes.run(
            [sys.executable, "-m", "verification.job", "--print-jars"], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .split(",")
    )
    assert any("spark-sql-kafka" in j for j in out) and all(Path(j).is_file() for j in out)
