"""The drill on the local TLS estate (issue 30): ``drctl drill`` on ``Pulumi.local-tls.yaml`` — SASL_SSL
listeners signed by the estate's own CA, every client verifying them — runs one graded planned game day
A→B→C from nothing: the applications on their published (TLS) client files move to B, nothing is lost,
the Spark verification over TLS is clean and C catches up with B.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.drill_runner import assert_drill_text, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack

STACK = "tlsdrill"
RTO_AIM = "application RTO"


def test_the_drill_on_the_local_tls_estate_is_graded_and_clean(
    tmp_path: Path, stack_ports: tuple[int, int, int]
) -> None:
    write_local_stack(tmp_path, STACK, stack_ports, one_broker=("A", "B", "C"), example="Pulumi.local-tls.yaml")
    out = tmp_path / "drill"
    res = drctl_drill(tmp_path, STACK, out, "--warmup", "4", "--rate", "300", timeout=900)
    try:
        r = drill_json(out)
        (c,) = r.get("cycles") or [None]
        assert c is not None, res.stdout[-3000:] + res.stderr[-5000:]
        print(
            f"\nlocal-tls drill: {c.get('grade')}; "
            + "; ".join(f"{a['application']} {a['kind']} RTO {a['rto_s']}s" for a in c.get("application_rto", []))
            + f"; {c['chain']} {(c.get('failover') or {}).get('a_b_c_s')}s"
        )
        assert c["chain"] == "A→B→C"
        assert_drill_text(res.stdout, r)
        failed = [k["check"] for k in c["checks"] if k["result"] == "FAIL" and not k["check"].startswith(RTO_AIM)]
        assert not failed, failed
        assert c["failover"]["status"] == "completed"
        assert [v["clean"] for v in c["verdicts"]] == [True]
        assert c["lost_before_recovery"] == 0 and c["lost_after_recovery"] == 0
        assert c["consumer"]["skipped"] == 0 and c["consumer"]["read_on_target"] > 0
        # the applications moved on their published files, which speak TLS to B with the estate's CA only
        published = sorted((out / "state").rglob("clients/*.properties"))
        assert published, "the drill published no client file"
        for path in published:
            text = path.read_text()
            assert "security.protocol=SASL_SSL" in text and "ssl.truststore" in text, (path, text)
        assert res.returncode == 0 or any(
            k["result"] != "PASS" for k in c["checks"] if k["check"].startswith(RTO_AIM)
        ), res.stderr[-3000:]
    finally:
        assert not jvms_under(out), "the drill left JVMs running"
