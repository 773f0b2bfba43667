"""``drctl verify --master spark://HOST:PORT`` on a real standalone Spark cluster.

A master and two workers (1 core, 1 GB each) are started from pyspark's own jars with ``spark-class``
on 127.0.0.1. Two 1-broker Kafka clusters hold the same records (B written as MirrorMaker 2 would:
same partition, same timestamp), except records dropped from B (scattered and at the tail), a
duplicate, a corruption and a record A never had. The verification runs on the cluster and finds exactly
what was seeded: the verdict, each class's count and the offending records (``local[2]``, the
verification every failover runs, is proven against the same seeding in tests/spark/), and the application really ran
there (the master lists it finished with both workers' cores; the executors fetched the Kafka
connector jars from the driver and ran tasks). A master that cannot be reached, a port that is not
a master, and a cluster without room for an executor are exit 4 within a bounded time, naming the
master and the next step.

Ports: free windows below the ephemeral range (tests/integration/ports.py) — one per Kafka cluster, and
one (P) for Spark: master P/P+1 (web UI), workers P+2..P+5, driver P+10/P+11, executors' block managers
from P+20; the not-a-master run's driver P+60/P+61, its block managers from P+70 (it runs in the
background while the cluster starts); the unreachable masters P+98/P+99.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dr.base.errors import ClusterError, ConfigError
from dr.runtime.cluster import ClusterSpec, LocalCluster
from dr.runtime.process import ensure_ports_free, pid_alive, wait_until
from tests import processes
from tests.integration.ports import windows
from verification.session import check_master, kafka_jars, standalone_masters

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TOPICS = {"orders": 3, "payments": 2}


@dataclass(frozen=True)
class SparkPorts:
    """The standalone cluster's and the drivers' ports in one window starting at ``base``."""

    base: int

    @property
    def master_port(self) -> int:
        return self.base

    @property
    def master_ui(self) -> int:
        return self.base + 1

    @property
    def workers(self) -> list[tuple[int, int]]:
        """(RPC port, web UI port) of each worker."""
        return [(self.base + 2, self.base + 3), (self.base + 4, self.base + 5)]

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def driver(self) -> str:
        """The drivers' ``--conf`` options (executors' block managers from P+20, Spark retries upwards)."""
        return (
            f"--conf spark.driver.port={self.base + 10} --conf spark.driver.blockManager.port={self.base + 11} "
            f"--conf spark.blockManager.port={self.base + 20}"
        )

    @property
    def unreachable(self) -> tuple[int, int]:
        """Two ports nothing of this module listens on."""
        return self.base + 98, self.base + 99


@pytest.fixture(scope="module")
def spark_ports() -> Iterator[SparkPorts]:
    with windows(1) as (base,):
        yield SparkPorts(base)


# ---------------------------------------------------------------- the standalone cluster


class SparkDaemon:
    """A master or worker started with pyspark's ``bin/spark-class`` in its own process group."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        import pyspark

        spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.name, self.log = name, log
        self.command = [str(spark_class), *args]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def group(self) -> list[int]:
        """Live processes of its group: the JVM and the executors (and their Python) it started."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                pids.append(int(stat.parent.name))
        return pids

    def stop(self) -> None:
        """SIGTERM to the group (the worker stops its executors), SIGKILL what is left after 60 s."""
        for sig, timeout in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            if wait_until(lambda: (self.proc.poll(), not self.group())[1], timeout, interval=0.5):
                break
        self.proc.wait(timeout=10)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def master_state(ports: SparkPorts) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ports.master_ui}/json/", timeout=10) as resp:
        return json.load(resp)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, spark_ports: SparkPorts) -> Iterator[dict]:
    import pyspark

    ports = spark_ports
    root = tmp_path_factory.mktemp("spark-standalone")
    ensure_ports_free(
        [
            ports.master_port,
            ports.master_ui,
            *(p for w in ports.workers for p in w),
            *(ports.base + i for i in (10, 11, 20, 21)),
        ],
        "the standalone Spark test cluster",
    )
    (root / "conf").mkdir()
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(root / "conf"),
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_DIRS": str(root / "scratch"),
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    daemons: list[SparkDaemon] = []
    try:
        daemons.append(
            SparkDaemon(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(ports.master_port),
                    "--webui-port",
                    str(ports.master_ui),
                ],
                env,
                root / "master.log",
            )
        )
        work_dirs = []
        for i, (port, ui) in enumerate(ports.workers, 1):
            work = root / f"worker{i}"
            work.mkdir()
            work_dirs.append(work)
            daemons.append(
                SparkDaemon(
                    f"worker{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        ports.master,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(ui),
                        "--work-dir",
                        str(work),
                    ],
                    env,
                    root / f"worker{i}.log",
                )
            )

        def registered() -> bool:
            for d in daemons:
                assert d.alive(), f"{d.name} exited:\n{d.tail()}"
            try:
                return master_state(ports)["aliveworkers"] == len(ports.workers)
            except OSError:
                return False

        started = time.monotonic()
        assert wait_until(registered, 300, interval=1), "workers not registered:\n" + "\n".join(
            d.tail(10) for d in daemons
        )
        print(f"\nstandalone cluster ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
        yield {"work_dirs": work_dirs, "daemons": daemons, "root": root}
    finally:
        for d in reversed(daemons):  # workers (and their executors) first, the master last
            d.stop()
        left = [(d.name, pid) for d in daemons for pid in d.group() if pid_alive(pid)]
        assert not left, f"processes left after stopping the Spark cluster: {left}"


# ---------------------------------------------------------------- two Kafka clusters


def _produce(endpoint, topic: str, records: list[tuple]) -> list[tuple]:
    """Produce (key, value, headers, partition, timestamp) records; return (partition, offset, ts, key)."""
    out, errors = [], []
    producer = Producer(endpoint.config(**{"acks": "all", "linger.ms": 5}))
    for key, value, headers, partition, ts in records:
        kwargs = {k: v for k, v in (("partition", partition), ("timestamp", ts)) if v is not None}
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            **kwargs,
            on_delivery=lambda err, msg: (errors if err else out).append(err or msg),
        )
        producer.poll(0)
    producer.flush(60)
    assert not errors, errors
    return [(m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers()) for m in out]


def _records(prefix: str, n: int) -> list[tuple]:
    out = []
    for i in range(n):
        headers = [("trace-id", f"{prefix}-{i}".encode())] if i % 3 == 0 else None
        value = None if i % 50 == 49 else f'{{"{prefix}": {i}, "pad": "{"x" * (i % 40)}"}}'.encode()
        out.append((f"{prefix}-{i}".encode(), value, headers, None, None))
    return out


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    state = tmp_path_factory.mktemp("standalone-estate")
    with windows(2) as (port_a, port_b):
        yield from _seeded(state, port_a, port_b, tmp_path_factory)


def _seeded(state: Path, port_a: int, port_b: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    a = LocalCluster(ClusterSpec("sparkA", brokers=1, base_port=port_a), state)
    b = LocalCluster(ClusterSpec("sparkB", brokers=1, base_port=port_b), state)
    try:
        a.start()
        b.start()
        for cluster in (a, b):
            admin = AdminClient(cluster.endpoint().config())
            for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
                fut.result(timeout=60)
        written = {"orders": _records("orders", 3000), "payments": _records("payments", 600)}
        on_a = {topic: _produce(a.endpoint(), topic, recs) for topic, recs in written.items()}
        headers_of = {r[0]: r[2] for recs in written.values() for r in recs}  # delivery reports carry none
        missing = set()
        for topic, delivered in on_a.items():
            copy = []
            for i, (p, o, ts, key, value, _) in enumerate(delivered):  # in the order produced
                scattered = topic == "orders" and i % 97 == 13
                tail = topic == "payments" and i >= len(delivered) - 10
                if scattered or tail:
                    missing.add((topic, p, o))
                else:
                    copy.append((key, value, headers_of[key], p, ts))
            _produce(b.endpoint(), topic, copy)  # what MirrorMaker 2 copies: same partition and timestamp
        pay = {r[3]: r for r in on_a["payments"]}
        p7, p11 = pay[b"payments-7"], pay[b"payments-11"]
        _produce(
            b.endpoint(),
            "payments",
            [
                (p7[3], p7[4], headers_of[p7[3]], p7[0], p7[2]),  # a second copy
                (b"payments-11", b"tampered on B", None, p11[0], p11[2]),
                (b"ghost", b"A never had this key", None, None, None),
            ],
        )
        creds = state / "admin.json"
        fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"username": "admin", "password": a.endpoint().password}, f)
        yield {"a": a, "b": b, "creds": creds, "missing": missing, "out": tmp_path_factory.mktemp("reports")}
    finally:
        a.destroy()
        b.destroy()


def driver_env(ports: SparkPorts, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a driver process: its ports in the window; the session chooses the driver's
    address and the executors' Python for a master on this machine."""
    run_env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"{ports.driver} pyspark-shell", **(env or {})}
    for name in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_GATEWAY_PORT"):
        run_env.pop(name, None)
    return run_env


