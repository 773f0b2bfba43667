"""A drill's stack: on a backend of its own, whatever the environment exports, and never a stack it did not
create (dr.estate.stack_owner, dr.failover.drill.frame)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dr.base.errors import ConfigError
from dr.base.stackref import StackRef
from dr.estate.stack import EstateStack
from dr.estate.stack_owner import OWNER_FILE, claim, require_owned
from dr.failover.drill.frame import DrillOptions, drill_stack, prepare_copy
from tests import REPO_ROOT

TEAM_URL = "postgres://kdr:db-pass-1234@db.example:5432/kdr"


def _copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("KDR_STACK_DIR", str(REPO_ROOT))
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    out.chmod(0o755)  # an existing --out readable by every local user
    return prepare_copy(DrillOptions(stack="local", out=out))


def test_a_drill_runs_on_its_own_backend_whatever_is_exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", TEAM_URL)
    stack_path, state = _copy(tmp_path, monkeypatch)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700, "made private though it existed 0755"
    ref, restore = drill_stack(stack_path, state)
    try:
        own = f"file://{tmp_path / 'out' / 'pulumi'}"
        assert ref.pulumi_backend == own and EstateStack(ref).backend_url == own
        assert os.environ["PULUMI_BACKEND_URL"] == own, "the journal, lease and audit state follow it"
        assert ref.failover_home == tmp_path / "out" / "pulumi" / ".pulumi" / "kdr" / "kafka-dr" / "local"
        require_owned(ref, own)
        assert stat.S_IMODE((tmp_path / "out" / "pulumi" / OWNER_FILE).stat().st_mode) == 0o600
    finally:
        restore()
    assert os.environ["PULUMI_BACKEND_URL"] == TEAM_URL


def test_a_drill_of_an_automatic_stack_runs_its_copy_in_manual_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    source = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    policy = {"mode": "automatic", "maxRpoRecords": 10, "witness": {"kind": "etcd", "endpoints": ["http://e:2379"]}}
    source["config"]["kafka-dr:failoverPolicy"] = policy
    (tmp_path / "Pulumi.local.yaml").write_text(yaml.safe_dump(source, sort_keys=False))
    (tmp_path / "Pulumi.yaml").write_text((REPO_ROOT / "Pulumi.yaml").read_text())
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    stack_path, _ = prepare_copy(DrillOptions(stack="local", out=tmp_path / "out"))
    copied = yaml.safe_load(stack_path.read_text())["config"]["kafka-dr:failoverPolicy"]
    # no controller runs in a drill: its brokers must not wait for a lease permit (the broker-side fence)
    assert copied == {**policy, "mode": "manual"}


def test_a_stack_the_drill_did_not_create_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack_path, state = _copy(tmp_path, monkeypatch)
    ref, restore = drill_stack(stack_path, state)
    restore()
    with pytest.raises(
        ConfigError, match=r"refusing to touch stack 'local' in backend postgres://kdr:\*\*\*@db"
    ) as err:
        require_owned(ref, TEAM_URL)  # the exported backend, not the drill's
    assert "db-pass-1234" not in str(err.value) and err.value.exit_code == 2
    (tmp_path / "out" / "pulumi" / OWNER_FILE).write_text("another drill's token\n")
    with pytest.raises(ConfigError, match="the drill did not create it"):
        EstateStack(ref).preview()  # checked before any Pulumi operation
    with pytest.raises(ConfigError, match="the drill did not create it"):
        EstateStack(ref).destroy()
    require_owned(StackRef.of_file(stack_path, state), TEAM_URL)  # a real stack's ref: no drill's to guard


def test_a_backend_that_holds_anything_is_never_claimed(tmp_path: Path) -> None:
    backend = tmp_path / "pulumi"
    (backend / ".pulumi" / "stacks").mkdir(parents=True)
    with pytest.raises(ConfigError, match="is not empty: a drill runs only on a backend it creates"):
        claim(backend)
    assert not (backend / OWNER_FILE).exists()


def test_every_drill_on_a_copy_ends_alike_whatever_happened_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_a_copy, the one ending of every drill on a copy: the drill failed inside, yet its seconds are
    measured, the process's backend is restored, the drill concluded, ``drill.json`` written and the
    stack's last drill recorded; with ``keep`` nothing is torn down."""
    import json

    from dr.failover.drill.frame import on_a_copy
    from dr.failover.drill.last import last_drill
    from dr.failover.drill.result import DrillResult

    monkeypatch.setenv("PULUMI_BACKEND_URL", TEAM_URL)
    monkeypatch.setenv("KDR_STACK_DIR", str(REPO_ROOT))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    own = StackRef.resolve("local")
    options = DrillOptions(stack="local", out=tmp_path / "out", keep=True)
    result = DrillResult(stack="local", mode="planned", out=str(options.out))
    concluded: list[str] = []
    with (
        pytest.raises(RuntimeError, match="lost in the middle"),
        on_a_copy(
            own, options, result, lambda _m: None, conclude=lambda: concluded.append(os.environ["PULUMI_BACKEND_URL"])
        ) as copy,
    ):
        assert copy.path == tmp_path / "out" / "stack" / "Pulumi.local.yaml"
        assert [c.name for c in copy.seen[0].clusters] == ["A", "B", "C"]
        assert os.environ["PULUMI_BACKEND_URL"] == copy.ref.pulumi_backend != TEAM_URL
        raise RuntimeError("lost in the middle")
    assert concluded == [TEAM_URL], "concluded once, after the backend was restored"
    assert result.seconds >= 0
    assert json.loads((tmp_path / "out" / "drill.json").read_text())["stack"] == "local"
    last = last_drill(own.made_state_dir())
    assert last is not None and last["stack"] == "local"
    assert copy.path.is_file(), "kept: nothing torn down"
