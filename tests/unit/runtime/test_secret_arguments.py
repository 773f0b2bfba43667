"""No secret on a JVM's command line, crash logs in the process's own directory, and dedicated MirrorMaker 2's
configuration referencing the replicator's password through a config provider (issue 32)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import dr.runtime.cluster as cluster_mod
from dr.runtime.cluster import ClusterSpec, LocalCluster, format_argfile, format_command
from dr.runtime.credentials import ADMIN_USER, REPLICATOR_USER, Credentials
from dr.runtime.mirrormaker import FILE_PROVIDER, MirrorMaker
from dr.runtime.process import argfile_text, java_command

PASSWORD = "Pw-0123456789abcdef"


def _error_files(cmd: list[str]) -> list[str]:
    return [o.split("=", 1)[1] for o in cmd if o.startswith("-XX:ErrorFile=")]


def test_the_storage_format_command_line_holds_no_password(tmp_path: Path) -> None:
    args_file = tmp_path / "clusters" / "A" / ".format-1.args"
    cmd = format_command("java", tmp_path / "libs", args_file, crash_dir=tmp_path / "clusters" / "A")
    assert not any(PASSWORD in word for word in cmd)
    assert cmd[-1] == f"@{args_file}", "main class and arguments come from the 0600 argument file"
    assert "kafka.tools.StorageTool" not in cmd and "--add-scram" not in cmd
    text = format_argfile("cid", tmp_path / "server.properties", PASSWORD)
    assert text.splitlines()[0] == '"kafka.tools.StorageTool"'
    assert f'"SCRAM-SHA-512=[name={ADMIN_USER},password={PASSWORD}]"' in text.splitlines()


def test_every_jvm_writes_its_crash_log_in_its_own_directory(tmp_path: Path) -> None:
    cmd = java_command("java", [tmp_path], "kafka.Kafka", ["server.properties"], crash_dir=tmp_path / "node-1")
    assert _error_files(cmd) == [str(tmp_path / "node-1" / "hs_err_pid%p.log")], "never /tmp, never the cwd"
    assert cmd.index(f"-XX:ErrorFile={tmp_path / 'node-1' / 'hs_err_pid%p.log'}") < cmd.index("-cp")
    fmt = format_command("java", tmp_path, tmp_path / "a.args", crash_dir=tmp_path / "clusters" / "A")
    assert _error_files(fmt) == [str(tmp_path / "clusters" / "A" / "hs_err_pid%p.log")]


def test_an_argument_file_quotes_what_the_launcher_would_split_or_unescape() -> None:
    text = argfile_text(["a b", 'q"uote', "back\\slash", "#not-a-comment"])
    assert text.splitlines() == ['"a b"', '"q\\"uote"', '"back\\\\slash"', '"#not-a-comment"']


def test_the_format_reads_its_password_from_a_private_file_deleted_afterwards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = Credentials(tmp_path)
    creds.set_password(ADMIN_USER, PASSWORD)
    cluster = LocalCluster(ClusterSpec("A", base_port=23100), tmp_path, creds)
    seen: dict[str, Any] = {}

    def run(cmd: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        args_file = Path(cmd[-1][1:])
        seen.update(
            cmd=cmd,
            file_mode=args_file.stat().st_mode & 0o777,
            dir_mode=args_file.parent.stat().st_mode & 0o777,
            text=args_file.read_text(),
            args_file=args_file,
        )
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(cluster_mod, "toolchain", lambda: SimpleNamespace(java="java", kafka_lib=tmp_path / "libs"))
    monkeypatch.setattr(cluster_mod.subprocess, "run", run)
    cluster._format(1, "cid", cluster.node_dir(1) / "server.properties")
    assert not any(PASSWORD in word for word in seen["cmd"])
    assert PASSWORD in seen["text"]
    assert seen["args_file"].parent == cluster.dir
    assert (seen["file_mode"], seen["dir_mode"]) == (0o600, 0o700)
    assert not seen["args_file"].exists(), "deleted once the format ran"
    assert _error_files(seen["cmd"]) == [str(cluster.dir / "hs_err_pid%p.log")]


def test_dedicated_mirrormaker_references_the_password_through_a_config_provider(tmp_path: Path) -> None:
    creds = Credentials(tmp_path)
    creds.set_password(REPLICATOR_USER, PASSWORD)
    a = LocalCluster(ClusterSpec("A", base_port=23100), tmp_path, creds)
    b = LocalCluster(ClusterSpec("B", base_port=23200), tmp_path, creds)
    mm = MirrorMaker(a, b, tmp_path)
    props = mm.properties()
    assert not [k for k, v in props.items() if PASSWORD in v], "the password itself is in no setting"
    ref = f"${{file:{mm.secrets_file()}:password}}"
    for alias in ("A", "B"):
        assert f'password="{ref}"' in props[f"{alias}.sasl.jaas.config"]
    assert props["config.providers"] == "file" and props["config.providers.file.class"] == FILE_PROVIDER
    assert props["config.providers.file.param.allowed.paths"] == str(mm.secrets_file().parent)
    path = mm.write_secrets()
    assert path.read_text() == f"password={PASSWORD}\n"
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
