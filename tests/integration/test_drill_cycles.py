"""The whole DR lifecycle three times, over TLS: ``drctl drill --cycles 3`` fails A→B→C, rebuilds A
(wiped) as the standby, fails B→C→A, rebuilds B, fails C→A→B — each failover graded and each ending
clean, though each cycle's replicator is SIGKILLed mid-copy (``--kill-replicator``: the link is exactly-once by
default, so it leaves no record twice on the passive). Every cluster serves SASL_SSL with a certificate of the estate's own CA (``local_tls``), so every
client of the product — the Kafka provider, drctl, MirrorMaker 2, the Spark verification and the
applications on their published files — verifies it against that CA only (the plaintext drill is
``make demo``'s, tests/integration/test_make_demo.py).

Each cycle's applications follow the client configuration the failover publishes; their RTO is
measured on their own traffic (the figures are printed; the ≤ 10 s aim is the drill's grade and
the benchmarks', not this test's: it asserts that they are measured and ordered right).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.drill_runner import assert_drill_text, assert_graded, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack

STACK = "cycles"


@pytest.mark.timeout(2100)  # above the 1800 s its command may take: the inner timeout kills its tree first
def test_three_cycles_each_graded_and_clean(tmp_path: Path, stack_ports: tuple[int, int, int]) -> None:
    write_local_stack(tmp_path, STACK, stack_ports, one_broker=("A", "B", "C"), local_tls=True)
    out = tmp_path / "drill"
    res = drctl_drill(
        tmp_path, STACK, out, "--cycles", "3", "--warmup", "4", "--rate", "300", "--kill-replicator", timeout=1800
    )
    try:
        r = drill_json(out)
        cycles = r.get("cycles", [])
        for c in cycles:
            f = c.get("failover") or {}
            k = c.get("replicator_crash") or {}
            print(
                f"\ncycle {c['number']} {c['chain']}: {c.get('grade')}; "
                + "; ".join(f"{a['application']} {a['kind']} RTO {a['rto_s']}s" for a in c.get("application_rto", []))
                + f"; probe {f.get('rto_s')}s; {c['chain']} {f.get('a_b_c_s')}s; "
                f"rebuild {(c.get('standby_rebuild') or {}).get('seconds')}s; replicator SIGKILLed after "
                f"{k.get('acknowledged_before_kill')} acknowledged, copying again {k.get('running_again_s')}s later, "
                f"{k.get('duplicated')} twice"
            )
        assert [c["chain"] for c in cycles] == ["A→B→C", "B→C→A", "C→A→B"], res.stderr[-5000:]
        assert_drill_text(res.stdout, r)
        for c in cycles:
            assert f"cycle {c['number']}: {c['chain']} — {c['grade']}" in res.stdout
        for c in cycles:
            assert_graded(c["checks"])
            assert c["failover"]["status"] == "completed"
            assert [v["clean"] for v in c["verdicts"]] == [True], "planned: the verification is clean at once"
            crash = c["replicator_crash"]  # killed mid-copy, exactly-once by default: nothing twice, nothing missing
            assert crash["delivery"] == "exactly-once" and crash["killed"] == "MirrorMaker 2 process", crash
            assert crash["acknowledged_before_kill"] > 0 and crash["duplicated"] == 0, crash
            assert c["verdicts"][0]["counts"] == {"missing": 0, "unexpected": 0, "duplicated": 0, "corrupted": 0}
            assert c["lost_before_recovery"] == 0 and c["lost_after_recovery"] == 0
            assert c["preview_after_failover"] in ({}, None) or not c["preview_after_failover"]
            assert c["consumer"]["skipped"] == 0 and c["consumer"]["read_on_target"] > 0
            rto = {a["kind"]: a for a in c["application_rto"]}
            assert set(rto) == {"writes", "reads"}
            for a in rto.values():
                assert a["rto_s"] is not None and a["rto_s"] > 0, a
                assert a["last_on_source"] < a["first_on_target"]
            assert c["producer"]["moved_at"], "the producer moved by itself when the configuration was published"
        # the applications moved on their published files, which speak TLS with the estate's CA only
        published = sorted((out / "state").rglob("clients/*.properties"))
        assert published, "the drill published no client file"
        for path in published:
            text = path.read_text()
            assert "security.protocol=SASL_SSL" in text and "ssl.truststore" in text, (path, text)
        # the old active was rebuilt, wiped, as the next standby after cycles 1 and 2
        assert [(c.get("standby_rebuild") or {}).get("cluster") for c in cycles] == ["A", "B", None]
        assert res.returncode == 0, res.stderr[-3000:]
    finally:
        assert not jvms_under(out), "the drill left JVMs running"
