"""The Spark session the verifier runs in: ``local[2]`` by default, a standalone cluster with
``spark://HOST:PORT``, any master when submitted.

With a standalone master (client mode: the driver is this process) the Kafka connector jars go to
the executors through ``spark.jars`` (each executor fetches them from the driver), the class-data
archive stays a driver-only option, and the executors take Spark's defaults (``spark.executor.memory``
1g, every core of their worker) unless ``extra`` or the Spark configuration says otherwise. The master
is checked with a TCP connection before the driver starts, and the first executor is awaited for a
bounded time: an unreachable master, one that refuses the application, or a cluster without room for
an executor is a :class:`~dr.base.errors.ClusterError` naming the master, never a hang.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dr.base.errors import ClusterError, ConfigError
from dr.base.hosts import is_loopback
from dr.base.toolchain import toolchain
from verification.class_archive import crashed_on_archive, discard, java_options

if TYPE_CHECKING:  # pyspark is imported when a session is built, not by the command line's start-up
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "check_master",
    "kafka_jars",
    "prefer_kafka_v2",
    "spark_session",
    "standalone_masters",
    "under_spark_submit",
]

#: Two cores and a small shuffle: the size of the machines this project targets by default.
DEFAULT_MASTER = "local[2]"
#: A standalone master's port that does not accept a TCP connection within this time is unreachable.
MASTER_CONNECT_TIMEOUT_S = 5.0
#: How long a standalone cluster may take to start the first executor (``KDR_SPARK_EXECUTOR_WAIT_S``).
EXECUTOR_WAIT_S = 120.0
_STANDALONE_PORT = 7077

# Options whose values may hold credentials are redacted from plans, logs and the UI.
_REDACT = "(?i)secret|password|token|jaas|credential|url"
_LOG4J = Path(__file__).with_name("log4j2.properties")


def prefer_kafka_v2(spark: SparkSession) -> None:
    """Read Kafka through Spark's DataSource V2 batch reader.

    Spark 4 still routes batch Kafka reads through the V1 relation by default, which turns every
    record into an external ``Row`` and back; the V2 reader builds ``UnsafeRow`` directly (about a
    quarter faster here). A runtime SQL setting, so it also applies under ``spark-submit``.
    """
    key = "spark.sql.sources.useV1SourceList"
    current = [s.strip() for s in (spark.conf.get(key, "") or "").split(",") if s.strip()]
    if "kafka" in current:
        spark.conf.set(key, ",".join(s for s in current if s != "kafka"))


def kafka_jars() -> list[str]:
    """The spark-sql-kafka connector jars of the cached toolchain (for ``spark.jars`` / ``--jars``)."""
    return [str(p) for p in toolchain().spark_kafka_jars]


def driver_jit_options(env: dict[str, str] | None = None) -> list[str]:
    """The driver JVM's compiler options for ``KDR_SPARK_JVM_PROFILE`` (pure): ``throughput`` (the default:
    the optimising compiler, which whole-stage code generation needs on real data) or ``footprint`` (the
    client compiler alone: a fraction of the CPU on small data, where compiling costs more than it saves —
    the test suite's choice). ConfigError for another name."""
    name = (os.environ if env is None else env).get("KDR_SPARK_JVM_PROFILE", "").strip() or "throughput"
    if name not in ("throughput", "footprint"):
        raise ConfigError(
            f"KDR_SPARK_JVM_PROFILE={name!r} is not a driver profile",
            "set it to throughput or footprint, or unset it (throughput)",
        )
    return ["-XX:TieredStopAtLevel=1"] if name == "footprint" else []


def _log4j_option() -> str | None:
    """The driver option that points log4j at this package's quiet configuration."""
    return f"-Dlog4j.configurationFile=file:{_LOG4J}" if _LOG4J.exists() else None


def under_spark_submit() -> bool:
    """True when this Python process is a driver launched by ``spark-submit`` (the JVM exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of a ``spark://`` URL (several for a high-availability master).

    Empty for any other master (``local[...]``, ``yarn``, ``k8s://...``).
    """
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://") :].split(","):
        host, port = part.strip().rstrip("/"), _STANDALONE_PORT
        if host.startswith("["):  # [::1]:7077
            end = host.find("]")
            host, rest = host[1:end], host[end + 1 :]
            port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else port
        elif host.count(":") == 1:
            host, _, text = host.partition(":")
            port = int(text) if text.isdigit() else -1
        if not host or not 0 < port < 65536:
            raise ConfigError(
                f"--master {master!r} is not a standalone master URL.",
                "write it as spark://HOST:PORT (the URL at the top of the master's web UI)",
            )
        out.append((host, port))
    return out


def check_master(master: str, *, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`ClusterError` unless some master of a ``spark://`` URL accepts a TCP connection.

    Spark's own client keeps retrying an unreachable master for about a minute and then reports a
    stopped context; this answers within ``timeout`` seconds per address. Other masters pass.
    """
    failures = []
    for host, port in standalone_masters(master):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.gaierror:
            failures.append(f"{host}: host name unknown")
        except TimeoutError:
            failures.append(f"{host}:{port}: no answer within {timeout:g} s")
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
    if failures:
        raise ClusterError(
            f"the Spark master {master} cannot be reached ({'; '.join(failures)}).",
            "start the master and its workers (`sbin/start-master.sh`, then `sbin/start-worker.sh "
            f"{master}`) or correct --master to the spark://HOST:PORT shown at the top of the master's "
            "web UI; leave --master out to verify on this machine (local[2])",
        )


def spark_session(
    *,
    master: str | None = DEFAULT_MASTER,
    app_name: str = "kdr-verify",
    shuffle_partitions: int | None = None,
    driver_memory: str = "2g",
    extra: dict[str, str] | None = None,
    use_archive: bool = True,
    driver_options: tuple[str, ...] = (),
) -> SparkSession:
    """Return the active session or build one with the Kafka connector on the classpath.

    Under ``spark-submit`` the master, jars and memory come from the submit command (pass the
    connector with ``--jars``); ``master`` is then ignored. Otherwise a session is built with
    ``master`` (default ``local[2]``; ``spark://HOST:PORT`` for a standalone cluster, whose executors
    receive the connector through ``spark.jars``) and few shuffle partitions (on a cluster, twice its
    cores); its driver maps the class-data archive of :mod:`verification.class_archive` when
    ``make setup`` built one (``use_archive``); ``driver_options`` are added to its JVM options.
    A standalone master that cannot be reached, refuses the application or starts no executor
    raises :class:`ClusterError`.

    The steps: decide how to launch (:func:`_launch`), start the driver, without the class-data
    archive when it stops the JVM (:func:`_start`), then wait for a standalone cluster's executors.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    launch = _launch(
        master=master or DEFAULT_MASTER,
        app_name=app_name,
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        extra=extra or {},
        use_archive=use_archive,
        driver_options=driver_options,
    )
    try:
        spark = _start(launch)
    except Exception as exc:
        if launch.standalone and type(exc).__module__.startswith(("py4j", "pyspark")):
            raise _refused(launch.master, exc) from None
        raise
    spark.sparkContext.setLogLevel(os.environ.get("KDR_SPARK_LOG_LEVEL", "ERROR"))
    if launch.standalone:
        _await_executors(spark, launch.master)
        if not shuffle_partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(max(4, 2 * spark.sparkContext.defaultParallelism)))
    prefer_kafka_v2(spark)
    return spark


