"""`drctl audit` on real clusters and a real MirrorMaker 2 link, across runs with records in flight.

One estate (A and B with one broker each, C declared standby) on three free port windows
(``stack_ports``), provisioned with `drctl estate up` and destroyed at the end. The tests run in order:

1. everything copied → the first (full) audit verifies it all, nothing in flight or missing;
2. link stopped, records written to A → in flight (not missing), the oldest unreplicated age shown,
   and the run reads only the new records;
3. link started again, and the first copies of those records deleted on B (the link "dropped"
   them) while later ones arrived → exactly those reported missing (exit 1), the rest verified;
4. a damaged state file and one from another stack → exit 2 naming the file and ``--reset``;
   ``--reset`` runs a full audit (both sides from their earliest offsets).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition

from tests.integration.helpers import StackEnv as Env
from tests.integration.helpers import drctl, link_copied

pytestmark = pytest.mark.integration

STACK = "audit"
TOPICS = ["orders", "payments"]


def audit(env: Env, *extra: str) -> tuple[int, dict, str]:
    res = drctl(env, "audit", "--stack", STACK, "--link", "A-to-B", "--json", *extra)
    run = json.loads(res.stdout.splitlines()[-1])["links"][0] if res.stdout.strip() else {}
    return res.returncode, run, res.stderr


def produce(env: Env, start: int, n: int, partition: int = 0) -> None:
    producer = Producer(env.estate().endpoint("A").config(**{"acks": "all", "linger.ms": 5}))
    errors: list = []
    for i in range(start, start + n):
        producer.produce(
            "orders",
            key=f"k-{i}".encode(),
            value=f"v-{i}".encode(),
            partition=partition,
            headers=[("n", str(i).encode())] if i % 2 else None,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(60) == 0 and not errors, errors[:3]


def synced(env: Env, timeout: float = 120) -> bool:
    estate = env.estate()
    return link_copied(estate, "A-to-B", TOPICS, timeout)


def test_first_audit_verifies_everything_copied(env: Env) -> None:
    produce(env, 0, 100)
    assert synced(env)
    code, run, err = audit(env)
    assert code == 0, err[-2000:]
    assert run["first_run"] and run["read_source"] == 100 and run["read_target"] == 100
    assert (run["verified"], run["in_flight"], run["missing"], run["target_unmatched"]) == (100, 0, 0, 0)
    path = env.state / "audit" / "A-to-B.json"
    assert Path(run["state_file"]) == path and (path.stat().st_mode & 0o777) == 0o600


def test_records_behind_a_stopped_link_are_in_flight_not_missing(env: Env) -> None:
    assert drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B").returncode == 0
    produce(env, 100, 30)
    code, run, err = audit(env)
    assert code == 0, err[-2000:]
    assert not run["first_run"] and run["read_source"] == 30 and run["read_target"] == 0  # only the new data
    assert (run["verified"], run["in_flight"], run["missing"]) == (0, 30, 0)
    assert run["link_lag"] == 30 and run["oldest_unreplicated_age_s"] > 0
    human = drctl(env, "audit", "--stack", STACK)
    assert (
        human.returncode == 0 and "in flight 30" in human.stdout and "missing beyond the link's lag 0" in human.stdout
    )


def _offset_on_b(env: Env, key: bytes) -> int:
    """B's offset, in orders-0, of the copy of the record with ``key``."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        env.estate().endpoint("B").config(**{"group.id": "audit-test-probe", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        for _ in range(300):
            for msg in consumer.consume(500, timeout=1):
                if msg.error() is None and msg.key() == key:
                    return int(msg.offset())
    finally:
        consumer.close()
    raise AssertionError(f"no copy of {key!r} on B")


