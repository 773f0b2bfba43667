"""An estate of real size through the whole failover: 200 topics (3 partitions) and 40 applications.

``drctl drill`` (planned) on that estate: ``pulumi up`` from nothing, traffic, a planned failover
A→B→C, the preview after it, the acknowledged records against what B holds, ``pulumi destroy``.
36 applications own their topics by prefix (``produces_prefix``/``consumes_prefix``); 4 list them by
name as stack files always did — both shapes in one estate. Correctness only: the timings are
benchmarks/scale_bench.py's (docs/scale.md).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.integration.drill_runner import drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack

STACK = "scale"
DOMAINS, PER_DOMAIN, NAMED = 40, 5, 4


def _scale_stack(root: Path, ports: tuple[int, int, int]) -> Path:
    path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
    doc = yaml.safe_load(path.read_text())
    cfg = doc["config"]
    cfg["kafka-dr:topics"] = [
        {"name": f"d{d:02d}.t{j}", "partitions": 3, "replication_factor": 1, "min_insync_replicas": 1}
        for d in range(DOMAINS)
        for j in range(PER_DOMAIN)
    ]
    apps = []
    for d in range(DOMAINS):
        nxt = (d + 1) % DOMAINS
        if d >= DOMAINS - NAMED:  # the old shape, unchanged
            owns = {
                "produces": [f"d{d:02d}.t{j}" for j in range(PER_DOMAIN)],
                "consumes": [f"d{nxt:02d}.t{j}" for j in range(PER_DOMAIN)],
            }
        else:
            owns = {"produces_prefix": f"d{d:02d}.", "consumes_prefix": f"d{nxt:02d}."}
        apps.append({"name": f"app{d:02d}", **owns, "consumer_group": f"app{d:02d}"})
    cfg["kafka-dr:principals"]["applications"] = apps
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_200_topics_40_applications_fail_over_clean(tmp_path: Path, stack_ports: tuple[int, int, int]) -> None:
    _scale_stack(tmp_path, stack_ports)
    out = tmp_path / "drill"
    res = drctl_drill(tmp_path, STACK, out, "--warmup", "4", "--rate", "300", timeout=2400)
    try:
        r = drill_json(out)
        assert r.get("cycles"), f"the drill did not run a failover:\n{res.stderr[-5000:]}"
        c = r["cycles"][0]
        f = c["failover"]
        print(
            f"\n200 topics / 40 apps: up {(r.get('provision_s') or {}).get('pulumi up')}s; "
            f"A→B→C {f.get('a_b_c_s')}s; "
            + "; ".join(f"{a['application']} {a['kind']} RTO {a['rto_s']}s" for a in c["application_rto"])
        )
        assert c["chain"] == "A→B→C"
        assert f["status"] == "completed", [(s["name"], s["status"]) for s in f["steps"]]
        assert not c["preview_after_failover"], (
            f"preview after the failover is not clean: {c['preview_after_failover']}"
        )
        assert c["producer"]["acked_on_source"] > 0 and c["producer"]["acked_on_target"] > 0
        assert c["lost_before_recovery"] == 0 and c["lost_after_recovery"] == 0, "acknowledged records were lost"
        assert [v["clean"] for v in c["verdicts"]] == [True], "planned: the verification is clean at once"
        assert c["consumer"]["skipped"] == 0 and c["consumer"]["read_on_target"] > 0
        groups = {g["group"]: g["status"] for g in f["consumer_groups"]}
        assert len(groups) == DOMAINS, f"the consumer-groups step reported {len(groups)} of {DOMAINS} groups"
        assert all(status != "partial" for status in groups.values()), groups
    finally:
        assert not jvms_under(out), "the drill left JVMs running"
    stack = (out / "stack" / f"Pulumi.{STACK}.yaml").read_text()
    assert "produces_prefix: d00." in stack and "produces:" in stack, "the failover rewrote the applications"