@dataclass(frozen=True)
class _Launch:
    """How :func:`spark_session` starts its driver: what it decided before any JVM runs."""

    master: str
    app_name: str
    shuffle_partitions: int | None
    driver_memory: str
    extra: dict[str, str]
    submitted: bool
    """A driver launched by ``spark-submit``: the submit command chose master, jars and memory."""
    standalone: list[tuple[str, int]]
    local_driver: bool
    """The executors run on this machine and reach the driver on the loopback address."""
    jars: list[str]
    java_opts: list[str]
    archive_opts: list[str]


def _launch(
    *,
    master: str,
    app_name: str,
    shuffle_partitions: int | None,
    driver_memory: str,
    extra: dict[str, str],
    use_archive: bool,
    driver_options: tuple[str, ...],
) -> _Launch:
    """Decide the driver's launch; a standalone master is checked first (seconds, not Spark's minute of retries)."""
    submitted = under_spark_submit()
    standalone = [] if submitted else standalone_masters(master)
    if standalone:
        check_master(master)
    local_driver = not submitted and (
        master.startswith("local") or (bool(standalone) and all(is_loopback(h) for h, _ in standalone))
    )
    jars = [] if submitted else kafka_jars()
    # The parallel collector: the driver is a batch job on few cores, and G1's concurrent work
    # competes with the tasks (a fresh 5M + 5M-record verification ran about 9 % faster).
    java_opts = [o for o in [_log4j_option(), "-XX:+UseParallelGC", *driver_jit_options(), *driver_options] if o]
    archive_opts: list[str] = []
    if use_archive and not submitted:
        archive_opts = java_options(jars)
    return _Launch(
        master=master,
        app_name=app_name,
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        extra=extra,
        submitted=submitted,
        standalone=standalone,
        local_driver=local_driver,
        jars=jars,
        java_opts=java_opts,
        archive_opts=archive_opts,
    )


