"""The Kafka JVMs' class-data archive: keyed by Java and the Kafka jars, used only when complete, and
only on the Kafka jars' classpath (MirrorMaker 2 and Connect run on others)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dr.runtime import class_archive
from dr.runtime.process import java_command


@pytest.fixture
def kafka_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Kafka lib dir with one jar, KDR_HOME in ``tmp_path``, no real toolchain needed."""
    monkeypatch.setenv("KDR_HOME", str(tmp_path / "home"))
    lib = tmp_path / "kafka" / "4.3.1"
    lib.mkdir(parents=True)
    (lib / "kafka_2.13-4.3.1.jar").write_bytes(b"jar")
    monkeypatch.setattr(class_archive, "toolchain", lambda: SimpleNamespace(kafka_lib=lib))
    return lib


def test_archive_is_keyed_by_the_kafka_jars_and_lives_in_the_cache(kafka_lib: Path, tmp_path: Path) -> None:
    one = class_archive.archive_path(kafka_lib)
    assert one.parent == tmp_path / "home" / "kafka-cds" and one.suffix == ".jsa"
    assert class_archive.archive_path(kafka_lib) == one
    (kafka_lib / "extra.jar").write_bytes(b"another jar")
    assert class_archive.archive_path(kafka_lib) != one, "other jars: another archive (the JVM would refuse it)"


def test_kafka_jvms_map_the_archive_only_when_it_is_complete(kafka_lib: Path, tmp_path: Path) -> None:
    assert class_archive.java_options([kafka_lib], "kafka.Kafka") == []
    path = class_archive.archive_path(kafka_lib)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\0" * 100)
    assert class_archive.java_options([kafka_lib], "kafka.Kafka") == [], "no completion stamp: not used"
    path.with_name(path.name + ".complete").write_text("100\n")
    cmd = java_command("java", [kafka_lib], "kafka.tools.StorageTool", ["format"], crash_dir=tmp_path)
    assert f"-XX:SharedArchiveFile={path}" in cmd and cmd.index(f"-XX:SharedArchiveFile={path}") < cmd.index("-cp")
    assert not any(o.startswith("-Xlog") and ":stdout" in o for o in cmd), "the storage tool's stdout is read"
    other = tmp_path / "connect"
    other.mkdir()
    assert not any(
        "SharedArchiveFile" in o for o in java_command("java", [other, kafka_lib], "x.Main", [], crash_dir=tmp_path)
    ), "MirrorMaker 2 / Connect classpaths do not match the archive"
    path.write_bytes(b"\0" * 60)  # cut short after it was stamped: mapping it would kill the JVM
    assert class_archive.java_options([kafka_lib], "kafka.Kafka") == []


def test_while_building_only_the_broker_writes_the_archive(kafka_lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive, "_dump_to", Path("/tmp/x.partial"))
    assert "-XX:ArchiveClassesAtExit=/tmp/x.partial" in class_archive.java_options([kafka_lib], "kafka.Kafka")
    assert class_archive.java_options([kafka_lib], "kafka.tools.StorageTool") == []
