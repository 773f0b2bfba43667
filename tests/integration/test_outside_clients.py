"""Clients that are not ours: Kafka's own Java console producer and consumer, configured only by the
``.properties`` files the product publishes, against a real estate and a real planned failover.

Before the failover the producing application is refused on the passive cluster B and accepted on the
active cluster A; after ``drctl failover`` the files the failover published for B let the consuming
application (its principal and group) read every record acknowledged on A, and the producer write on B.

`drctl estate up` publishes the active cluster's client files (the same function the failover's
``clients`` step runs); they are checked against the stack's published bootstrap servers.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr.base.stackref import StackRef
from dr.base.toolchain import toolchain
from dr.estate.estate import Estate
from dr.estate.stack import EstateStack
from dr.failover.act.clients import client_files
from dr.failover.act.probe import PROBE_KEY
from dr.failover.drill.traffic import read_keys
from dr.runtime.process import java_command, pid_alive
from dr.topology import load_stack_file
from tests import processes
from tests.integration.helpers import StackEnv, committed_counts, drctl, provisioned, write_local_stack

pytestmark = pytest.mark.integration

STACK = "outside"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"  # Kafka 4.x: kafka-tools, no longer kafka.tools (Scala)
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
REFUSED = "TopicAuthorizationException: Not authorized to access topics: [orders]"
PROBE = PROBE_KEY.decode()


def _jvms_under(path: Path) -> list[int]:
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
    """The local stack on this suite's ports (A with 1 broker), provisioned by `drctl estate up`;
    `drctl estate down --destroy` afterwards, then whatever either side of the failover left running."""
    d = tmp_path_factory.mktemp("outside-clients")
    write_local_stack(d, STACK, stack_ports)
    e = StackEnv(d, STACK)
    with provisioned(e):
        try:
            yield e
        finally:
            drctl(e, "estate", "down", "--stack", STACK, "--destroy")
    left = _jvms_under(d)
    assert not left, f"processes left running: {left}"


@pytest.fixture
def estate(env: StackEnv) -> Estate:
    """The estate as the stack file declares it now."""
    return env.estate()


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


ACKED: list[str] = []  # what the console producer had acknowledged on A
REFUSED_KEYS = [f"refused-on-b-{i}" for i in range(5)]


def test_before_the_failover_the_producer_is_refused_on_b_and_accepted_on_a(
    env: dict[str, str], estate: Estate, tmp_path: Path
) -> None:
    state = Path(env["KDR_STATE_DIR"]) / STACK
    published = client_files(state, "orders-app")[0]
    assert published.is_file() and published.read_text().startswith("# orders-app on cluster A"), (
        "estate up publishes the active cluster's client files"
    )
    assert published.stat().st_mode & 0o777 == 0o600
    before = tmp_path / "clients-A"
    shutil.move(state / "clients", before)  # what the failover writes later is then its own
    outputs = EstateStack(StackRef.resolve(STACK)).outputs()
    producer, consumer = (before / client_files(state, app)[0].name for app in ("orders-app", "billing"))
    assert _props(producer)["bootstrap.servers"] == outputs["clusters"]["A"]["bootstrapServers"]
    b_bootstrap = outputs["clusters"]["B"]["bootstrapServers"]

    refused = console_produce(producer, b_bootstrap, REFUSED_KEYS)
    assert refused.returncode == 1 and REFUSED in refused.stderr, refused.stderr[-3000:]

    keys = [f"outside-{i}" for i in range(400)]
    accepted = console_produce(producer, _props(producer)["bootstrap.servers"], keys)
    assert accepted.returncode == 0, accepted.stderr[-3000:]  # --sync: every line acknowledged
    ACKED.extend(keys)
    # read back as billing in its own group, committing nothing: after the failover the same group
    # must still find every record on B (no offset of it to translate)
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


def test_after_a_planned_failover_the_console_clients_use_what_it_published_for_b(env: dict[str, str]) -> None:
    assert ACKED, "runs after the test above"
    state = Path(env["KDR_STATE_DIR"]) / STACK
    t0 = time.monotonic()
    res = drctl(env, "failover", "--stack", STACK, "--yes")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    print(f"\nplanned failover: {time.monotonic() - t0:.1f}s")

    after = Estate(load_stack_file(Path(env["KDR_STACK_DIR"]) / f"Pulumi.{STACK}.yaml"), state)
    b_bootstrap = EstateStack(StackRef.resolve(STACK)).outputs()["clusters"]["B"]["bootstrapServers"]
    producer, consumer = (client_files(state, app)[0] for app in ("orders-app", "billing"))
    for path in (producer, consumer):
        assert path.read_text().startswith(f"# {path.stem} on cluster B ")
        assert _props(path)["bootstrap.servers"] == b_bootstrap
    assert _props(consumer)["group.id"] == "billing"

    total = sum(committed_counts(after.endpoint("B"), ["orders"]).values())  # B's offsets count commit markers
    read = console_consume(consumer, b_bootstrap, "billing", total)
    assert Counter(k for k in read if k != PROBE) == Counter(ACKED), "every acknowledged record, once"
    assert not set(REFUSED_KEYS) & set(read)

    late = [f"on-b-{i}" for i in range(100)]
    written = console_produce(producer, b_bootstrap, late)
    assert written.returncode == 0, written.stderr[-3000:]
    assert Counter(console_consume(consumer, b_bootstrap, "billing", len(late))) == Counter(late), (
        "the group resumes after what it read and finds exactly the new records"
    )
