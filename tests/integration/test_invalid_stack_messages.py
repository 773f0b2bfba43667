"""A stack file that breaks a rule: the real engine's refusal is reported exactly (issue 24 §4)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.integration.helpers import StackEnv, drctl, jvms_under, write_local_stack


def test_destroy_and_up_of_an_invalid_stack_say_exactly_what_happened(
    tmp_path: Path, stack_ports: tuple[int, int, int]
) -> None:
    path = write_local_stack(tmp_path, "badpattern", stack_ports)
    doc = yaml.safe_load(path.read_text())
    doc["config"]["kafka-dr:links"][0]["topics"] = ["(?#not java)orders"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = StackEnv(tmp_path, "badpattern")

    # `down --destroy` runs the program through the engine, which registers the stack before the
    # program refuses the topology: the message counts what the engine did instead of "nothing".
    destroy = drctl(env, "estate", "down", "--destroy", "--stack", "badpattern")
    out = destroy.stdout + destroy.stderr
    print(out)
    assert destroy.returncode == 2, out
    assert "links[0].topics[0]" in out and "refused by Java's regular expressions" in out
    assert "nothing was created" not in out
    created = re.search(r"(\d+) resources? created, then refused the topology", out)
    assert created is not None or "refused the topology (nothing was destroyed)" in out, out

    # `estate up` refuses before the engine starts: exit 2, and no JVM of the stack (below) ever ran.
    up = drctl(env, "estate", "up", "--stack", "badpattern")
    assert up.returncode == 2, up.stderr
    assert "refused by Java's regular expressions" in up.stderr
    assert not jvms_under(tmp_path)
