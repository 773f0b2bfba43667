"""A failover journal belongs to its estate, and a failover refuses before it fences (issue 32, parts 3 and 4).

Without clusters: a local cluster's identity is its storage's ``cluster.json``, written here as the
estate would; the Pulumi state is a file in the stack's ``file://`` backend; the steps of the
stack-file test are stand-ins run by the real frame (:func:`dr.failover.frame.run.run_frame`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from dr.base.errors import FailoverError, LockHeld
from dr.base.stackref import StackRef
from dr.failover.frame.journal import Journal
from dr.failover.frame.run import new_context, run_frame
from dr.failover.frame.stack_guard import file_digest
from dr.failover.frame.step import Context, FailoverOptions, Step, StepResult
from dr.topology import StackFile, Topology, dump_stack_config, load_stack_file
from tests.unit.failover.kinds.active_passive.test_failover_plan import run
from tests.unit.failover_helpers import journal_home, lock_held_elsewhere, new_journal

PORTS = (32110, 32210, 32310)  # nothing listens there during the unit tests


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The local stack on idle ports, its own stack and state directories."""
    from tests.unit.failover_helpers import local_stack_copy

    path = local_stack_copy(tmp_path, PORTS)
    monkeypatch.setenv("KDR_STACK_DIR", str(path.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    yield path


def _state() -> Path:
    return Path(os.environ["KDR_STATE_DIR"]) / "unit"


def _format(cluster: str, cluster_id: str) -> None:
    """Give local cluster ``cluster`` the storage identity ``cluster_id`` (as LocalCluster does)."""
    d = _state() / "clusters" / cluster
    d.mkdir(parents=True, exist_ok=True)
    (d / "cluster.json").write_text(json.dumps({"cluster_id": cluster_id, "brokers": 1, "base_port": 0}))


def _pending_journal(stack: Path, clusters: dict[str, str] | None) -> Journal:
    """A failover of the stack that promoted B, published clients and wrote the desired state, then
    waited (``pending``) — the journal of the finding — recording ``clusters`` (None: an older drctl's)."""
    original = load_stack_file(stack)
    j = new_journal(journal_home(), dump_stack_config(original), dump_stack_config(original.after_failover()))
    if clusters is not None:
        j.record_estate(clusters=clusters, stack_state=None, stack_digest=file_digest(stack))
    j.begin_run(mode="planned", options={})
    for name in ("preflight", "fence-drain", "promote", "clients", "consumer-groups", "desired-state", "integrity"):
        j.start_step(name, {})
        j.finish_step(name, "done", {"summary": f"{name} ok"}, 0.1)
    j.end_run("pending")
    j.set_status("pending")
    return j


# ------------------------------------------------------------------------------ part 3: the journal's estate
def test_a_journal_of_other_clusters_is_refused_naming_both_ids_archived_and_never_resumed(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding: the estate destroyed and rebuilt from the same stack file, the old journal pending."""
    j = _pending_journal(stack, {"A": "old-AAAAAAAAAAAAAAAAAAAA", "B": "old-BBBBBBBBBBBBBBBBBBBB"})
    _format("A", "new-AAAAAAAAAAAAAAAAAAAA")
    _format("B", "new-BBBBBBBBBBBBBBBBBBBB")

    assert run("status", "--stack", "unit", "--json") == 6, "status must not say all is well"
    out = capsys.readouterr()
    st = json.loads(out.out)
    assert "A: journal old-AAAAAAAAAAAAAAAAAAAA, now new-AAAAAAAAAAAAAAAAAAAA" in st["journal_foreign"]
    assert any("belongs to other clusters" in p and "B: journal old-B" in p for p in st["problems"])
    assert "do not resume it" in out.err

    assert run("failover", "--stack", "unit", "--dry-run") == 6  # writes nothing
    assert "belongs to another estate" in capsys.readouterr().err
    assert Journal.load(journal_home()) is not None

    assert run("failover", "--stack", "unit", "--mode", "planned", "--yes") == 6
    err = capsys.readouterr().err
    assert "B: journal old-BBBBBBBBBBBBBBBBBBBB, now new-BBBBBBBBBBBBBBBBBBBB" in err
    assert "never resumed" in err and "resuming" not in err and "Nothing was done" in err
    assert Journal.load(journal_home()) is None, "the foreign journal is no longer the current one"
    archived = list((journal_home() / "failover").glob(f"abandoned-{j.failover_id}-*.json"))
    assert len(archived) == 1, "moved aside, not deleted"
    data = json.loads(archived[0].read_text())
    assert data["status"] == "abandoned" and data["abandoned"]["status_before"] == "pending"
    assert data["steps"]["promote"]["status"] == "done", "the archive keeps what the journal held"

    assert run("status", "--stack", "unit", "--json") == 6
    st = json.loads(capsys.readouterr().out)
    assert st["abandoned_journal"]["path"] == str(archived[0])
    assert any(str(archived[0]) in p and "ended unfinished" in p for p in st["problems"])


def test_a_journal_on_its_own_clusters_is_not_foreign(stack: Path) -> None:
    from dr.failover.frame.identity import foreign_reason

    j = _pending_journal(stack, {"A": "same-A", "B": "same-B"})
    _format("A", "same-A")
    _format("B", "same-B")
    assert foreign_reason(StackRef.resolve("unit"), j) is None
    _format("B", "other-B")
    assert (
        foreign_reason(StackRef.resolve("unit"), j)
        == "its clusters are not the ones running now (B: journal same-B, now other-B)"
    )


def test_a_cluster_whose_id_cannot_be_read_now_is_not_a_mismatch() -> None:
    """An unreachable A (unplanned failover) or a standby not built yet proves nothing either way."""
    from dr.failover.frame.identity import mismatches

    assert mismatches({"A": "a1", "B": "b1"}, {"B": "b1"}) == []
    assert [str(m) for m in mismatches({"A": "a1", "B": "b1"}, {"A": "a2", "B": "b1"})] == ["A: journal a1, now a2"]


def test_a_journal_of_an_older_drctl_without_ids_is_resumed_as_before(stack: Path) -> None:
    """Decision: a journal that recorded no identities (and no stack state) cannot be checked; it loads and
    is not refused, so a failover started before the upgrade can still be finished."""
    from dr.failover.frame.identity import foreign_reason

    j = _pending_journal(stack, None)
    raw = json.loads(j.path.read_text())
    for key in ("clusters", "stack_state", "stack_digests", "abandoned"):
        raw.pop(key, None)
    j.path.write_text(json.dumps(raw))
    _format("B", "whatever")
    again = Journal.load(journal_home())
    assert again is not None and again.record.clusters == {} and again.record.stack_digests == []
    assert foreign_reason(StackRef.resolve("unit"), again) is None


def test_a_stack_removed_from_its_backend_makes_its_journal_foreign(stack: Path) -> None:
    from dr.estate.stack_state import file_backend_stacks
    from dr.failover.frame.identity import foreign_reason

    ref = StackRef.resolve("unit")
    stacks = file_backend_stacks(ref)
    assert stacks is not None
    stacks.mkdir(parents=True)
    state_file = stacks / "unit.json"
    state_file.write_text(json.dumps({"version": 3, "checkpoint": {"stack": "unit", "latest": {}}}))
    j = _pending_journal(stack, {})
    j.record_estate(clusters={}, stack_state=str(state_file), stack_digest=file_digest(stack))
    assert foreign_reason(ref, j) is None
    state_file.unlink()  # `pulumi stack rm --force`
    reason = foreign_reason(ref, j)
    assert reason is not None and str(state_file) in reason and "pulumi stack rm" in reason


def test_estate_down_destroy_archives_the_journal_and_refuses_beside_a_running_failover(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dr.failover.lifecycle import destroy_estate

    ref = StackRef.resolve("unit")
    j = _pending_journal(stack, {"B": "b-1"})
    destroyed: list[bool] = []
    with lock_held_elsewhere(journal_home()), pytest.raises(LockHeld):
        destroy_estate(ref, lambda: destroyed.append(True))
    assert destroyed == [] and Journal.load(journal_home()) is not None

    where = destroy_estate(ref, lambda: destroyed.append(True))
    assert destroyed == [True] and where is not None and where.name.startswith(f"abandoned-{j.failover_id}-")
    assert Journal.load(journal_home()) is None
    assert json.loads(where.read_text())["abandoned"]["by"] == "drctl estate down --destroy"
    assert run("status", "--stack", "unit") == 6
    err = capsys.readouterr().err
    assert f"last failover {j.failover_id} was ended unfinished (pending)" in err and str(where) in err


# ------------------------------------------------------------------------------ part 4: refused before fencing
def _frame(stack: Path, steps: list[Step]) -> Journal:
    """Run ``steps`` through the real frame (lock, journal, per-step checks) as a new failover."""
    ref = StackRef.resolve("unit")
    original = load_stack_file(stack)
    desired = original.after_failover()

    class NoConverger:
        name = "none"

        def converge(self, topology: Topology, progress: Any) -> dict[str, float]:
            return {}

    def open_run(journal: Journal | None, _read: StackFile) -> tuple[Context, bool]:
        j = Journal.create(
            ref.made_failover_home(),
            stack="unit",
            mode="planned",
            source="A",
            target="B",
            standby="C",
            original_config=dump_stack_config(original),
            desired_config=dump_stack_config(desired),
            steps=[s.name for s in steps],
        )
        ctx = new_context(
            Context, ref, j, original, desired, "planned",
            options=FailoverOptions(), converger=NoConverger(), progress=lambda _m: None,
        )  # fmt: skip
        return ctx, False

    run_frame(ref, steps, open_run, title=lambda ctx: "test")
    journal = Journal.load(journal_home())
    assert journal is not None
    return journal


def test_a_stack_file_changed_while_the_failover_runs_is_refused_at_the_next_step(stack: Path) -> None:
    """A topic added to the stack file mid-run: never silently dropped by the run's own write."""
    ran: list[str] = []

    def edits(ctx: Context) -> StepResult:
        ran.append("first")
        doc = yaml.safe_load(stack.read_text())
        doc["config"]["kafka-dr:topics"].append({"name": "added-mid-run", "partitions": 1, "replication_factor": 1})
        stack.write_text(yaml.safe_dump(doc, sort_keys=False))
        return StepResult("done", None, "an operator edits the stack file meanwhile")

    def writes(ctx: Context) -> StepResult:
        ran.append("second")
        ctx.write_stack(ctx.desired)
        return StepResult("done", None, "wrote the desired state")

    with pytest.raises(FailoverError) as refused:
        _frame(stack, [Step("first", edits, "edit"), Step("second", writes, "write")])
    text = str(refused.value)
    assert ran == ["first"], "the step after the change did not run"
    assert f"{stack} was changed while the failover runs" in text and "before step second" in text
    assert "undo the change" in text and "drctl estate up" in text
    assert "added-mid-run" in stack.read_text(), "the operator's change is still there, not overwritten"


def test_the_runs_own_writes_of_the_stack_file_pass_the_check(stack: Path) -> None:
    def writes(ctx: Context) -> StepResult:
        ctx.write_stack(ctx.desired)
        return StepResult("done", None, "wrote the desired state")

    def after(ctx: Context) -> StepResult:
        return StepResult("done", None, "ran after the write")

    journal = _frame(stack, [Step("writes", writes, "write"), Step("after", after, "after")])
    assert journal.status == "completed"
    assert journal.record.stack_digests == [file_digest(stack)]
    assert load_stack_file(stack).cluster("B").role.value == "active"


def _damage_state() -> Path:
    from dr.estate.stack_state import file_backend_stacks

    stacks = file_backend_stacks(StackRef.resolve("unit"))
    assert stacks is not None
    stacks.mkdir(parents=True)
    path = stacks / "unit.json"
    path.write_text('{"version": 3, "checkpoint": {"stack": "unit", "latest": {"resources": [')  # truncated
    return path


def test_a_damaged_pulumi_state_makes_dry_run_status_and_failover_exit_non_zero_naming_the_file(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _damage_state()
    assert run("failover", "--stack", "unit", "--dry-run") == 2
    err = capsys.readouterr().err
    assert str(path) in err and "cannot be read" in err and "pulumi stack import" in err

    assert run("status", "--stack", "unit", "--json") == 2
    out = capsys.readouterr()
    st = json.loads(out.out)
    assert str(path) in st["pulumi_state_error"]
    assert any(str(path) in p for p in st["problems"]) and str(path) in out.err

    assert run("failover", "--stack", "unit", "--yes") == 2
    assert str(path) in capsys.readouterr().err
    assert Journal.load(journal_home()) is None, "refused before a journal was started: nothing fenced"


def test_a_readable_state_and_no_state_are_not_problems(stack: Path) -> None:
    from dr.estate.stack_state import state_problem

    ref = StackRef.resolve("unit")
    assert state_problem(ref) is None  # never provisioned
    path = _damage_state()
    path.write_text(json.dumps({"version": 3, "checkpoint": {"stack": "unit", "latest": {"resources": []}}}))
    assert state_problem(ref) is None
    path.write_text(json.dumps({"version": 3}))
    assert "not a Pulumi checkpoint" in (state_problem(ref) or "")


def test_a_half_written_metadata_sidecar_is_removed_and_the_checkpoint_kept(stack: Path) -> None:
    """An engine killed inside the blob layer's write leaves an empty ``<file>.attrs`` beside a whole
    checkpoint (Pulumi then fails every command with ``failed to load checkpoint: EOF``): the damaged
    sidecars of this stack go, whole ones and other stacks' stay, the checkpoint is untouched."""
    from dr.estate.stack_state import drop_damaged_sidecars, file_backend_stacks

    ref = StackRef.resolve("unit")
    assert drop_damaged_sidecars(ref) == []  # no backend yet
    path = _damage_state()
    checkpoint = json.dumps({"version": 3, "checkpoint": {"stack": "unit", "latest": {"resources": []}}})
    path.write_text(checkpoint)
    stacks = file_backend_stacks(ref)
    assert stacks is not None
    empty = stacks / "unit.json.attrs"
    empty.write_bytes(b"")
    cut = stacks / "unit.json.bak.attrs"
    cut.write_text('{"user.cache_control":')
    whole = stacks / "other.json.attrs"
    whole.write_bytes(b"")  # another stack's: not this command's to touch
    good = stacks.parent.parent / "locks" / "organization" / "kafka-dr" / "unit" / "x.json.attrs"
    good.parent.mkdir(parents=True)
    good.write_text('{"user.content_type": "application/json", "md5": null}')
    assert drop_damaged_sidecars(ref) == sorted([empty, cut])
    assert not empty.exists() and not cut.exists() and whole.exists() and good.exists()
    assert path.read_text() == checkpoint
    assert drop_damaged_sidecars(ref) == []


def test_preflight_refuses_a_replicated_topic_the_verification_would_not_read() -> None:
    """Asked of the verification's own rule (one small call): refused in step 1, before the fence."""
    from dr.failover.act.integrity import topics_left_unread
    from dr.failover.kinds.active_passive.steps import _refuse_unverifiable

    # One definition of "internal" (dr.kafka.internal_topics): `_ledger` and `connect-audit` are ordinary
    # topics the verification reads (they stopped the failover at the integrity step before); only a name
    # Kafka or MirrorMaker 2 keeps for itself is left unread.
    assert topics_left_unread(["orders", "_ledger", "connect-audit", "__ledger", "payments"]) == ["__ledger"]
    ctx: Any = SimpleNamespace(options=FailoverOptions(), topics=["orders", "_ledger"], stack="unit")
    _refuse_unverifiable(ctx)  # read like any other topic: nothing to refuse
    ctx.topics = ["orders", "__ledger"]
    with pytest.raises(FailoverError) as refused:
        _refuse_unverifiable(ctx)
    assert "__ledger" in str(refused.value) and "nothing was changed" in str(refused.value)
    ctx.options = FailoverOptions(skip_verify=True)
    _refuse_unverifiable(ctx)  # no verification: nothing to refuse


def test_estate_up_is_refused_between_a_failovers_fence_and_its_desired_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    from dr.base.errors import FailoverError
    from dr.failover.frame.stack_guard import refuse_up_mid_failover
    from tests.unit.failover_helpers import new_journal

    journal = new_journal(tmp_path)
    refuse_up_mid_failover(None, "unit")  # no failover: nothing to refuse
    journal.step("preflight").status = "completed"
    refuse_up_mid_failover(journal, "unit")  # only the read-only preflight ran
    journal.step("fence-drain").status = "completed"
    journal.step("promote").status = "running"
    journal.record.status = "interrupted"
    with pytest.raises(FailoverError) as info:
        refuse_up_mid_failover(journal, "unit")
    assert "unfinished (interrupted, last step promote)" in str(info.value)
    assert "drctl failover --stack unit" in (info.value.fix or "")
    for name in journal.record.steps:
        journal.step(name).status = "completed"
    journal.record.status = "completed"
    refuse_up_mid_failover(journal, "unit")  # finished: the stack file is the new one
