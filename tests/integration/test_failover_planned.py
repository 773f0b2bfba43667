"""A planned failover A→B→C on one estate of real local clusters, as operators, monitoring and outside
clients meet it, driven through ``drctl`` and Kafka's own Java console clients.

One estate for the module (A and B with one broker each, C declared standby) on three free port
windows (``stack_ports``), provisioned with `drctl estate up` (Pulumi through the Automation API) and
destroyed at the end — no process of it is left. The tests are ordered steps (file order); each leaves
the estate as the next expects, and a step after the failover says so at once when the failover did not
complete instead of failing on a state it did not expect:

1. first, while ``orders`` holds nothing else: the console producer and consumer, configured only by the
   ``.properties`` files `drctl estate up` published, refused on the passive B and accepted on A;
2. a link stopped and started alone, `drctl status` as a monitoring check, unknown links refused;
3. failovers refused (B down; a link that does not drain): nothing changes and A is unfenced;
4. ONE planned failover, resuming the refused runs' journal: no acknowledged record lost, the group
   resumes on B from its translated offsets, C built as the new passive cluster;
5. after it: the console clients on B with the files the failover published, the new roles, the
   finished failover run again changes nothing, status, the old link not started again;
6. last (destructive): the old active cluster wiped and declared the next standby; no command printed a
   password.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer

from dr.base.stackref import StackRef
from dr.base.toolchain import toolchain
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import client_files
from dr.failover.act.groups import translated_within
from dr.failover.act.probe import PROBE_KEY
from dr.failover.drill.traffic import read_keys
from dr.failover.frame.journal import Journal
from dr.kafka.client import Endpoint
from dr.kafka.offsets import committed_offsets, end_offsets
from dr.kafka.records import reached
from dr.runtime.process import java_command, pid_alive, wait_until
from tests import processes
from tests.integration.helpers import StackEnv, link_copied, produce, provisioned, write_local_stack
from tests.integration.helpers import drctl as run_drctl
from tests.integration.journal_home import journal_home

STACK = "planned"
TOPICS = ["orders", "payments"]
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"  # Kafka 4.x: kafka-tools, no longer kafka.tools (Scala)
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
REFUSED = "TopicAuthorizationException: Not authorized to access topics: [orders]"
PROBE = PROBE_KEY.decode()
REFUSED_KEYS = [f"refused-on-b-{i}" for i in range(5)]

OUTPUTS: list[str] = []  # every drctl output of the module: no password may appear in any
ACKED: list[str] = []  # every key A acknowledged in this module: none may be lost
GROUP: dict[str, list[str]] = {}  # what the billing group read on A before, and on B after, the failover
SUMMARY: dict[str, Any] = {}  # the failover's --json summary
PASSED: set[str] = set()  # the ordered steps that passed, for a later step to name the one it needs


def _needs(step: str) -> None:
    """Fail at once, naming ``step``, when that earlier step of the module did not pass."""
    if step not in PASSED:
        pytest.fail(f"this step runs on the estate step {step!r} leaves, and that step did not pass (see above)")


def _processes_naming(path: Path) -> list[int]:
    """Live processes whose command line names ``path`` (brokers, MirrorMaker 2, console clients)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(path).encode() in cmdline and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, stack_ports: tuple[int, int, int]) -> Iterator[StackEnv]:
    """The local stack on this module's ports (A with 1 broker), provisioned by `drctl estate up` once for
    the module; destroyed afterwards with whatever either side of the failover left running — checked."""
    root = tmp_path_factory.mktemp(STACK)
    write_local_stack(root, STACK, stack_ports)
    with provisioned(StackEnv(root, STACK)) as e:
        yield e
    left = _processes_naming(root)
    assert not left, f"processes left running: {left}"


@pytest.fixture
def estate(env: StackEnv) -> Estate:
    """The estate as the stack file declares it now."""
    return env.estate()


