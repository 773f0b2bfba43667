"""The alert rules of ``ops/prometheus/kdr-rules.yml``, unit-tested by Debian's ``promtool test rules`` (from the
cache: ``scripts/setup.sh prometheus``) against ``kdr-rules.test.yml`` — and a rule broken on purpose makes
those tests fail, so they hold the rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from dr.base.toolchain import prometheus
from tests import REPO_ROOT

RULES = REPO_ROOT / "ops" / "prometheus"


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(prometheus().binary("promtool")), *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    checked = _promtool("check", "rules", "kdr-rules.yml", cwd=RULES)
    assert checked.returncode == 0 and "SUCCESS: 16 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", "kdr-rules.test.yml", cwd=RULES)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_a_broken_rule_fails_its_unit_test(tmp_path: Path) -> None:
    shutil.copy(RULES / "kdr-rules.test.yml", tmp_path)
    rules = (RULES / "kdr-rules.yml").read_text()
    (tmp_path / "kdr-rules.yml").write_text(
        rules.replace('kdr_detection_state{state="down"} == 1', 'kdr_detection_state{state="suspect"} == 1')
    )
    tested = _promtool("test", "rules", "kdr-rules.test.yml", cwd=tmp_path)
    assert tested.returncode != 0
    assert "KdrClusterDown" in tested.stdout + tested.stderr
