"""``drctl failover`` resolves its stack once and reads its stack file once (issue 47): the command reads
it into a :class:`~dr.topology.StackFile` and every layer under it — the kind's confirmation, plan and run,
the frame's checks under the lock, the journal's digest — takes what was read."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dr.base.stackref import StackRef
from dr.failover.frame.journal import Journal
from tests.conftest import copy_stack


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[str], list[Path]]]:
    """Stack ``local`` copied into a stack directory of its own; every resolution of a stack (its names) and
    every read of that stack file's bytes (its paths) recorded."""
    stack = copy_stack("local", tmp_path / "stacks" / "Pulumi.local.yaml")
    monkeypatch.setenv("KDR_STACK_DIR", str(stack.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    resolved: list[str] = []
    read: list[Path] = []
    resolve, read_bytes = StackRef.resolve.__func__, Path.read_bytes  # type: ignore[attr-defined]

    def counting_read_bytes(path: Path) -> bytes:
        if path.resolve() == stack.resolve():
            read.append(path)
        return read_bytes(path)

    monkeypatch.setattr(StackRef, "resolve", classmethod(lambda cls, name: resolved.append(name) or resolve(cls, name)))
    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)
    yield stack, resolved, read


def _drctl(*args: str) -> Any:
    from dr.cli.drctl import cli

    return CliRunner().invoke(cli, list(args))


def test_a_failover_reads_its_stack_file_once_from_the_command_to_the_journal(
    counted: tuple[Path, list[str], list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new failover: the command, the kind's confirmation and run, the frame under the lock, the topologies
    and the journal's record of the estate all take one reading; the journal's digest is of those bytes.
    Then, the failover finished: ``drctl failover`` and its dry run read the file once each."""
    import dr.failover.frame.run as frame_run

    stack, resolved, read = counted
    ran: list[str] = []

    def no_steps(ctx: Any, steps: Any, on_step: Any, *, probe: bool) -> None:  # the steps need running clusters
        ran.append(f"{ctx.source}->{ctx.target}")
        ctx.journal.set_status("pending")

    monkeypatch.setattr(frame_run, "_run_steps", no_steps)
    res = _drctl("failover", "--stack", "local", "--yes", "--json")
    assert res.exit_code == 0, res.output
    assert ran == ["A->B"], "the run opened on the topology the command read"
    assert resolved == ["local"], "the stack resolved once"
    assert read == [stack], "the stack file read once, by the command"
    journal = Journal.load(StackRef.of_file(stack, stack.parent.parent / "state" / "local").failover_home)
    assert journal is not None
    assert journal.record.stack_digests == [hashlib.sha256(stack.read_bytes()).hexdigest()], "the digest of the read"

    journal.record.desired_config = journal.record.original_config  # as if it finished with this very file
    journal.set_status("completed")
    for args in (("--yes",), ("--dry-run",)):
        resolved.clear(), read.clear()
        res = _drctl("failover", "--stack", "local", *args)
        assert res.exit_code == 0, res.output
        assert "already finished" in res.output, res.output
        assert (resolved, read) == (["local"], [stack]), f"drctl failover {' '.join(args)}: resolved and read once"