def drctl(env: StackEnv, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``drctl <args>`` as an operator runs it; its output kept for the secret check."""
    return run_drctl(env, *args, timeout=timeout, outputs=OUTPUTS)


def app(estate: Estate, cluster: str, name: str = "orders-app") -> Endpoint:
    """Application ``name``'s endpoint on ``cluster``, with its own credentials."""
    return estate.endpoint(cluster).with_user(name, estate.app_password(name))


# --- Kafka's console clients -------------------------------------------------------------------------


def _props(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file as written by the clients step (``key=value``, ``#`` comments)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {k: v for k, v in pairs}


def _java(main: str, *args: str, stdin: str = "", timeout: float = 180) -> subprocess.CompletedProcess[str]:
    tc = toolchain()
    cmd = java_command(
        tc.java,
        [tc.kafka_lib],
        main,
        args,
        heap_mb=256,
        extra_jvm=["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"],
        crash_dir=Path(tempfile.gettempdir()),  # a test's client: no secret on its command line
    )
    return processes.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)


def console_produce(config: Path, bootstrap: str, keys: list[str]) -> subprocess.CompletedProcess[str]:
    """``kafka-console-producer`` of one ``key<TAB>value`` line per key; ``--sync``: exit 0 means every
    record was acknowledged (acks=all is the tool's default), the first refusal exits 1. The tool's
    ``--timeout`` (linger.ms) defaults to 1 s, which ``--sync`` would pay per record: linger.ms=0."""
    lines = "".join(f"{k}\tvalue-{k}\n" for k in keys)
    return _java(
        PRODUCER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "orders",
        "--command-config",
        str(config),
        "--reader-property",
        "parse.key=true",
        "--sync",
        "--command-property",
        "linger.ms=0",
        stdin=lines,
    )


def console_consume(config: Path, bootstrap: str, group: str, count: int, *extra: str) -> list[str]:
    """``kafka-console-consumer`` of ``orders`` as the file's principal in ``group``; the keys it printed."""
    res = _java(
        CONSUMER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "orders",
        "--command-config",
        str(config),
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        *extra,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"Processed a total of {count} messages" in res.stderr, res.stderr[-3000:]
    return [line.split("\t", 1)[0] for line in res.stdout.splitlines() if line]


# --- a consumer group of our own clients ---------------------------------------------------------------


def _read_group(conf: dict[str, Any], topic: str, until: int, timeout: float = 60) -> list[str]:
    """At least ``until`` keys of ``topic`` read in the group of ``conf`` (from its committed offsets, else
    the beginning), then committed; what was read by ``timeout`` when fewer came (uncommitted)."""
    consumer = Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(keys) < until and time.monotonic() < deadline:
            keys += [m.key().decode() for m in consumer.consume(500, timeout=0.5) if m.error() is None]
    finally:
        if until and len(keys) >= until:
            consumer.commit(asynchronous=False)
        consumer.close()
    return keys


def _read_group_to_end(conf: dict[str, Any], admin: Endpoint, topic: str, timeout: float = 60) -> list[str]:
    """Every key of ``topic`` after the committed offsets of the group of ``conf``, up to the end offsets
    it has now (read as :func:`dr.kafka.records.read_to_end` judges an end: the consumer's position),
    committing nothing."""
    done = committed_offsets(admin, conf["group.id"])
    todo = {tp: n for tp, n in end_offsets(admin, [topic]).items() if n > done.get(tp, 0)}
    consumer = Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            keys += [m.key().decode() for m in consumer.consume(500, timeout=0.5) if m.error() is None]
            for tp in reached(consumer, todo):
                del todo[tp]
    finally:
        consumer.close()
    assert not todo, f"partitions not read to their end in {timeout}s: {sorted(todo)}"
    return keys


# --- 1. before anything else is written: the console clients ------------------------------------------


def test_before_any_failover_the_console_producer_is_refused_on_b_and_accepted_on_a(
    env: StackEnv, estate: Estate, tmp_path: Path
) -> None:
    state = env.state
    published = client_files(state, "orders-app")[0]
    assert published.is_file() and published.read_text().startswith("# orders-app on cluster A"), (
        "estate up publishes the active cluster's client files"
    )
    assert published.stat().st_mode & 0o777 == 0o600
    before = tmp_path / "clients-A"
    shutil.move(state / "clients", before)  # what the failover writes later is then its own
    outputs = EstateStack(StackRef.resolve(STACK)).outputs()
    producer, consumer = (before / client_files(state, name)[0].name for name in ("orders-app", "billing"))
    assert _props(producer)["bootstrap.servers"] == outputs["clusters"]["A"]["bootstrapServers"]
    b_bootstrap = outputs["clusters"]["B"]["bootstrapServers"]

    refused = console_produce(producer, b_bootstrap, REFUSED_KEYS)
    assert refused.returncode == 1 and REFUSED in refused.stderr, refused.stderr[-3000:]

    keys = [f"outside-{i}" for i in range(400)]
    accepted = console_produce(producer, _props(producer)["bootstrap.servers"], keys)
    assert accepted.returncode == 0, accepted.stderr[-3000:]  # --sync: every line acknowledged
    ACKED.extend(keys)
    # read back as billing in its own group, committing nothing: the group's first committed offsets are
    # those of the half-way reader before the failover (test_planned_failover_...)
    read = console_consume(
        consumer,
        _props(consumer)["bootstrap.servers"],
        "billing",
        len(keys),
        "--command-property",
        "enable.auto.commit=false",
    )
    assert Counter(read) == Counter(keys)

    estate.mirror("A-to-B").wait_caught_up(["orders"], timeout=120)
    assert read_keys(estate.endpoint("B"), "orders") == Counter(keys), "B holds only what the link copied"


# --- 2. a link alone, status as a monitoring check ----------------------------------------------------


def test_a_stopped_link_makes_status_exit_non_zero_naming_it(env: StackEnv, estate: Estate) -> None:
    acked, errors = produce(app(estate, "A"), "orders", [f"before-{i}" for i in range(100)])
    assert len(acked) == 100, errors[:3]
    ACKED.extend(acked)
    assert link_copied(estate, "A-to-B", TOPICS, 90)
    ok = drctl(env, "status", "--stack", STACK)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "problems: none" in ok.stdout

    stop = drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B")
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert "link A-to-B (A → B): running → stopped" in stop.stdout
    assert not env.estate().mirror("A-to-B").alive()

    res = drctl(env, "status", "--stack", STACK, "--json")
    assert res.returncode == 4, res.stderr[-2000:]
    report = json.loads(res.stdout)  # the full status is printed first
    assert report["problems"] == ["link A-to-B (A → B) is stopped; the topology says it runs"]
    assert [(lk["name"], lk["process"]) for lk in report["links"]] == [("A-to-B", "stopped")]
    assert f"stack {STACK} has 1 problem" in res.stderr and "drctl link start" in res.stderr

    again = drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B")
    assert again.returncode == 0 and "stopped → stopped" in again.stdout, "stopping is idempotent"


def test_link_start_refuses_a_stopped_cluster_then_resumes_where_it_stopped(env: StackEnv, estate: Estate) -> None:
    acked, _ = produce(app(estate, "A"), "orders", [f"while-stopped-{i}" for i in range(200)])
    assert len(acked) == 200
    ACKED.extend(acked)
    estate.local_cluster("B").stop()
    refused = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert refused.returncode == 4, refused.stderr[-2000:]
    assert "cluster B (target of link A-to-B, passive) is stopped" in refused.stderr
    assert f"drctl estate start --stack {STACK} --cluster B" in refused.stderr
    back = drctl(env, "estate", "start", "--stack", STACK, "--cluster", "B")
    assert back.returncode == 0, back.stderr[-2000:]

    start = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert start.returncode == 0, start.stderr[-3000:]
    assert "stopped → running" in start.stdout and env.estate().mirror("A-to-B").alive()
    assert link_copied(env.estate(), "A-to-B", TOPICS, 90), "the records written while the link was stopped reach B"
    ok = drctl(env, "status", "--stack", STACK)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]


def test_unknown_links_are_refused_naming_the_known_ones(env: StackEnv) -> None:
    res = drctl(env, "link", "start", "--stack", STACK, "--link", "B-to-A")
    assert res.returncode == 2 and "use one of: A-to-B" in res.stderr


# --- 3. refused failovers ------------------------------------------------------------------------------


def test_a_failover_is_refused_while_b_is_down_and_nothing_changes(env: StackEnv, estate: Estate) -> None:
    before = env.stack_file.read_bytes()
    b = estate.local_cluster("B")
    b.stop()
    try:
        res = drctl(env, "failover", "--stack", STACK, "--yes")
        assert res.returncode == 6, res.stderr[-2000:]
        assert "cluster B (the passive cluster to promote) is unreachable" in res.stderr
        assert env.stack_file.read_bytes() == before
        acked, errors = produce(app(estate, "A"), "orders", ["while-b-down"])
        assert acked == ["while-b-down"] and not errors, "A was not fenced by a refused preflight"
        ACKED.extend(acked)
    finally:
        b.start()
    assert estate.mirror("A-to-B").alive()


def test_a_link_that_does_not_drain_is_refused_and_a_is_unfenced(env: StackEnv, estate: Estate) -> None:
    mirror = estate.mirror("A-to-B")
    mirror.stop()
    try:
        keys = [f"lag-{i}" for i in range(200)]
        acked, _ = produce(app(estate, "A"), "orders", keys)
        assert len(acked) == 200
        ACKED.extend(acked)
        res = drctl(env, "failover", "--stack", STACK, "--yes", "--drain-timeout", "2")
        assert res.returncode == 6, res.stderr[-2000:]
        assert "link A-to-B (its process is NOT running) still lags by" in res.stderr
        assert "A was unfenced" in res.stderr and "--force" in res.stderr
        again, errors = produce(app(estate, "A"), "orders", ["after-refusal"])
        assert again == ["after-refusal"] and not errors, "the refused failover gave A its write ACLs back"
        ACKED.extend(again)
        journal = Journal.load(journal_home(env, STACK))
        assert journal is not None
        assert journal.step("fence-drain").status == "failed"
        assert journal.step("promote").status == "pending"
        assert journal.measurements.fenced_bindings == []
    finally:
        mirror.start()


# --- 4. the planned failover ---------------------------------------------------------------------------


def test_planned_failover_loses_no_acknowledged_record(env: StackEnv, estate: Estate) -> None:
    keys = [f"p-{i}" for i in range(3000)]
    acked, errors = produce(app(estate, "A"), "orders", keys)
    assert len(acked) == 3000 and not errors
    ACKED.extend(acked)
    billing_a = app(estate, "A", "billing").config(**{"group.id": "billing"})
    GROUP["A"] = _read_group(billing_a, "orders", until=1700)  # the group is half-way when A is failed over
    assert len(GROUP["A"]) >= 1700
    # as the runbook says: start once the link shows the group's position on B
    within = translated_within(estate.topology, "B")
    assert wait_until(lambda: bool(committed_offsets(estate.endpoint("B"), "billing")), within, interval=0.5)

    res = drctl(env, "failover", "--stack", STACK, "--yes", "--json")
    assert res.returncode == 0, res.stderr[-4000:]
    s = json.loads(res.stdout)
    print(
        f"\nplanned: RTO {s['rto_s']}s, A→B→C {s['a_b_c_s']}s, total {s['total_s']}s, runs {s['runs']}, "
        + ", ".join(f"{st['name']} {st['seconds']}s" for st in s["steps"])
    )
    assert s["status"] == "completed"
    assert [st["status"] for st in s["steps"]] == ["done"] * 8
    assert s["runs"] == 3, "it resumed the journal of the two refused runs"
    # the timing figures are measured (their aims are graded by the drill and the benchmarks, not here)
    assert s["rto_s"] is not None and s["rto_s"] > 0
    assert s["a_b_c_s"] is not None and s["a_b_c_s"] > 0
    assert s["verdict"]["clean"] and s["verdict"]["counts"]["missing"] == 0
    assert s["rpo_estimate"]["records"] == 0
    SUMMARY.update(s)
    PASSED.add("failover")

    # zero acknowledged records lost: every key A acknowledged is on B, and nothing else from A is missing
    on_b = read_keys(estate.endpoint("B"), "orders")
    assert not set(ACKED) - set(on_b)
    assert on_b[PROBE] == 1, "exactly one RTO probe record"
    assert sum(on_b.values()) == len(ACKED) + 1


def test_the_group_resumes_on_b_from_its_translated_offsets_skipping_none(env: StackEnv, estate: Estate) -> None:
    _needs("failover")
    groups = {g["group"]: g for g in SUMMARY["consumer_groups"]}
    assert groups["billing"]["status"] in ("translated", "partial") and not groups["billing"]["would_skip"]
    b_admin = estate.endpoint("B")
    assert committed_offsets(b_admin, "billing"), "MirrorMaker 2 translated the group's offsets"
    conf = json.loads(client_files(env.state, "billing")[1].read_text())  # what the moved application loads
    assert conf["bootstrap.servers"] == estate.local_cluster("B").bootstrap
    GROUP["B"] = _read_group_to_end(conf, b_admin, "orders")  # committing nothing: the console consumer follows
    read_on_a, read_on_b = GROUP["A"], [k for k in GROUP["B"] if k != PROBE]
    rereads = len(set(read_on_b) & set(read_on_a))
    print(f"billing: read {len(read_on_a)} on A, {len(read_on_b)} on B, {rereads} read twice")
    everything = {k for k in read_keys(b_admin, "orders") if k != PROBE}
    assert everything <= set(read_on_a) | set(read_on_b), "the resumed group skipped records"
    assert not set(REFUSED_KEYS) & everything, "nothing the console producer was refused reached B"


# --- 5. after the failover -----------------------------------------------------------------------------


def test_after_the_failover_the_console_clients_use_what_it_published_for_b(env: StackEnv) -> None:
    _needs("failover")
    assert "B" in GROUP, "runs after the group's own client read B"
    b_bootstrap = EstateStack(StackRef.resolve(STACK)).outputs()["clusters"]["B"]["bootstrapServers"]
    producer, consumer = (client_files(env.state, name)[0] for name in ("orders-app", "billing"))
    for path in (producer, consumer):
        assert path.read_text().startswith(f"# {path.stem} on cluster B ")
        assert _props(path)["bootstrap.servers"] == b_bootstrap
    assert _props(consumer)["group.id"] == "billing"

    # from the group's translated position, exactly what the group's own client read there, each once
    read = console_consume(consumer, b_bootstrap, "billing", len(GROUP["B"]))
    assert Counter(read) == Counter(GROUP["B"]) and max(Counter(read).values()) == 1
    assert not set(ACKED) - set(GROUP["A"]) - set(read), "every acknowledged record, read on A or by the console"
    assert not set(REFUSED_KEYS) & set(read)

    late = [f"on-b-{i}" for i in range(100)]
    written = console_produce(producer, b_bootstrap, late)
    assert written.returncode == 0, written.stderr[-3000:]
    assert Counter(console_consume(consumer, b_bootstrap, "billing", len(late))) == Counter(late), (
        "the group resumes after what it read and finds exactly the new records"
    )


def test_b_is_active_and_c_is_built_as_the_new_passive_cluster(env: StackEnv) -> None:
    _needs("failover")
    after = env.estate()
    roles = {c.name: c.role.value for c in after.topology.clusters}
    assert roles == {"A": "decommissioned", "B": "active", "C": "passive"}
    assert after.local_cluster("A").state() == "stopped"
    assert after.local_cluster("C").state() == "running" and after.mirror("B-to-C").alive()
    late, errors = produce(app(after, "B"), "orders", ["on-b"])
    assert late == ["on-b"] and not errors
    assert link_copied(after, "B-to-C", ["orders"], 60), "C replicates B"
    refused, denied = produce(app(after, "C"), "orders", ["on-c"], **{"message.timeout.ms": 5000})
    assert not refused and denied and denied[0].name() == "TOPIC_AUTHORIZATION_FAILED", "C is read-only for apps"
    assert read_keys(app(after, "C", "billing"), "orders")["on-b"] == 1, "billing may read on C"

    for path in (env.state / "clients").iterdir():
        assert oct(path.stat().st_mode & 0o777) == "0o600"

    # the fence and the promotion are desired state: Pulumi proposes no change after the failover
    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]


def test_the_finished_failover_run_again_changes_nothing(env: StackEnv) -> None:
    _needs("failover")
    journal = Journal.path_for(journal_home(env, STACK))
    before = (env.stack_file.read_bytes(), journal.read_bytes())
    res = drctl(env, "failover", "--stack", STACK, "--yes")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "already finished; nothing changed" in res.stdout
    assert f"of stack {STACK}: A → B → C — COMPLETED" in res.stdout, res.stdout[-2000:]
    assert (env.stack_file.read_bytes(), journal.read_bytes()) == before


def test_status_shows_the_new_roles_the_link_b_to_c_and_the_last_failover(env: StackEnv) -> None:
    _needs("failover")
    res = drctl(env, "status", "--stack", STACK, "--json", "--isr")
    assert res.returncode == 0, res.stderr[-2000:]
    st = json.loads(res.stdout)
    clusters = {c["name"]: c for c in st["clusters"]}
    assert (clusters["B"]["role"], clusters["B"]["health"]["healthy"]) == ("active", True)
    assert (clusters["C"]["role"], clusters["C"]["health"]["healthy"]) == ("passive", True)
    assert clusters["B"]["health"]["partitions"]["orders:0"]["isr"] == [1]
    assert clusters["A"]["process"] == "stopped"
    assert [(lk["name"], lk["process"]) for lk in st["links"]] == [("B-to-C", "running")]
    assert st["last_failover"]["status"] == "completed"
    text = drctl(env, "status", "--stack", STACK)
    assert "last failover" in text.stdout and "B-to-C" in text.stdout


def test_after_the_failover_the_old_link_is_not_started_again(env: StackEnv) -> None:
    _needs("failover")
    refused = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert refused.returncode == 6, refused.stderr[-2000:]
    assert "link A-to-B (A → B) is not started" in refused.stderr
    assert "drctl recover" in refused.stderr and "twice" in refused.stderr
    assert f"drctl estate standby --stack {STACK} --cluster A --yes" in refused.stderr
    assert env.estate().mirror("B-to-C").alive(), "the new link runs"

    refused_b = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "B", "--yes")
    assert refused_b.returncode == 6 and "cluster B is active" in refused_b.stderr


