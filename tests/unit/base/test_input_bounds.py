"""Issue 32, deliverables 5-7: inputs that hung a command, escaped the state base, changed a directory's
mode, reached Java clients as other names, or asked for a size the provisioning cannot carry.

Each test is one finding of the security review and fails on the code before it: link patterns that
backtrack catastrophically, stack names that are paths, a state base that is a file or a shared
directory, group names Java reads differently from ``.properties``, and a 1,000-topic estate on
``provisioning: individual``.
"""

from __future__ import annotations

import base64
import copy
import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr.base.errors import ConfigError
from tests import REPO_ROOT
from tests.unit.cli.test_input_hardening import LOCAL_DOC, Drctl, drctl

__all__ = ["drctl"]  # the fixture, imported for the tests below

# -- 5. bounded pattern matching ------------------------------------------------------------------

SLOW = "(a+)+b"
NAME_48 = "a" * 48


def _slow_stack(root: Path, pattern: str = SLOW) -> None:
    doc = copy.deepcopy(LOCAL_DOC)
    doc["config"]["kafka-dr:topics"].append(
        {"name": NAME_48, "partitions": 1, "replication_factor": 1, "min_insync_replicas": 1}
    )
    doc["config"]["kafka-dr:links"][0]["topics"] = [pattern]
    (root / "Pulumi.slow.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


@pytest.mark.parametrize("command", [["status"], ["failover", "--dry-run"], ["estate", "status"]])
def test_a_backtracking_pattern_is_refused_in_bounded_time(tmp_path: Path, command: list[str]) -> None:
    """`(a+)+b` beside a topic of 48 a's kept `status` and `failover --dry-run` spinning past 90 s of CPU.

    Bounded in CPU seconds (the command's own, as the kernel counts them), not in wall time: a busy machine
    stretches the wall clock (37 s at load 60 for 1 s of CPU), while a match that backtracks spins the CPU."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    _slow_stack(stacks)
    env = {**os.environ, "KDR_STACK_DIR": str(stacks), "KDR_STATE_DIR": str(tmp_path / "state")}
    env.pop("KDR_DEBUG", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dr.cli", *command, "--stack", "slow"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,  # a hang's bound only
            cwd=REPO_ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`drctl {' '.join(command)}` still running after 600 s on the pattern {SLOW!r}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 20, f"`drctl {' '.join(command)}` spent {cpu:.1f} CPU seconds on the pattern {SLOW!r}"
    assert done.returncode == 2, done.stderr
    assert "links[0].topics[0]" in done.stderr
    assert repr(SLOW) in done.stderr and "catastrophic backtracking" in done.stderr
    assert "(a+)+b → a+b" in done.stderr  # the fix


UNSAFE = [
    r"(a+)+b",
    r"(a*)*",
    r"(a|a)*",
    r"(.*)*",
    r"(\w+\s?)*",
    r"(a?)+",
    r"(a+a+)*",
    r"(?:a|b|ab)*c",
    r"((ab)+)+",
    r"(a+){9}b",
    r"(?=(a+)+b)a",
    r".*a.*a.*a.*b",
    r"(.*a){12}",
    r"(?:(a)\1?)*",
]
SAFE = [
    "orders",
    r"orders\..*",
    "(orders|payments)",
    ".*",
    "app-[0-9]+",
    r"([a-z]+\.)*orders",
    "(ab+c)*",
    "[a-z]+(-[a-z]+)*",
    r".*\..*\..*",
    "(?!internal).*",
    "billing|orders|payments",
]


@pytest.mark.parametrize("pattern", UNSAFE)
def test_backtracking_shapes_are_found(pattern: str) -> None:
    from dr.base.pattern_safety import backtracking_problem

    assert backtracking_problem(pattern) is not None


@pytest.mark.parametrize("pattern", SAFE)
def test_ordinary_patterns_pass_the_backtracking_check(pattern: str) -> None:
    from dr.base.pattern_safety import backtracking_problem

    assert backtracking_problem(pattern) is None


@pytest.mark.parametrize("pattern", UNSAFE)
def test_every_refused_shape_is_refused_by_validation(drctl: Drctl, pattern: str) -> None:
    doc = copy.deepcopy(LOCAL_DOC)
    doc["config"]["kafka-dr:links"][0]["consumer_groups"] = [pattern]
    drctl.write("slowgroups", doc)
    message = drctl.refused("slowgroups")
    assert "links[0].consumer_groups[0]" in message and "catastrophic backtracking" in message


def test_names_are_matched_in_linear_time() -> None:
    """drctl's own matching (lag, verification, offsets) is RE2: bounded even for an unsafe pattern."""
    from dr.base.pattern_safety import name_matcher
    from dr.topology import Link

    assert name_matcher(SLOW).fullmatch(NAME_48) is False
    assert name_matcher(SLOW).fullmatch("a" * 5000 + "b") is True
    link = Link(name="l", source="A", target="B", topics=[SLOW], consumer_groups=[SLOW])
    assert not link.selects_topic(NAME_48) and not link.selects_group(NAME_48)  # (backtracking: hours)
    assert name_matcher(r"(?!x)orders").linear is None  # look-around: Python's re (a safe pattern)
    assert name_matcher(r"[[:alpha:]]+").linear is None  # RE2 would read a POSIX class
    assert name_matcher(r"\w+").fullmatch("bïlling") is True  # non-ASCII: Python's Unicode \w
    assert name_matcher(r"orders\.v1").fullmatch("orders.v1") is True
    assert name_matcher("orders(").fullmatch("orders(") is True  # invalid: its own text, as before


def test_the_java_checker_answers_a_runaway_pattern_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: a shape the static check missed still gets an answer from the JVM, not a hang."""
    from dr.topology import java_regex

    monkeypatch.setenv("KDR_HOME", str(tmp_path))
    monkeypatch.setattr(java_regex, "_memory", {})
    verdict = java_regex.java_verdicts([r"(.*a){12}"], ["a" * 40 + "!", "orders"])[r"(.*a){12}"]
    assert verdict.error is not None and "catastrophic backtracking" in verdict.error  # the JVM's own bound said so
    assert list((tmp_path / "java-regex").glob("*/KdrRegexCheck$*.class"))  # the compiled checker, whole


# -- 6. names and paths -----------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mode for p in [root, *root.rglob("*")] if p.is_dir()}


@pytest.mark.parametrize("name", ["..", ".", "../escape", "a/b", "x" * 300, "two words", "", "ü"])
@pytest.mark.parametrize("command", [["status"], ["estate", "status"], ["failover", "--dry-run"]])
def test_a_stack_name_that_is_a_path_is_refused_before_any_directory(
    drctl: Drctl, tmp_path: Path, name: str, command: list[str]
) -> None:
    drctl.write("local", LOCAL_DOC)
    before = _tree(tmp_path)
    code, err = drctl.run(*command, "--stack", name)
    assert code == 2, err
    assert "stack name" in err and "Pulumi's rule" in err and "next step:" in err
    assert _tree(tmp_path) == before  # no directory made, none re-moded (`..` was the project dir)


def test_pulumis_longest_stack_name_is_accepted() -> None:
    from dr.base.stackref import valid_stack_name

    assert valid_stack_name("a" * 100) == "a" * 100
    assert valid_stack_name("prod.eu-1_b") == "prod.eu-1_b"
    with pytest.raises(ConfigError, match="101 characters"):
        valid_stack_name("a" * 101)


def test_a_shared_state_base_keeps_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """KDR_STATE_DIR naming an existing 1777 directory was chmod-ed to 0700."""
    from dr.base.pulumi_env import passphrase_file
    from dr.base.stackref import StackRef

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (tmp_path / "Pulumi.yaml").write_text("name: kafka-dr\n")
    monkeypatch.setenv("KDR_STACK_DIR", str(tmp_path))
    monkeypatch.setenv("KDR_STATE_DIR", str(shared))
    made = StackRef.resolve("local").made_state_dir()
    passphrase_file(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(made.stat().st_mode) == 0o700  # what the product made is private
    assert stat.S_IMODE((shared / "passphrase").stat().st_mode) == 0o600
    err = capsys.readouterr().err
    assert f"warning: {shared} is writable by others (mode 1777)" in err


def test_private_dir_makes_each_missing_part_0700_and_leaves_the_rest(tmp_path: Path) -> None:
    from dr.base.files import private_dir

    os.chmod(tmp_path, 0o755)
    made = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


@pytest.mark.parametrize("command", [["status"], ["failover", "--dry-run"]])
def test_a_state_base_that_is_a_file_exits_2(
    drctl: Drctl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    drctl.write("local", LOCAL_DOC)
    base = tmp_path / "state-file"
    base.write_text("not a directory\n")
    monkeypatch.setenv("KDR_STATE_DIR", str(base))
    code, err = drctl.run(*command, "--stack", "local")
    assert code == 2, err
    assert f"{base} is a file, not a directory" in err and "next step:" in err


TRICKY = [
    " billing",
    "  two leading",
    "bïlling",
    "订单-group",
    "emoji-😀",
    "a\\b",
    "a:b=c",
    "#not-a-comment",
    "!bang",
    "trailing ",
    "tab\there",
    "line\nbreak",
    "back\\",
    "\\u0041",
]

_LOADER = """
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import java.util.TreeSet;

public final class LoadProps {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);  // ISO-8859-1, as Kafka's clients and tools load their files
        }
        Base64.Encoder b64 = Base64.getEncoder();
        for (String key : new TreeSet<>(props.stringPropertyNames())) {
            System.out.println(b64.encodeToString(key.getBytes(StandardCharsets.UTF_8)) + " "
                + b64.encodeToString(props.getProperty(key).getBytes(StandardCharsets.UTF_8)));
        }
    }
}
"""


def _java_load(tmp_path: Path, text: str) -> dict[str, str]:
    java = shutil.which("java")
    assert java is not None, "no java on PATH: Java 17 is a required part (make setup checks it)"
    source = tmp_path / "LoadProps.java"
    source.write_text(_LOADER)
    path = tmp_path / "x.properties"
    path.write_text(text, encoding="utf-8")  # as the product writes it; Java reads ISO-8859-1
    done = subprocess.run([java, str(source), str(path)], capture_output=True, text=True, timeout=120, check=True)
    out = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        out[base64.b64decode(key).decode()] = base64.b64decode(value).decode()
    return out


def test_java_properties_read_back_every_key_and_value_exactly(tmp_path: Path) -> None:
    """A group name with a leading space or non-ASCII letters reached Java clients as another name."""
    from dr.base.java_properties import properties_text

    props = {f"k{i}": v for i, v in enumerate(TRICKY)} | {k: f"v{i}" for i, k in enumerate(TRICKY)}
    text = properties_text(props, header="a header ✓")
    assert _java_load(tmp_path, text) == props


def test_published_client_properties_name_the_group_as_its_acl(tmp_path: Path) -> None:
    from dr.failover.act.clients import _configs
    from dr.kafka.client import Endpoint
    from dr.topology import Application

    for group in (" billing", "bïlling", "订单"):
        app = Application(name="billing", consumes=["orders"], consumer_group=group)
        text, librdkafka = _configs(Endpoint("127.0.0.1:1", "billing", "pw"), app, "B")
        assert librdkafka["group.id"] == group
        assert _java_load(tmp_path, text)["group.id"] == group


def test_escapes_are_the_documented_ones() -> None:
    from dr.base.java_properties import escape_key, escape_value

    assert escape_value(" a b") == "\\ a b"
    assert escape_value("ï") == "\\u00EF"
    assert escape_value("😀") == "\\uD83D\\uDE00"
    assert escape_key("a b:c=d") == "a\\ b\\:c\\=d"
    assert escape_value(r"orders\.v1") == r"orders\\.v1"


# -- 7. a size the provisioning cannot carry ------------------------------------------------------


def _sized(topics: int, apps: int, provisioning: str | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(LOCAL_DOC)
    config = doc["config"]
    config["kafka-dr:topics"] = [
        {"name": f"t{i:04d}", "partitions": 1, "replication_factor": 1, "min_insync_replicas": 1} for i in range(topics)
    ]
    config["kafka-dr:principals"]["applications"] = [
        {"name": f"app{i:03d}", "produces": [f"t{i % topics:04d}"], "consumer_group": f"app{i:03d}"}
        for i in range(apps)
    ]
    if provisioning:
        config["kafka-dr:provisioning"] = provisioning
    return doc


def _topology(doc: dict[str, Any], name: str = "big") -> Any:
    from dr.topology import load_topology

    return load_topology(name, doc["config"])


def test_individual_provisioning_past_its_measured_size_is_warned() -> None:
    from dr.topology.provisioning import provisioning_warning

    found = provisioning_warning(_topology(_sized(1000, 200)))
    assert found is not None
    assert "1000 topics and 200 applications" in found
    assert "provisioning: batched" in found and "200 topics / 40 applications" in found
    assert "53 minutes" in found and "96-132 s" in found
    assert provisioning_warning(_topology(_sized(200, 40))) is None  # measured: came up
    assert provisioning_warning(_topology(_sized(201, 1))) is not None
    assert provisioning_warning(_topology(_sized(10, 41))) is not None
    assert provisioning_warning(_topology(_sized(1000, 200, "batched"))) is None


def test_estate_up_and_dry_run_warn_before_they_run(drctl: Drctl, monkeypatch: pytest.MonkeyPatch) -> None:
    from dr.estate.stack import EstateStack
    from dr.failover.kinds.active_passive import run as plan_module

    def stop(*_args: Any, **_kwargs: Any) -> Any:
        raise ConfigError("stopped by the test", "none")

    monkeypatch.setattr(EstateStack, "up", stop)
    monkeypatch.setattr(plan_module, "plan_failover", stop)  # imported by the command when it runs
    drctl.write("big", _sized(1000, 200))
    for command in (["estate", "up"], ["failover", "--dry-run"]):
        code, err = drctl.run(*command, "--stack", "big")
        assert code == 2 and "stopped by the test" in err, err
        assert "warning: stack 'big' declares 1000 topics" in err
        assert err.index("warning:") < err.index("stopped by the test")


def test_the_program_warns_in_pulumi_preview(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi

    from tests.unit.stacks.test_stack_program import run_program

    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: said.append(message))
    run_program(_topology(_sized(300, 2), "local"), tmp_path / "state")
    assert any("provisioning: batched" in m and "300 topics" in m for m in said)
    said.clear()
    run_program(_topology(_sized(10, 2), "local"), tmp_path / "state2")
    assert not any("provisioning: batched" in m for m in said)


def test_the_drills_output_directory_is_made_private(tmp_path: Path) -> None:
    """``drctl drill --out`` holds the drill's stack state, credentials and passphrase: made 0700 when the
    drill creates it (the secret scan of the unplanned drill found it 0755 once directories stopped being
    re-moded), and also when it exists with a wider mode (it is new, empty or an earlier drill's, never a
    shared directory: an existing 0755 one left the drill's backend readable by other local users)."""
    from types import SimpleNamespace

    from dr.failover.kinds.active_passive.drill import _prepare_out

    made = _prepare_out(SimpleNamespace(out=tmp_path / "new" / "drill"))  # type: ignore[arg-type]
    assert made.stat().st_mode & 0o777 == 0o700 and (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    existing = tmp_path / "mine"
    existing.mkdir(mode=0o750)
    existing.chmod(0o750)
    _prepare_out(SimpleNamespace(out=existing))  # type: ignore[arg-type]
    assert existing.stat().st_mode & 0o777 == 0o700
