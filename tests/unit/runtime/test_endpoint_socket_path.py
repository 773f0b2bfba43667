"""The local proxy's runtime API socket: beside its configuration, or under a private temporary directory
when a deep clone would make the path longer than HAProxy accepts (found by `make demo` in a deep clone)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dr.base.errors import ConfigError
from dr.runtime.endpoint import SOCKET_PATH_MAX, api_socket_path, socket_dir


def test_a_short_state_directory_keeps_the_socket_beside_the_configuration(tmp_path: Path) -> None:
    d = Path("/srv/kdr/state/endpoint")
    assert api_socket_path(d) == d / "api.sock"


def test_a_deep_state_directory_gets_a_short_private_socket_path_stable_per_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 60) / "out" / "demo" / "state" / "endpoint"
    path = api_socket_path(deep)
    assert len(str(path)) <= SOCKET_PATH_MAX and path.name == "api.sock"
    assert path == api_socket_path(deep) and path != api_socket_path(deep.parent / "other")
    assert path.parent.name.startswith(f"kdr-{os.getuid()}-")


def test_the_socket_directory_is_made_private_and_a_foreign_or_open_one_is_refused(tmp_path: Path) -> None:
    sock = tmp_path / "kdr-sock" / "api.sock"
    socket_dir(sock)
    assert (sock.parent.stat().st_mode & 0o777) == 0o700
    socket_dir(sock)  # ours and private: accepted again
    os.chmod(sock.parent, 0o777)
    with pytest.raises(ConfigError, match="not a private directory"):
        socket_dir(sock)