# --- 6. last: destructive ------------------------------------------------------------------------------


def test_the_old_active_cluster_is_wiped_and_declared_the_next_standby(env: StackEnv) -> None:
    _needs("failover")
    a = env.estate().local_cluster("A")
    assert a.state() == "stopped", "the failover's decommission step stopped A, its data kept"
    data = a.dir
    dry = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert re.search(r"^-\s+role: decommissioned\n\+\s+role: standby$", dry.stdout, re.M), dry.stdout[:3000]
    assert f"data that would be removed: {data}" in dry.stdout, dry.stdout[:3000]
    assert data.exists(), "the dry run changes nothing"

    res = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--yes", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert (out["cluster"], out["old_role"], out["new_role"]) == ("A", "decommissioned", "standby")
    assert out["data_removed"] == str(data) and out["removed_by"] == "pulumi up"
    assert a.state() == "absent" and not data.exists() and not a.running_nodes()
    assert not [pid for pid in out["stopped_pids"] if pid_alive(pid)]
    doc = yaml.safe_load(env.stack_file.read_text())
    roles = {c["name"]: c["role"] for c in doc["config"]["kafka-dr:clusters"]}
    assert roles == {"A": "standby", "B": "active", "C": "passive"}

    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
    status = drctl(env, "status", "--stack", STACK, "--json")
    assert status.returncode == 0, status.stdout[-2000:] + status.stderr[-2000:]
    assert json.loads(status.stdout)["problems"] == []

    again = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--yes")
    assert again.returncode == 0, "running it again changes nothing"
    plan = drctl(env, "failover", "--stack", STACK, "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr[-2000:]
    p = json.loads(plan.stdout)
    assert (p["source"], p["target"], p["standby"]) == ("B", "C", "A"), "the next failover is B→C→A"


def test_no_password_was_ever_printed(estate: Estate) -> None:
    secrets = [estate.credentials.password(u) for u in estate.credentials.users()]
    assert len(secrets) >= 4
    assert OUTPUTS and not [s for s in secrets for out in OUTPUTS if s in out]
