"""Setup and toolchain bad input: a missing tool or a half-written cache names the problem and the fix."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dr.base.errors import ToolchainError
from dr.base.toolchain import toolchain, versions
from tests import REPO_ROOT


@pytest.mark.parametrize("missing", ["java", "mvn", "go"])
def test_setup_names_a_missing_tool_and_how_to_install_it(missing: str, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in [
        "python3.11",
        "java",
        "mvn",
        "go",
        "bash",
        "sed",
        "head",
        "df",
        "awk",
        "mkdir",
        "date",
        "dirname",
        "cat",
        "sha256sum",
        "cut",
        "printf",
    ]:
        found = shutil.which(tool)
        if found and tool != missing:
            (bindir / tool).symlink_to(found)
    res = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        env={"PATH": str(bindir), "HOME": str(tmp_path), "KDR_HOME": str(tmp_path / "cache")},
        timeout=60,
    )
    assert res.returncode == 3, res.stderr
    assert f"'{missing}' is not on PATH" in res.stderr
    assert "next step:" in res.stderr


def test_half_written_cache_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = versions()
    partial = tmp_path / "kafka" / v["KAFKA_VERSION"]
    partial.mkdir(parents=True)
    (partial / "kafka_2.13.jar").write_bytes(b"truncated")  # no .complete stamp: an interrupted copy
    monkeypatch.setenv("KDR_HOME", str(tmp_path))
    toolchain.cache_clear()
    try:
        with pytest.raises(ToolchainError) as info:
            toolchain()
        assert "make setup" in str(info.value) and v["KAFKA_VERSION"] in str(info.value)
    finally:
        toolchain.cache_clear()
