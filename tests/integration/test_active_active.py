"""Active-active on real clusters, one estate for the module (Pulumi.active-active.yaml's shape on free ports:
A and B, one broker each, MirrorMaker 2 links both ways), each test from where the last one left:

1. ``drctl drill --keep`` on it, in a subprocess: traffic on both peers, region A failed over (planned) to B
   under traffic and rejoining under its applications' traffic, graded and reported — then the drill's copy,
   kept running, is the module's estate (the drill's own backend; destroyed at the end, nothing left running);
2. traffic both ways lands in prefixed remote topics, no loop; remote topics are read-only for applications;
3. A's brokers killed under traffic both ways, an unplanned failover, A back with its data, the records
   that never crossed replayed, and A rejoining again;
4. a planned failover of region A under traffic with an idle consumer group: nothing acknowledged lost, the
   group positioned exactly (nothing skipped, nothing of B's read again).

The drill's timing aims (application RTO ≤ 10 s, the survivor's longest pause ≤ 5 s, the rejoin's write gap)
are graded MISSED, not FAIL, when load alone misses them (the suite's one timing policy,
drill_runner.assert_graded): the drill test asserts that they are measured and ordered right, and that every
correctness check passes."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from dr.base.errors import ClusterError, FailoverError
from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.estate.stack_owner import OWNER_FILE
from dr.failover.act.health import listening
from dr.failover.drill.frame import restart
from dr.failover.drill.traffic import ConfigSource, ProducerLoop, read_keys, start_config, unanswered
from dr.failover.frame.journal import Journal
from dr.failover.frame.step import FailoverOptions
from dr.failover.frame.summary import FailoverSummary
from dr.failover.kinds.active_active.rejoin import run_region_rejoin
from dr.failover.kinds.active_active.run import recover_region, run_region_failover
from dr.failover.status import status_report
from dr.kafka.client import Endpoint, admin_client
from dr.kafka.offsets import committed_offsets
from dr.runtime.mirrormaker import group_offsets_translated_within
from dr.runtime.process import wait_until
from dr.topology import load_stack_file
from tests import REPO_ROOT
from tests.integration.drill_runner import assert_graded, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, mm2_checkpoints, produce
from tests.integration.ports import windows

STACK = "aatest"
READ_TWICE_AT_MOST = 200
"""Records the drill's moved group may read twice: one second of the drill's traffic (the positions are exact
when its last commits on A reach B's offset syncs; a commit after the step only costs re-reads)."""
REJOIN_COMMIT_SLACK = 400
"""Beyond what it read on B during the rejoin, the records the returning group may read twice at home: what it
read before the rejoin began and had not committed yet (two of the drill consumer's 500 ms auto-commit
intervals of B's orders, written at 400/s by both applications)."""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``drctl drill --keep`` on the example active-active stack on free ports; its copy, kept running, is the
    module's estate (on the drill's own backend); destroyed at the end, nothing left running."""
    d = tmp_path_factory.mktemp("active-active")
    out = (d / "drill").resolve()
    with windows(2) as ports:
        doc = yaml.safe_load((REPO_ROOT / "Pulumi.active-active.yaml").read_text())
        for c, port in zip(doc["config"]["kafka-dr:clusters"], ports, strict=True):
            c["base_port"] = port
        (d / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        original = load_stack_file(d / f"Pulumi.{STACK}.yaml")
        backend, copy = out / "pulumi", out / "stack" / f"Pulumi.{STACK}.yaml"

        def drills_ref() -> StackRef:
            """The drill's copy on the drill's own backend, with the token the drill claimed it by."""
            owner = backend / OWNER_FILE
            token = owner.read_text().strip() if owner.exists() else None
            return StackRef.of_file(copy, out / "state", backend=f"file://{backend}", owner=token)

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KDR_STATE_DIR", str(d / "state"))  # the stack's own state (its last drill), not the clone's
            try:
                t0 = time.monotonic()
                res = drctl_drill(d, STACK, out, "--keep", "--warmup", "1", "--rate", "200", timeout=900)
                yield {
                    "ref": drills_ref(),
                    "original": original,
                    "res": res,
                    "out": out,
                    "drill_s": time.monotonic() - t0,
                }
            finally:
                try:
                    if (backend / OWNER_FILE).exists():
                        EstateStack(drills_ref()).destroy()
                finally:
                    seen = [original, *([load_stack_file(copy)] if copy.exists() else [])]
                    for topology in seen:
                        estate = Estate(topology, out / "state")
                        estate.stop()
                        for c in topology.clusters:
                            estate.local_cluster(c.name).destroy()
        left = jvms_under(d)
        assert not left, f"processes left running: {left}"


def _secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}s"


def test_planned_region_drill_is_graded_and_reported(env: dict[str, Any]) -> None:
    res, out = env["res"], env["out"]
    print(res.stdout)
    r = drill_json(out)
    assert r, f"no drill.json; stderr:\n{res.stderr[-4000:]}"
    assert (r["architecture"], r["mode"], r["region"], r["survivor"]) == ("active-active", "planned", "A", "B")
    assert_graded(r["checks"])
    assert res.returncode == 0 and r["grade"].startswith("PASS"), (r["grade"], res.stderr[-3000:])
    # --keep: the drill's estate still runs (the module's tests go on with it; the fixture destroys it)
    kept = Estate(load_stack_file(env["ref"].stack_file), env["ref"].state_dir)
    assert all(listening(kept.local_cluster(c).bootstrap) for c in ("A", "B")), "the drill kept no cluster running"
    assert all(kept.mirror(link).process.alive() for link in ("A-to-B", "B-to-A")), "the drill kept no link running"
    # the figures behind the grade
    assert r["failover"]["status"] == "completed"
    steps = {s["name"]: s["status"] for s in r["failover"]["steps"]}
    assert steps["integrity"] == "done" and steps["decommission"] == "done", steps
    assert r["never_reached_survivor"] == 0 and r["listed_by_verification"] == 0 and r["verification_exact"]
    assert r["lost_after_recovery"] == 0 and r["loops"] == [] and r["preview_after_failover"] == {}
    rto = {(a["application"], a["kind"]): a for a in r["application_rto"]}
    assert set(rto) == {("shop-a", "writes"), ("shop-a", "reads")}, "only A's application moves"
    for a in rto.values():
        assert a["rto_s"] is not None and a["rto_s"] > 0 and a["last_on_source"] < a["first_on_target"], a
    traffic = {t["application"]: t for t in r["traffic"]}
    assert traffic["shop-a"]["moved"] and traffic["shop-a"]["acked_on_survivor"] > 0
    assert not traffic["shop-b"]["moved"] and traffic["shop-b"]["acked_during_failover"] > 0
    assert traffic["shop-b"]["reads_during_failover"] > 0, "B's consumer kept reading during the failover"
    [consumer] = r["consumers"]
    assert consumer["group"] == "shop-a" and consumer["skipped"] == 0 and consumer["read_on_target"] > 0
    # positioned on B before its file was published (issue 34): B's records it had read as B.orders on A, and
    # A's it had read on A, are not read again (before: 5,981 read twice)
    assert consumer["read_twice"] <= READ_TWICE_AT_MOST, consumer
    # the rejoin under the returning applications' traffic, its write gap graded (issue 34)
    rejoin = r["rejoin"]
    assert rejoin["summary"]["status"] == "completed", rejoin
    assert all(s["status"] == "done" for s in rejoin["summary"]["steps"]), rejoin["summary"]["steps"]
    [w] = rejoin["writes"]
    assert w["application"] == "shop-a" and w["refused"] == 0, w
    assert w["acked_on_peer"] > 0 and w["acked_on_home"] > 0, w
    gap = w["gap"]
    assert (gap["source"], gap["target"]) == ("B", "A") and gap["rto_s"] is not None, gap
    assert rejoin["moved_within_s"] is not None and rejoin["moved_within_s"] > 0, rejoin
    [back] = rejoin["consumers"]
    assert back["group"] == "shop-a" and back["skipped"] == 0 and back["read_on_target"] > 0, back
    # positioned at home from its offsets on B: it reads again at most what it read on B during the rejoin
    # (between its positioning and its move: grows with the step's duration, so no constant bounds it) and
    # the reads of its last auto-commit interval before
    assert back["read_twice"] <= back["read_on_source"] + REJOIN_COMMIT_SLACK, back
    assert any(c["check"].startswith("rejoin write gap ≤ 2s (shop-a: ") for c in r["checks"]), r["checks"]
    # the text a person reads carries the same figures
    text = res.stdout
    assert f"DRILL (planned, active-active) on stack {STACK}: region A → B — {r['grade']}" in text, text
    for k in r["checks"]:
        assert f"[{k['result']:>4}] {k['check']}" in text, k
    for a in r["application_rto"]:
        assert f"  {a['application']} {a['kind']}: {_secs(a['rto_s'])} ({a['measured']})" in text, a
    assert re.search(r"shop-b \(home B\): \d+ acknowledged on B; during the failover \d+ written", text), text
    assert f"{consumer['read_twice']} read twice, 0 skipped" in text, text
    assert f"acknowledged and lost after recovery: {r['lost_after_recovery']}" in text, text
    assert f"drill result: {out / 'drill.json'}" in text, text
    assert (
        f"shop-a: {w['acked_on_peer']} acknowledged on B and {w['acked_on_home']} on A while it ran, 0 refused, "
        f"{w['unanswered']} unanswered" in text
    )
    assert f"consumer group shop-a: {back['read_on_source']} read on B, {back['read_on_target']} at home on A" in text
    print(
        f"drill {r['seconds']:.0f}s (with provisioning, kept; {env['drill_s']:.0f}s in all); region failover "
        f"{r['failover_s']}s; moved group read twice {consumer['read_twice']}, skipped {consumer['skipped']}; "
        + "; ".join(f"{a['application']} {a['kind']} RTO {a['rto_s']}s" for a in r["application_rto"])
        + f"; rejoin {rejoin['seconds']}s, write gap {gap['rto_s']}s, {w['refused']} refused, returning group read "
        f"twice {back['read_twice']}, skipped {back['skipped']}"
    )


def test_after_the_drills_rejoin_region_a_is_a_peer_again_with_its_applications_home(env: dict[str, Any]) -> None:
    ref = env["ref"]
    after = load_stack_file(ref.stack_file)
    assert after.cluster("A").role == "active" and not after.failover_done
    assert sorted(lk.name for lk in after.links) == ["A-to-B", "B-to-A"]
    assert {a.name: a.home for a in after.principals.applications} == {"shop-a": "A", "shop-b": "B"}
    estate = Estate(after, ref.state_dir)
    # what shop-a wrote on B while away stays in B's orders, and reaches A once as B.orders (the global view)
    away = {k for k in read_keys(estate.endpoint("B"), "orders") if k.startswith("drill-shop-a-")}
    assert away, "shop-a wrote B's orders while A was failed over"
    assert wait_until(lambda: away <= set(read_keys(estate.endpoint("A"), "B.orders")), 90, interval=1)
    on_a = read_keys(estate.endpoint("A"), "B.orders")
    assert all(on_a[k] == 1 for k in away), "a record shop-a wrote on B copied twice into B.orders on A"
    # shop-a, home again, no longer writes B
    stray, errors = produce(_app(estate, "B", "shop-a"), "orders", ["drill-stray"], **{"message.timeout.ms": 5000})
    assert not stray and errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    # the returning group was positioned on A before A's file was published (issue 34): every partition of
    # A's orders and B.orders, B.orders from its commits on B's orders — auto.offset.reset never applies
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    group = (journal.step("rejoin-consumer-groups").outcome or {})["details"]["groups"]["shop-a"]
    positions = {(p["topic"], p["partition"]): p for p in group["positions"]}
    assert group["positions_committed"] and {t for t, _p in positions} == {"orders", "B.orders"}, group
    sources = {p["source"] for (t, _p), p in positions.items() if t == "B.orders"}
    assert sources and sources <= {"translated", "kept"}, positions


def _app(estate: Estate, cluster: str, app: str) -> Endpoint:
    return estate.local_cluster(cluster).endpoint().with_user(app, estate.app_password(app))


def _topics(ep: Endpoint) -> set[str]:
    return set(admin_client(ep).list_topics(timeout=10).topics)


#: What MirrorMaker 2 logs (INFO, its Scheduler) at the end of each topic refresh of its source connector.
TOPIC_REFRESH_DONE = "refreshing topics took"


def _topic_refresh_begun_and_done(estate: Estate, *links: str) -> None:
    """Return once MirrorMaker 2 of each of ``links`` has logged two more completed topic refreshes than now:
    the second began after this call, so it listed every topic its source holds now (the first may have begun
    before). The links are watched together: each refreshes on its own clock."""
    logs = {link: estate.mirror(link).process.log_file for link in links}

    def done(link: str) -> int:
        return logs[link].read_text(errors="replace").count(TOPIC_REFRESH_DONE)

    seen = {link: done(link) for link in links}
    assert wait_until(lambda: all(done(link) >= seen[link] + 2 for link in links), 120, interval=0.5), (
        f"MirrorMaker 2 of {', '.join(links)} logged no two topic refreshes ({TOPIC_REFRESH_DONE!r}) each in "
        f"120 s: read {', '.join(str(log) for log in logs.values())}"
    )


def test_traffic_both_ways_lands_in_prefixed_remote_topics_without_a_loop(env: dict[str, Any]) -> None:
    estate = Estate(env["original"], env["ref"].state_dir)
    a_keys, errors = produce(_app(estate, "A", "shop-a"), "orders", [f"a-{i}" for i in range(300)])
    assert not errors and len(a_keys) == 300
    b_keys, errors = produce(_app(estate, "B", "shop-b"), "orders", [f"b-{i}" for i in range(300)])
    assert not errors and len(b_keys) == 300
    a_admin, b_admin = estate.endpoint("A"), estate.endpoint("B")
    # A's orders reach B as A.orders, B's reach A as B.orders (beside what the drill wrote before)
    assert wait_until(lambda: set(a_keys) <= set(read_keys(b_admin, "A.orders")), 90, interval=1)
    assert wait_until(lambda: set(b_keys) <= set(read_keys(a_admin, "B.orders")), 90, interval=1)
    assert {k for k in read_keys(b_admin, "A.orders") if k.startswith(("a-", "b-"))} == set(a_keys)
    assert {k for k in read_keys(a_admin, "B.orders") if k.startswith(("a-", "b-"))} == set(b_keys)
    # the negative check after a positive marker: each link has since completed a topic refresh that listed
    # the other region's remote copy on its source, so a loop would have created its topic by now
    _topic_refresh_begun_and_done(estate, "A-to-B", "B-to-A")
    every = _topics(a_admin) | _topics(b_admin)
    loops = sorted(t for t in every if t.startswith(("A.B.", "B.A.", "A.A.", "B.B.")))
    assert not loops, f"replication loop: {loops}"
    # the local topics hold only their own region's records
    assert {k for k in read_keys(b_admin, "orders") if k.startswith(("a-", "b-"))} == set(b_keys)
    assert {k for k in read_keys(a_admin, "orders") if k.startswith(("a-", "b-"))} == set(a_keys)
    # drctl status shows every link's lag, each topic against its remote copy
    report = status_report(env["ref"], snapshot=False)
    lags = {link.name: link.total_lag for link in report.links}
    assert lags == {"A-to-B": 0, "B-to-A": 0}, lags


def test_remote_topics_are_read_only_for_applications(env: dict[str, Any]) -> None:
    estate = Estate(env["original"], env["ref"].state_dir)
    acked, errors = produce(_app(estate, "B", "shop-b"), "A.orders", ["intruder"], **{"message.timeout.ms": 5000})
    assert not acked
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    # but readable: the global view
    consumer_keys = read_keys(_app(estate, "B", "shop-b"), "A.orders")
    assert sum(consumer_keys.values()) >= 300


class _Writer(threading.Thread):
    """shop-a writing to A's orders until stopped; keeps the acknowledged keys."""

    def __init__(self, ep: Endpoint, prefix: str = "t") -> None:
        super().__init__(daemon=True)
        self.ep, self.prefix, self.stopping = ep, prefix, threading.Event()
        self.acked: list[str] = []
        self.refused = 0

    def run(self) -> None:
        producer = Producer(self.ep.config(**{"acks": "all", "linger.ms": 5, "message.timeout.ms": 5000}))

        def done(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self.acked.append(msg.key().decode())

        i = 0
        while not self.stopping.is_set():
            try:
                producer.produce("orders", key=f"{self.prefix}-{i}", value=f"v-{i}", on_delivery=done)
            except KafkaException:
                self.refused += 1  # fenced: the region no longer takes this application's writes
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        producer.flush(10)


def _consume(
    ep: Endpoint, topics: list[str], group: str, until: float, want: set[str] | None = None, reset: str = "earliest"
) -> list[str]:
    consumer = Consumer(ep.config(**{"group.id": group, "auto.offset.reset": reset, "enable.auto.commit": False}))
    consumer.subscribe(topics)
    keys: list[str] = []
    deadline = time.monotonic() + until
    try:
        while time.monotonic() < deadline and (want is None or not want <= set(keys)):
            batch = [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
            keys += [m.key().decode() for m in batch]
            if batch:
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return keys


def _positions(ref: StackRef) -> list[dict[str, Any]]:
    """The positions the last region failover's consumer-groups step gave shop-a on the survivor."""
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    details = (journal.step("consumer-groups").outcome or {})["details"]
    return list(details["groups"]["shop-a"]["positions"])


def _no_loop(*eps: Endpoint) -> None:
    every = set().union(*(_topics(ep) for ep in eps))
    loops = sorted(t for t in every if t.startswith(("A.B.", "B.A.", "A.A.", "B.B.")))
    assert not loops, f"replication loop: {loops}"


def _both_ways_after_rejoin(estate: Estate, tag: str) -> tuple[list[str], list[str]]:
    """shop-a writes its home A again and shop-b writes B; each region's records reach the other as
    ``<region>.orders``, each once; shop-a no longer writes B. Returns both lists of acknowledged keys."""
    a_admin, b_admin = estate.endpoint("A"), estate.endpoint("B")
    home, errors = produce(_app(estate, "A", "shop-a"), "orders", [f"{tag}-home-{i}" for i in range(100)])
    assert not errors and len(home) == 100
    on_b, errors = produce(_app(estate, "B", "shop-b"), "orders", [f"{tag}-b-{i}" for i in range(100)])
    assert not errors and len(on_b) == 100
    stray, errors = produce(_app(estate, "B", "shop-a"), "orders", [f"{tag}-stray"], **{"message.timeout.ms": 5000})
    assert not stray and errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    assert wait_until(lambda: set(home) <= set(read_keys(b_admin, "A.orders")), 90, interval=1)
    assert wait_until(lambda: set(on_b) <= set(read_keys(a_admin, "B.orders")), 90, interval=1)
    copied = read_keys(b_admin, "A.orders")
    assert all(copied[k] == 1 for k in home), "a record of A copied twice into A.orders"
    _no_loop(a_admin, b_admin)
    return home, on_b


def _rejoin_under_traffic(ref: StackRef, tag: str) -> tuple[FailoverSummary, float]:
    """The rejoin of A while shop-a writes from its published file (on B, then on A once A's is published):
    none of its writes is refused (issue 34: B's were removed before A's file was published). Returns the
    summary and the rejoin's seconds; prints the application's figures."""
    estate = Estate(load_stack_file(ref.stack_file), ref.state_dir)
    clusters = {estate.local_cluster(c).bootstrap: c for c in ("A", "B")}
    app = estate.topology.principals.application("shop-a")
    b_bootstrap = estate.local_cluster("B").bootstrap
    conf = start_config(estate, ref.state_dir, app, "B", b_bootstrap)
    conf.pop("group.id", None)
    assert conf["bootstrap.servers"] == b_bootstrap, "shop-a starts from its published file for B"
    writer = ProducerLoop(conf, "B", "orders", 100, ConfigSource(ref.state_dir, "shop-a", clusters), tag)
    writer.start()
    assert wait_until(lambda: bool(writer.ack_times("B")), 60), "shop-a's writes are acknowledged on B"
    t0 = time.monotonic()
    try:
        summary = run_region_rejoin(ref, "A", options=FailoverOptions(probe=False), progress=print)
        rejoin_s = time.monotonic() - t0
        # shop-a follows its published file back to A and writes there
        wait_until(lambda: len(writer.ack_times("A")) >= 50, 60)
    finally:
        writer.stop()
    on_b, on_a = writer.ack_times("B"), writer.ack_times("A")
    assert on_b and on_a, (len(on_b), len(on_a))
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    moved_within = (journal.step("rejoin-release").outcome or {})["details"]["moved_within_s"]
    print(
        f"rejoin under shop-a's traffic: {len(writer.failed)} writes refused or unanswered "
        f"({sorted(set(writer.failed.values()))}); last ack on B → first on A {min(on_a) - max(on_b):+.2f}s; "
        f"A's file published {moved_within}s before the removal of B's writes began"
    )
    refused = {k: why for k, why in writer.failed.items() if not unanswered(why)}
    assert not refused, f"{len(refused)} of shop-a's writes refused during the rejoin: {sorted(set(refused.values()))}"
    assert moved_within is not None and moved_within > 0
    return summary, rejoin_s


def _group_synced(estate: Estate, group: str, committed_on_a: dict[tuple[str, int], int]) -> bool:
    """Link A→B has checkpointed ``group``'s commits on A's orders (upstream offset equal to the commit) and
    written each translated offset to the group on B (B's commit at or past the checkpoint's)."""
    checkpoints = mm2_checkpoints(estate.endpoint("B"), "A", group)
    on_b = committed_offsets(estate.endpoint("B"), group)
    for (_topic, partition), offset in committed_on_a.items():
        checkpoint = checkpoints.get(("A.orders", partition))
        if checkpoint is None or checkpoint[0] != offset or on_b.get(("A.orders", partition), -1) < checkpoint[1]:
            return False
    return True


def test_unplanned_failover_of_region_a_recover_and_rejoin(env: dict[str, Any]) -> None:
    ref = env["ref"]
    estate = Estate(load_stack_file(ref.stack_file), ref.state_dir)
    wa, wb = _Writer(_app(estate, "A", "shop-a"), "u-a"), _Writer(_app(estate, "B", "shop-b"), "u-b")
    wa.start()
    wb.start()
    assert wait_until(lambda: len(wa.acked) >= 300 and len(wb.acked) >= 300, 60), (len(wa.acked), len(wb.acked))
    read_on_a = _consume(_app(estate, "A", "shop-a"), ["^(B\\.)?orders$"], "shop-a", until=4)
    assert read_on_a
    # the idle group's last commits reach B's checkpoints and its group on B: waited for as an event, at most
    # the bound the link's intervals give (what this test slept before: 26 s)
    committed_on_a = {tp: n for tp, n in committed_offsets(estate.endpoint("A"), "shop-a").items() if tp[0] == "orders"}
    assert committed_on_a
    t_sync = time.monotonic()
    synced = wait_until(
        lambda: _group_synced(estate, "shop-a", committed_on_a), group_offsets_translated_within(), interval=0.5
    )
    print(f"shop-a's last commits on B's checkpoints: {synced} after {time.monotonic() - t_sync:.1f}s")
    estate.mirror("A-to-B").kill()  # the link falls behind first, so some acknowledged records never cross
    after = len(wa.acked)
    assert wait_until(lambda: len(wa.acked) >= after + 100, 60), (after, len(wa.acked))
    estate.local_cluster("A").kill()  # SIGKILL: A is gone, under traffic
    wa.stopping.set()
    wa.join(30)
    assert wa.acked
    # a planned failover needs A: refused, naming the way on
    with pytest.raises(FailoverError, match="--mode unplanned"):
        run_region_failover(ref, "A", options=FailoverOptions(mode="planned", probe=False))
    t0 = time.monotonic()
    summary = run_region_failover(ref, "A", options=FailoverOptions(mode="unplanned", probe=False), progress=print)
    failover_s = time.monotonic() - t0
    steps = {s.name: s for s in summary.steps}
    assert steps["fence-drain"].status == "skipped"
    assert steps["integrity"].status == "deferred" and "drctl estate start" in steps["integrity"].summary
    assert steps["decommission"].status == "deferred"
    after = load_stack_file(ref.stack_file)
    assert after.cluster("A").role == "decommissioned" and after.links == []
    assert {a.name: a.home for a in after.principals.applications} == {"shop-a": "B", "shop-b": "B"}
    # shop-a moves to B at once and writes B's local orders
    moved, errors = produce(_app(estate, "B", "shop-a"), "orders", [f"u-moved-{i}" for i in range(20)])
    assert not errors and len(moved) == 20
    # nothing to replay from while A is down: said so, with the next step
    with pytest.raises(ClusterError, match="drctl estate start"):
        recover_region(ref, "A")
    restart(estate.local_cluster("A"))  # A's brokers back with their data
    with pytest.raises(FailoverError, match="--recover"):
        run_region_failover(ref, "A", options=FailoverOptions(probe=False))
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    missing = (journal.step("integrity").outcome or {})["details"]["missing"]
    assert missing > 0, "the link was killed before A: some acknowledged records never crossed"
    assert recover_region(ref, "A").replayed == missing
    assert recover_region(ref, "A").replayed == 0, "a second recovery writes nothing"
    summary = run_region_failover(ref, "A", options=FailoverOptions(probe=False), progress=print)
    steps = {s.name: s for s in summary.steps}
    assert steps["integrity"].status == "done" and steps["decommission"].status == "done", summary.steps
    wb.stopping.set()
    wb.join(30)
    b_admin = estate.endpoint("B")
    on_b = read_keys(b_admin, "A.orders")
    lost = sorted(set(wa.acked) - set(on_b))
    assert not lost, f"{len(lost)} records acknowledged by A lost, e.g. {lost[:5]}"
    assert set(wb.acked) | set(moved) <= set(read_keys(b_admin, "orders"))
    # A was gone when the group was positioned: on B's own orders nothing can be derived, so it resumes from
    # its commit of its first stay on B, or else the first record (said so, with the re-reads that costs) —
    # with auto.offset.reset=latest nothing it had not read is skipped
    positions = _positions(ref)
    assert {p["source"] for p in positions if p["topic"] == "orders"} <= {"start", "kept"}, positions
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    details = (journal.step("consumer-groups").outcome or {})["details"]
    assert details["gaps"] and details["groups"]["shop-a"]["rereads_at_most"] > 0, "said: not derived, may re-read"
    unread = (set(wa.acked) - set(read_on_a)) | set(moved) | (set(wb.acked) - set(read_on_a))
    read_on_b = _consume(
        _app(estate, "B", "shop-a"), ["^(A\\.)?orders$"], "shop-a", until=90, want=unread, reset="latest"
    )
    skipped = sorted(unread - set(read_on_b))
    assert not skipped, f"{len(skipped)} records skipped by the resumed consumer, e.g. {skipped[:5]}"
    reread = len(set(read_on_a) & set(read_on_b))
    print(f"unplanned: re-read after the move {reread} of {len(read_on_a)} (A unreadable), skipped {len(skipped)}")
    _no_loop(b_admin)
    # fail back: A, rebuilt, rejoins; traffic both ways again
    summary, rejoin_s = _rejoin_under_traffic(ref, "rj2")
    assert all(s.status == "done" for s in summary.steps), summary.steps
    after = load_stack_file(ref.stack_file)
    assert after.cluster("A").role == "active" and not after.failover_done
    assert {a.name: a.home for a in after.principals.applications} == {"shop-a": "A", "shop-b": "B"}
    estate = Estate(after, ref.state_dir)
    # the returning group was positioned on A before A's file was published: every partition of A's orders and
    # B.orders (B's orders had no derivable position: A was rebuilt empty, so from the group's commit or the
    # first record, said with the re-reads that costs)
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    group = (journal.step("rejoin-consumer-groups").outcome or {})["details"]["groups"]["shop-a"]
    assert group["positions_committed"] and {p["topic"] for p in group["positions"]} == {"orders", "B.orders"}, group
    home, on_b = _both_ways_after_rejoin(estate, "r2")
    # the consumer at home reads A's orders and B.orders with auto.offset.reset=latest, Java's default: nothing
    # skipped, and what it had read on B and reads again at home within what the step said
    want = set(home) | set(on_b)
    read = _consume(_app(estate, "A", "shop-a"), ["^(B\\.)?orders$"], "shop-a", until=60, want=want, reset="latest")
    skipped_home = sorted(want - set(read))
    assert not skipped_home, f"{len(skipped_home)} records skipped after the move home, e.g. {skipped_home[:5]}"
    reread_home = sorted(set(moved) & set(read))
    print(
        f"the consumer at home re-read {len(reread_home)} of the moved records; the step said at most "
        f"{group['rereads_at_most']}"
    )
    assert len(reread_home) <= group["rereads_at_most"], (reread_home[:5], group["text"])
    # every record shop-a had acknowledged anywhere is still there: A's in A.orders on B, the moved ones
    # in B's orders and (global view) in B.orders on A
    assert set(wa.acked) <= set(read_keys(estate.endpoint("B"), "A.orders"))
    assert set(moved) <= set(read_keys(estate.endpoint("A"), "B.orders"))
    print(
        f"unplanned failover {failover_s:.1f}s; acked on A {len(wa.acked)}, never crossed {missing} (replayed); "
        f"acked on B {len(wb.acked)}; rejoin {rejoin_s:.1f}s"
    )


def test_failover_of_region_a_under_traffic_loses_nothing_and_consumers_resume(env: dict[str, Any]) -> None:
    ref, estate = env["ref"], Estate(env["original"], env["ref"].state_dir)
    # B's new records reach A as B.orders, for shop-a's consumer to read there before A fails over
    b_keys, errors = produce(_app(estate, "B", "shop-b"), "orders", [f"p-b-{i}" for i in range(300)])
    assert not errors and len(b_keys) == 300
    assert wait_until(lambda: set(b_keys) <= set(read_keys(estate.endpoint("A"), "B.orders")), 90, interval=1)
    writer = _Writer(_app(estate, "A", "shop-a"))
    writer.start()
    assert wait_until(lambda: len(writer.acked) >= 300, 60), "shop-a's writes are acknowledged on A"
    # shop-a's consumer reads the global view on A (A's orders and B.orders, B's 300 new records) from its
    # commits, commits, and stops (its group idle, so MM2 syncs it to B)
    read_on_a = _consume(_app(estate, "A", "shop-a"), ["^(B\\.)?orders$"], "shop-a", until=4)
    assert set(b_keys) <= set(read_on_a)
    read_as_b_orders = set(read_on_a) & set(read_keys(estate.endpoint("A"), "B.orders"))
    t0 = time.monotonic()
    summary = run_region_failover(
        ref, "A", options=FailoverOptions(mode="planned", drain_timeout=60, probe=False), progress=print
    )
    failover_s = time.monotonic() - t0
    writer.stopping.set()
    writer.join(15)
    statuses = {s.name: s.status for s in summary.steps}
    assert statuses["integrity"] == "done", summary.steps
    assert statuses["decommission"] == "done", summary.steps
    after = load_stack_file(ref.stack_file)
    assert after.cluster("A").role == "decommissioned" and after.links == []
    assert {a.name: a.home for a in after.principals.applications} == {"shop-a": "B", "shop-b": "B"}
    b_admin = estate.endpoint("B")
    # every record acknowledged on A is on B, in A.orders
    on_b = read_keys(b_admin, "A.orders")
    lost = sorted(set(writer.acked) - set(on_b))
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    # the moved producer writes B's local orders
    moved, errors = produce(_app(estate, "B", "shop-a"), "orders", [f"moved-{i}" for i in range(20)])
    assert not errors and len(moved) == 20
    # the moved group was positioned on B before its configuration was published: on A.orders by the link's
    # translation, on B's own orders from what it had read of B.orders on A (issue 34)
    positions = _positions(ref)
    assert {p["source"] for p in positions if p["topic"] == "orders"} == {"translated"}, positions
    # the moved consumer resumes on B (local orders + A.orders) with auto.offset.reset=latest, Java's
    # default: what it had not read on A is read now — nothing skipped — and what it had read (B's records,
    # read there as B.orders) is not read again
    unread = set(writer.acked) - set(read_on_a)
    read_on_b = _consume(
        _app(estate, "B", "shop-a"), ["^(A\\.)?orders$"], "shop-a", until=60, want=unread | set(moved), reset="latest"
    )
    skipped = sorted((unread | set(moved)) - set(read_on_b))
    assert not skipped, f"{len(skipped)} records skipped by the resumed consumer, e.g. {skipped[:5]}"
    redelivered = len(set(read_on_a) & set(read_on_b))
    reread_of_b = sum(1 for k in read_on_b if k in read_as_b_orders)
    assert reread_of_b == 0, f"{reread_of_b} of B's records read as B.orders on A were read again on B"
    print(
        f"failover {failover_s:.1f}s; acked on A {len(writer.acked)}; "
        f"re-read after the move {redelivered} of {len(read_on_a)} (of B's own records: {reread_of_b}); "
        f"skipped {len(skipped)}"
    )
    every = _topics(b_admin)
    assert not [t for t in every if t.startswith(("A.B.", "B.A."))]
