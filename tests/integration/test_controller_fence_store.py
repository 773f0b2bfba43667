"""The self-fence's record in a real PostgreSQL team database (``kdr_event`` rows ``self-fence`` and
``self-fence-lifted``): what a fence writes is what a restarted controller, or another machine, reads back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from dr.controller.fence import FenceRecord, FenceStore
from dr.failover.record.team_store import TeamStore
from tests.pg_server import PgUrl, pg_server

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgUrl]:
    with pg_server() as url:
        yield url


def test_the_fence_record_lives_in_the_team_database(pg: PgUrl, tmp_path_factory: pytest.TempPathFactory) -> None:
    stack = uuid.uuid4().hex[:12]
    store = FenceStore(tmp_path_factory.mktemp("home"), stack, TeamStore(str(pg), "kafka-dr"))
    assert store.latest() is None
    fenced = FenceRecord(
        cluster="A", holder="ops@host/A", token=41, reason="renew-deadline", fenced_at=1000.5, last_renewed_at=995.0,
        lease_expires_at=1003.0, removed=[{"principal": "User:orders-app", "operation": "WRITE"}],
    )  # fmt: skip
    store.save(fenced, "ops@host/A")
    elsewhere = FenceStore(tmp_path_factory.mktemp("other"), stack, TeamStore(str(pg), "kafka-dr"))
    assert elsewhere.latest() == fenced  # another machine with only the URL sees it
    store.save(fenced.model_copy(update={"lifted_at": 1010.0, "lifted_token": 57}), "ops@host/A")
    latest = elsewhere.latest()
    assert latest is not None and latest.lifted_token == 57 and latest.fenced_at == 1000.5
    kinds = [e["kind"] for e in TeamStore(str(pg), "kafka-dr").events(stack)]
    assert kinds == ["self-fence", "self-fence-lifted"]
    assert not store.path.exists()  # nothing written beside it on disk
    assert (
        FenceStore(tmp_path_factory.mktemp("x"), uuid.uuid4().hex[:12], TeamStore(str(pg), "kafka-dr")).latest() is None
    )