def _start(launch: _Launch) -> SparkSession:
    """Start the driver with the class-data archive, or without it when it stopped the JVM."""
    started = time.time()
    try:
        return _build(launch, launch.java_opts + launch.archive_opts)
    except Exception as exc:  # a damaged archive can stop the JVM before it says hello
        if not launch.archive_opts or "JAVA_GATEWAY_EXITED" not in str(exc):
            raise

        # Only a JVM that crashed mapping the archive condemns it; one that exited for another
        # reason (a machine under load, a killed parent) leaves it for the next start.
        condemned = crashed_on_archive(launch.jars, since=started)
        print(
            f"warning: the Spark driver did not start with its class-data archive ({launch.archive_opts[0]}); "
            "starting without it."
            + (" Next step: re-run `make setup`, which rebuilds the archive." if condemned else ""),
            file=sys.stderr,
        )
        if condemned:
            discard(launch.jars)
        return _build(launch, launch.java_opts)


def _build(launch: _Launch, driver_opts: list[str]) -> SparkSession:
    """Configure the session builder for ``launch`` and start (or join) the session."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(launch.app_name)
    if not launch.submitted:
        if launch.local_driver:  # executors on this machine reach the driver on the loopback address
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            if launch.standalone:  # and can run this interpreter for the little Python they run
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
                builder = builder.config("spark.driver.host", "127.0.0.1").config(
                    "spark.driver.bindAddress", "127.0.0.1"
                )
        partitions = launch.shuffle_partitions or max(2, 2 * _cores(launch.master))
        builder = (
            builder.master(launch.master)
            .config("spark.driver.extraJavaOptions", " ".join(driver_opts))
            .config("spark.jars", ",".join(launch.jars))
            .config("spark.driver.memory", launch.driver_memory)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(partitions))
        )
    elif launch.shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(launch.shuffle_partitions))
    builder = (
        builder.config("spark.redaction.regex", _REDACT)
        .config("spark.sql.redaction.options.regex", _REDACT)
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in launch.extra.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _refused(master: str, exc: Exception) -> ClusterError:
    """The error for a standalone master whose port answers but which did not take the application."""
    import pyspark

    text = str(exc)
    reason = (
        "no master answered the registration"
        if "unresponsive" in text or "stopped SparkContext" in text
        else text.strip().splitlines()[0][:300]
    )
    return ClusterError(
        f"the Spark master {master} accepted the connection but did not register the application ({reason}).",
        "check that HOST:PORT is the master's RPC address (the spark:// URL at the top of its web UI, not the "
        f"web UI's port) and that the cluster runs Spark {pyspark.__version__}, the version of this pyspark",
    )


def _await_executors(spark: SparkSession, master: str) -> None:
    """Wait until a standalone cluster runs an executor of this application (bounded; see EXECUTOR_WAIT_S).

    Without one, Spark would keep the first job waiting forever ("Initial job has not accepted any
    resources"). With dynamic allocation no executor starts before a job asks, so nothing is awaited.
    """
    sc = spark.sparkContext
    conf = sc.getConf()
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        return
    wait_s = float(os.environ.get("KDR_SPARK_EXECUTOR_WAIT_S", EXECUTOR_WAIT_S))
    jsc = sc._jsc.sc()
    app = sc.applicationId
    deadline = time.monotonic() + wait_s
    while True:
        if jsc.isStopped():
            spark.stop()
            raise ClusterError(
                f"the Spark master {master} removed the application {app} before any executor ran "
                "(its workers could not start one).",
                "read the workers' logs and the executor logs in their work directory "
                f"(work/{app}/*/stderr), fix the cause, and run again",
            )
        if jsc.getExecutorMemoryStatus().size() > 1:  # the driver's own block manager counts as one
            return
        if time.monotonic() >= deadline:
            memory = conf.get("spark.executor.memory", "1g")
            spark.stop()
            raise ClusterError(
                f"the Spark master {master} took the application {app} but started no executor within "
                f"{wait_s:g} s: no alive worker has a free core and {memory} of free memory "
                "(spark.executor.memory) for it.",
                "look at the master's web UI (port 8080 by default) for alive workers and their free cores and "
                "memory; start workers, let other applications finish, or lower spark.executor.memory "
                "(spark-defaults.conf, or PYSPARK_SUBMIT_ARGS='--conf spark.executor.memory=... pyspark-shell'); "
                "KDR_SPARK_EXECUTOR_WAIT_S waits longer",
            )
        time.sleep(0.5)


def _cores(master: str) -> int:
    if master.startswith("local[") and master.endswith("]"):
        inner = master[6:-1].split(",")[0]
        if inner == "*":
            return os.cpu_count() or 2
        try:
            return int(inner)
        except ValueError:
            return 2
    return 2
