"""Real clusters, real MirrorMaker 2, real Spark: seeded differences found exactly, then recovered.

Scenario (A → B with MM2, identity naming):

* ``orders`` and ``events``: records produced to A while MM2 is stopped → missing (20 and 7);
* ``payments``: a record produced again on B → duplicated; a record with the key of an A record and
  another value on B → corrupted; a key A never had, written to B → unexpected;
* records produced to B after the cut-off (``orders`` 3, ``events`` 5) → ignored.

* an aborted transaction on A (``events``) and on B (``payments``) → neither missing nor unexpected;

Then ``recover`` replays the missing ones; a second run writes nothing; ``orders``/``events`` verify
clean, and ``payments`` still shows exactly the records recovery cannot delete.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr.cli.verify import recover, verify
from dr.kafka.offsets import end_offsets
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.mirrormaker import MirrorMaker
from tests import processes
from tests.integration.helpers import committed_counts
from tests.integration.ports import windows

pytestmark = pytest.mark.integration

TOPICS = ["events", "orders", "payments"]
REPO = Path(__file__).resolve().parents[2]


def produce(endpoint, topic, records):
    """Produce (key, value, headers) records; return the delivered messages' (partition, offset, ts)."""
    out, errors = [], []
    producer = Producer(endpoint.config(**{"acks": "all", "linger.ms": 5}))
    for key, value, headers in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            on_delivery=lambda err, msg: (errors if err else out).append(err or msg),
        )
        producer.poll(0)
    producer.flush(60)
    assert not errors, errors
    return [(m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers()) for m in out]


