"""Where the cached toolchain lives: jars, the Pulumi CLI, versions (``dr/versions.env``).

The pinned versions are package data (``dr/versions.env``, installed with the package);
``toolchain/versions.env`` in a clone is a symbolic link to it, which ``scripts/setup.sh`` sources.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dr.base.errors import ToolchainError


@functools.cache
def versions() -> dict[str, str]:
    """The pinned toolchain versions (``KAFKA_VERSION``, ``SPARK_VERSION``, ``PULUMI_VERSION`` ...)."""
    out: dict[str, str] = {}
    for line in resources.files("dr").joinpath("versions.env").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def kdr_home() -> Path:
    """The cache root outside the clone (``$KDR_HOME``, default ``~/.cache/kafka-dr``)."""
    return Path(os.environ.get("KDR_HOME", Path.home() / ".cache" / "kafka-dr"))


@dataclass(frozen=True)
class Toolchain:
    """Resolved, verified paths of the cached components."""

    kafka_lib: Path
    mm2_lib: Path
    spark_kafka_lib: Path
    connect_auth_lib: Path
    """Kafka Connect's basic-auth REST extension (on the workers' classpath next to ``mm2_lib``);
    checked only by what runs Connect workers (:meth:`require_connect_auth`), so an older cache
    without it still runs brokers and MirrorMaker 2."""
    pulumi_bin: Path
    java: str

    def require_lease_authorizer(self) -> Path:
        """The directory of the broker-side lease fence's jar (:func:`lease_authorizer_lib`), raising
        :class:`ToolchainError` when it is not built."""
        return _complete(lease_authorizer_lib(), "the lease-fence authorizer (toolchain/lease-authorizer)")

    def require_connect_auth(self) -> Path:
        """``connect_auth_lib``, raising :class:`ToolchainError` when it is not installed."""
        return _complete(self.connect_auth_lib, "the Kafka Connect basic-auth extension")

    @property
    def spark_kafka_jars(self) -> list[Path]:
        """The jars to pass to Spark as ``spark.jars``."""
        return sorted(self.spark_kafka_lib.glob("*.jar"))


def _complete(path: Path, what: str) -> Path:
    if not (path / ".complete").is_file():
        raise ToolchainError(
            f"{what} is not installed (no complete cache at {path}).",
            "run `make setup` (it resumes a half-finished setup)",
        )
    return path


@functools.cache
def toolchain() -> Toolchain:
    """Locate every cached component, raising :class:`ToolchainError` naming the missing one."""
    v = versions()
    home = kdr_home()
    java = shutil.which("java")
    if java is None:
        raise ToolchainError(
            "`java` is not on PATH; Kafka, MirrorMaker 2 and Spark need Java 17+.",
            "install a JDK 17 (apt-get install openjdk-17-jdk-headless)",
        )
    return Toolchain(
        kafka_lib=_complete(home / "kafka" / v["KAFKA_VERSION"], f"Kafka {v['KAFKA_VERSION']}"),
        mm2_lib=_complete(home / "mm2" / v["KAFKA_VERSION"], f"MirrorMaker 2 {v['KAFKA_VERSION']}"),
        spark_kafka_lib=_complete(home / "spark-kafka" / v["SPARK_VERSION"], f"spark-sql-kafka {v['SPARK_VERSION']}"),
        connect_auth_lib=home / "connect-auth" / v["KAFKA_VERSION"],
        pulumi_bin=home / "pulumi" / v["PULUMI_VERSION"] / "bin",
        java=java,
    )


LEASE_AUTHORIZER_SOURCE = Path(__file__).resolve().parents[2] / "toolchain" / "lease-authorizer"
"""The broker-side lease fence's Maven project in this clone (``scripts/setup.sh`` builds it)."""


def source_hash(root: Path) -> str:
    """The cache key of a Java component built by ``scripts/setup.sh`` (its ``source_hash``): sha256 of the
    ``sha256sum`` lines of ``pom.xml`` and every file under ``src/``, paths as the script names them."""
    base = root.parent.parent
    files = sorted([root / "pom.xml", *(p for p in (root / "src").rglob("*") if p.is_file())], key=str)
    lines = "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(base)}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()[:12]


