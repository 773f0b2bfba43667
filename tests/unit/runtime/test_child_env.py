"""Long-running children (brokers, MirrorMaker 2, watchdogs, HAProxy) start with only the environment they
need: never the operator's Pulumi passphrase, the backend URL with its database password, or other secrets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dr.base.child_env import child_env
from dr.runtime.process import JvmProcess, pid_alive, wait_until

SECRETS = {
    "PULUMI_CONFIG_PASSPHRASE": "pass-phrase-1234",
    "PULUMI_BACKEND_URL": "postgres://kdr:db-pass-5678@db.example:5432/kdr",
    "PGPASSWORD": "pg-pass-9012",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-3456",
    "KDR_SOME_TOKEN": "kdr-token-7890",
    "SOME_UNRELATED_SETTING": "kept-nowhere",
}


def test_child_env_keeps_what_a_process_needs_and_nothing_else() -> None:
    base = {**SECRETS, "PATH": "/usr/bin", "HOME": "/home/op", "LC_ALL": "C.UTF-8", "KDR_STATE_DIR": "/s"}
    env = child_env({"EXTRA": "given"}, base=base)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/op", "LC_ALL": "C.UTF-8", "KDR_STATE_DIR": "/s", "EXTRA": "given"}


def test_a_started_process_does_not_inherit_the_operators_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "node-0"
    proc = JvmProcess("kdr-unit-env", home / "pid", home / "server.log")
    pid = proc.start([sys.executable, "-c", "import time; time.sleep(60)", "-cp", str(home / "x.properties")])
    try:
        environ = Path(f"/proc/{pid}/environ")
        # until the child has exec'd, /proc shows its parent's environment
        assert wait_until(lambda: b"kdr-unit-env" in Path(f"/proc/{pid}/cmdline").read_bytes(), 10)
        seen = environ.read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0].decode() for item in seen if item}
        assert "PATH" in names and not names & set(SECRETS), names
        assert not any(value.encode() in environ.read_bytes() for value in SECRETS.values())
    finally:
        proc.kill()
        assert not pid_alive(pid)