def test_records_the_link_dropped_are_missing_once_it_moved_past_them(env: Env) -> None:
    start = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert start.returncode == 0, start.stderr[-2000:]
    produce(env, 130, 20)
    assert synced(env)
    # the link "drops" the copies of A's orders-0 offsets 100..104: they vanish from B before any audit read
    # them. B's offsets are not A's (an exactly-once link's commit markers take offsets on B): cut B's
    # orders-0 at the copy of A's offset 105, found by its key.
    from confluent_kafka.admin import AdminClient

    cut = _offset_on_b(env, b"k-105")
    admin = AdminClient(env.estate().endpoint("B").config())
    for fut in admin.delete_records([TopicPartition("orders", 0, cut)]).values():
        fut.result(timeout=30)
    code, run, err = audit(env)
    assert code == 1, err[-2000:]
    # the offsets deleted on B: the 5 copies and the markers among them
    assert run["read_source"] == 20 and run["read_target"] == 45 and run["target_lost_to_retention"] >= 5
    assert (run["verified"], run["in_flight"], run["missing"]) == (45, 0, 5)
    assert [(m["topic"], m["partition"], m["offset"]) for m in run["missing_sample"]] == [
        ("orders", 0, o) for o in range(100, 105)
    ]
    assert "5 record(s) missing" in err and "drctl verify" in err
    # a further run with nothing new still reports them (they stay in the residue), reading nothing
    code, run, _ = audit(env)
    assert code == 1 and run["read_source"] == 0 and run["missing"] == 5 and run["verified"] == 0


def test_damaged_or_foreign_state_refused_and_reset_runs_a_full_audit(env: Env) -> None:
    path = env.state / "audit" / "A-to-B.json"
    good = path.read_text()
    path.write_text(good[: len(good) // 2])
    res = drctl(env, "audit", "--stack", STACK)
    assert res.returncode == 2 and str(path) in res.stderr and "--reset" in res.stderr, res.stderr
    data = json.loads(good)
    data["stack"] = "other"
    path.write_text(json.dumps(data))
    res = drctl(env, "audit", "--stack", STACK)
    assert res.returncode == 2 and "belongs to stack 'other'" in res.stderr and "--reset" in res.stderr
    code, run, err = audit(env, "--reset")
    assert code == 1, err[-2000:]
    # B's orders-0 now starts at 105: the full audit finds everything below it missing there
    assert run["first_run"] and run["read_source"] == 150 and run["read_target"] == 45
    assert (run["verified"], run["in_flight"], run["missing"]) == (45, 0, 105)


def test_first_audit_on_spark_equals_the_python_one_and_the_next_run_continues_from_it(env: Env) -> None:
    """`--first-run spark`: one Spark verification of everything, turned into the same state a Python
    first audit writes (missing and in-flight records alike); an unreachable master loses nothing."""
    path = env.state / "audit" / "A-to-B.json"
    assert drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B").returncode == 0
    produce(env, 150, 12)  # in flight behind the stopped link
    code_py, py, err_py = audit(env, "--reset", "--first-run", "python")
    state_py = json.loads(path.read_text())
    before = path.read_bytes()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    code, _, err = audit(env, "--reset", "--first-run", "spark", "--master", f"spark://127.0.0.1:{closed}")
    assert code == 4 and "cannot be reached" in err and path.read_bytes() == before, err[-2000:]
    code_sp, sp, err_sp = audit(env, "--reset", "--first-run", "spark")
    state_sp = json.loads(path.read_text())
    assert code_py == code_sp == 1, (err_py[-1500:], err_sp[-3000:])
    assert "on Spark" in err_sp and sp["first_run"]
    figures = ("read_source", "read_target", "verified", "in_flight", "missing", "target_unmatched", "link_lag")
    assert {k: sp[k] for k in figures} == {k: py[k] for k in figures}
    assert (sp["verified"], sp["in_flight"], sp["missing"]) == (45, 12, 105)
    assert sp["missing_sample"] == py["missing_sample"]
    for k in ("bounds", "frontier", "residue"):
        assert state_sp[k] == state_py[k], k
    assert state_sp["max_ts"]["source"] >= state_py["max_ts"]["source"] > 0
    report = path.with_name("A-to-B.first-audit")
    assert (report / "report.html").is_file() and json.loads((report / "summary.json").read_text())["totals"][
        "missing"
    ] == 117
    # the next run reads only the increment, in Python, from the Spark run's state
    assert drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B").returncode == 0
    assert synced(env)
    code, run, err = audit(env)
    assert code == 1, err[-2000:]
    assert not run["first_run"] and (run["read_source"], run["read_target"]) == (0, 12)
    assert (run["verified"], run["in_flight"], run["missing"]) == (12, 0, 105)
