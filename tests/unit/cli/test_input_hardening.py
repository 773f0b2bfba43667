"""Inputs nobody planned for: each class is refused through ``drctl`` itself, before anything starts.

Every test writes a stack file into a temporary ``$KDR_STACK_DIR`` and runs
``dr.cli.main([..., "--stack", X])``: a bad input exits 2 with a message naming the offending field
and the fix, and never echoing a secret; an unexpected exception exits 10 naming the 0600 file
that holds its traceback.
"""

from __future__ import annotations

import copy
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr import cli
from dr.base.errors import ConfigError
from dr.topology import load_stack_file, load_topology
from tests import REPO_ROOT

LOCAL_DOC: dict[str, Any] = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8"))
PRODUCTION_DOC: dict[str, Any] = yaml.safe_load(
    (REPO_ROOT / "Pulumi.production-example.yaml").read_text(encoding="utf-8")
)

Mutation = Callable[[dict[str, Any]], None]


class Drctl:
    """Runs ``drctl`` in-process against stack files in a temporary directory."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys

    def write(self, stack: str, content: str | bytes | dict[str, Any]) -> Path:
        path = self.root / f"Pulumi.{stack}.yaml"
        if isinstance(content, dict):
            content = yaml.safe_dump(content, sort_keys=False)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return path

    def mutated(self, stack: str, mutate: Mutation, base: dict[str, Any] = LOCAL_DOC) -> Path:
        doc = copy.deepcopy(base)
        mutate(doc["config"])
        return self.write(stack, doc)

    def run(self, *args: str) -> tuple[int, str]:
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            cli.main(list(args))
        return int(info.value.code or 0), self.capsys.readouterr().err

    def refused(self, stack: str, *args: str) -> str:
        """Run ``estate status`` (or ``args``) on ``stack``; assert exit 2; return the message."""
        code, err = self.run(*(args or ("estate", "status")), "--stack", stack)
        assert code == 2, f"exit {code}, expected 2:\n{err}"
        assert "next step:" in err, err
        return err


@pytest.fixture
def drctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Drctl:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    monkeypatch.setenv("KDR_STACK_DIR", str(stacks))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("KDR_DEBUG", raising=False)
    return Drctl(stacks, capsys)


def _line(message: str, path: str, *fragments: str) -> str:
    """The violation line for ``path`` holding every fragment, with a fix after ' — '."""
    lines = [line for line in message.splitlines() if line.strip().startswith(f"- {path}: ")]
    assert lines, f"no violation for {path!r} in:\n{message}"
    for line in lines:
        if all(fragment in line for fragment in fragments):
            assert " — " in line, f"no fix in {line!r}"
            return line
    raise AssertionError(f"no violation for {path!r} mentions {fragments} in:\n{message}")


def _apps(config: dict[str, Any]) -> list[dict[str, Any]]:
    return config["kafka-dr:principals"]["applications"]


def _app(name: str) -> Mutation:
    return lambda config: _apps(config).append({"name": name})


def _principals(**fields: Any) -> Mutation:
    return lambda config: config["kafka-dr:principals"].update(fields)


def _both(*mutations: Mutation) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        for m in mutations:
            m(config)

    return mutate


def test_the_shipped_stack_files_still_load() -> None:
    for name in ("local", "production-example", "confluent-example"):
        assert load_stack_file(REPO_ROOT / f"Pulumi.{name}.yaml").name == name


# -- 1. principal names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "path", "fragment"),
    [
        (_app(name="broker"), "principals.applications[2].name", "inter-broker super user"),
        (_app(name="admin"), "principals.applications[2].name", "principals.admin"),
        (_app(name="replicator"), "principals.applications[2].name", "principals.replicator"),
        # renamed, the built-in names stay taken on local clusters (super.users, MirrorMaker 2's user)
        (_both(_principals(admin="root"), _app(name="admin")), "principals.applications[2].name", "super user"),
        (
            _both(_principals(replicator="mm"), _app(name="replicator")),
            "principals.applications[2].name",
            "MirrorMaker 2",
        ),
        (_both(_principals(admin="root"), _app(name="root")), "principals.applications[2].name", "principals.admin"),
        (
            _both(_principals(replicator="mm"), _app(name="mm")),
            "principals.applications[2].name",
            "principals.replicator",
        ),
        (_app(name="billing"), "principals.applications[2].name", "already used by principals.applications[1]"),
    ],
    ids=[
        "broker",
        "admin",
        "replicator",
        "renamed-admin",
        "renamed-replicator",
        "declared-admin",
        "declared-replicator",
        "duplicate",
    ],
)
def test_application_names_taken_by_the_product_are_refused(
    drctl: Drctl, mutate: Mutation, path: str, fragment: str
) -> None:
    drctl.mutated("apps", mutate)
    _line(drctl.refused("apps"), path, fragment)


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"admin": "broker"}, "principals.admin", "inter-broker super user"),
        ({"replicator": "broker"}, "principals.replicator", "inter-broker super user"),
        ({"replicator": "admin"}, "principals.replicator", "also the admin principal"),
        ({"admin": "root", "replicator": "admin"}, "principals.replicator", "super user"),
        ({"admin": "replicator", "replicator": "mm"}, "principals.admin", "MirrorMaker 2"),
    ],
)
def test_admin_and_replicator_keep_apart(drctl: Drctl, fields: dict[str, str], path: str, fragment: str) -> None:
    drctl.mutated("roles", _principals(**fields))
    _line(drctl.refused("roles"), path, fragment)


@pytest.mark.parametrize("name", ['a"b', "User:x", "*", "two words", "ünïcode", "a\nb", "..", "x" * 65, "a;b", "a=b"])
def test_principal_names_outside_the_safe_alphabet_are_refused(drctl: Drctl, name: str) -> None:
    drctl.mutated("names", lambda config: _apps(config)[1].update(name=name))
    _line(drctl.refused("names"), "principals.applications[1].name", "not a valid principal name", "[A-Za-z0-9._-]")


@pytest.mark.parametrize("field", ["admin", "replicator"])
def test_admin_and_replicator_names_use_the_safe_alphabet(drctl: Drctl, field: str) -> None:
    drctl.mutated("names", _principals(**{field: "User:root"}))
    _line(drctl.refused("names"), f"principals.{field}", "not a valid principal name", "1-64 characters")


def test_longest_safe_principal_name_is_accepted(drctl: Drctl) -> None:
    name = "a.B_9-" + "x" * 58
    path = drctl.mutated("longest", lambda config: _apps(config)[1].update(name=name))
    assert load_stack_file(path).principals.applications[1].name == name


def test_application_named_like_an_external_clusters_admin_is_refused(drctl: Drctl) -> None:
    drctl.mutated(
        "ext",
        lambda config: (
            _apps(config)[1].update(name="dcadmin") or config["kafka-dr:clusters"][1].update(admin_username="dcadmin")
        ),
        PRODUCTION_DOC,
    )
    _line(drctl.refused("ext"), "principals.applications[1].name", "admin user of cluster 'dc2'")


# -- 2. what Kafka itself would refuse ------------------------------------------------------------


def _topic(index: int, **fields: Any) -> Mutation:
    return lambda config: config["kafka-dr:topics"][index].update(fields)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("__consumer_offsets", "consumer offsets"),
        ("__transaction_state", "transaction state"),
        ("__share_group_state", "share group state"),
        ("__anything", "starts with '__'"),
        ("mm2-offsets.A.internal", "mm2-"),
        ("mm2-orders", "mm2-"),
        ("heartbeats", "heartbeats"),
        ("A.heartbeats", "heartbeats"),
        ("A.checkpoints.internal", ".internal"),
        ("orders.internal", ".internal"),
        ("orders.replica", ".replica"),
        (".hidden", "starts with '.'"),
        ("bad topic", "not a valid Kafka topic name"),
        ("x" * 250, "not a valid Kafka topic name"),
        ("..", "not a valid Kafka topic name"),
    ],
)
def test_reserved_and_invalid_topic_names_are_refused(drctl: Drctl, name: str, fragment: str) -> None:
    drctl.mutated("topics", _both(_topic(1, name=name), lambda config: _apps(config)[0].update(consumes=[])))
    _line(drctl.refused("topics"), "topics[1].name", fragment)


def test_topics_colliding_after_dot_underscore_normalisation_are_refused(drctl: Drctl) -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:topics"] += [
            {"name": "a.b", "partitions": 1, "replication_factor": 1},
            {"name": "a_b", "partitions": 1, "replication_factor": 1},
        ]

    drctl.mutated("collide", mutate)
    _line(drctl.refused("collide"), "topics[3].name", "collides with 'a.b' (topics[2])", "rename one")


def test_duplicate_topic_names_are_refused(drctl: Drctl) -> None:
    drctl.mutated(
        "dup",
        lambda config: config["kafka-dr:topics"].append({"name": "orders", "partitions": 1, "replication_factor": 1}),
    )
    _line(drctl.refused("dup"), "topics[2].name", "already used by topics[0]")


@pytest.mark.parametrize(
    ("key", "value", "fragment", "fix"),
    [
        ("retention.msec", "1000", "not a Kafka topic config", "did you mean 'retention.ms'?"),
        ("cleanup.polcy", "delete", "not a Kafka topic config", "did you mean 'cleanup.policy'?"),
        ("message.downconversion.enable", "true", "removed in Kafka 4.0", "remove it"),
        ("min.insync.replicas", "1", "duplicates the topic's min_insync_replicas", "set min_insync_replicas"),
        ("cleanup.policy", "deleet", "not one of 'delete', 'compact'", "use one of the values"),
        ("compression.type", "ZSTD", "not one of", "case matters"),
        ("message.timestamp.type", "createtime", "not one of 'CreateTime', 'LogAppendTime'", "use one of"),
        ("preallocate", "yes", "not a boolean", "use true or false"),
        ("retention.ms", "-2", "Kafka requires at least -1", "at least -1"),
        ("retention.ms", "7d", "not a 64-bit whole number", "use a whole number"),
        ("retention.ms", "1_000", "not a 64-bit whole number", "use a whole number"),
        ("retention.bytes", "9223372036854775808", "not a 64-bit whole number", "whole number"),
        ("segment.bytes", "1048575", "at least 1048576", "at least 1048576"),
        ("segment.bytes", "2147483648", "not a 32-bit whole number", "whole number"),
        ("segment.ms", "0", "at least 1", "at least 1"),
        ("max.message.bytes", "-1", "at least 0", "at least 0"),
        ("min.cleanable.dirty.ratio", "1.5", "between 0 and 1", "decimal number"),
        ("min.cleanable.dirty.ratio", "NaN", "between 0 and 1", "decimal number"),
        ("compression.gzip.level", "10", "between 1 and 9 (or -1)", "between 1 and 9"),
        ("leader.replication.throttled.replicas", "all", "not a list of replicas", "partitionId:brokerId"),
    ],
)
def test_topic_configs_kafka_would_refuse_are_refused(
    drctl: Drctl, key: str, value: str, fragment: str, fix: str
) -> None:
    drctl.mutated("configs", _topic(0, configs={key: value}))
    line = _line(drctl.refused("configs"), f'topics[0].configs["{key}"]', fragment)
    assert fix in line.split(" — ", 1)[1], line


def test_topic_configs_kafka_accepts_are_accepted(drctl: Drctl) -> None:
    configs = {
        "cleanup.policy": "compact, delete",
        "compression.type": "zstd",
        "compression.gzip.level": -1,
        "retention.ms": -1,
        "retention.bytes": -1,
        "segment.bytes": 1048576,
        "min.cleanable.dirty.ratio": 0,
        "message.timestamp.type": "LogAppendTime",
        "preallocate": True,
        "unclean.leader.election.enable": "TRUE",
        "local.retention.ms": -2,
        "leader.replication.throttled.replicas": "0:1, 1:2",
    }
    path = drctl.mutated("fine", _topic(0, configs=configs))
    assert load_stack_file(path).topics[0].configs["retention.ms"] == "-1"


def test_min_compaction_lag_above_max_is_refused(drctl: Drctl) -> None:
    drctl.mutated("lag", _topic(0, configs={"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}))
    _line(drctl.refused("lag"), 'topics[0].configs["min.compaction.lag.ms"]', "more than max.compaction.lag.ms 5")


def test_tiered_storage_on_a_local_cluster_is_refused(drctl: Drctl) -> None:
    drctl.mutated("tiered", _topic(1, configs={"remote.storage.enable": "true"}))
    _line(drctl.refused("tiered"), 'topics[1].configs["remote.storage.enable"]', "without tiered storage")


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"partitions": 100_001}, "topics[0].partitions", "more than 100000"),
        ({"partitions": 0}, "topics[0].partitions", "use a value of at least 1"),
        ({"replication_factor": 2}, "topics[0].replication_factor", "more than the 1 broker(s)"),
        ({"replication_factor": 0}, "topics[0].replication_factor", "use a value of at least 1"),
        ({"min_insync_replicas": 2}, "topics[0].min_insync_replicas", "more than replication_factor 1"),
    ],
)
def test_partitions_and_replicas_out_of_bounds_are_refused(
    drctl: Drctl, fields: dict[str, int], path: str, fragment: str
) -> None:
    drctl.mutated("sizes", _topic(0, **fields))
    _line(drctl.refused("sizes"), path, fragment)


def test_too_many_partitions_for_a_local_cluster_are_refused(drctl: Drctl) -> None:
    drctl.mutated("many", _topic(0, partitions=20_000))
    _line(drctl.refused("many"), "clusters[1]", "partition replicas per broker", "fewer partitions")


@pytest.mark.parametrize(
    ("group", "fragment"),
    [
        ("", "1-255"),
        ("g" * 256, "1-255"),
        ("*", "every consumer group"),
        ("connect-billing", "groups.exclude"),
        ("console-consumer-7", "groups.exclude"),
        ("bill\ning", "control"),
    ],
    ids=["empty", "too-long", "wildcard", "connect", "console", "newline"],
)
def test_consumer_group_names_are_checked(drctl: Drctl, group: str, fragment: str) -> None:
    drctl.mutated("groups", lambda config: _apps(config)[1].update(consumer_group=group))
    _line(drctl.refused("groups"), "principals.applications[1].consumer_group", fragment)


@pytest.mark.parametrize(
    ("field", "pattern", "fragment"),
    [
        ("topics", "orders(", "missing ), unterminated subpattern"),
        ("consumer_groups", "[billing", "unterminated character set"),
        ("topics", "ord{1,3}", "separator"),
        ("topics", "", "selects nothing"),
        ("consumer_groups", "(?P<g>bill)ing", "Python-only"),
    ],
)
def test_link_patterns_must_compile(drctl: Drctl, field: str, pattern: str, fragment: str) -> None:
    drctl.mutated("patterns", lambda config: config["kafka-dr:links"][0].update({field: [".*", pattern]}))
    _line(drctl.refused("patterns"), f"links[0].{field}[1]", fragment)


# -- 3. the stack file itself ---------------------------------------------------------------------


def test_duplicate_top_level_key_is_refused(drctl: Drctl) -> None:
    text = (REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8")
    drctl.write("dupkey", text + "  kafka-dr:profile: production\n")
    err = drctl.refused("dupkey")
    assert "'kafka-dr:profile' twice" in err and f"lines 5 and {text.count(chr(10)) + 1}" in err, err
    assert "keep one entry for 'kafka-dr:profile'" in err


def test_duplicate_nested_key_is_refused(drctl: Drctl) -> None:
    text = (REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8")
    drctl.write("nested", text.replace("      base_port: 19200\n", "      base_port: 19200\n      base_port: 19250\n"))
    err = drctl.refused("nested")
    assert "'base_port' twice" in err, err


def test_yaml_merge_keys_may_be_overridden(drctl: Drctl) -> None:
    text = (REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "    - name: B\n      role: passive\n      kind: local\n      brokers: 1\n",
        "    - &one\n      name: B\n      role: passive\n      kind: local\n      brokers: 1\n",
    )
    text = text.replace(
        "    - name: C\n      role: standby\n      kind: local\n      brokers: 1\n",
        "    - <<: *one\n      name: C\n      role: standby\n",
    )
    path = drctl.write("merge", text)
    assert load_stack_file(path).cluster("C").brokers == 1


def test_a_file_that_is_not_utf8_is_refused_with_the_byte_offset(drctl: Drctl) -> None:
    data = (REPO_ROOT / "Pulumi.local.yaml").read_bytes().replace(b"orders-app", b"orders-\xe9pp", 1)
    drctl.write("latin1", data)
    offset = data.index(b"\xe9")
    err = drctl.refused("latin1")
    assert f"byte offset {offset}" in err and "not UTF-8" in err and "save the file as UTF-8" in err


def test_a_utf16_file_is_refused(drctl: Drctl) -> None:
    drctl.write("utf16", (REPO_ROOT / "Pulumi.local.yaml").read_text(encoding="utf-8").encode("utf-16"))
    assert "UTF-16" in drctl.refused("utf16")


def test_a_utf8_byte_order_mark_is_fine(drctl: Drctl) -> None:
    path = drctl.write("bom", b"\xef\xbb\xbf" + (REPO_ROOT / "Pulumi.local.yaml").read_bytes())
    assert load_stack_file(path).name == "bom"


# -- 4. one passive (and one standby) per active --------------------------------------------------


def test_two_passive_clusters_are_refused(drctl: Drctl) -> None:
    def mutate(config: dict[str, Any]) -> None:
        config["kafka-dr:clusters"][2]["role"] = "passive"
        config["kafka-dr:links"].append({"name": "A-to-C", "source": "A", "target": "C"})

    drctl.mutated("passives", mutate)
    _line(
        drctl.refused("passives"),
        "clusters[2].role",
        "is passive but so is 'B'",
        "one passive cluster per active",
        "make 'C' standby",
    )


def test_two_standby_clusters_are_refused(drctl: Drctl) -> None:
    drctl.mutated(
        "standbys",
        lambda config: config["kafka-dr:clusters"].append({"name": "D", "role": "standby", "base_port": 19400}),
    )
    _line(drctl.refused("standbys"), "clusters[3].role", "is standby but so is 'C'")


# -- 5. passwords in plain text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("estate", "status"), ("estate", "up"), ("status",), ("connect-config",), ("failover", "--dry-run")],
    ids=lambda c: " ".join(c),
)
def test_a_plaintext_application_password_is_refused_by_every_command(
    drctl: Drctl, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dr.estate.stack import EstateStack

    def engine(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the Pulumi engine was started")

    monkeypatch.setattr(EstateStack, "_stack", engine)  # were the refusal to regress, nothing starts
    drctl.mutated("plain", lambda config: _apps(config)[0].update(password="Tr0ub4dor&3"), PRODUCTION_DOC)
    err = drctl.refused("plain", *command)
    assert "kafka-dr:principals.applications[0].password" in err
    assert "pulumi config set --stack plain --path --secret 'kafka-dr:principals.applications[0].password'" in err
    assert "Tr0ub4dor" not in err


def test_a_plaintext_cluster_admin_password_is_refused(drctl: Drctl) -> None:
    drctl.mutated(
        "plain", lambda config: config["kafka-dr:clusters"][1].update(admin_password="hunter2hunter2"), PRODUCTION_DOC
    )
    err = drctl.refused("plain")
    assert "--secret 'kafka-dr:clusters[1].admin_password'" in err and "hunter2" not in err


def test_the_pulumi_program_still_gets_decrypted_passwords() -> None:
    """The engine hands the program plaintext: only the raw file is refused, not load_topology."""
    config = copy.deepcopy(PRODUCTION_DOC["config"])
    config["kafka-dr:principals"]["applications"][0]["password"] = "decrypted-by-the-engine"
    app = load_topology("production-example", config).principals.applications[0]
    assert app.password is not None and app.password.get_secret_value() == "decrypted-by-the-engine"


@pytest.mark.parametrize("password", ["correct-horse-battery", 123456], ids=["text", "number"])
def test_load_stack_file_refuses_plaintext_with_a_config_error(tmp_path: Path, password: object) -> None:
    doc = copy.deepcopy(PRODUCTION_DOC)
    doc["config"]["kafka-dr:principals"]["applications"][1]["password"] = password
    path = tmp_path / "Pulumi.num.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"in plain text: kafka-dr:principals\.applications\[1\]\.password") as info:
        load_stack_file(path)
    assert str(password) not in str(info.value)


# -- 6. unexpected exceptions -----------------------------------------------------------------------


@pytest.fixture
def broken_status(monkeypatch: pytest.MonkeyPatch) -> None:
    from dr.estate.estate import Estate

    def explode(cls: type, stack: str) -> None:
        raise RuntimeError("status exploded: sasl.password=hunter2-xyz while reading")

    monkeypatch.setattr(Estate, "for_stack", classmethod(explode))


def test_an_unexpected_exception_exits_10_naming_the_traceback_file(drctl: Drctl, broken_status: None) -> None:
    code, err = drctl.run("estate", "status", "--stack", "local")
    assert code == 10, err
    assert "internal error" in err and "RuntimeError: status exploded" in err
    assert "Traceback" not in err and "hunter2" not in err
    files = list((Path(os.environ["KDR_STATE_DIR"]) / "internal-errors").glob("drctl-*.traceback.txt"))
    assert len(files) == 1, files
    assert str(files[0]) in err and "next step: report this as a bug" in err
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    text = files[0].read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "in explode" in text
    assert "hunter2" not in text


def test_kdr_debug_prints_the_traceback_too(drctl: Drctl, broken_status: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_DEBUG", "1")
    code, err = drctl.run("estate", "status", "--stack", "local")
    assert code == 10
    assert "Traceback (most recent call last)" in err and "hunter2" not in err


def test_secrets_in_the_environment_are_masked(drctl: Drctl, monkeypatch: pytest.MonkeyPatch) -> None:
    from dr.estate.estate import Estate

    monkeypatch.setenv("KDR_TEST_API_SECRET", "s3cr3t-from-env")

    def explode(cls: type, stack: str) -> None:
        raise ValueError("could not reach broker with s3cr3t-from-env")

    monkeypatch.setattr(Estate, "for_stack", classmethod(explode))
    code, err = drctl.run("estate", "status", "--stack", "local")
    assert code == 10 and "ValueError" in err and "s3cr3t-from-env" not in err
