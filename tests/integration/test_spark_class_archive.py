"""The Spark driver with its class-data archive: used when sound, and a damaged one is survived."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests import processes
from verification.class_archive import archive_path, usable
from verification.session import kafka_jars

_START = """
import sys
from pathlib import Path
import verification.class_archive as ca
damaged = Path(sys.argv[1])
ca.archive_path = lambda jars: damaged
from verification.session import spark_session
spark = spark_session()
print("sum", spark.range(10).selectExpr("sum(id) AS s").collect()[0]["s"])
print("archive left", damaged.exists())
"""


def _archive() -> Path:
    path = archive_path(kafka_jars())
    if not usable(path):
        pytest.fail(f"make setup did not build the Spark class-data archive {path}")
    return path


def test_the_driver_maps_the_archive_that_setup_built() -> None:
    path = _archive()
    res = processes.run(
        [
            sys.executable,
            "-c",
            """
from verification.session import spark_session
spark = spark_session()
print(spark.sparkContext.getConf().get("spark.driver.extraJavaOptions"))
print("sum", spark.range(10).selectExpr("sum(id) AS s").collect()[0]["s"])
""",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"-XX:SharedArchiveFile={path}" in res.stdout and "sum 45" in res.stdout
    assert "[cds]" not in res.stdout + res.stderr, "class-data notes must not reach the output"


def test_a_damaged_archive_is_dropped_and_spark_starts_without_it(tmp_path: Path) -> None:
    damaged = tmp_path / "driver.jsa"
    with open(_archive(), "rb") as src, open(damaged, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.truncate(40 << 20)  # cut short: the JVM would die mapping it (SIGBUS)
    damaged.with_name(damaged.name + ".complete").write_text(f"{os.path.getsize(damaged)}\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = processes.run(
        [sys.executable, "-c", _START, str(damaged)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    # (Spark 4.0 itself leaves an empty ``artifacts`` directory in the working directory: SPARK-52396)
    assert not [f for f in cwd.iterdir() if f.name != "artifacts"], "the JVM's crash log must not land in the cwd"
    assert "sum 45" in res.stdout
    assert "did not start with its class-data archive" in res.stderr and "make setup" in res.stderr
    assert "archive left False" in res.stdout, "the damaged archive is discarded so setup rebuilds it"
