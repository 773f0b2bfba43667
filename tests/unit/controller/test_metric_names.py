"""The alert rules, their promtool tests, the Grafana dashboard and the runbook name only metrics the controller
serves (:class:`dr.controller.metrics.ControllerMetrics`) — so none of them drifts from the code — and the
dashboard shows every one of them."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from dr.controller.metrics import ControllerMetrics
from tests import REPO_ROOT

RULES = REPO_ROOT / "ops" / "prometheus" / "kdr-rules.yml"
RULE_TESTS = REPO_ROOT / "ops" / "prometheus" / "kdr-rules.test.yml"
DASHBOARD = REPO_ROOT / "ops" / "grafana" / "kdr-dashboard.json"
RUNBOOK = REPO_ROOT / "runbooks" / "controller.md"

_NAME = re.compile(r"\bkdr[_:][a-zA-Z0-9_:]*")


def _served() -> set[str]:
    """The sample names a controller serves: a counter's with ``_total``."""
    families = ControllerMetrics("s", "A", "manual").registry.collect()
    return {f"{f.name}_total" if f.type == "counter" else f.name for f in families}


def _recorded() -> set[str]:
    return {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r}


def _exprs(node: Any) -> list[str]:
    """Every ``expr`` and ``query`` string in a parsed JSON/YAML document."""
    if isinstance(node, dict):
        return [
            v for k, v in node.items() if k in ("expr", "query") and isinstance(v, str)
        ] + [e for v in node.values() for e in _exprs(v)]  # fmt: skip
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def _names(texts: list[str]) -> set[str]:
    return {m for t in texts for m in _NAME.findall(t)}


def test_every_metric_the_rules_and_their_tests_use_is_served_or_recorded() -> None:
    known = _served() | _recorded()
    rules = _names(_exprs(yaml.safe_load(RULES.read_text())))
    series = _names(
        [t["series"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for t in test["input_series"]]
    )
    assert rules and series
    assert rules <= known, rules - known
    assert series <= known, series - known
    assert {"kdr_automatic_failovers_total", "kdr_self_fence_total", "kdr_ready"} <= rules


def test_the_dashboard_uses_only_served_metrics_and_shows_them_all() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used = _names(_exprs(dashboard))
    served = _served()
    assert used - _recorded() <= served, used - _recorded() - served
    assert served <= used, served - used
    for panel in dashboard["panels"]:
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_the_runbook_lists_every_metric_the_controller_serves() -> None:
    listed = _names(re.findall(r"^\| `(kdr_[a-z_]+)", RUNBOOK.read_text(), re.MULTILINE))
    assert _served() <= listed, _served() - listed
    assert listed <= _served(), listed - _served()
