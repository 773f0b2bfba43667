"""Active-active on real clusters: two peers with traffic both ways, prefixed remote topics and no loop;
a planned failover of region A under traffic — nothing acknowledged lost, consumers resume without
skipping; A rejoining as a peer (fail-back); then A's brokers killed under traffic both ways, an
unplanned failover, A back with its data, the records that never crossed replayed, and A rejoining
again. One estate for the module (A and B, one broker each, links both ways), provisioned with
``pulumi up`` through the Automation API; the tests run in order, each from where the last one left."""

from __future__ import annotations

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
from tests.integration.helpers import jvms_under, mm2_checkpoints, produce
from tests.integration.ports import windows

STACK = "aatest"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The example active-active stack on free ports, provisioned once; destroyed, nothing left running."""
    d = tmp_path_factory.mktemp("active-active")
    with windows(2) as ports:
        doc = yaml.safe_load((REPO_ROOT / "Pulumi.active-active.yaml").read_text())
        for c, port in zip(doc["config"]["kafka-dr:clusters"], ports, strict=True):
            c["base_port"] = port
        path = d / f"Pulumi.{STACK}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        original = load_stack_file(path)
        variables = {"KDR_STACK_DIR": str(d), "KDR_STATE_DIR": str(d / "state")}
        with pytest.MonkeyPatch.context() as mp:
            for k, v in variables.items():
                mp.setenv(k, v)
            ref = StackRef.resolve(STACK)
            try:
                t0 = time.monotonic()
                EstateStack(ref).up(original)
                yield {"ref": ref, "original": original, "path": path, "up_s": time.monotonic() - t0}
            finally:
                try:
                    EstateStack(ref).destroy()
                finally:
                    estate = Estate(original, ref.state_dir)
                    estate.stop()
                    for c in original.clusters:
                        estate.local_cluster(c.name).destroy()
        left = jvms_under(d)
        assert not left, f"processes left running: {left}"


def _app(estate: Estate, cluster: str, app: str) -> Endpoint:
    return estate.local_cluster(cluster).endpoint().with_user(app, estate.app_password(app))


def _topics(ep: Endpoint) -> set[str]:
    return set(admin_client(ep).list_topics(timeout=10).topics)


#: What MirrorMaker 2 logs (INFO, its Scheduler) at the end of each topic refresh of its source connector.
TOPIC_REFRESH_DONE = "refreshing topics took"


def _topic_refresh_begun_and_done(estate: Estate, link: str) -> None:
    """Return once MirrorMaker 2 of ``link`` has logged two more completed topic refreshes than now: the second
    began after this call, so it listed every topic its source holds now (the first may have begun before)."""
    log = estate.mirror(link).process.log_file

    def done() -> int:
        return log.read_text(errors="replace").count(TOPIC_REFRESH_DONE)

    seen = done()
    assert wait_until(lambda: done() >= seen + 2, 120, interval=0.5), (
        f"MirrorMaker 2 of {link} logged no two topic refreshes ({TOPIC_REFRESH_DONE!r}) in 120 s: read {log}"
    )


def test_traffic_both_ways_lands_in_prefixed_remote_topics_without_a_loop(env: dict[str, Any]) -> None:
    estate = Estate(env["original"], env["ref"].state_dir)
    a_keys, errors = produce(_app(estate, "A", "shop-a"), "orders", [f"a-{i}" for i in range(300)])
    assert not errors and len(a_keys) == 300
    b_keys, errors = produce(_app(estate, "B", "shop-b"), "orders", [f"b-{i}" for i in range(300)])
    assert not errors and len(b_keys) == 300
    a_admin, b_admin = estate.endpoint("A"), estate.endpoint("B")
    # A's orders reach B as A.orders, B's reach A as B.orders
    assert wait_until(lambda: sum(read_keys(b_admin, "A.orders").values()) >= 300, 90, interval=1)
    assert wait_until(lambda: sum(read_keys(a_admin, "B.orders").values()) >= 300, 90, interval=1)
    assert set(read_keys(b_admin, "A.orders")) == set(a_keys)
    assert set(read_keys(a_admin, "B.orders")) == set(b_keys)
    # the negative check after a positive marker: each link has since completed a topic refresh that listed
    # the other region's remote copy on its source, so a loop would have created its topic by now
    for link in ("A-to-B", "B-to-A"):
        _topic_refresh_begun_and_done(estate, link)
    every = _topics(a_admin) | _topics(b_admin)
    loops = sorted(t for t in every if t.startswith(("A.B.", "B.A.", "A.A.", "B.B.")))
    assert not loops, f"replication loop: {loops}"
    # the local topics hold only their own region's records
    assert set(read_keys(b_admin, "orders")) == set(b_keys)
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


def test_failover_of_region_a_under_traffic_loses_nothing_and_consumers_resume(env: dict[str, Any]) -> None:
    ref, estate = env["ref"], Estate(env["original"], env["ref"].state_dir)
    writer = _Writer(_app(estate, "A", "shop-a"))
    writer.start()
    assert wait_until(lambda: len(writer.acked) >= 300, 60), "shop-a's writes are acknowledged on A"
    # shop-a's consumer reads the global view on A (A's orders and B.orders, B's 300 records), commits, and
    # stops (its group idle, so MM2 syncs it to B)
    read_on_a = _consume(_app(estate, "A", "shop-a"), ["^(B\\.)?orders$"], "shop-a", until=4)
    assert {f"b-{i}" for i in range(300)} <= set(read_on_a)
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
    after = load_stack_file(env["path"])
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
    reread_of_b = sum(1 for k in read_on_b if k.startswith("b-"))
    assert reread_of_b == 0, f"{reread_of_b} of B's records read as B.orders on A were read again on B"
    print(
        f"up {env['up_s']:.1f}s; failover {failover_s:.1f}s; acked on A {len(writer.acked)}; "
        f"re-read after the move {redelivered} of {len(read_on_a)} (of B's own records: {reread_of_b}); "
        f"skipped {len(skipped)}"
    )
    every = _topics(b_admin)
    assert not [t for t in every if t.startswith(("A.B.", "B.A."))]


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


def test_region_a_rejoins_as_a_peer_and_its_applications_move_home(env: dict[str, Any]) -> None:
    ref = env["ref"]
    summary, rejoin_s = _rejoin_under_traffic(ref, "rj1")
    assert all(s.status == "done" for s in summary.steps), summary.steps
    after = load_stack_file(env["path"])
    assert after.cluster("A").role == "active" and not after.failover_done
    assert sorted(lk.name for lk in after.links) == ["A-to-B", "B-to-A"]
    assert {a.name: a.home for a in after.principals.applications} == {"shop-a": "A", "shop-b": "B"}
    estate = Estate(after, ref.state_dir)
    # what shop-a wrote on B while away stays in B's orders, and reaches A once as B.orders (the global view)
    on_a = read_keys(estate.endpoint("A"), "B.orders")
    moved = {f"moved-{i}" for i in range(20)}
    assert moved <= set(on_a) and all(on_a[k] == 1 for k in moved)
    # the returning group was positioned on A before A's file was published (issue 34): every partition of
    # A's orders and B.orders, B.orders from its commits on B's orders — auto.offset.reset never applies
    journal = Journal.load(ref.failover_home)
    assert journal is not None
    group = (journal.step("rejoin-consumer-groups").outcome or {})["details"]["groups"]["shop-a"]
    positions = {(p["topic"], p["partition"]): p for p in group["positions"]}
    assert group["positions_committed"] and {t for t, _p in positions} == {"orders", "B.orders"}, group
    # each from its commits on B, or the group's own commit on A where that is at or past their translation
    # (the link's offset syncs short of B's commits: what it may read again is counted, checked below)
    sources = {p["source"] for (t, _p), p in positions.items() if t == "B.orders"}
    assert sources and sources <= {"translated", "kept"}, positions
    home, on_b = _both_ways_after_rejoin(estate, "r1")
    # the consumer at home reads A's orders and B.orders with auto.offset.reset=latest, Java's default: nothing
    # skipped (before: A's records written before it started), and B's records it had read on B not read again
    want = set(home) | set(on_b)
    read = _consume(_app(estate, "A", "shop-a"), ["^(B\\.)?orders$"], "shop-a", until=60, want=want, reset="latest")
    skipped = sorted(want - set(read))
    assert not skipped, f"{len(skipped)} records skipped after the move home, e.g. {skipped[:5]}"
    # what it had read on B and reads again at home is counted by the step (observed: 20 of the moved records,
    # the link's offset syncs short of the group's commits after its bulk catch-up)
    reread = sorted(moved & set(read))
    print(
        f"the consumer at home re-read {len(reread)} of B's records; the step said at most {group['rereads_at_most']}"
    )
    assert len(reread) <= group["rereads_at_most"], (reread[:5], group["text"])
    report = status_report(ref, snapshot=False)
    assert {link.name: link.total_lag for link in report.links} == {"A-to-B": 0, "B-to-A": 0}
    print(f"rejoin {rejoin_s:.1f}s; the consumer read {len(read)} records at home for {len(want)} new")


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
    estate = Estate(load_stack_file(env["path"]), ref.state_dir)
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
    after = load_stack_file(env["path"])
    assert after.cluster("A").role == "decommissioned" and after.links == []
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
    estate = Estate(load_stack_file(env["path"]), ref.state_dir)
    _both_ways_after_rejoin(estate, "r2")
    # every record shop-a had acknowledged anywhere is still there: A's in A.orders on B, the moved ones
    # in B's orders and (global view) in B.orders on A
    assert set(wa.acked) <= set(read_keys(estate.endpoint("B"), "A.orders"))
    assert set(moved) <= set(read_keys(estate.endpoint("A"), "B.orders"))
    print(
        f"unplanned failover {failover_s:.1f}s; acked on A {len(wa.acked)}, never crossed {missing} (replayed); "
        f"acked on B {len(wb.acked)}; rejoin {rejoin_s:.1f}s"
    )
