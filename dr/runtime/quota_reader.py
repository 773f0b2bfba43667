"""A cluster's client quotas, read with Kafka's own ``ConfigCommand`` (``kafka-configs.sh --describe``).

librdkafka has no DescribeClientQuotas, so ``drctl estate adopt`` asks Kafka's tool: one JVM per
entity kind (users; client ids; users with client ids; IPs), run side by side, the admin's client
configuration in a 0600 file (never on the command line). :func:`parse_quotas` reads the tool's lines
(pure, unit-tested).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dr.base.errors import AuthError, ClusterError
from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint
from dr.kafka.live import LiveQuota
from dr.kafka.oauth import jvm_allowed_urls
from dr.runtime.cluster import write_properties
from dr.runtime.process import java_command

__all__ = ["describe_command", "parse_quotas", "read_quotas"]

_TOOL = "kafka.admin.ConfigCommand"
#: ``--entity-type`` sets: every kind of client quota entity Kafka keeps.
_KINDS: tuple[tuple[str, ...], ...] = (("users",), ("clients",), ("users", "clients"), ("ips",))
_ENTITY = re.compile(
    r"(the default (?P<dkind>user-principal|client-id|ip)|(?P<kind>user-principal|client-id|ip) '(?P<name>(?:[^']|'')*)')"
)
_KIND_NAMES = {"user-principal": "user", "client-id": "client-id", "ip": "ip"}


def parse_quotas(text: str) -> list[LiveQuota]:
    """The quotas in ``ConfigCommand --describe`` output: lines ``Quota configs for user-principal 'a' are
    producer_byte_rate=1024.0, consumer_byte_rate=2048.0`` (also ``the default user-principal``, ``client-id
    'x'``, ``user-principal 'a', client-id 'x'``, ``ip '10.0.0.1'``). Other lines are ignored."""
    found: list[LiveQuota] = []
    for line in text.splitlines():
        head, sep, values = line.strip().partition(" are ")
        if not sep or not head.startswith("Quota configs for "):
            continue
        entity: dict[str, str | None] = {}
        for m in _ENTITY.finditer(head.removeprefix("Quota configs for ")):
            if m.group("dkind"):
                entity[_KIND_NAMES[m.group("dkind")]] = None
            else:
                entity[_KIND_NAMES[m.group("kind")]] = m.group("name")
        configs: dict[str, float] = {}
        for pair in values.split(", "):
            key, eq, value = pair.partition("=")
            if eq:
                try:
                    configs[key.strip()] = float(value)
                except ValueError:
                    continue
        if entity and configs:
            found.append(LiveQuota(entity, configs))
    return found


def describe_command(endpoint: Endpoint, config: Path, kinds: tuple[str, ...], crash_dir: Path) -> list[str]:
    """``ConfigCommand --describe`` of ``kinds`` with the client configuration in ``config`` (pure); over
    OAUTHBEARER the JVM allows the token endpoint."""
    tc = toolchain()
    args = ["--bootstrap-server", endpoint.bootstrap, "--command-config", str(config), "--describe"]
    for kind in kinds:
        args += ["--entity-type", kind]
    jvm = jvm_allowed_urls(endpoint.oauth if endpoint.uses_oauth else None)
    return java_command(tc.java, [tc.kafka_lib], _TOOL, args, heap_mb=256, extra_jvm=jvm, crash_dir=crash_dir)


def _describe(endpoint: Endpoint, config: Path, kinds: tuple[str, ...], crash_dir: Path, timeout: float) -> str:
    cmd = describe_command(endpoint, config, kinds, crash_dir)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        out = (res.stdout + res.stderr)[-1500:]
        if endpoint.password:
            out = out.replace(endpoint.password, "***")
        if "AuthorizationException" in out or "not authorized" in out.lower():
            raise AuthError(
                f"{endpoint.label}: user {endpoint.username!r} may not describe client quotas "
                f"({' '.join(kinds)}); nothing was written.",
                "adopt as the cluster's admin (DescribeConfigs on the cluster is needed)",
            )
        raise ClusterError(
            f"{endpoint.label}: reading client quotas ({' '.join(kinds)}) with Kafka's ConfigCommand failed:\n{out}",
            "check the cluster is reachable with the stack's security settings, then rerun",
        )
    return res.stdout


def read_quotas(
    endpoint: Endpoint, timeout: float = 120.0, kinds: tuple[tuple[str, ...], ...] = _KINDS
) -> list[LiveQuota]:
    """Every client quota of the cluster (user, default user, client id, user + client id, IP entities), or
    only those of ``kinds`` (``(("users",),)``: one JVM)."""
    with tempfile.TemporaryDirectory(prefix="kdr-quotas-") as tmp:
        config = Path(tmp) / "admin.properties"
        write_properties(config, endpoint.java_config())
        with ThreadPoolExecutor(len(kinds)) as pool:
            outputs = list(pool.map(lambda kind: _describe(endpoint, config, kind, Path(tmp), timeout), kinds))
    found: dict[tuple[tuple[str, str | None], ...], LiveQuota] = {}
    for text in outputs:
        for quota in parse_quotas(text):
            found[tuple(sorted(quota.entity.items(), key=lambda kv: kv[0]))] = quota
    return list(found.values())