def drctl_verify(
    s: dict, ports: SparkPorts, out: Path, master: str, env: dict[str, str] | None = None, timeout: float = 900
) -> tuple[subprocess.CompletedProcess, float]:
    """``drctl verify`` in its own process (one Spark driver per process), timed."""
    args = [
        "verify",
        "--source-bootstrap",
        s["a"].bootstrap,
        "--target-bootstrap",
        s["b"].bootstrap,
        "--credentials",
        str(s["creds"]),
        "--cutoff",
        "none",
        "--out",
        str(out),
        "--json",
        "--quiet",
        "--master",
        master,
    ]
    run_env = driver_env(ports, env)
    started = time.monotonic()
    proc = processes.run(
        [sys.executable, "-c", "from dr.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=run_env,
    )
    return proc, time.monotonic() - started


def offending(out: Path) -> set[tuple]:
    rows = pq.read_table(out / "offending.parquet").to_pylist()
    return {(r["class"], r["side"], r["topic"], r["partition"], r["offset"], r["key"], r["checksum"]) for r in rows}


# ---------------------------------------------------------------- tests


def test_standalone_master_urls() -> None:
    assert standalone_masters("spark://10.0.0.5:7077") == [("10.0.0.5", 7077)]
    assert standalone_masters("spark://m1:7077,m2:7078") == [("m1", 7077), ("m2", 7078)]  # high availability
    assert standalone_masters("spark://spark-master") == [("spark-master", 7077)]
    assert standalone_masters("spark://[::1]:7077") == [("::1", 7077)]
    for other in ("local[2]", "yarn", "k8s://https://k:443"):
        assert standalone_masters(other) == []
    with pytest.raises(ConfigError, match="spark://HOST:PORT"):
        standalone_masters("spark://host:port")
    check_master("local[2]")  # nothing to check
    with pytest.raises(ClusterError, match=r"spark://nowhere\.invalid:7077 cannot be reached \(nowhere\.invalid: host"):
        check_master("spark://nowhere.invalid:7077", timeout=2)


@pytest.fixture(scope="module")
def not_a_master(seeded: dict, spark_ports: SparkPorts) -> Iterator[Future]:
    """``drctl verify`` against a port that accepts connections and never answers, started in the background
    before the cluster: Spark's client waits out its three 20 s registration attempts while the module starts
    its master and workers (its own driver ports, P+60/P+61, block managers from P+70)."""
    port = spark_ports.unreachable[0]
    server = socket.create_server(("127.0.0.1", port))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    b = spark_ports.base
    own_ports = (
        f"--conf spark.driver.port={b + 60} --conf spark.driver.blockManager.port={b + 61} "
        f"--conf spark.blockManager.port={b + 70} pyspark-shell"
    )
    url = f"spark://127.0.0.1:{port}"
    pool = ThreadPoolExecutor(1)

    def verify() -> dict:
        proc, seconds = drctl_verify(
            seeded,
            spark_ports,
            seeded["out"] / "not-a-master",
            url,
            env={"PYSPARK_SUBMIT_ARGS": own_ports},
            timeout=400,
        )
        return {"proc": proc, "seconds": seconds, "url": url, "accepted": len(accepted)}

    future = pool.submit(verify)
    try:
        yield future
    finally:
        with contextlib.suppress(Exception):  # noqa: BLE001 - its own test reports its failure
            future.result(timeout=450)
        pool.shutdown()
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        server.close()


@pytest.fixture(scope="module")
def both_runs(not_a_master: Future, spark_cluster: dict, seeded: dict, spark_ports: SparkPorts) -> dict:
    """The verification on the standalone cluster (the master's finished applications before it, to find it)."""
    before = {app["id"] for app in master_state(spark_ports)["completedapps"]}
    cluster, cluster_s = drctl_verify(seeded, spark_ports, seeded["out"] / "cluster", spark_ports.master)
    print(f"\nverification wall time (process): standalone 2 workers {cluster_s:.1f} s", file=sys.stderr)
    assert cluster.returncode == 1, f"exit {cluster.returncode}\n{cluster.stdout[-2000:]}\n{cluster.stderr[-4000:]}"
    summary = json.loads((seeded["out"] / "cluster" / "summary.json").read_text())
    print(f"  cluster timings: {summary.get('timings')}", file=sys.stderr)
    return {"cluster": cluster, "before": before, "seconds": cluster_s, "cluster_summary": summary}


def test_the_cluster_finds_exactly_what_was_seeded(both_runs: dict, seeded: dict, spark_ports: SparkPorts) -> None:
    cluster = both_runs["cluster_summary"]
    assert cluster["spark"]["master"] == spark_ports.master
    assert cluster["verdict"] == "differences"
    classes = ("missing", "unexpected", "duplicated", "corrupted")
    assert {t: {c: cluster["topics"][t][c] for c in classes} for t in TOPICS} == {
        "orders": {
            "missing": len([m for m in seeded["missing"] if m[0] == "orders"]),
            "unexpected": 0,
            "duplicated": 0,
            "corrupted": 0,
        },
        "payments": {"missing": 10, "unexpected": 1, "duplicated": 1, "corrupted": 1},
    }
    rows = offending(seeded["out"] / "cluster")
    assert {(t, p, o) for c, _, t, p, o, *_ in rows if c == "missing"} == seeded["missing"]
    # the second copy of payments-7, payments-11 tampered on B, and the key A never had, each on B
    others = {(c, t, bytes(k)) for c, _side, t, _p, _o, k, _sum in rows if c != "missing"}
    assert others == {
        ("duplicated", "payments", b"payments-7"),
        ("corrupted", "payments", b"payments-11"),
        ("unexpected", "payments", b"ghost"),
    }, others


def test_the_application_ran_on_both_workers_with_the_connector_jars(
    both_runs: dict, spark_cluster: dict, spark_ports: SparkPorts
) -> None:
    apps = [a for a in master_state(spark_ports)["completedapps"] if a["id"] not in both_runs["before"]]
    assert [(a["name"], a["state"], a["cores"], a["memoryperexecutor"]) for a in apps] == [
        ("kdr-verify", "FINISHED", 2, 1024)
    ], apps
    app_id = apps[0]["id"]
    connector = Path(next(j for j in kafka_jars() if "spark-sql-kafka" in j)).name
    executors = [d for work in spark_cluster["work_dirs"] for d in (work / app_id).iterdir() if d.is_dir()]
    assert {d.parents[1] for d in executors} == set(spark_cluster["work_dirs"]), "an executor on each worker"
    ran_tasks = 0
    for d in executors:
        log = (d / "stderr").read_text(errors="replace")
        assert "SharedArchiveFile" not in log.split("\n", 1)[0], "the driver's class-data archive is driver-only"
        if "Finished task" in log:
            ran_tasks += 1
            assert (d / connector).is_file() and f"/jars/{connector}" in log, f"{d}: connector jar not fetched"
    assert ran_tasks >= 1
    print(f"\nexecutors that ran tasks: {ran_tasks} of {len(executors)}", file=sys.stderr)


#: One audit run of the link sparkA → sparkB in its own process: source, target, credentials, state file,
#: --first-run, master; prints the run's figures.
AUDIT = """
import json, sys
from pathlib import Path
from verification.audit import audit_endpoints
from verification.endpoints import endpoint_from_file
src, dst, creds, path, first, master = sys.argv[1:7]
run = audit_endpoints(
    endpoint_from_file(src, creds), endpoint_from_file(dst, creds), path=Path(path), stack="standalone",
    link="A-to-B", source_cluster="sparkA", target_cluster="sparkB", first_run=first, master=master or None,
)
print(json.dumps(run.to_dict()))
"""


def test_a_first_audit_on_the_cluster_writes_the_state_a_python_first_audit_writes(
    both_runs: dict, seeded: dict, spark_ports: SparkPorts
) -> None:
    """``drctl audit --first-run spark --master spark://…``: the first (full) audit as one verification on
    the standalone cluster; same figures, bounds, frontier and residue as the one-process audit."""
    runs = {}
    for first, master in (("python", ""), ("spark", spark_ports.master)):
        path = seeded["out"] / f"audit-{first}" / "A-to-B.json"
        args = [seeded["a"].bootstrap, seeded["b"].bootstrap, str(seeded["creds"]), str(path), first, master]
        proc = processes.run(
            [sys.executable, "-c", AUDIT, *args],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
            env=driver_env(spark_ports),
        )
        assert proc.returncode == 0, f"{first}: {proc.stderr[-4000:]}"
        runs[first] = (json.loads(proc.stdout.splitlines()[-1]), json.loads(path.read_text()))
    (py, py_state), (sp, sp_state) = runs["python"], runs["spark"]
    figures = ("read_source", "read_target", "verified", "in_flight", "missing", "target_unmatched", "missing_sample")
    assert {k: sp[k] for k in figures} == {k: py[k] for k in figures}
    # source: the records never copied; target: the second copy, the tampered one and the ghost
    assert sp["missing"] + sp["in_flight"] == len(seeded["missing"]) and sp["target_unmatched"] == 3
    for k in ("bounds", "frontier", "residue"):
        assert sp_state[k] == py_state[k], k
    summary = json.loads((seeded["out"] / "audit-spark" / "A-to-B.first-audit" / "summary.json").read_text())
    assert summary["spark"]["master"] == spark_ports.master


def test_an_unreachable_master_is_exit_4_within_seconds(seeded: dict, spark_ports: SparkPorts) -> None:
    port = spark_ports.unreachable[1]
    url = f"spark://127.0.0.1:{port}"
    ensure_ports_free([port], "this test (nothing may listen there)")
    proc, seconds = drctl_verify(seeded, spark_ports, seeded["out"] / "unreachable", url, timeout=300)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"the Spark master {url} cannot be reached" in proc.stderr and "Connection refused" in proc.stderr
    assert "next step: start the master" in proc.stderr and "Traceback" not in proc.stderr
    assert seconds < 120, f"{seconds:.0f} s"  # Kafka bounds, then a TCP check: no driver JVM was started


def test_a_port_that_is_not_a_master_is_exit_4_after_sparks_retries(not_a_master: Future) -> None:
    """Something listens (here: a socket that accepts and never answers): Spark's client gives up after
    its three registration attempts (about a minute), and that is a ClusterError too, not a hang."""
    run = not_a_master.result(timeout=450)
    proc, url = run["proc"], run["url"]
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"the Spark master {url} accepted the connection but did not register the application" in proc.stderr
    assert "next step: check that HOST:PORT is the master's RPC address" in proc.stderr
    assert run["accepted"] and run["seconds"] < 300, f"{run['seconds']:.0f} s"


def test_a_cluster_without_room_for_an_executor_is_exit_4_not_a_hang(
    both_runs: dict, seeded: dict, spark_ports: SparkPorts
) -> None:
    """Executors of 2 GB do not fit 1 GB workers: Spark would wait forever for resources."""
    proc, _seconds = drctl_verify(
        seeded,
        spark_ports,
        seeded["out"] / "no-room",
        spark_ports.master,
        timeout=400,
        env={
            "KDR_SPARK_EXECUTOR_WAIT_S": "20",
            "PYSPARK_SUBMIT_ARGS": f"{spark_ports.driver} --conf spark.executor.memory=2g pyspark-shell",
        },
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert (
        f"the Spark master {spark_ports.master} took the application" in proc.stderr
        and "started no executor within 20 s" in proc.stderr
        and "2g of free memory" in proc.stderr
    )
    assert wait_until(lambda: not master_state(spark_ports)["activeapps"], 60, interval=1), (
        "the waiting application stopped"
    )
