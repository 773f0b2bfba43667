"""The team backend's journal and lease store (dr.failover.record.team_store) against a real PostgreSQL
server (tests/pg_server.py: Debian's binaries from the cache, started once for this module)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.base.errors import ConfigError, LockHeld, StateStoreError, mask_secrets
from dr.base.pulumi_env import mask_url
from dr.failover.frame.journal import Journal, StackLock
from dr.failover.record import team_store as ts
from dr.runtime.process import wait_until
from tests.pg_server import pg_server


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_server() as url:
        yield url


@pytest.fixture
def team(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PULUMI_BACKEND_URL", pg_url)
    monkeypatch.delenv("KDR_LEASE_STALE_S", raising=False)
    return pg_url


def _new(home: Path, stack: str) -> Journal:
    return Journal.create(
        home, stack=stack, mode="planned", source="A", target="B", standby=None,
        original_config={"x": 1}, desired_config={"x": 2}, steps=["preflight", "fence-drain"],
    )  # fmt: skip


def test_migrations_are_versioned_and_idempotent(pg_url: str) -> None:
    first, second = ts.TeamStore(pg_url), ts.TeamStore(pg_url)
    assert first.schema_version() == ts.MIGRATIONS[-1][0]
    assert second.schema_version() == ts.MIGRATIONS[-1][0]  # a second first use changes nothing
    with first.connect() as conn:
        assert conn.execute("SELECT count(*) FROM kdr_schema").fetchone() == (len(ts.MIGRATIONS),)


def test_journal_round_trip_from_another_empty_state_dir(team: str, tmp_path: Path) -> None:
    journal = _new(tmp_path / "op1" / "s1", "s1")
    journal.begin_run(mode="planned", options={})
    journal.start_step("preflight", {"a": 1})
    journal.finish_step("preflight", "done", {"summary": "ok"}, 0.5)
    journal.start_step("fence-drain", {})
    assert not (tmp_path / "op1" / "s1" / "failover" / "journal.json").exists()  # in the database, not a file
    other = Journal.load(tmp_path / "op2" / "s1")  # another operator: its own, empty state directory
    assert other is not None and other.store is not None
    assert other.failover_id == journal.failover_id
    assert other.is_done("preflight") and other.step("fence-drain").status == "running"
    # one transaction per write: 1 create + begin_run + 2 per step start/finish + 1 start
    assert ts.team_store(team).version(other._key) == 5


def test_the_steps_come_back_in_the_order_they_were_written(team: str, tmp_path: Path) -> None:
    """jsonb sorts an object's keys (by length, then bytes): without the kept order a failed run's summary
    listed clients, promote, integrity, preflight, … (found by the suite's team-backend run)."""
    steps = ["preflight", "fence-drain", "promote", "clients", "consumer-groups", "desired-state", "integrity"]
    journal = Journal.create(
        tmp_path / "op1" / "s9", stack="s9", mode="planned", source="A", target="B", standby=None,
        original_config={}, desired_config={}, steps=steps,
    )  # fmt: skip
    journal.begin_run(mode="planned", options={})
    other = Journal.load(tmp_path / "op2" / "s9")
    assert other is not None and list(other.record.steps) == steps
    assert [r["steps"] for r in ts.team_store(team).history("s9")] and "step_order" not in other.record.model_dump()


def test_a_new_failover_keeps_the_old_row(team: str, tmp_path: Path) -> None:
    old = _new(tmp_path / "s2", "s2")
    old.set_status("completed")
    new = _new(tmp_path / "s2", "s2")
    assert Journal.load(tmp_path / "s2").failover_id == new.failover_id  # type: ignore[union-attr]
    assert [r["failover_id"] for r in ts.team_store(team).history("s2")] == [new.failover_id, old.failover_id]


def test_live_lease_is_never_taken_and_names_its_holder(
    team: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_OPERATOR", "alice")
    with StackLock(tmp_path / "s3", "s3"):
        monkeypatch.setenv("KDR_OPERATOR", "bob")
        monkeypatch.setenv("KDR_TAKE_OVER_STALE_LEASE", "1")
        with pytest.raises(LockHeld, match="held by alice"):
            StackLock(tmp_path / "s3", "s3").acquire()
    lock = StackLock(tmp_path / "s3", "s3")  # released: bob gets it
    lock.acquire()
    lock.release()


def test_a_live_lease_is_never_taken_whatever_the_takers_threshold(
    team: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staleness is the holder's recorded threshold's: bob's KDR_LEASE_STALE_S=1 does not make alice's lease,
    renewed 2.5 s ago under her 30 s, stale (the acceptance finding); alice's own 1 s does."""
    store = ts.team_store(team)
    monkeypatch.setenv("KDR_OPERATOR", "alice")
    alice = store.acquire("t1")
    alice._stop.set()  # no heartbeat meanwhile: the age below is what the test sets
    with store.session() as conn, conn.transaction():
        conn.execute("UPDATE kdr_lease SET heartbeat_at = now() - interval '2.5 seconds' WHERE stack = 't1'")
    monkeypatch.setenv("KDR_OPERATOR", "bob")
    monkeypatch.setenv("KDR_LEASE_STALE_S", "1")
    with pytest.raises(LockHeld, match=r"held by alice .*stale only after the 30 s its holder recorded"):
        store.acquire("t1", take_over=True)
    lease = store.lease("t1")
    assert lease is not None and lease.holder == "alice" and lease.stale_after_s == 30 and not lease.stale
    monkeypatch.setenv("KDR_OPERATOR", "alice")  # alice renews under her own 1 s threshold
    assert store.renew("t1", alice.epoch, ts.stale_after_s())
    with store.session() as conn, conn.transaction():
        conn.execute("UPDATE kdr_lease SET heartbeat_at = now() - interval '2.5 seconds' WHERE stack = 't1'")
    monkeypatch.delenv("KDR_LEASE_STALE_S")  # bob on the default 30 s: alice's 1 s decides
    monkeypatch.setenv("KDR_OPERATOR", "bob")
    taken = store.acquire("t1", take_over=True)
    assert store.lease("t1").holder == "bob" and store.lease("t1").stale_after_s == 30  # type: ignore[union-attr]
    over = next(e for e in store.events("t1") if e["kind"] == "lease-taken-over")
    assert over["detail"]["from_stale_after_s"] == 1 and over["detail"]["stale_after_s"] == 30
    taken.release()


def test_the_database_identity_of_the_session_is_recorded(team: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """KDR_OPERATOR is a name anybody can give: the lease and every event carry the database's own identity of
    the session beside it (session_user, inet_client_addr(), pg_backend_pid())."""
    store = ts.TeamStore(team)
    monkeypatch.setenv("KDR_OPERATOR", "mallory-as-alice")
    handle = store.acquire("id1")
    with store.session() as conn:
        backend_pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
    lease = store.lease("id1")
    assert lease is not None and (lease.holder, lease.db_user, lease.db_client) == (
        "mallory-as-alice",
        "kdr",
        "127.0.0.1",
    )
    assert lease.db_pid == backend_pid
    handle.release()
    for event in store.events("id1"):
        assert (event["detail"]["db_user"], event["detail"]["db_client"]) == ("kdr", "127.0.0.1"), event
        assert event["detail"]["db_pid"] == backend_pid


def test_bad_stale_threshold_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("0.5", "soon", "inf", "nan", "-3"):
        monkeypatch.setenv("KDR_LEASE_STALE_S", bad)
        with pytest.raises(ConfigError, match=r"KDR_LEASE_STALE_S=.* is not a number of seconds of at least 1"):
            ts.stale_after_s()
    monkeypatch.setenv("KDR_LEASE_STALE_S", "3")
    assert ts.stale_after_s() == 3.0 and ts.heartbeat_s(3.0) == 0.5 and ts.heartbeat_s(60) == 10


def test_simultaneous_starts_exactly_one_wins(team: str, tmp_path: Path) -> None:
    results: list[str] = []
    gate = threading.Barrier(4)

    def start() -> None:
        gate.wait()
        try:
            ts.team_store(team).acquire("s4")
            results.append("won")
        except LockHeld:
            results.append("refused")

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["refused", "refused", "refused", "won"]


def test_stale_lease_taken_over_only_explicitly_and_journaled(
    team: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ts.team_store(team)
    with store.connect() as conn, conn.transaction():  # a dead operator's lease: no heartbeat for a minute
        conn.execute(
            "INSERT INTO kdr_lease (stack, holder, host, pid, heartbeat_at) VALUES ('s5', 'carol', 'h1', 4242, now() - interval '60 seconds')"
        )
    monkeypatch.setenv("KDR_OPERATOR", "dave")
    lock = StackLock(tmp_path / "s5", "s5")
    with pytest.raises(LockHeld, match="stale: carol"):
        lock.acquire()
    assert store.lease("s5").holder == "carol"  # type: ignore[union-attr]
    monkeypatch.setenv("KDR_TAKE_OVER_STALE_LEASE", "1")
    lock.acquire()
    assert store.lease("s5").holder == "dave"  # type: ignore[union-attr]
    lock.release()
    kinds = [(e["kind"], e["actor"]) for e in store.events("s5")]
    assert ("lease-taken-over", "dave") in kinds and kinds[-1] == ("lease-released", "dave")
    assert next(e for e in store.events("s5") if e["kind"] == "lease-taken-over")["detail"]["from"] == "carol"


def test_heartbeat_keeps_a_lease_fresh(team: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_LEASE_STALE_S", "1.2")  # a heartbeat every 0.5 s
    store = ts.team_store(team)
    handle = store.acquire("s6")
    with store.connect() as conn, conn.transaction():
        conn.execute("UPDATE kdr_lease SET heartbeat_at = now() - interval '20 seconds' WHERE stack = 's6'")
    # the heartbeat thread's next beat (every 0.5 s) makes it fresh: waited for, not assumed within 0.8 s
    assert wait_until(lambda: store.lease("s6").heartbeat_age_s < 5, 30)  # type: ignore[union-attr]
    handle.release()
    assert store.lease("s6") is None


def test_unreachable_database_is_a_clear_refusal_without_the_password(tmp_path: Path) -> None:
    url = "postgres://kdr:hunter2secret@127.0.0.1:1/kdr?sslmode=disable"
    with pytest.raises(StateStoreError) as err:
        ts.TeamStore(url).load("x")
    assert "hunter2secret" not in str(err.value) and "kdr:***@127.0.0.1:1/kdr" in str(err.value)
    assert err.value.exit_code == 8


def test_mask_url_and_the_backend_password_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    assert mask_url("postgres://u:p%40ss@h:5432/db?sslmode=require") == "postgres://u:***@h:5432/db?sslmode=require"
    assert mask_url("file:///x/y") == "file:///x/y"
    monkeypatch.setenv("PULUMI_BACKEND_URL", "postgres://u:pw-1234@h/db")
    assert "pw-1234" not in mask_secrets("could not log in to the state backend postgres://u:pw-1234@h/db")


@pytest.mark.parametrize("command", [["status"], ["failover", "--yes"]])
def test_cli_refuses_an_unreachable_database_before_anything(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dr.cli.drctl import main
    from tests import REPO_ROOT

    monkeypatch.setenv("PULUMI_BACKEND_URL", "postgres://kdr:Sup3rSecret@127.0.0.1:1/kdr")
    monkeypatch.setenv("KDR_STACK_DIR", str(REPO_ROOT))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--stack", "local"])
    err = capsys.readouterr().err
    assert exit_.value.code == 8, err
    assert "team database postgres://kdr:***@127.0.0.1:1/kdr is unreachable" in err and "Sup3rSecret" not in err
    assert not list((tmp_path / "state").rglob("journal*.json")), "nothing written"


def test_status_names_the_holder_the_step_and_since_when(team: str, tmp_path: Path) -> None:
    from dr.failover.status import LastFailover, _with_holder, lock_held

    home = tmp_path / "s7"
    journal = _new(home, "s7")
    journal.begin_run(mode="planned", options={})
    journal.start_step("fence-drain", {})
    with ts.team_store(team).session() as conn, conn.transaction():  # op1 died 60 s ago inside fence-drain
        conn.execute(
            "INSERT INTO kdr_lease (stack, holder, host, pid, acquired_at, heartbeat_at) "
            "VALUES ('s7', 'op1', 'laptop', 77, now() - interval '90 seconds', now() - interval '60 seconds')"
        )
    assert not lock_held(home)
    loaded = Journal.load(tmp_path / "elsewhere" / "s7")
    assert loaded is not None
    last = _with_holder(LastFailover.of(loaded, lock_held(home)), loaded)
    assert last.holder is not None
    assert last.holder.startswith("op1 (pid 77 on laptop) since ") and "STALE" in last.holder
    assert last.holder.endswith("step fence-drain")
    assert "holder" in last.model_dump(exclude_unset=True)


def _record(failover_id: str, status: str, operator: str) -> dict[str, object]:
    return {"failover_id": failover_id, "status": status, "runs": [{"operator": operator}]}


def test_a_writer_whose_lease_was_taken_over_is_fenced(team: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """op1's process freezes (no heartbeat); op2 takes the stale lease over and finishes; op1 wakes up and
    writes its journal: refused, naming op2, and op2's row is untouched."""
    op1, op2 = ts.TeamStore(team), ts.TeamStore(team)  # two processes
    monkeypatch.setenv("KDR_OPERATOR", "op1")
    frozen = op1.acquire("f1")
    frozen._stop.set()  # SIGSTOP: no more heartbeats
    op1.create("f1", _record("F1", "running", "op1"))
    with op1.session() as conn, conn.transaction():
        conn.execute("UPDATE kdr_lease SET heartbeat_at = now() - interval '60 seconds' WHERE stack = 'f1'")
    monkeypatch.setenv("KDR_OPERATOR", "op2")
    taker = op2.acquire("f1", take_over=True)
    assert taker.epoch > frozen.epoch
    op2.save("f1", _record("F1", "completed", "op2"))
    version = op2.version("f1")
    with pytest.raises(LockHeld, match=r"lost the lease on stack 'f1': op2 took it over at .*finished by op2"):
        op1.save("f1", _record("F1", "failed", "op1"))  # the stale writer
    assert op2.load("f1") == _record("F1", "completed", "op2") and op2.version("f1") == version
    assert not op1.renew("f1", frozen.epoch), "a heartbeat of the old epoch renews nothing"
    taker.release()
    with pytest.raises(LockHeld, match="op2 took it over"):  # also once op2 released the lease
        op1.save("f1", _record("F1", "failed", "op1"))


def test_own_dead_lease_is_reclaimed_without_take_over(team: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stopped by the database going away leaves its lease; the same operator on the same machine, as
    the same database user, takes it back once that process is gone, anybody else still needs --take-over —
    also one who only gives the same KDR_OPERATOR name while logged in to the database as another user."""
    import socket

    store = ts.TeamStore(team)
    with store.session() as conn, conn.transaction():
        for stack, db_user in (("r1", "kdr"), ("r2", "someone-else")):
            conn.execute(
                "INSERT INTO kdr_lease (stack, holder, host, pid, epoch, heartbeat_at, db_user) "
                "VALUES (%s, 'erin', %s, 999999, 1, now() - interval '60 seconds', %s)",
                (stack, socket.gethostname(), db_user),
            )
    monkeypatch.setenv("KDR_OPERATOR", "frank")
    with pytest.raises(LockHeld, match="stale: erin"):
        store.acquire("r1")
    monkeypatch.setenv("KDR_OPERATOR", "erin")
    store.acquire("r1").release()
    assert [e["kind"] for e in store.events("r1")] == ["lease-reclaimed", "lease-released"]
    with pytest.raises(LockHeld, match="stale: erin"):  # the name, not the database user: not erin's to reclaim
        store.acquire("r2")
    assert store.lease("r2").db_user == "someone-else"  # type: ignore[union-attr]


def test_rows_are_keyed_by_project_and_stack(team: str) -> None:
    one, other = ts.TeamStore(team, "proj-one"), ts.TeamStore(team, "proj-two")
    one.create("same", _record("P1", "running", "a"))
    other.create("same", _record("P2", "running", "b"))
    assert one.load("same")["failover_id"] == "P1" and other.load("same")["failover_id"] == "P2"  # type: ignore[index]
    one.acquire("same")
    other.acquire("same")  # another project's stack of the same name: its own lease


def test_migration_2_keeps_the_rows_of_a_version_1_database(pg_url: str) -> None:
    import psycopg

    admin = pg_url.replace("/kdr?", "/postgres?")
    with psycopg.connect(ts._libpq_url(admin), autocommit=True) as conn:
        conn.execute("CREATE DATABASE kdr_v1")
    v1 = pg_url.replace("/kdr?", "/kdr_v1?")
    with psycopg.connect(ts._libpq_url(v1), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE kdr_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(ts.MIGRATIONS[0][1])
        conn.execute("INSERT INTO kdr_schema (version) VALUES (1)")
        conn.execute(
            "INSERT INTO kdr_failover (stack, failover_id, status, record) VALUES ('old', 'F0', 'running', %s)",
            ('{"failover_id": "F0", "status": "running"}',),
        )
        conn.execute("INSERT INTO kdr_lease (stack, holder, host, pid) VALUES ('old', 'gina', 'h', 1)")
    store = ts.TeamStore(v1, "kafka-dr")
    assert store.load("old") == {"failover_id": "F0", "status": "running"}
    assert store.schema_version() == ts.MIGRATIONS[-1][0]
    assert store.lease("old").holder == "gina"  # type: ignore[union-attr]
    assert ts.TeamStore(v1, "another").load("old") is None
    assert ts.TeamStore(v1, "kafka-dr").schema_version() == ts.MIGRATIONS[-1][0]  # applied once


def test_audit_state_lives_in_the_database(team: str, tmp_path: Path) -> None:
    from verification.audit_state import AuditState, Fingerprint, StateIdentity, load_state, save_state
    from verification.link_ref import LinkRef

    ident = StateIdentity(ref=LinkRef(stack="a1", link="A-to-B", source="A", target="B"), source_id="x", target_id="y")
    state = AuditState(**vars(ident), source_bounds={"t": {0: 10}}, target_bounds={"t": {0: 9}}, runs=1)
    state.source_residue = [Fingerprint("t", 0, 9, 5, 1, 2)]
    save_state(tmp_path / "op1" / "audit" / "A-to-B.json", state)
    assert not (tmp_path / "op1").exists(), "no local file"
    again = load_state(tmp_path / "op2" / "audit" / "A-to-B.json", ident)  # another machine, empty state dir
    assert again is not None and again.source_bounds == {"t": {0: 10}} and again.source_residue == state.source_residue
    again.runs = 2
    save_state(tmp_path / "op2" / "x.json", again)
    late = AuditState(**vars(ident), runs=2)  # continued run 1 too, finished after the other
    with pytest.raises(LockHeld, match="another audit of link A-to-B"):
        save_state(tmp_path / "op1" / "x.json", late)
    assert load_state(tmp_path / "op3" / "x.json", ident).runs == 2  # type: ignore[union-attr]


def test_a_runs_verification_summary_is_recorded(team: str, tmp_path: Path) -> None:
    import hashlib

    report = tmp_path / "report"
    report.mkdir()
    (report / "result.json").write_text('{"clean": true}')
    journal = Journal.create(
        tmp_path / "v1", stack="v1", mode="planned", source="A", target="B", standby=None,
        original_config={}, desired_config={}, steps=["integrity"],
    )  # fmt: skip
    journal.begin_run(mode="planned", options={})
    verdict = {"clean": True, "counts": {"missing": 0}, "report_dir": str(report)}
    journal.finish_step("integrity", "done", {"verdict": verdict}, 1.0)
    [row] = ts.team_store(team).verifications("v1")
    digest = hashlib.sha256(b"result.json\0" + b'{"clean": true}').hexdigest()
    assert row["failover_id"] == journal.failover_id and row["run"] == 1 and row["clean"] is True
    assert row["report_digest"] == digest and row["verdict"]["counts"] == {"missing": 0}


def test_a_write_waits_for_the_database_to_come_back(team: str, pg_url: object) -> None:
    """PostgreSQL stopped and started again while a run waits to write: the write lands, once."""
    store = ts.TeamStore(team)
    store.create("w1", _record("W1", "running", "a"))
    store.load("w1")  # this thread's connection is open: the restart breaks it
    pg_url.stop()  # type: ignore[attr-defined]
    restart = threading.Timer(2.0, pg_url.start)  # type: ignore[attr-defined]
    restart.start()
    store.save("w1", _record("W1", "completed", "a"))
    restart.join()
    assert store.load("w1")["status"] == "completed" and store.version("w1") == 2  # type: ignore[index]


def test_an_operator_back_with_the_old_stack_file_is_refused_naming_who_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dr.failover.frame.converge import read_stack_config
    from dr.failover.frame.stack_guard import refuse_finished_elsewhere
    from dr.topology import read_stack_file
    from tests import REPO_ROOT

    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    stack_file = REPO_ROOT / "Pulumi.local.yaml"
    read = read_stack_file(stack_file)
    journal = Journal.create(
        tmp_path / "local", stack="local", mode="planned", source="A", target="B", standby="C",
        original_config=read_stack_config(stack_file), desired_config={"changed": True}, steps=["preflight"],
    )  # fmt: skip
    monkeypatch.setenv("KDR_OPERATOR", "op2")
    journal.begin_run(mode="planned", options={})
    journal.set_status("completed")
    refuse_finished_elsewhere(journal, read)  # op2 itself: nothing to refuse
    monkeypatch.setenv("KDR_OPERATOR", "op1")
    with pytest.raises(LockHeld, match=rf"failover {journal.failover_id} of stack 'local' was finished by op2 at "):
        refuse_finished_elsewhere(journal, read)
    journal.record.desired_config = read_stack_config(stack_file)  # op1 pulled the file op2's run wrote
    journal.record.original_config = {"before": True}
    refuse_finished_elsewhere(journal, read)
