"""Link patterns are checked with Java's regular expressions (the JVM MirrorMaker 2 runs them on)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr.base.errors import TopologyError
from dr.topology import java_regex, load_topology
from dr.topology.java_regex import java_verdicts, same_in_both
from tests.unit.topology.test_topology_validation import LOCAL


@pytest.fixture(scope="module")
def kdr_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of its own: the first check compiles the checker, later ones reuse it."""
    home = tmp_path_factory.mktemp("kdr-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KDR_HOME", str(home))
        java_regex._memory.clear()
        yield home
    java_regex._memory.clear()


def _link_error(kdr_home: Path, field: str, patterns: list[str]) -> str:
    config: dict[str, Any] = copy.deepcopy(LOCAL)
    config["kafka-dr:links"][0][field] = patterns
    with pytest.raises(TopologyError) as info:
        load_topology("test", config)
    return str(info.value)


def test_a_pattern_python_accepts_and_java_refuses_is_refused_naming_java_s_reason(kdr_home: Path) -> None:
    import re

    re.compile("(?#a comment)orders")  # Python's re accepts it ...
    message = _link_error(kdr_home, "topics", ["(?#a comment)orders"])
    line = next(x for x in message.splitlines() if "links[0].topics[0]" in x)
    assert "refused by Java's regular expressions" in line and "Unknown inline modifier near index 2" in line
    assert " — " in line and "syntax both share" in line


def test_patterns_both_accept_with_different_meanings_are_refused_naming_a_string(kdr_home: Path) -> None:
    # POSIX class: Java reads a union [:alph]; Python a set [[:alph] followed by a literal ']'.
    message = _link_error(kdr_home, "topics", ["[[:alpha:]]+"])
    assert "links[0].topics[0]: '[[:alpha:]]+' means different things" in message
    assert "Java matches ':', Python does not" in message
    # Class intersection: Java reads a-z except e; Python reads '&&[^' literally.
    message = _link_error(kdr_home, "consumer_groups", ["[a-z&&[^e]]+"])
    assert "links[0].consumer_groups[0]: '[a-z&&[^e]]+' means different things" in message
    assert "Java matches 'billing', Python does not" in message  # a declared group, probed first


def test_portable_patterns_pass_and_the_verdicts_are_cached(kdr_home: Path) -> None:
    config: dict[str, Any] = copy.deepcopy(LOCAL)
    config["kafka-dr:links"][0]["topics"] = ["ord[a-z]+s", r"pay\w+"]
    config["kafka-dr:links"][0]["consumer_groups"] = ["(?:orders|billing)(-app)?"]
    topology = load_topology("test", config)
    assert topology.links[0].selects_topic("orders") and topology.links[0].selects_group("orders-app")
    assert (kdr_home / "java-regex").is_dir()
    cache = next((kdr_home / "java-regex").glob("*/verdicts.json"))
    assert "ord[a-z]+s" in cache.read_text()
    java_regex._memory.clear()  # a new drctl process: the verdicts come from the file, no JVM start

    def no_jvm(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a JVM was started for verdicts the cache holds")

    with pytest.MonkeyPatch.context() as mp:  # the JVM path fails: only the cached verdicts can pass
        mp.setattr(java_regex, "_run_checker", no_jvm)
        mp.setattr(java_regex.subprocess, "run", no_jvm)
        load_topology("test", config)


def test_a_back_reference_in_a_list_is_refused(kdr_home: Path) -> None:
    message = _link_error(kdr_home, "topics", ["(o)rders", r"(p)\1ayments"])
    assert "links[0].topics[1]" in message and "numbered back-reference" in message


def test_names_and_dots_never_start_a_jvm() -> None:
    assert same_in_both(".*") and same_in_both("orders") and same_in_both("orders-v2.*")
    assert not same_in_both("ord(ers)") and not same_in_both("[a-z]+") and not same_in_both(r"\w+")


def test_the_checker_reports_java_s_own_verdicts(kdr_home: Path) -> None:
    verdicts = java_verdicts(["a\\z", "(?P<n>a)", "[ab]&&[b]"], ["a", "b", "b&&b"])
    assert verdicts["a\\z"].error is None and verdicts["a\\z"].matches == {"a": True, "b": False, "b&&b": False}
    assert verdicts["(?P<n>a)"].error is not None and "Unknown inline modifier" in verdicts["(?P<n>a)"].error
    assert verdicts["[ab]&&[b]"].matches["b&&b"] is True  # outside a class, && is literal in Java too


@pytest.fixture
def invalid_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kdr_home: Path) -> Path:
    """The local stack on idle ports whose link selects topics with a pattern only Python accepts."""
    import yaml

    from tests import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    for c, port in zip(doc["config"]["kafka-dr:clusters"], (32100, 32200, 32300), strict=True):
        c["base_port"] = port
    doc["config"]["kafka-dr:links"][0]["topics"] = ["(?#orders only)orders"]
    path = tmp_path / "stacks" / "Pulumi.unit.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KDR_STACK_DIR", str(path.parent))
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return path


@pytest.mark.parametrize("command", [["estate", "up"], ["failover", "--dry-run"], ["failover", "--yes"]])
def test_drctl_refuses_a_java_invalid_pattern_before_anything_starts(
    invalid_stack: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from dr.cli import main

    before = invalid_stack.read_bytes()
    with pytest.raises(SystemExit) as info:
        main([*command, "--stack", "unit"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err  # ConfigError/TopologyError: bad input, nothing changed
    assert "links[0].topics[0]" in err and "refused by Java's regular expressions" in err
    state = invalid_stack.parent.parent / "state"
    started = [p for p in state.rglob("*")] if state.exists() else []
    # no process, no stack in the backend (only the failover lock, which lives with the backend, may be)
    assert not [p for p in started if p.name == "pid" or "stacks" in p.parts or p.suffix == ".json"], [
        p for p in started if p.is_file()
    ]
    assert invalid_stack.read_bytes() == before
