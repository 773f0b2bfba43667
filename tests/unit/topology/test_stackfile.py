"""``dr.topology.stackfile``: the desired topology is written into the user's stack file in place."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest
import yaml

from dr.base.errors import ConfigError
from dr.topology import Topology, load_stack_file
from dr.topology.secret import StackSecret
from dr.topology.stackfile import render_stack_config, stack_file_diff, write_stack_config

REPO_ROOT = Path(__file__).resolve().parents[3]

# What a failover of the local stack changes, line by line (old, new), in file order.
FAILOVER_CHANGES = [
    ("  kafka-dr:failoverDone: false", "  kafka-dr:failoverDone: true"),
    ("      role: active", "      role: decommissioned"),
    ("      role: passive", "      role: active"),
    ("      role: standby", "      role: passive"),
    ("    - name: A-to-B", "    - name: B-to-C"),
    ("      source: A", "      source: B"),
    ("      target: B", "      target: C"),
]


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    """A copy of the repository's Pulumi.local.yaml."""
    path = tmp_path / "Pulumi.local.yaml"
    path.write_bytes((REPO_ROOT / "Pulumi.local.yaml").read_bytes())
    return path


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) of a line diff, in order."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def comment_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("#")]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture no longer contains {old!r}"
    path.write_text(text.replace(old, new, 1))


def make_old(path: Path) -> int:
    """Back-date the file's mtime (so a rewrite would show); return it in ns."""
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    return path.stat().st_mtime_ns


def test_a_failover_changes_only_the_roles_the_flag_and_the_link(stack: Path) -> None:
    before = stack.read_text()
    desired = load_stack_file(stack).after_failover()
    assert write_stack_config(stack, desired) is True
    after = stack.read_text()
    assert changed_lines(before, after) == ([old for old, _ in FAILOVER_CHANGES], [new for _, new in FAILOVER_CHANGES])
    # every change is in place: same number of lines, each changed line where the old one was
    pairs = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert pairs == FAILOVER_CHANGES


def test_the_diff_is_what_would_be_written_and_writes_nothing(stack: Path) -> None:
    before = stack.read_bytes()
    mtime = make_old(stack)
    desired = load_stack_file(stack).after_failover()
    diff = stack_file_diff(stack, desired)
    assert stack.read_bytes() == before and stack.stat().st_mtime_ns == mtime
    assert diff.startswith("--- a/Pulumi.local.yaml\n+++ b/Pulumi.local.yaml\n")
    expected = "".join(
        difflib.unified_diff(
            before.decode().splitlines(keepends=True),
            render_stack_config(stack, desired).splitlines(keepends=True),
            "a/Pulumi.local.yaml",
            "b/Pulumi.local.yaml",
        )
    )
    assert diff == expected
    write_stack_config(stack, desired)
    assert stack.read_text() == render_stack_config(stack, desired) != before.decode()
    assert stack_file_diff(stack, desired) == ""


def test_every_comment_line_and_the_key_order_survive(stack: Path) -> None:
    before = stack.read_text()
    write_stack_config(stack, load_stack_file(stack).after_failover())
    after = stack.read_text()
    assert comment_lines(before) and comment_lines(after) == comment_lines(before)
    old, new = yaml.safe_load(before)["config"], yaml.safe_load(after)["config"]
    assert list(new) == list(old)
    for section in ("kafka-dr:clusters", "kafka-dr:topics"):
        assert [list(item) for item in new[section]] == [list(item) for item in old[section]]
    assert list(new["kafka-dr:principals"]) == list(old["kafka-dr:principals"])


def test_writing_again_changes_nothing_not_even_the_mtime(stack: Path) -> None:
    desired = load_stack_file(stack).after_failover()
    assert write_stack_config(stack, desired) is True
    written = stack.read_bytes()
    mtime = make_old(stack)
    assert write_stack_config(stack, desired) is False
    assert stack.read_bytes() == written
    assert stack.stat().st_mtime_ns == mtime


def test_an_unchanged_topology_is_not_written(stack: Path) -> None:
    before = stack.read_bytes()
    mtime = make_old(stack)
    assert write_stack_config(stack, load_stack_file(stack)) is False
    assert stack.read_bytes() == before and stack.stat().st_mtime_ns == mtime
    assert stack_file_diff(stack, load_stack_file(stack)) == ""


def test_the_result_loads_back_as_the_desired_topology(stack: Path) -> None:
    desired = load_stack_file(stack).after_failover()
    write_stack_config(stack, desired)
    assert load_stack_file(stack) == desired
    assert [link.name for link in load_stack_file(stack).links] == ["B-to-C"]


