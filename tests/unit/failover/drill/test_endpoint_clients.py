"""The drill's unmodified clients on the client endpoint (issue 31): how their ledgers become one cycle's
report — the acknowledgements of this cycle only, those missing on the target counted lost, the write
and read gaps around the switch, the records read twice or never — without a cluster: the producer's
and the consumer's ledgers are filled by hand (their threads are never started)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from dr.failover.drill import endpoint_clients
from dr.failover.drill.endpoint_clients import EndpointClients, _Consumer, _Producer, endpoint_report
from dr.kafka.client import Endpoint

EP = Endpoint("127.0.0.1:19900", "orders-app", "pw")
SINCE, SWITCH, UNTIL = 1000.0, 1010.0, 1030.0


def _key(n: int) -> str:
    return f"endpoint-{n:08d}"


def _clients(reads: list[tuple[int | str, float]] | None) -> EndpointClients:
    """Acknowledged: #0 in an earlier cycle, #1-#3 up to the switch (#3 at its instant), #4-#5 after it,
    #6 after the target was read. ``reads``: what the consumer read, in order (None: no consumer)."""
    producer = _Producer(EP, "orders")
    producer.acked = {
        _key(0): 995.0,
        _key(1): 1002.0,
        _key(2): 1008.5,
        _key(3): SWITCH,
        _key(4): 1013.2,
        _key(5): 1020.0,
        _key(6): 1031.0,
    }
    consumer = None
    if reads is not None:
        consumer = _Consumer(EP.with_user("ledger-app", "pw2"), "orders", "ledger")
        consumer.reads = [(k if isinstance(k, str) else _key(k), t) for k, t in reads]
    return EndpointClients(EP.bootstrap, "orders-app", producer, "ledger" if consumer else None, consumer)


# On B after recovery: all but #3 (acknowledged by A at the switch's instant, never copied), plus the
# drill's own records, which are not the endpoint clients'.
ON_TARGET = Counter([_key(n) for n in (0, 1, 2, 4, 5, 6)] + ["drill-c1-00000001"])
ALL_READ: list[tuple[int | str, float]] = [
    (0, 996.0),  # an earlier cycle's, read twice then: not this cycle's duplicate
    (0, 997.0),
    (1, 1003.0),
    (2, 1009.0),  # the last read before the switch
    (2, 1014.0),  # read again from B: the first read after it
    (4, 1015.5),
    ("drill-c1-00000001", 1016.0),
    (5, 1021.0),
]


def test_the_report_counts_this_cycles_acknowledgements_the_lost_and_both_gaps() -> None:
    report = endpoint_report(_clients(ALL_READ), SWITCH, "B", ON_TARGET, SINCE, UNTIL)
    assert (report.bootstrap, report.target, report.producer, report.switched_at) == (
        "127.0.0.1:19900",
        "B",
        "orders-app",
        SWITCH,
    )
    assert (report.acked_before_switch, report.acked_after_switch) == (3, 2)  # #0 and #6 are not this cycle's
    assert report.acknowledged_lost == 1 and report.lost_sample == [_key(3)]
    assert report.writes_rto_s == 3.2  # #3 at the switch → #4 at 1013.2
    assert report.group == "ledger" and report.read == 5  # this cycle's reads of endpoint records only
    assert report.read_twice == 1 and report.skipped == 0
    assert report.reads_rto_s == 5.0  # 1009 → 1014
    assert report.producer_fatal is None


def test_a_record_never_read_is_skipped_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    def no_wait(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
        waits.append(timeout)
        return predicate()

    monkeypatch.setattr(endpoint_clients, "wait_until", no_wait)
    reads = [r for r in ALL_READ if r[0] != 5]
    report = endpoint_report(_clients(reads), SWITCH, "B", ON_TARGET, SINCE, UNTIL)
    assert report.skipped == 1 and report.read == 4 and waits == [60]
    # a record lost on the target is counted lost, never skipped: the consumer could not have read it
    lost_too = Counter({k: n for k, n in ON_TARGET.items() if k != _key(5)})
    again = endpoint_report(_clients(reads), SWITCH, "B", lost_too, SINCE, UNTIL)
    assert again.skipped == 0 and again.acknowledged_lost == 2 and again.lost_sample == [_key(3), _key(5)]


def test_the_report_waits_for_the_consumer_to_read_what_it_must() -> None:
    """#5 is read only after the report began: the counts include it (the wait ends on the read)."""
    clients = _clients([r for r in ALL_READ if r[0] != 5])
    consumer = clients.consumer
    assert consumer is not None
    late = threading.Timer(0.3, lambda: consumer.reads.append((_key(5), 1021.0)))
    late.start()
    try:
        report = endpoint_report(clients, SWITCH, "B", ON_TARGET, SINCE, UNTIL)
    finally:
        late.join()
    assert report.skipped == 0 and report.read == 5


def test_without_a_consumer_or_a_switch_the_figures_are_left_unmeasured() -> None:
    report = endpoint_report(_clients(None), SWITCH, "B", ON_TARGET, SINCE, UNTIL)
    assert report.group is None and report.read == 0 and report.reads_rto_s is None
    assert report.writes_rto_s == 3.2
    clients = _clients(ALL_READ)
    clients.producer.fatal = "Broker: Producer fenced"
    unswitched = endpoint_report(clients, None, "B", ON_TARGET, SINCE, UNTIL)
    assert unswitched.switched_at is None and unswitched.producer_fatal == "Broker: Producer fenced"
    assert (unswitched.acked_before_switch, unswitched.acked_after_switch) == (0, 0)
    assert unswitched.writes_rto_s is None and unswitched.reads_rto_s is None
    assert unswitched.acknowledged_lost == 1  # a loss is counted whether or not the endpoint moved
