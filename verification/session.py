"""The Spark session the verifier runs in: ``local[2]`` by default, any master when submitted."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dr.toolchain import toolchain

if TYPE_CHECKING:  # pyspark is imported when a session is built, not by the command line's start-up
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "kafka_jars", "prefer_kafka_v2", "spark_session", "under_spark_submit"]

#: Two cores and a small shuffle: the size of the machines this project targets by default.
DEFAULT_MASTER = "local[2]"

# Options whose values may hold credentials are redacted from plans, logs and the UI.
_REDACT = "(?i)secret|password|token|jaas|credential|url"
_LOG4J = Path(__file__).with_name("log4j2.properties")


def prefer_kafka_v2(spark: "SparkSession") -> None:
    """Read Kafka through Spark's DataSource V2 batch reader.

    Spark 4 still routes batch Kafka reads through the V1 relation by default, which turns every
    record into an external ``Row`` and back; the V2 reader builds ``UnsafeRow`` directly (about a
    quarter faster here). A runtime SQL setting, so it also applies under ``spark-submit``.
    """
    key = "spark.sql.sources.useV1SourceList"
    current = [s.strip() for s in spark.conf.get(key, "").split(",") if s.strip()]
    if "kafka" in current:
        spark.conf.set(key, ",".join(s for s in current if s != "kafka"))


def kafka_jars() -> list[str]:
    """The spark-sql-kafka connector jars of the cached toolchain (for ``spark.jars`` / ``--jars``)."""
    return [str(p) for p in toolchain().spark_kafka_jars]


def _log4j_option() -> str | None:
    """The driver option that points log4j at this package's quiet configuration."""
    return f"-Dlog4j.configurationFile=file:{_LOG4J}" if _LOG4J.exists() else None


def under_spark_submit() -> bool:
    """True when this Python process is a driver launched by ``spark-submit`` (the JVM exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(*, master: str | None = DEFAULT_MASTER, app_name: str = "kdr-verify",
                  shuffle_partitions: int | None = None, driver_memory: str = "2g",
                  extra: dict[str, str] | None = None, use_archive: bool = True,
                  driver_options: tuple[str, ...] = ()) -> "SparkSession":
    """Return the active session or build one with the Kafka connector on the classpath.

    Under ``spark-submit`` the master, jars and memory come from the submit command (pass the
    connector with ``--jars``); ``master`` is then ignored. Otherwise a local session is built with
    ``master`` (default ``local[2]``) and few shuffle partitions; its driver maps the class-data
    archive of :mod:`verification.class_archive` when ``make setup`` built one (``use_archive``);
    ``driver_options`` are added to its JVM options.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    submitted = under_spark_submit()
    jars = [] if submitted else kafka_jars()
    # The parallel collector: the driver is a batch job on few cores, and G1's concurrent work
    # competes with the tasks (a fresh 5M + 5M-record verification ran about 9 % faster).
    java_opts = [o for o in [_log4j_option(), "-XX:+UseParallelGC", *driver_options] if o]
    archive_opts: list[str] = []
    if use_archive and not submitted:
        from verification.class_archive import java_options

        archive_opts = java_options(jars)

    def build(driver_opts: list[str]) -> "SparkSession":
        builder = SparkSession.builder.appName(app_name)
        if not submitted:
            cores = _cores(master or DEFAULT_MASTER)
            if (master or DEFAULT_MASTER).startswith("local"):
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (builder.master(master or DEFAULT_MASTER)
                       .config("spark.driver.extraJavaOptions", " ".join(driver_opts))
                       .config("spark.jars", ",".join(jars))
                       .config("spark.driver.memory", driver_memory)
                       .config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false")
                       .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, 2 * cores))))
        elif shuffle_partitions:
            builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        builder = (builder.config("spark.redaction.regex", _REDACT)
                   .config("spark.sql.redaction.options.regex", _REDACT)
                   .config("spark.sql.adaptive.enabled", "true")
                   .config("spark.sql.session.timeZone", "UTC")
                   .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
        for key, value in (extra or {}).items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    started = time.time()
    try:
        spark = build(java_opts + archive_opts)
    except Exception as exc:  # a damaged archive can stop the JVM before it says hello
        if not archive_opts or "JAVA_GATEWAY_EXITED" not in str(exc):
            raise
        from verification.class_archive import crashed_on_archive, discard

        # Only a JVM that crashed mapping the archive condemns it; one that exited for another
        # reason (a machine under load, a killed parent) leaves it for the next start.
        condemned = crashed_on_archive(jars, since=started)
        print(f"warning: the Spark driver did not start with its class-data archive ({archive_opts[0]}); "
              "starting without it." + (" Next step: re-run `make setup`, which rebuilds the archive."
                                        if condemned else ""), file=sys.stderr)
        if condemned:
            discard(jars)
        spark = build(java_opts)
    spark.sparkContext.setLogLevel(os.environ.get("KDR_SPARK_LOG_LEVEL", "ERROR"))
    prefer_kafka_v2(spark)
    return spark


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