def test_encrypted_secrets_are_kept_byte_for_byte(stack: Path) -> None:
    edit(
        stack,
        "        consumer_group: billing\n",
        "        consumer_group: billing\n        password: {secure: v1:abc}\n",
    )
    stack.write_text(stack.read_text() + "  aws:secretKey:\n    secure: v1:AAAA+/xyz==\nencryptionsalt: v1:salt=\n")
    before = stack.read_text()
    loaded = load_stack_file(stack)
    assert loaded.principals.application("billing").password == StackSecret("v1:abc", encrypted=True)
    write_stack_config(stack, loaded.after_failover())
    after = stack.read_text()
    for line in (
        "        password: {secure: v1:abc}",
        "  aws:secretKey:",
        "    secure: v1:AAAA+/xyz==",
        "encryptionsalt: v1:salt=",
    ):
        assert line in after.splitlines()
    removed, added = changed_lines(before, after)
    assert removed == [old for old, _ in FAILOVER_CHANGES] and added == [new for _, new in FAILOVER_CHANGES]


@pytest.mark.parametrize("spelling", ["snake", "camel"])
def test_unchanged_keys_keep_their_spelling(stack: Path, spelling: str) -> None:
    snake = [
        "failover_done",
        "base_port",
        "replication_factor",
        "min_insync_replicas",
        "consumer_group",
        "consumer_groups",
    ]
    camel = ["failoverDone", "basePort", "replicationFactor", "minInsyncReplicas", "consumerGroup", "consumerGroups"]
    keep, other = (snake, camel) if spelling == "snake" else (camel, snake)
    text = stack.read_text()
    for old, new in zip(other, keep, strict=True):
        text = re.sub(rf"\b{old}:", f"{new}:", text)
    stack.write_text(text)
    desired = load_stack_file(stack).after_failover()
    clusters = [c.model_copy(update={"admin_username": "ops"}) if c.name == "C" else c for c in desired.clusters]
    write_stack_config(stack, Topology.model_validate({**dict(desired), "clusters": clusters}))
    after = stack.read_text()
    for key in keep:
        assert f"{key}:" in after
    for key in other:
        assert f"{key}:" not in after
    assert after.count(f"{keep[1]}:") == 3  # base_port of each cluster, untouched
    new_key = "admin_username" if spelling == "snake" else "adminUsername"
    assert f"      {new_key}: ops\n" in after  # a new key is spelled like the others


def test_the_file_mode_is_kept_and_no_temporary_file_is_left(stack: Path) -> None:
    os.chmod(stack, 0o640)
    write_stack_config(stack, load_stack_file(stack).after_failover())
    assert stack.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in stack.parent.iterdir()) == ["Pulumi.local.yaml"]


def test_a_plaintext_secret_is_refused_and_the_file_left_alone(stack: Path) -> None:
    before = stack.read_bytes()
    mtime = make_old(stack)
    loaded = load_stack_file(stack)
    app = loaded.principals.applications[0].model_copy(update={"password": StackSecret("hunter2")})
    principals = loaded.principals.model_copy(update={"applications": [app, *loaded.principals.applications[1:]]})
    desired = Topology.model_validate({**dict(loaded.after_failover()), "principals": principals})
    with pytest.raises(ConfigError, match="plaintext secrets"):
        write_stack_config(stack, desired)
    with pytest.raises(ConfigError, match="plaintext secrets"):
        stack_file_diff(stack, desired)
    assert stack.read_bytes() == before and stack.stat().st_mtime_ns == mtime


def test_a_field_reset_to_its_default_is_removed_and_the_comment_after_it_stays(stack: Path) -> None:
    edit(stack, "      base_port: 19300\n", "      base_port: 19300\n      admin_username: ops  # temporary\n")
    before = stack.read_text()
    loaded = load_stack_file(stack)
    clusters = [c.model_copy(update={"admin_username": None}) if c.name == "C" else c for c in loaded.clusters]
    desired = Topology.model_validate({**dict(loaded), "clusters": clusters})
    assert write_stack_config(stack, desired) is True
    after = stack.read_text()
    assert changed_lines(before, after) == (["      admin_username: ops  # temporary"], [])
    assert comment_lines(after) == [c for c in comment_lines(before) if "temporary" not in c]
    assert load_stack_file(stack) == desired


