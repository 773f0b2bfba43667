"""The controller's witness on real stores: a three-member etcd cluster on loopback, and PostgreSQL.

etcd (:class:`~dr.controller.etcd.EtcdWitness` through etcd's JSON gateway): one holder at a time (two
controllers racing get one winner), the fencing token grows across holders, a holder that stops renewing
loses the lease after the TTL, a killed member leaves the witness working (quorum), and the whole witness
down makes acquiring fail with a clear error; observers' verdicts are read back by another client and
disappear after their TTL, and the last automatic failover's time outlives the clients. The PostgreSQL
single witness (:class:`~dr.controller.pg_witness.PostgresWitness`) is held to the same first three, the
verdicts and the same error.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from dr.base.errors import ClusterError
from dr.controller.etcd import EtcdWitness
from dr.controller.pg_witness import PostgresWitness
from dr.controller.witness import Holding, Witness
from dr.failover.record.team_store import TeamStore
from tests.etcd_server import EtcdCluster, etcd_cluster
from tests.pg_server import PgUrl, pg_server

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def etcd3() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def pg() -> Iterator[PgUrl]:
    with pg_server() as url:
        yield url


def _etcd(cluster: EtcdCluster, key: str, ttl: float = 10) -> EtcdWitness:
    return EtcdWitness(cluster.endpoints, f"/kafka-dr/test/{key}/leader", ttl)


def _key() -> str:
    return uuid.uuid4().hex[:12]


def _race(witnesses: list[Witness]) -> list[Holding | None]:
    """Every witness acquires at once (released together by a barrier)."""
    barrier = threading.Barrier(len(witnesses))
    results: list[Holding | None] = [None] * len(witnesses)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = witnesses[i].acquire(f"controller-{i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(witnesses))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _one_holder_at_a_time(witnesses: list[Witness]) -> None:
    results = _race(witnesses)
    won = [h for h in results if h is not None]
    assert len(won) == 1, results
    current = witnesses[0].current()
    assert current is not None and current.holder == won[0].holder and current.token == won[0].token
    # the others are told who holds it, and cannot take it while it lives
    assert all(w.acquire("late") is None for w in witnesses)
    assert witnesses[1].renew(won[0])


def _token_grows(first: Witness, second: Witness) -> None:
    a = first.acquire("a")
    assert a is not None
    first.release(a)
    assert first.current() is None
    b = second.acquire("b")
    assert b is not None and b.token > a.token
    assert not first.renew(a)  # a released holding is never renewed into the new holder's lease
    second.release(b)


def _lost_after_ttl(holder: Witness, other: Witness) -> None:
    held = holder.acquire("stops-renewing")
    assert held is not None
    assert holder.renew(held)
    assert other.acquire("waiting") is None
    deadline = time.monotonic() + 10 * holder.ttl_s + 30  # etcd expires it; this only bounds a hang
    while (now := other.current()) is not None:
        assert now.token == held.token
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.2)
    taken = other.acquire("waiting")
    assert taken is not None and taken.token > held.token
    assert not holder.renew(held)
    other.release(taken)


def _verdicts_expire_and_the_last_automatic_stays(publisher: Witness, reader: Witness) -> None:
    assert reader.verdicts() == {} and reader.last_automatic() is None
    publisher.publish("B", {"A": "down", "B": "up"}, ttl_s=60)
    publisher.publish("C", {"A": "suspect"}, ttl_s=2)
    assert reader.verdicts() == {"B": {"A": "down", "B": "up"}, "C": {"A": "suspect"}}
    publisher.publish("B", {"A": "up", "B": "up"}, ttl_s=60)  # a new verdict replaces the observer's last
    deadline = time.monotonic() + 60  # the store expires C's; this only bounds a hang
    while "C" in (seen := reader.verdicts()):
        assert time.monotonic() < deadline, "the verdict never expired"
        time.sleep(0.2)
    assert seen == {"B": {"A": "up", "B": "up"}}
    before = time.time()
    publisher.mark_automatic("ops/B", 42)
    at = reader.last_automatic()
    assert at is not None and before - 5 <= at <= time.time() + 5  # the database's clock may differ a little


# ---------------------------------------------------------------------------------------------- etcd


def test_etcd_one_holder_at_a_time(etcd3: EtcdCluster) -> None:
    key = _key()
    # each racer talks to a different member first
    racers: list[Witness] = [
        EtcdWitness([*etcd3.endpoints[i:], *etcd3.endpoints[:i]], f"/kafka-dr/test/{key}/leader", 10) for i in range(3)
    ]
    _one_holder_at_a_time(racers)


def test_etcd_token_grows_across_holders(etcd3: EtcdCluster) -> None:
    key = _key()
    _token_grows(_etcd(etcd3, key), _etcd(etcd3, key))


def test_etcd_holder_that_stops_renewing_loses_the_lease_after_its_ttl(etcd3: EtcdCluster) -> None:
    key = _key()
    _lost_after_ttl(_etcd(etcd3, key, ttl=3), _etcd(etcd3, key, ttl=3))


def test_etcd_keeps_verdicts_for_their_ttl_and_the_last_automatic_failover(etcd3: EtcdCluster) -> None:
    key = _key()
    _verdicts_expire_and_the_last_automatic_stays(_etcd(etcd3, key), _etcd(etcd3, key))


def test_etcd_keeps_working_with_a_member_killed_and_refuses_clearly_when_all_are_down() -> None:
    with etcd_cluster(3) as cluster:
        key = _key()
        held = _etcd(cluster, key).acquire("before")
        assert held is not None
        cluster.kill(0)  # the first endpoint every call tries
        survivor = _etcd(cluster, key)
        assert survivor.renew(held)
        now = survivor.current()
        assert now is not None and now.holder == "before"
        survivor.release(held)
        again = survivor.acquire("after")
        assert again is not None and again.token > held.token
        cluster.kill_all()
        with pytest.raises(ClusterError) as caught:
            survivor.acquire("nobody")
        message = str(caught.value)
        assert "the witness (etcd) does not answer" in message
        assert all(url in message for url in cluster.endpoints)
        assert "automatic failover is off" in message


# ---------------------------------------------------------------------------------------------- PostgreSQL


def _pg(url: PgUrl, stack: str, ttl: float = 10) -> PostgresWitness:
    return PostgresWitness(TeamStore(str(url), "kafka-dr"), stack, ttl)


def test_postgres_one_holder_at_a_time(pg: PgUrl) -> None:
    stack = _key()
    _one_holder_at_a_time([_pg(pg, stack) for _ in range(3)])


def test_postgres_token_grows_and_a_silent_holder_loses_the_lease(pg: PgUrl) -> None:
    stack = _key()
    _token_grows(_pg(pg, stack), _pg(pg, stack))
    stack = _key()
    _lost_after_ttl(_pg(pg, stack, ttl=2), _pg(pg, stack, ttl=2))


def test_postgres_keeps_verdicts_for_their_ttl_and_the_last_automatic_failover(pg: PgUrl) -> None:
    stack = _key()
    _verdicts_expire_and_the_last_automatic_stays(_pg(pg, stack), _pg(pg, stack))


def test_postgres_down_is_a_clear_error(pg: PgUrl) -> None:
    witness = _pg(pg, _key())
    pg.stop()
    try:
        with pytest.raises(ClusterError) as caught:
            witness.acquire("nobody")
        assert "the witness (the team database) does not answer" in str(caught.value)
        assert "automatic failover is off" in str(caught.value)
    finally:
        pg.start()
