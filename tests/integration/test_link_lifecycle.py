"""The lifecycle through `drctl` on real clusters: a link stopped and started alone, `drctl status` as a
monitoring check, a planned failover, the old link refused, and the old active cluster wiped and
declared the next standby.

One estate for the module (A and B with one broker each, C declared standby) on three free port
windows (``stack_ports``), provisioned with `drctl estate up` (Pulumi through the Automation API) and
destroyed at the end — no JVM of it is left. The tests run in order; each leaves the estate as the next expects.
"""

from __future__ import annotations

import json
import re
import subprocess

import yaml

from dr.runtime.process import pid_alive
from tests.integration.helpers import StackEnv as Env
from tests.integration.helpers import drctl as run_drctl
from tests.integration.helpers import link_copied, produce

STACK = "lifecycle"
TOPICS = ["orders", "payments"]
OUTPUTS: list[str] = []


def drctl(env: Env, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_drctl(env, *args, timeout=timeout, outputs=OUTPUTS)


def _app(env: Env, cluster: str, name: str = "orders-app"):  # noqa: ANN202 - Endpoint
    estate = env.estate()
    return estate.endpoint(cluster).with_user(name, estate.app_password(name))


def _same_ends(env: Env, a: str, b: str, timeout: float = 90) -> bool:
    estate = env.estate()
    return link_copied(estate, f"{a}-to-{b}", TOPICS, timeout)


def test_a_stopped_link_makes_status_exit_non_zero_naming_it(env: Env) -> None:
    acked, errors = produce(_app(env, "A"), "orders", [f"before-{i}" for i in range(100)])
    assert len(acked) == 100, errors[:3]
    assert _same_ends(env, "A", "B")
    ok = drctl(env, "status", "--stack", STACK)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "problems: none" in ok.stdout

    stop = drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B")
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert "link A-to-B (A → B): running → stopped" in stop.stdout
    assert not env.estate().mirror("A-to-B").alive()

    res = drctl(env, "status", "--stack", STACK, "--json")
    assert res.returncode == 4, res.stderr[-2000:]
    report = json.loads(res.stdout)  # the full status is printed first
    assert report["problems"] == ["link A-to-B (A → B) is stopped; the topology says it runs"]
    assert [(lk["name"], lk["process"]) for lk in report["links"]] == [("A-to-B", "stopped")]
    assert "stack lifecycle has 1 problem" in res.stderr and "drctl link start" in res.stderr

    again = drctl(env, "link", "stop", "--stack", STACK, "--link", "A-to-B")
    assert again.returncode == 0 and "stopped → stopped" in again.stdout, "stopping is idempotent"


def test_link_start_refuses_a_stopped_cluster_then_resumes_where_it_stopped(env: Env) -> None:
    acked, _ = produce(_app(env, "A"), "orders", [f"while-stopped-{i}" for i in range(200)])
    assert len(acked) == 200
    env.estate().local_cluster("B").stop()
    refused = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert refused.returncode == 4, refused.stderr[-2000:]
    assert "cluster B (target of link A-to-B, passive) is stopped" in refused.stderr
    assert f"drctl estate start --stack {STACK} --cluster B" in refused.stderr
    back = drctl(env, "estate", "start", "--stack", STACK, "--cluster", "B")
    assert back.returncode == 0, back.stderr[-2000:]

    start = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert start.returncode == 0, start.stderr[-3000:]
    assert "stopped → running" in start.stdout and env.estate().mirror("A-to-B").alive()
    assert _same_ends(env, "A", "B"), "the records written while the link was stopped reach B, once"
    ok = drctl(env, "status", "--stack", STACK)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]


def test_unknown_links_are_refused_naming_the_known_ones(env: Env) -> None:
    res = drctl(env, "link", "start", "--stack", STACK, "--link", "B-to-A")
    assert res.returncode == 2 and "use one of: A-to-B" in res.stderr


def test_after_a_failover_the_old_link_is_not_started_again(env: Env) -> None:
    res = drctl(env, "failover", "--stack", STACK, "--yes")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "COMPLETED" in res.stdout

    refused = drctl(env, "link", "start", "--stack", STACK, "--link", "A-to-B")
    assert refused.returncode == 6, refused.stderr[-2000:]
    assert "link A-to-B (A → B) is not started" in refused.stderr
    assert "drctl recover" in refused.stderr and "twice" in refused.stderr
    assert f"drctl estate standby --stack {STACK} --cluster A --yes" in refused.stderr
    assert env.estate().mirror("B-to-C").alive(), "the new link runs"

    refused_b = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "B", "--yes")
    assert refused_b.returncode == 6 and "cluster B is active" in refused_b.stderr


def test_the_old_active_cluster_is_wiped_and_declared_the_next_standby(env: Env) -> None:
    a = env.estate().local_cluster("A")
    assert a.state() == "stopped", "the failover's decommission step stopped A, its data kept"
    data = a.dir
    dry = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert re.search(r"^-\s+role: decommissioned\n\+\s+role: standby$", dry.stdout, re.M), dry.stdout[:3000]
    assert f"data that would be removed: {data}" in dry.stdout, dry.stdout[:3000]
    assert data.exists(), "the dry run changes nothing"

    res = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--yes", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert (out["cluster"], out["old_role"], out["new_role"]) == ("A", "decommissioned", "standby")
    assert out["data_removed"] == str(data) and out["removed_by"] == "pulumi up"
    assert a.state() == "absent" and not data.exists() and not a.running_nodes()
    assert not [pid for pid in out["stopped_pids"] if pid_alive(pid)]
    doc = yaml.safe_load(env.stack_file.read_text())
    roles = {c["name"]: c["role"] for c in doc["config"]["kafka-dr:clusters"]}
    assert roles == {"A": "standby", "B": "active", "C": "passive"}

    preview = drctl(env, "estate", "preview", "--stack", STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-2000:]
    status = drctl(env, "status", "--stack", STACK, "--json")
    assert status.returncode == 0, status.stdout[-2000:] + status.stderr[-2000:]
    assert json.loads(status.stdout)["problems"] == []

    again = drctl(env, "estate", "standby", "--stack", STACK, "--cluster", "A", "--yes")
    assert again.returncode == 0, "running it again changes nothing"
    plan = drctl(env, "failover", "--stack", STACK, "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr[-2000:]
    p = json.loads(plan.stdout)
    assert (p["source"], p["target"], p["standby"]) == ("B", "C", "A"), "the next failover is B→C→A"


def test_no_password_was_printed(env: Env) -> None:
    estate = env.estate()
    secrets = [estate.credentials.password(u) for u in estate.credentials.users()]
    assert secrets and OUTPUTS
    assert not [s for s in secrets for out in OUTPUTS if s in out]
