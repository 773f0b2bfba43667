"""The Spark driver's class-data archive: keyed by the toolchain, used only when it exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from verification import class_archive


def test_archive_is_keyed_by_the_connector_jars_and_lives_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_HOME", str(tmp_path))
    one = class_archive.archive_path(["/cache/spark-kafka/a.jar"])
    other = class_archive.archive_path(["/cache/spark-kafka/b.jar"])
    assert one != other
    assert one.parent == tmp_path / "spark-cds" and one.suffix == ".jsa"
    assert class_archive.archive_path(["/cache/spark-kafka/a.jar"]) == one


def test_driver_options_map_the_archive_only_when_it_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_HOME", str(tmp_path))
    jars = ["/cache/spark-kafka/a.jar"]
    assert class_archive.java_options(jars) == []
    path = class_archive.archive_path(jars)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0" * 100)
    assert class_archive.java_options(jars) == [], "an archive without its completion stamp is not used"
    path.with_name(path.name + ".complete").write_text("100\n")
    opts = class_archive.java_options(jars)
    assert f"-XX:SharedArchiveFile={path}" in opts
    assert not any(o.startswith("-Xlog") and ":stdout" in o for o in opts), "stdout may carry --json output"
    crash = path.parent / "crash"
    assert f"-XX:ErrorFile={crash / 'hs_err_pid%p.log'}" in opts, "crash logs stay out of the shared /tmp"
    assert crash.stat().st_mode & 0o777 == 0o700
    (crash / "hs_err_pid7.log").write_text(f"Command Line: -XX:SharedArchiveFile={path}\n")
    assert class_archive.crashed_on_archive(jars, since=0), "the crash is found where the driver writes it"
    path.write_bytes(b"\0" * 60)  # truncated after it was stamped: mapping it would kill the JVM
    assert class_archive.java_options(jars) == []
    class_archive.discard(jars)
    assert not path.exists() and not path.with_name(path.name + ".complete").exists()