def test_a_new_field_goes_after_the_last_one_before_the_comment_that_follows(stack: Path) -> None:
    loaded = load_stack_file(stack)
    clusters = [c.model_copy(update={"admin_username": "ops"}) if c.name == "C" else c for c in loaded.clusters]
    desired = Topology.model_validate({**dict(loaded), "clusters": clusters})
    write_stack_config(stack, desired)
    lines = stack.read_text().splitlines()
    at = lines.index("      base_port: 19300")
    assert lines[at + 1] == "      admin_username: ops"
    assert lines[at + 2].startswith("  # Replication factor must fit")
    assert load_stack_file(stack) == desired


def test_a_missing_key_is_added_at_the_end_of_the_kafka_dr_section(stack: Path) -> None:
    text = stack.read_text().replace("  kafka-dr:failoverDone: false\n", "")
    stack.write_text(text + "  aws:region: eu-west-1  # other namespace\n")
    desired = load_stack_file(stack).after_failover()
    write_stack_config(stack, desired)
    lines = stack.read_text().splitlines()
    assert lines[-2:] == ["  kafka-dr:failoverDone: true", "  aws:region: eu-west-1  # other namespace"]
    assert load_stack_file(stack) == desired


def test_an_unchanged_item_keeps_its_formatting_when_another_is_added(stack: Path) -> None:
    edit(
        stack,
        "    - name: payments\n      partitions: 3\n",
        "    # payments: low volume\n    - name: payments\n      partitions: 3   # small\n",
    )
    before = stack.read_text()
    loaded = load_stack_file(stack)
    topic = loaded.topics[0].model_copy(update={"name": "refunds", "configs": {"retention.ms": "1000"}})
    desired = Topology.model_validate({**dict(loaded), "topics": [*loaded.topics, topic]})
    write_stack_config(stack, desired)
    removed, added = changed_lines(before, stack.read_text())
    assert removed == []
    assert added == [
        "    - name: refunds",
        "      partitions: 6",
        "      replication_factor: 1",
        "      min_insync_replicas: 1",
        "      configs:",
        '        retention.ms: "1000"',
    ]
    assert load_stack_file(stack) == desired


def test_spellings_ruamel_would_normalise_are_kept_on_unchanged_lines(stack: Path) -> None:
    text = "---\n" + stack.read_text().replace("brokers: 3\n", "brokers:   3\n")
    stack.write_text(text.replace("failoverDone: false", "failoverDone: False"))
    before = stack.read_text()
    loaded = load_stack_file(stack)
    topics = [loaded.topics[0], loaded.topics[1].model_copy(update={"partitions": 4})]
    desired = Topology.model_validate({**dict(loaded), "topics": topics})
    write_stack_config(stack, desired)
    assert changed_lines(before, stack.read_text()) == (["      partitions: 3"], ["      partitions: 4"])


def test_a_changed_list_of_names_keeps_its_flow_style_and_quoting(stack: Path) -> None:
    before = stack.read_text()
    loaded = load_stack_file(stack)
    link = loaded.links[0].model_copy(update={"consumer_groups": [".*", "billing"]})
    desired = Topology.model_validate({**dict(loaded), "links": [link]})
    write_stack_config(stack, desired)
    assert changed_lines(before, stack.read_text()) == (
        ['      consumer_groups: [".*"]'],
        ['      consumer_groups: [".*", "billing"]'],
    )


def test_a_list_emptied_by_the_failover_is_removed_and_the_comment_after_it_stays(stack: Path) -> None:
    text = stack.read_text()
    text = text[: text.index("    - name: C\n")] + text[text.index("  # Replication factor") :]
    stack.write_text(text + "  # settings of other namespaces\n  aws:region: eu-west-1\n")
    before = stack.read_text()
    desired = load_stack_file(stack).after_failover()  # no standby: no link any more
    assert desired.links == []
    write_stack_config(stack, desired)
    after = stack.read_text()
    links = before[before.index("  kafka-dr:links:\n") : before.index("  # settings")].splitlines()
    assert changed_lines(before, after) == (
        [*[old for old, _ in FAILOVER_CHANGES[:3]], *links],
        [new for _, new in FAILOVER_CHANGES[:3]],
    )
    assert comment_lines(after) == comment_lines(before)
    assert load_stack_file(stack) == desired


# -- a stack file in PyYAML's default block style: sequence dashes at their parent key's column ----

