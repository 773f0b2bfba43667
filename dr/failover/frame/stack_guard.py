"""The stack file during a failover: unchanged since the run began, except by the run itself.

A failover converges the topology it planned from the stack file when it began. A change made to the
file while it runs (a topic added, say) would be overwritten by the run's own write of the desired
state — silently dropped — or would mix into the convergence. So the journal keeps the SHA-256 the file
must have (:attr:`dr.failover.frame.journal.JournalRecord.stack_digests`): before every step
:func:`check_unchanged` refuses a file with another digest, naming it and what to do; the run's own
writes go through :func:`guarded_write`, which records the digest it writes (both the old and the new
while the write is under way, so a run killed in between resumes).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dr.base.errors import FailoverError, LockHeld
from dr.topology.stackfile import render_stack_config, write_stack_config

if TYPE_CHECKING:
    from dr.failover.frame.journal import Journal
    from dr.topology import StackFile, Topology

__all__ = ["check_unchanged", "file_digest", "guarded_write", "refuse_finished_elsewhere", "text_digest"]


def text_digest(text: str) -> str:
    """SHA-256 (hex) of a stack file's text as written (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of the file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def refuse_finished_elsewhere(journal: Journal, stack: StackFile) -> None:
    """Refuse (:class:`LockHeld`, exit 7) an operator coming back to a failover another operator finished,
    with the stack file that failover started from (not the one it wrote; ``stack``, as read): running from
    it would start a failover of an estate that is no longer as the file says. Names who finished it and when."""
    from dr.failover.record.team_store import finished_by, operator_identity

    record = journal.record
    who = finished_by(record.to_json())
    if not journal.finished or who in (None, operator_identity()):
        return
    if stack.config != record.original_config or record.original_config == record.desired_config:
        return
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.finished_at or 0))
    raise LockHeld(
        f"failover {journal.failover_id} of stack '{record.stack}' was finished by {who} at {when}; "
        f"{stack.path.name} here is still the stack file it started from.",
        f"take the stack file {who}'s failover wrote (git pull), then `drctl status --stack {record.stack}`; "
        "nothing was changed",
    )


def check_unchanged(journal: Journal, path: Path, step: str) -> None:
    """Refuse (FailoverError) when the stack file is not as the run expects it before ``step``.

    A journal without recorded digests (an older drctl) is not checked."""
    allowed = journal.record.stack_digests
    if not allowed:
        return
    try:
        now = file_digest(path)
    except OSError as exc:
        raise FailoverError(
            f"failover {journal.failover_id} stopped before step {step}: its stack file {path} cannot be read "
            f"({exc.strerror or exc}).",
            "put the file back as it was, then rerun the same command: the failover resumes",
        ) from None
    if now in allowed:
        return
    raise FailoverError(
        f"failover {journal.failover_id} stopped before step {step}: {path} was changed while the failover runs "
        f"(sha256 {now[:12]}…, the run expects {allowed[-1][:12]}…). The failover converges the topology it "
        "began with; a change made now would be overwritten or lost, so it is not applied.",
        f"undo the change (the copy the run keeps is {journal.path.parent / (path.name + '.before-' + journal.failover_id)}"
        " once the desired-state step has run; before it, the file as it was at the start), rerun "
        "`drctl failover` to finish, then make the change again and `drctl estate up`",
    )


def guarded_write(journal: Journal, path: Path, topology: Topology) -> bool:
    """Write ``topology`` to the stack file (:func:`dr.topology.stackfile.write_stack_config`) after
    checking it is unchanged, recording the digest written; True when the file changed."""
    check_unchanged(journal, path, "its write of the stack file")
    if not journal.record.stack_digests:
        return write_stack_config(path, topology)
    before, after = file_digest(path), text_digest(render_stack_config(path, topology))
    journal.record.stack_digests = [before, after]
    journal.save()
    written = write_stack_config(path, topology)
    journal.record.stack_digests = [file_digest(path)]
    journal.save()
    return written


def refuse_up_mid_failover(journal: Journal | None, stack: str) -> None:
    """Refuse (:class:`FailoverError`, exit 6) ``drctl estate up`` while a failover of ``stack`` is past its
    preflight and has not written its desired state: the stack file still declares the estate as it was
    before the failover, so an ``up`` (with ``--refresh`` above all) would grant back the writes the fence
    removed and point a client endpoint back at the old cluster."""
    if journal is None or journal.status not in ("running", "interrupted", "failed"):
        return
    steps = journal.record.steps
    entered = [n for n, e in steps.items() if e.status != "pending" and not n.endswith("preflight")]
    if not entered or ("desired-state" in steps and journal.is_done("desired-state")):
        return
    raise FailoverError(
        f"failover {journal.failover_id} of stack '{stack}' is unfinished ({journal.status}, last step "
        f"{entered[-1]}): `drctl estate up` would apply the stack file as it stood before the failover, "
        "granting back the writes its fence removed.",
        f"finish it first: `drctl failover --stack {stack}` resumes it (a stopped local cluster: "
        f"`drctl estate start --stack {stack} --cluster <name>`); nothing was changed",
    )
