"""What a platform team made by hand on a running cluster before adopting it (``drctl estate adopt``'s test).

A few hundred topics, ACLs, SCRAM users and client quotas, each made as a team makes them: the bulk through
the admin API (one CreateTopics for 299 topics, one CreateAcls for every binding, one
AlterUserScramCredentials — a JVM per ``kafka-topics.sh`` call would cost minutes), and the rest with
Kafka's own tools, one JVM each, side by side: ``kafka-topics.sh`` for a topic with its configurations,
``kafka-acls.sh`` for a DENY rule, ``kafka-configs.sh`` for each quota entity. Passwords reach the tools
only in a 0600 ``--command-config`` file and the admin API, never a command line.
"""

from __future__ import annotations

import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka.admin import (
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from dr.base.toolchain import toolchain
from dr.kafka.client import Endpoint, acl
from dr.runtime.cluster import write_properties
from dr.runtime.process import java_command, wait_until

PRODUCED = [f"adopt.orders-{i:03d}" for i in range(120)]
"""Written by ``adopt-producer`` (a literal Write and Describe each)."""
CONSUMED = PRODUCED[:60]
"""Read by ``adopt-consumer`` (literal Read and Describe), in group ``adopt-consumers``."""
EVENTS = [f"adopt.events.{i:03d}" for i in range(120)]
"""Written by ``adopt-events`` through ONE prefixed Write on ``adopt.events.``."""
OTHERS = [f"adopt.misc-{i:03d}" for i in range(59)]
LEDGER = "adopt.ledger"
"""Made with ``kafka-topics.sh``: 4 partitions, ``retention.ms=3600000``, ``cleanup.policy=compact``."""
TOPICS = [*PRODUCED, *EVENTS, *OTHERS]
PRODUCER_QUOTA = {"producer_byte_rate": 1048576, "request_percentage": 200}
DEFAULT_QUOTA = {"consumer_byte_rate": 1073741824}  # large: nothing on this cluster is slowed by it


def _tool(endpoint: Endpoint, config: Path, main: str, args: list[str], crash_dir: Path) -> None:
    tc = toolchain()
    cmd = java_command(
        tc.java,
        [tc.kafka_lib],
        main,
        ["--bootstrap-server", endpoint.bootstrap, "--command-config", str(config), *args],
        heap_mb=256,
        crash_dir=crash_dir,
    )
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0, f"{main} {args[:4]} failed: {(res.stdout + res.stderr)[-1500:]}"


def _tool_calls() -> list[tuple[str, list[str]]]:
    configs = "kafka.admin.ConfigCommand"
    producer = ",".join(f"{k}={v}" for k, v in PRODUCER_QUOTA.items())
    default = ",".join(f"{k}={v}" for k, v in DEFAULT_QUOTA.items())
    return [
        (
            "org.apache.kafka.tools.TopicCommand",
            [
                "--create",
                "--topic",
                LEDGER,
                "--partitions",
                "4",
                "--replication-factor",
                "1",
                "--config",
                "retention.ms=3600000",
                "--config",
                "cleanup.policy=compact",
            ],
        ),
        (
            "org.apache.kafka.tools.AclCommand",
            ["--add", "--deny-principal", "User:adopt-mallory", "--operation", "Read", "--topic", PRODUCED[0]],
        ),
        (configs, ["--alter", "--add-config", producer, "--entity-type", "users", "--entity-name", "adopt-producer"]),
        (configs, ["--alter", "--add-config", default, "--entity-type", "users", "--entity-default"]),
        (
            configs,
            [
                "--alter",
                "--add-config",
                "producer_byte_rate=2048",
                "--entity-type",
                "clients",
                "--entity-name",
                "adopt-batch",
            ],
        ),
    ]


def _bindings() -> list[object]:
    bindings = []
    for topic in PRODUCED:
        bindings += [
            acl("adopt-producer", ResourceType.TOPIC, topic, op) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
    for topic in CONSUMED:
        bindings += [
            acl("adopt-consumer", ResourceType.TOPIC, topic, op) for op in (AclOperation.READ, AclOperation.DESCRIBE)
        ]
    bindings.append(acl("adopt-consumer", ResourceType.GROUP, "adopt-consumers", AclOperation.READ))
    bindings.append(
        acl("adopt-events", ResourceType.TOPIC, "adopt.events.", AclOperation.WRITE, ResourcePatternType.PREFIXED)
    )
    bindings.append(acl("*", ResourceType.TOPIC, OTHERS[0], AclOperation.READ))  # a wildcard principal
    bindings.append(acl("adopt-ops", ResourceType.TOPIC, OTHERS[1], AclOperation.ALTER_CONFIGS))  # beyond a role
    from confluent_kafka.admin import AclBinding

    bindings.append(  # limited to one host
        AclBinding(
            ResourceType.TOPIC,
            OTHERS[2],
            ResourcePatternType.LITERAL,
            "User:adopt-consumer",
            "10.0.0.7",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    )
    return bindings


def make_by_hand(endpoint: Endpoint) -> None:
    """Create every topic, ACL, SCRAM user and quota above on the cluster ``endpoint`` reaches (as its admin)."""
    admin = AdminClient(endpoint.config())
    with tempfile.TemporaryDirectory(prefix="kdr-by-hand-") as tmp:
        config = Path(tmp) / "admin.properties"
        write_properties(config, endpoint.java_config())
        with ThreadPoolExecutor(len(_tool_calls())) as pool:
            tools = [pool.submit(_tool, endpoint, config, main, args, Path(tmp)) for main, args in _tool_calls()]
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
                future.result(60)
            for future in admin.create_acls(_bindings()).values():
                future.result(60)
            users = [
                UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), f"{user}-password".encode())
                for user, mechanism in (
                    ("adopt-producer", ScramMechanism.SCRAM_SHA_512),
                    ("adopt-consumer", ScramMechanism.SCRAM_SHA_512),
                    ("adopt-legacy", ScramMechanism.SCRAM_SHA_256),
                )
            ]
            for future in admin.alter_user_scram_credentials(users).values():
                future.result(60)
            for future in tools:
                future.result()
    wanted = {*TOPICS, LEDGER}
    assert wait_until(lambda: wanted <= set(admin.list_topics(timeout=10).topics), 60), "the topics appear"