# What a failover of that file changes, line by line (old, new), in file order.
PYYAML_FAILOVER_CHANGES = [
    ("  kafka-dr:failoverDone: false", "  kafka-dr:failoverDone: true"),
    ("    role: active", "    role: decommissioned"),
    ("    role: passive", "    role: active"),
    ("    role: standby", "    role: passive"),
    ("  - name: A-to-B", "  - name: B-to-C"),
    ("    source: A", "    source: B"),
    ("    target: B", "    target: C"),
]


@pytest.fixture
def pyyaml_stack(tmp_path: Path) -> Path:
    """Pulumi.local.yaml as ``yaml.safe_dump`` writes it (``key:`` then ``- item`` at the key's column)."""
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    path = tmp_path / "Pulumi.unit.yaml"
    path.write_text("# header comment kept\n" + yaml.safe_dump(doc, sort_keys=False))
    assert "  kafka-dr:clusters:\n  - name: A\n    role: active\n" in path.read_text()
    assert "    racks:\n    - r1\n" in path.read_text()
    return path


def test_a_failover_keeps_sequence_dashes_at_their_key_column(pyyaml_stack: Path) -> None:
    before = pyyaml_stack.read_text()
    desired = load_stack_file(pyyaml_stack).after_failover()
    assert write_stack_config(pyyaml_stack, desired) is True
    after = pyyaml_stack.read_text()
    assert changed_lines(before, after) == (
        [old for old, _ in PYYAML_FAILOVER_CHANGES],
        [new for _, new in PYYAML_FAILOVER_CHANGES],
    )
    pairs = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert pairs == PYYAML_FAILOVER_CHANGES
    assert load_stack_file(pyyaml_stack) == desired


def test_the_diff_of_a_pyyaml_style_file_shows_only_the_changed_lines(pyyaml_stack: Path) -> None:
    before = pyyaml_stack.read_bytes()
    diff = stack_file_diff(pyyaml_stack, load_stack_file(pyyaml_stack).after_failover())
    assert pyyaml_stack.read_bytes() == before
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert removed == [f"-{old}" for old, _ in PYYAML_FAILOVER_CHANGES]
    assert added == [f"+{new}" for _, new in PYYAML_FAILOVER_CHANGES]


def test_a_pyyaml_style_file_is_not_rewritten_when_nothing_differs(pyyaml_stack: Path) -> None:
    before = pyyaml_stack.read_bytes()
    mtime = make_old(pyyaml_stack)
    assert write_stack_config(pyyaml_stack, load_stack_file(pyyaml_stack)) is False
    assert pyyaml_stack.read_bytes() == before and pyyaml_stack.stat().st_mtime_ns == mtime
    assert stack_file_diff(pyyaml_stack, load_stack_file(pyyaml_stack)) == ""


def test_a_new_item_and_a_longer_block_list_follow_the_pyyaml_style(pyyaml_stack: Path) -> None:
    before = pyyaml_stack.read_text()
    loaded = load_stack_file(pyyaml_stack)
    link = loaded.links[0].model_copy(update={"topics": [".*", "orders"]})
    topic = loaded.topics[1].model_copy(update={"name": "refunds"})
    desired = Topology.model_validate({**dict(loaded), "links": [link], "topics": [*loaded.topics, topic]})
    write_stack_config(pyyaml_stack, desired)
    assert changed_lines(before, pyyaml_stack.read_text()) == (
        [],
        [
            "  - name: refunds",
            "    partitions: 3",
            "    replication_factor: 1",
            "    min_insync_replicas: 1",
            "    - orders",
        ],
    )
    assert load_stack_file(pyyaml_stack) == desired


def test_the_sequence_style_is_measured_from_the_first_block_sequence_under_a_key(stack: Path) -> None:
    # mapping indent 4, dashes at the key's column: nothing here is at ruamel's defaults
    doc = yaml.safe_load(stack.read_text())
    stack.write_text(yaml.safe_dump(doc, sort_keys=False, indent=4))
    before = stack.read_text()
    assert "    kafka-dr:clusters:\n    -   name: A\n        role: active\n" in before
    desired = load_stack_file(stack).after_failover()
    write_stack_config(stack, desired)
    assert changed_lines(before, stack.read_text()) == (
        [
            "    kafka-dr:failoverDone: false",
            "        role: active",
            "        role: passive",
            "        role: standby",
            "    -   name: A-to-B",
            "        source: A",
            "        target: B",
        ],
        [
            "    kafka-dr:failoverDone: true",
            "        role: decommissioned",
            "        role: active",
            "        role: passive",
            "    -   name: B-to-C",
            "        source: B",
            "        target: C",
        ],
    )
    assert load_stack_file(stack) == desired
