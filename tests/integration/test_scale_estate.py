"""An estate of real size through the whole failover: 200 topics (3 partitions) and 40 applications.

``drctl drill`` (planned, one cycle) on the estate ``benchmarks/scale_estate.py`` generates — the one
the benchmark measures: ``pulumi up`` from nothing, traffic, a planned failover A→B→C, the preview after
it, the acknowledged records against what B holds, ``pulumi destroy``. 39 applications own their topics
by prefix (``produces_prefix``/``consumes_prefix``); the last lists them by name as stack files always
did — both shapes in one estate. Each cluster's topics and ACLs are provisioned batched
(``kafka-dr:provisioning: batched``: one topic set and one ACL set per cluster, :mod:`stacks.kafka_sets`);
the engine runs 32 operations at once (``KDR_PULUMI_PARALLEL``, as the benchmark's fastest runs).
Correctness only: the timings are benchmarks/scale_bench.py's (docs/scale.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks.scale_estate import generate
from tests.integration.drill_runner import assert_graded, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack

STACK = "scale"
TOPICS, APPLICATIONS, NAMED = 200, 40, 1


def _scale_stack(root: Path, ports: tuple[int, int, int]) -> Path:
    path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
    doc = yaml.safe_load(path.read_text())
    generate(doc["config"], TOPICS, named=NAMED)
    doc["config"]["kafka-dr:provisioning"] = "batched"
    assert len(doc["config"]["kafka-dr:principals"]["applications"]) == APPLICATIONS
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.timeout(2100)  # above the 1800 s its command may take: the inner timeout kills its tree first
def test_200_topics_40_applications_fail_over_clean(
    tmp_path: Path, stack_ports: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _scale_stack(tmp_path, stack_ports)
    monkeypatch.setenv("KDR_PULUMI_PARALLEL", "32")
    out = tmp_path / "drill"
    res = drctl_drill(tmp_path, STACK, out, "--warmup", "4", "--rate", "100", timeout=1800)
    try:
        r = drill_json(out)
        assert r.get("cycles"), f"the drill did not run a failover:\n{res.stderr[-5000:]}"
        c = r["cycles"][0]
        f = c["failover"]
        print(
            f"\n200 topics / 40 apps: up {(r.get('provision_s') or {}).get('pulumi up')}s; "
            f"A→B→C {f.get('a_b_c_s')}s; "
            + "; ".join(f"{s['name']} {s['seconds']}s" for s in f["steps"])
            + "; "
            + "; ".join(f"{a['application']} {a['kind']} RTO {a['rto_s']}s" for a in c["application_rto"])
        )
        assert c["chain"] == "A→B→C"
        assert_graded(c["checks"])
        assert f["status"] == "completed", [(s["name"], s["status"]) for s in f["steps"]]
        assert not c["preview_after_failover"], (
            f"preview after the failover is not clean: {c['preview_after_failover']}"
        )
        assert c["producer"]["acked_on_source"] > 0 and c["producer"]["acked_on_target"] > 0
        assert c["lost_before_recovery"] == 0 and c["lost_after_recovery"] == 0, "acknowledged records were lost"
        assert [v["clean"] for v in c["verdicts"]] == [True], "planned: the verification is clean at once"
        assert c["consumer"]["skipped"] == 0 and c["consumer"]["read_on_target"] > 0
        groups = {g["group"]: g["status"] for g in f["consumer_groups"]}
        assert len(groups) == APPLICATIONS, f"the consumer-groups step reported {len(groups)} of {APPLICATIONS} groups"
        assert all(status != "partial" for status in groups.values()), groups
    finally:
        assert not jvms_under(out), "the drill left JVMs running"
    assert "`pulumi destroy` failed" not in res.stdout + res.stderr, (
        "the drill's destroy failed:\n" + res.stdout[-3000:]
    )
    stack = (out / "stack" / f"Pulumi.{STACK}.yaml").read_text()
    assert "produces_prefix: d000." in stack and "produces:" in stack, "the failover rewrote the applications"
    assert "kafka-dr:provisioning: batched" in stack, "the failover dropped the provisioning"
