"""dr.base.files.write_atomic: the one atomic file write (credentials, properties, the stack file)."""

from __future__ import annotations

import os
from pathlib import Path

from dr.base.files import write_atomic
from dr.runtime.cluster import write_properties
from dr.runtime.credentials import Credentials


def test_a_new_file_is_private_and_complete(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "secret.json"
    write_atomic(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}'
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret.json"]  # no temporary file left


def test_mode_none_keeps_the_mode_and_a_link_keeps_its_target(tmp_path: Path) -> None:
    real = tmp_path / "Pulumi.real.yaml"
    real.write_text("old\n")
    os.chmod(real, 0o644)
    link = tmp_path / "Pulumi.link.yaml"
    link.symlink_to(real)
    write_atomic(link, "new\n", mode=None)
    assert link.is_symlink() and real.read_text() == "new\n"
    assert real.stat().st_mode & 0o777 == 0o644


def test_the_writers_use_it(tmp_path: Path) -> None:
    write_properties(tmp_path / "server.properties", {"a": "1", "b": "x=y"})
    assert (tmp_path / "server.properties").read_text() == "a=1\nb=x=y\n"
    assert (tmp_path / "server.properties").stat().st_mode & 0o777 == 0o600
    creds = Credentials(tmp_path / "state")
    password = creds.password("alice")
    assert Credentials(tmp_path / "state").password("alice") == password
    assert (tmp_path / "state" / "credentials.json").stat().st_mode & 0o777 == 0o600