def lease_authorizer_lib() -> Path:
    """Where ``scripts/setup.sh`` caches the lease-fence authorizer's jar: keyed by the Kafka version and
    the source's hash, so a clone finds the jar of its own source."""
    if not (LEASE_AUTHORIZER_SOURCE / "pom.xml").is_file():
        raise ToolchainError(
            f"the lease-fence authorizer's source is not at {LEASE_AUTHORIZER_SOURCE} (an installed drctl without its clone)",
            "run drctl from a clone set up with `make setup`, or install the jar on the brokers as runbooks/controller.md says",
        )
    return kdr_home() / "lease-authorizer" / f"{versions()['KAFKA_VERSION']}-{source_hash(LEASE_AUTHORIZER_SOURCE)}"


@dataclass(frozen=True)
class HAProxy:
    """Debian's haproxy unpacked in the cache (``scripts/setup_haproxy.sh``): the binary and the
    directory of the shared libraries it needs that a base system lacks (``LD_LIBRARY_PATH``)."""

    binary: Path
    lib_dir: Path

    def env(self) -> dict[str, str]:
        """The environment to run :attr:`binary` with: only what it needs (:func:`dr.base.child_env.child_env`)."""
        from dr.base.child_env import child_env

        env = child_env()
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
        return env


def haproxy() -> HAProxy:
    """The cached HAProxy of the pinned ``HAPROXY_VERSION``, raising :class:`ToolchainError` when absent."""
    version = versions()["HAPROXY_VERSION"]
    root = _complete(kdr_home() / "haproxy" / version, f"HAProxy {version}")
    return HAProxy(binary=root / "usr" / "sbin" / "haproxy", lib_dir=root / "usr" / "lib" / "x86_64-linux-gnu")


@dataclass(frozen=True)
class DebianTool:
    """A static Go program of a Debian package unpacked in the cache (``scripts/setup_witness.sh``)."""

    root: Path

    def binary(self, name: str) -> Path:
        """The path of ``usr/bin/<name>`` in the unpacked package."""
        return self.root / "usr" / "bin" / name


def etcd() -> DebianTool:
    """Debian's etcd (``etcd``, ``etcdctl``) of the pinned ``ETCD_VERSION``; :class:`ToolchainError` when absent."""
    version = versions()["ETCD_VERSION"]
    return DebianTool(_complete(kdr_home() / "etcd" / version, f"etcd {version}"))


def prometheus() -> DebianTool:
    """Debian's Prometheus (``prometheus``, ``promtool``) of the pinned ``PROMETHEUS_VERSION``; ToolchainError when absent."""
    version = versions()["PROMETHEUS_VERSION"]
    return DebianTool(_complete(kdr_home() / "prometheus" / version, f"Prometheus {version}"))


def oidc_server_lib() -> Path:
    """The jars of the OpenID Connect server the OAUTHBEARER tests start (``no.nav.security:mock-oauth2-server``
    at the pinned ``OIDC_SERVER_VERSION``, copied by ``scripts/setup.sh``); ToolchainError when absent."""
    version = versions()["OIDC_SERVER_VERSION"]
    return _complete(kdr_home() / "oidc-server" / version, f"the OIDC server (mock-oauth2-server {version})")


def keycloak_home() -> Path:
    """Keycloak's unpacked server (``org.keycloak:keycloak-quarkus-dist`` at the pinned ``KEYCLOAK_VERSION``), the
    identity provider of the OAUTHBEARER refusal test, built for development mode by ``scripts/setup.sh``; its
    ``.java-home`` names the Java 21+ it runs on and ``.dev.env`` the environment of every start. ToolchainError
    when absent."""
    version = versions()["KEYCLOAK_VERSION"]
    return _complete(kdr_home() / "keycloak" / version, f"Keycloak {version}")