def aborted(endpoint, topic, key):
    """Write one record in a transaction, then abort it: a record no read-committed reader returns, and
    an abort marker taking an offset (what a replicator killed mid-transaction leaves behind)."""
    producer = Producer(endpoint.config(**{"transactional.id": f"kdr-test-{topic}-{key.decode()}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=key, value=b"never committed")
    producer.flush(30)
    producer.abort_transaction(30)


def read_at(endpoint, topic, partition, offset):
    consumer = Consumer(endpoint.config(**{"group.id": "kdr-test-read", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        for _ in range(30):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return msg
        raise AssertionError(f"no record at {topic}/{partition}@{offset}")
    finally:
        consumer.close()


def records(prefix, n, start=0):
    out = []
    for i in range(start, start + n):
        headers = [("trace-id", f"{prefix}-{i}".encode()), ("optional", None)] if i % 3 == 0 else None
        value = None if i % 50 == 49 else f'{{"{prefix}": {i}, "pad": "{"x" * (i % 40)}"}}'.encode()
        out.append((f"{prefix}-{i}".encode(), value, headers))
    return out


@pytest.fixture(scope="module")
def estate(tmp_path_factory):
    state = tmp_path_factory.mktemp("verify-estate")
    with windows(2) as (port_a, port_b):
        a = LocalCluster(ClusterSpec("verifyA", brokers=1, base_port=port_a), state)
        b = LocalCluster(ClusterSpec("verifyB", brokers=1, base_port=port_b), state)
        mm2 = MirrorMaker(a, b, state, topics="|".join(TOPICS))
        try:
            a.start()
            b.start()
            yield a, b, mm2, state
        finally:
            mm2.stop()
            a.destroy()
            b.destroy()


@pytest.fixture(scope="module")
def seeded(estate, tmp_path_factory):
    a, b, mm2, _state = estate
    admin = AdminClient(a.endpoint().config())
    for fut in admin.create_topics(
        [NewTopic("orders", 3, 1), NewTopic("payments", 2, 1), NewTopic("events", 2, 1)]
    ).values():
        fut.result(timeout=30)
    for cluster in (a, b):  # a topic with no record on either side must not upset the report
        cluster_admin = AdminClient(cluster.endpoint().config())
        cluster_admin.create_topics([NewTopic("quiet", 1, 1)])["quiet"].result(timeout=30)
    on_a = {t: produce(a.endpoint(), t, records(t, n)) for t, n in (("orders", 300), ("payments", 120), ("events", 90))}
    mm2.start()
    mm2.wait_caught_up(TOPICS, timeout=180)
    mm2.stop()
    # never replicated: written to A while the link is down
    lost = {
        "orders": produce(a.endpoint(), "orders", records("orders", 20, start=300)),
        "events": produce(a.endpoint(), "events", records("events", 7, start=90)),
    }
    # aborted transactions on both sides (issue 35): neither missing from B nor unexpected on B
    aborted(a.endpoint(), "events", b"aborted-on-a")
    aborted(b.endpoint(), "payments", b"aborted-on-b")
    # written straight to B (the admin is a super-user): one duplicate, one corruption, one stranger
    p7 = records("payments", 120)[7]
    produce(b.endpoint(), "payments", [p7])
    produce(b.endpoint(), "payments", [(b"payments-11", b"tampered on B", None)])
    produce(b.endpoint(), "payments", [(b"ghost", b"A never had this key", None)])
    time.sleep(0.05)
    cutoff = int(time.time() * 1000)
    time.sleep(0.05)
    produce(
        b.endpoint(),
        "orders",
        [(b"orders-1", b"after failover", None), (b"new-1", b"x", None), records("orders", 3)[2]],
    )
    produce(b.endpoint(), "events", [*records("events", 4), (b"fresh", b"y", None)])
    creds = tmp_path_factory.mktemp("creds") / "admin.json"
    fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"username": "admin", "password": a.endpoint().password}, f)
    assert a.endpoint().password == b.endpoint().password  # one estate, one admin
    return {
        "a": a,
        "b": b,
        "cutoff": cutoff,
        "lost": lost,
        "on_a": on_a,
        "creds": creds,
        "out": tmp_path_factory.mktemp("reports"),
    }


def cli_args(s, out, *extra):
    return [
        "--source-bootstrap",
        s["a"].bootstrap,
        "--target-bootstrap",
        s["b"].bootstrap,
        "--credentials",
        str(s["creds"]),
        "--cutoff",
        str(s["cutoff"]),
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def first_report(seeded):
    out = seeded["out"] / "before"
    result = CliRunner().invoke(verify, cli_args(seeded, out, "--json", "--quiet"))
    return result, out


def test_verify_finds_each_seeded_class_exactly(first_report):
    result, out = first_report
    assert result.exit_code == 1, result.output
    summary = json.loads((out / "summary.json").read_text())
    got = {
        t: {c: summary["topics"][t][c] for c in ("missing", "unexpected", "duplicated", "corrupted")} for t in TOPICS
    }
    assert got == {
        "orders": {"missing": 20, "unexpected": 0, "duplicated": 0, "corrupted": 0},
        "events": {"missing": 7, "unexpected": 0, "duplicated": 0, "corrupted": 0},
        "payments": {"missing": 0, "unexpected": 1, "duplicated": 1, "corrupted": 1},
    }
    assert summary["topics"]["orders"]["target_after_cutoff"] == 3
    assert summary["topics"]["events"]["target_after_cutoff"] == 5
    assert summary["verdict"] == "differences" and summary["exit_code"] == 1


def test_missing_records_are_exactly_the_ones_written_while_mm2_was_down(first_report, seeded):
    _, out = first_report
    rows = pq.read_table(out / "offending.parquet").to_pylist()
    missing = {(r["topic"], r["partition"], r["offset"]) for r in rows if r["class"] == "missing"}
    expected = {(t, p, o) for t, recs in seeded["lost"].items() for p, o, *_ in recs}
    assert missing == expected
    payments = {(r["class"], r["key"]) for r in rows if r["topic"] == "payments"}
    assert payments == {("duplicated", b"payments-7"), ("corrupted", b"payments-11"), ("unexpected", b"ghost")}


def test_summary_records_the_exact_offset_bounds_read(first_report, seeded):
    _, out = first_report
    summary = json.loads((out / "summary.json").read_text())
    for side, cluster in (("source", seeded["a"]), ("target", seeded["b"])):
        ends = end_offsets(cluster.endpoint(), TOPICS)
        records = committed_counts(cluster.endpoint(), TOPICS)  # an aborted record and its marker: 2 offsets, 0 read
        for (topic, p), end in ends.items():
            bounds = summary["offsets"][side][topic][str(p)]
            assert bounds["end"] == end and bounds["start"] == 0 and bounds["read"] == records[(topic, p)]
    assert sum(ends.values()) - sum(records.values()) == 2, "the target's aborted transaction takes two offsets"


def test_report_has_html_chart_parquet_and_no_secret(first_report, seeded):
    from PIL import Image

    _, out = first_report
    html = (out / "report.html").read_text()
    assert "DIFFERENCES FOUND" in html and "<code>payments</code>" in html
    assert "data:image/png;base64," in html
    with Image.open(out / "missing_over_time.png") as img:
        img.verify()
    with Image.open(out / "missing_over_time.png") as img:
        assert img.format == "PNG" and img.size == (1000, 340)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert sum(n for n, rgb in colours if rgb[2] > 150 and rgb[0] < 100) > 50  # the bars are drawn
    password = seeded["a"].endpoint().password
    for path in out.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), f"password leaked into {path}"


def test_recover_replays_missing_records_then_writes_nothing(first_report, seeded):
    _, out = first_report
    runner = CliRunner()
    dry = runner.invoke(
        recover, ["--report", str(out), "--credentials", str(seeded["creds"]), "--dry-run", "--json", "--quiet"]
    )
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["to_write"] == 27 and json.loads(dry.output)["written"] == 0

    first = runner.invoke(recover, ["--report", str(out), "--credentials", str(seeded["creds"]), "--json", "--quiet"])
    assert first.exit_code == 0, first.output
    r1 = json.loads(first.output)
    assert (r1["missing"], r1["written"], r1["already_present"]) == (27, 27, 0)

    second = runner.invoke(recover, ["--report", str(out), "--credentials", str(seeded["creds"]), "--json", "--quiet"])
    assert second.exit_code == 0, second.output
    r2 = json.loads(second.output)
    assert (r2["written"], r2["already_present"], r2["to_write"]) == (0, 27, 0)


def test_recovered_records_keep_key_value_headers_timestamp_and_partition(first_report, seeded):
    _, out = first_report
    ledger = [json.loads(line) for line in (out / "recovery-ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == 27
    for entry in ledger[:10]:
        orig = read_at(seeded["a"].endpoint(), entry["topic"], entry["source_partition"], entry["source_offset"])
        copy = read_at(seeded["b"].endpoint(), entry["topic"], entry["target_partition"], entry["target_offset"])
        assert (copy.key(), copy.value(), copy.headers(), copy.timestamp()[1], copy.partition()) == (
            orig.key(),
            orig.value(),
            orig.headers(),
            orig.timestamp()[1],
            orig.partition(),
        )


def test_verify_after_recovery(seeded, first_report):
    runner = CliRunner()
    clean = runner.invoke(
        verify, cli_args(seeded, seeded["out"] / "after-clean", "--topics", "orders,events,quiet", "--quiet")
    )
    assert clean.exit_code == 0, clean.output
    assert "verdict: CLEAN" in clean.output
    summary = json.loads((seeded["out"] / "after-clean" / "summary.json").read_text())
    # an empty topic, even one asked for, is not compared: the report says why
    assert "quiet" not in summary["topics"] and set(summary["topics"]) == {"orders", "events"}
    assert summary["topics_left_out"]["quiet"]["reason"] == "empty"
    assert (seeded["out"] / "after-clean" / "missing_over_time.png").stat().st_size > 1000
    full = runner.invoke(verify, cli_args(seeded, seeded["out"] / "after-all", "--json", "--quiet"))
    assert full.exit_code == 1
    totals = json.loads((seeded["out"] / "after-all" / "summary.json").read_text())["totals"]
    # Kafka cannot delete single records: what recovery cannot undo stays, exactly
    assert (totals["missing"], totals["duplicated"], totals["corrupted"], totals["unexpected"]) == (0, 1, 1, 1)


def test_spark_submit_runs_the_same_job(seeded, first_report):
    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    jars = processes.run(
        [sys.executable, "-m", "verification.job", "--print-jars"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    out = seeded["out"] / "submitted"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    proc = processes.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            "--jars",
            jars,
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "verification" / "job.py"),
            *cli_args(seeded, out, "--topics", "orders,events"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "clean" and summary["spark"]["master"] == "local[2]"
    assert summary["totals"]["source_compared"] == 300 + 20 + 90 + 7
    assert seeded["a"].endpoint().password not in proc.stdout + proc.stderr


def test_wrong_password_is_an_auth_error(seeded, tmp_path):
    bad = tmp_path / "bad.json"
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"username": "admin", "password": "not-the-password"}, f)
    result = CliRunner().invoke(
        verify,
        [
            "--source-bootstrap",
            seeded["a"].bootstrap,
            "--target-bootstrap",
            seeded["b"].bootstrap,
            "--credentials",
            str(bad),
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ],
    )
    assert result.exit_code == 5, result.output


def test_archive_of_a_is_a_source_for_verify_and_recover(seeded, tmp_path):
    """A Parquet archive of A (made with Spark's Kafka source) stands in for A: verify, then recover."""
    from verification.archive import archive_kafka
    from verification.session import spark_session

    a, b = seeded["a"], seeded["b"]
    for cluster in (a, b):
        admin = AdminClient(cluster.endpoint().config())  # keep the handle alive until the topic exists
        admin.create_topics([NewTopic("audit", 2, 1)])["audit"].result(timeout=30)
    originals = {k: (k, v, h) for k, v, h in records("audit", 40)}
    written = produce(a.endpoint(), "audit", list(originals.values()))
    # B got 30 of them exactly as MM2 would deliver them: same partition, timestamp, key, value, headers
    # (headers come from the originals: delivery reports do not carry them)
    producer = Producer(b.endpoint().config(**{"acks": "all"}))
    for p, _o, ts, key, _v, _h in sorted(written, key=lambda r: (r[2], r[0], r[1]))[:30]:
        key, value, headers = originals[key]
        producer.produce("audit", key=key, value=value, headers=headers, partition=p, timestamp=ts)
    assert producer.flush(30) == 0
    bounds = archive_kafka(spark_session(), a.endpoint(), ["audit"], tmp_path / "archive")
    assert sum(v["end"] for v in bounds["audit"].values()) == 40

    runner = CliRunner()
    target = ["--target-bootstrap", b.bootstrap, "--credentials", str(seeded["creds"]), "--topics", "audit", "--quiet"]
    first = runner.invoke(
        verify, ["--source-archive", str(tmp_path / "archive"), *target, "--out", str(tmp_path / "r1")]
    )
    assert first.exit_code == 1, first.output
    totals = json.loads((tmp_path / "r1" / "summary.json").read_text())["totals"]
    assert totals["missing"] == 10, totals
    rec = runner.invoke(
        recover, ["--report", str(tmp_path / "r1"), "--credentials", str(seeded["creds"]), "--json", "--quiet"]
    )
    assert rec.exit_code == 0, rec.output
    assert json.loads(rec.output)["written"] == 10
    again = runner.invoke(
        verify, ["--source-archive", str(tmp_path / "archive"), *target, "--out", str(tmp_path / "r2")]
    )
    assert again.exit_code == 0, again.output


def test_recovery_reads_scattered_offsets_back_exactly(seeded):
    """Far-apart offsets are fetched by re-positioning one consumer; vanished offsets are not invented."""
    from verification.recover import _fetch_kafka

    a = seeded["a"]
    admin = AdminClient(a.endpoint().config())
    admin.create_topics([NewTopic("sparse", 1, 1)])["sparse"].result(timeout=30)
    produce(a.endpoint(), "sparse", records("sparse", 5000))
    wanted = [3, 4, 1500, 3100, 4999, 7000]  # 7000 does not exist
    got = _fetch_kafka(a.endpoint(), {("sparse", 0): wanted}, idle_timeout=10)
    assert sorted(o for _t, _p, o in got) == wanted[:-1]
    assert got[("sparse", 0, 3100)].key == b"sparse-3100"
    assert got[("sparse", 0, 3)].headers == [("trace-id", b"sparse-3"), ("optional", None)]


_KILLED_MID_TRANSACTION = """
import os, sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "security.protocol": sys.argv[2], "sasl.mechanism": sys.argv[3],
              "sasl.username": sys.argv[4], "sasl.password": sys.stdin.read(), "transactional.id": "kdr-test-killed"})
p.init_transactions(30)
p.begin_transaction()
p.produce("hanging", key=b"in-open-transaction", value=b"x")
p.flush(30)
os._exit(0)  # like a replicator SIGKILLed mid-transaction: no commit, no abort
"""


def test_a_transaction_a_killed_producer_left_open_is_found_and_aborted(estate):
    """What promote does after stopping an exactly-once link (issue 35): a transaction left open holds
    the last stable offset back (read-committed consumers stop there); it is found and aborted."""
    from dr.runtime.transactions import abort_open, open_transactions

    b = estate[1].endpoint()
    admin = AdminClient(b.config())  # kept referenced until the future resolves
    admin.create_topics([NewTopic("hanging", 1, 1)])["hanging"].result(timeout=30)
    produce(b, "hanging", [(b"before", b"x", None)])
    conf = b.config()
    args = [conf["bootstrap.servers"], conf["security.protocol"], conf["sasl.mechanisms"], conf["sasl.username"]]
    killed = processes.run(
        [sys.executable, "-c", _KILLED_MID_TRANSACTION, *args], input=b.password, text=True, timeout=60, check=False
    )
    assert killed.returncode == 0, killed.stderr
    produce(b, "hanging", [(b"after", b"x", None)])  # behind the open transaction: invisible to read committed
    assert open_transactions(b, ["hanging"]) == {("hanging", 0): 1}
    t0 = time.monotonic()
    abort_open(b, open_transactions(b, ["hanging"]))
    print(f"aborted in {time.monotonic() - t0:.1f}s")
    assert open_transactions(b, ["hanging"]) == {}
    consumer = Consumer(b.config(**{"group.id": "kdr-test-hanging", "isolation.level": "read_committed"}))
    try:
        consumer.assign([TopicPartition("hanging", 0, 0)])
        keys = [m.key() for m in consumer.consume(10, timeout=10) if m.error() is None]
    finally:
        consumer.close()
    assert keys == [b"before", b"after"], keys
