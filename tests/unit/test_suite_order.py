"""The suite starts its longest modules first and keeps each module's tests together, in their order."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import MODULE_SECONDS, heaviest_first


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_modules_go_longest_first_unknown_ones_last_by_path_tests_kept_in_order() -> None:
    items = _items("t/a.py::x", "t/b.py::x", "t/a.py::y", "t/c.py::x", "t/d.py::x", "t/b.py::y")
    ordered = heaviest_first(items, {"t/b.py": 300.0, "t/c.py": 20.0})
    assert [i.nodeid for i in ordered] == ["t/b.py::x", "t/b.py::y", "t/c.py::x", "t/a.py::x", "t/a.py::y", "t/d.py::x"]


def test_the_committed_figures_name_modules_that_exist() -> None:
    seconds = json.loads(MODULE_SECONDS.read_text())
    root = MODULE_SECONDS.parent.parent
    gone = [m for m in seconds if not (root / m).is_file()]
    assert not gone, f"tests/module_seconds.json names modules that no longer exist: {gone}"
    assert all(isinstance(v, int | float) and v >= 0 for v in seconds.values())


def test_the_refresh_script_sums_a_junit_report_by_module(tmp_path: Path) -> None:
    import runpy

    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.integration.test_x" name="a" time="10.4"/>'
        '<testcase classname="tests.integration.test_x" name="b" time="5"/>'
        '<testcase classname="tests.unit.test_y.TestZ" name="c" time="1"/>'
        "</testsuite></testsuites>"
    )
    script = runpy.run_path(str(MODULE_SECONDS.parent.parent / "scripts" / "module_seconds.py"))
    assert script["module_seconds"](str(junit)) == {"tests/integration/test_x.py": 15, "tests/unit/test_y.py": 1}


def test_make_test_keeps_the_suites_order() -> None:
    """xdist's loadfile reorders modules by their number of tests unless told not to: a one-test ten-minute
    module then starts last (seen: the drill cycles starting 40 minutes into the run)."""
    makefile = (MODULE_SECONDS.parent.parent / "Makefile").read_text()
    test_line = next(line for line in makefile.splitlines() if "--dist loadfile" in line)
    assert "--no-loadscope-reorder" in test_line
