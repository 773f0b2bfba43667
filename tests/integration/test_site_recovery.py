"""Recovery of a lost site at scale, on real clusters: the code path of ``drctl failover --region A
--recover`` and ``--edge E --recover`` (:func:`dr.failover.frame.site_loss.recover_site`, which both call).

A holds 20,000 records of ``recovery`` in 8 partitions; B holds the copies a link delivered before the
loss, as ``A.recovery``: each partition's first 1,200 records but two (offsets 5 and 7). So 10,416
records are missing, in two offset ranges per partition more than a thousand offsets apart. The
recovery writes each of them once, keeping partition, key, value, headers and timestamp; a second run writes
nothing. Its time is printed, not asserted: how fast the batched path is against the former one (one consumer
per record, 50 records/s) is benchmarks/recovery_bench.py's measure, where load cannot fail a correctness test.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from dr.failover.frame.site_loss import recover_site
from dr.kafka.client import Endpoint
from dr.kafka.offsets import end_offsets
from dr.kafka.records import read_to_end
from dr.runtime.cluster import LocalCluster
from tests.integration.helpers import create_topic

pytestmark = pytest.mark.integration

TOPIC = "recovery"
PARTITIONS = 8
PER_PARTITION = 2_500
COPIED = 1_200  # offsets below this reached B before the loss ...
NOT_COPIED = {5, 7}  # ... but these two

Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def _record(partition: int, offset: int) -> tuple[bytes, bytes, list[tuple[str, bytes | None]] | None, int]:
    headers: list[tuple[str, bytes | None]] | None = (
        [("trace", f"t-{partition}-{offset}".encode()), ("empty", None)] if offset % 3 == 0 else None
    )
    value = f"value-{partition}-{offset}-".encode() + b"x" * 150
    return f"k-{offset % 700}".encode(), value, headers, 1_700_000_000_000 + partition * 100_000 + offset


def _write(endpoint: Endpoint, topic: str, offsets: dict[int, list[int]]) -> None:
    producer = Producer(endpoint.config(**{"acks": "all", "enable.idempotence": True, "linger.ms": 20}))
    failed: list[object] = []
    for partition, offs in offsets.items():
        for offset in offs:
            key, value, headers, ts = _record(partition, offset)
            while True:
                try:
                    producer.produce(
                        topic,
                        key=key,
                        value=value,
                        headers=headers,
                        timestamp=ts,
                        partition=partition,
                        on_delivery=lambda err, _m: failed.append(err) if err else None,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
    assert producer.flush(60) == 0 and not failed, failed[:3]


def _content(endpoint: Endpoint, topic: str) -> Counter[Record]:
    return Counter(
        (
            m.partition() or 0,
            m.key(),
            m.value(),
            tuple((h[0], h[1]) for h in m.headers() or []),
            m.timestamp()[1],
        )
        for m in read_to_end(endpoint, topic)
    )


def test_ten_thousand_missing_records_are_recovered_in_batches_and_a_second_run_writes_nothing(
    cluster_a: LocalCluster, cluster_b: LocalCluster
) -> None:
    a_ep, b_ep = cluster_a.endpoint(), cluster_b.endpoint()
    create_topic(cluster_a, TOPIC, partitions=PARTITIONS)
    create_topic(cluster_b, f"A.{TOPIC}", partitions=PARTITIONS)
    _write(a_ep, TOPIC, {p: list(range(PER_PARTITION)) for p in range(PARTITIONS)})
    copied = [o for o in range(COPIED) if o not in NOT_COPIED]
    _write(b_ep, f"A.{TOPIC}", {p: copied for p in range(PARTITIONS)})
    missing = PARTITIONS * (PER_PARTITION - len(copied))
    assert missing >= 10_000

    t0 = time.monotonic()
    said: list[str] = []
    done = recover_site(a_ep, b_ep, "A", [TOPIC], rerun="rerun the test", progress=lambda m: (said.append(m), print(m)))
    seconds = time.monotonic() - t0
    print(f"recovered {done.replayed:,} records in {seconds:.1f}s ({done.replayed / seconds:,.0f} records/s)")
    assert done.missing_before == missing and done.replayed == missing, done
    # read in offset ranges, not record by record: each partition's missing offsets are at most three runs
    # (5, 7 and 1,200 to the end), so at most three ranges each — the former path made 10,416 reads
    reading = [re.search(r"reading ([\d,]+) records in (\d+) offset ranges of (\d+) partitions", m) for m in said]
    (found,) = [m for m in reading if m]
    assert found[1] == f"{missing:,}" and int(found[3]) == PARTITIONS and int(found[2]) <= 3 * PARTITIONS, found[0]
    # every record of A is on B once, in its partition, with its key, value, headers and timestamp
    assert _content(b_ep, f"A.{TOPIC}") == _content(a_ep, TOPIC)
    assert done.topics[TOPIC].missing == missing

    ends = end_offsets(b_ep, [f"A.{TOPIC}"])
    again = recover_site(a_ep, b_ep, "A", [TOPIC], rerun="rerun the test")
    assert again.missing_before == 0 and again.replayed == 0, again
    assert end_offsets(b_ep, [f"A.{TOPIC}"]) == ends, "a second recovery writes nothing"
