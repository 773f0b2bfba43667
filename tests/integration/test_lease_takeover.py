"""A live lease is never taken over, whatever the taker's settings: real processes, a real PostgreSQL.

Operator 1's process holds the failover lease of stack ``local`` in the team database (the lock every
failover takes, :class:`dr.failover.frame.journal.StackLock`) on the default 30 s threshold, renewing it.
Operator 2 sets ``KDR_LEASE_STALE_S=1`` and runs ``drctl failover --take-over`` once operator 1's heartbeat
is more than 1 s old (the acceptance finding: before, the taker's own threshold made the live lease
stale and the take-over went through). Now it exits 7 naming operator 1, and the lease is operator 1's,
same epoch, with no take-over event.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.failover.record.team_store import TeamStore
from dr.runtime.process import wait_until
from tests import REPO_ROOT
from tests.integration.helpers import StackEnv
from tests.pg_server import PgUrl, pg_server

HOLD = """
import sys
from pathlib import Path
from dr.failover.frame.journal import StackLock
lock = StackLock(Path(sys.argv[1]), "local")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


@pytest.fixture(scope="module")
def pg_url() -> Iterator[PgUrl]:
    with pg_server() as url:
        yield url


def _env(url: str, root: Path, operator: str, **extra: str) -> dict[str, str]:
    """The repository's own stack ``local`` (its stack file only is read), with this operator's state under
    ``root`` and the team database as the backend."""
    return {
        **os.environ,
        "PULUMI_BACKEND_URL": url,
        **StackEnv(REPO_ROOT, "local", state_dir=root / "state"),
        "KDR_OPERATOR": operator,
        **extra,
    }


def test_a_live_lease_is_refused_to_a_taker_with_a_1s_threshold(pg_url: PgUrl, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "op1" / "state" / "local")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env=_env(pg_url, tmp_path / "op1", "op1"),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = TeamStore(pg_url, "kafka-dr")
        before = store.lease("local")
        assert before is not None and before.holder == "op1"
        # op1 renews every 5 s: wait until its last heartbeat is older than op2's 1 s
        assert wait_until(lambda: store.lease("local").heartbeat_age_s > 1.5, 30, interval=0.1)  # type: ignore[union-attr]
        res = subprocess.run(
            [sys.executable, "-m", "dr.cli", "failover", "--stack", "local", "--yes", "--take-over"],
            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
            env=_env(pg_url, tmp_path / "op2", "op2", KDR_LEASE_STALE_S="1"),
        )  # fmt: skip
        assert res.returncode == 7, res.stdout[-2000:] + res.stderr[-2000:]
        assert "held by op1" in res.stderr and "never taken over" in res.stderr, res.stderr
        after = store.lease("local")
        assert after is not None and (after.holder, after.epoch) == ("op1", before.epoch)
        assert "lease-taken-over" not in [e["kind"] for e in store.events("local")]
        assert after.stale_after_s == 30, "the holder's threshold, recorded with its lease"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert TeamStore(pg_url, "kafka-dr").lease("local") is None, "op1 released its lease"
