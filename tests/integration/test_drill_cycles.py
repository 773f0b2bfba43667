"""The DR lifecycle twice in a row, over TLS: ``drctl drill --cycles 2`` fails A→B→C, rebuilds A (wiped) as
the standby, fails B→C→A onto the rebuilt A — each failover graded and each ending clean (a third cycle,
C→A→B, would prove nothing the second does not: a failover onto a standby rebuilt by the drill), though each cycle's replicator is SIGKILLed mid-copy (``--kill-replicator``: the link is exactly-once by
default, so it leaves no record twice on the passive). Every cluster serves SASL_SSL with a certificate of the estate's own CA (``local_tls``), so every
client of the product — the Kafka provider, drctl, MirrorMaker 2, the Spark verification and the
applications on their published files — verifies it against that CA only (the plaintext drill is
``make demo``'s, tests/integration/test_make_demo.py).

Each cycle's applications follow the client configuration the failover publishes; their RTO is
measured on their own traffic (the figures are printed; the ≤ 10 s aim is the drill's grade and
the benchmarks', not this test's: it asserts that they are measured and ordered right).

The drill keeps its estate (``--keep``), and on it, as an operator's stack, the local TLS estate is checked
as an operator drives it (formerly test_tls_estate.py, with an estate and a planned failover of its own): the
brokers speak TLS signed by the estate's CA, the published files carry that CA and let the application write
over TLS on the active cluster, ``drctl status`` is clean with the link running, the passive cluster is fed
over TLS, and a client given the wrong CA is told the cluster, the endpoint and "certificate verify failed".
(That ``pulumi preview`` proposes nothing after each failover is the drill's own graded check, asserted per
cycle.) Then the estate is torn down as the drill would have.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from dr.runtime.certificates import make_ca
from tests.integration.drill_runner import (
    assert_drill_text,
    assert_graded,
    drctl_drill,
    drill_json,
    kept_stack_env,
    teardown_kept,
)
from tests.integration.helpers import StackEnv, drctl, jvms_under, link_copied, write_local_stack

STACK = "cycles"


@pytest.mark.timeout(2400)  # above the 1800 s its command may take, the checks on the kept estate and its teardown
def test_two_cycles_each_graded_and_clean(tmp_path: Path, stack_ports: tuple[int, int, int]) -> None:
    write_local_stack(tmp_path, STACK, stack_ports, one_broker=("A", "B", "C"), local_tls=True)
    out = tmp_path / "drill"
    res = drctl_drill(
        tmp_path, STACK, out, "--cycles", "2", "--warmup", "1", "--rate", "100", "--kill-replicator", "--keep",
        timeout=1800,
    )  # fmt: skip
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
        assert [c["chain"] for c in cycles] == ["A→B→C", "B→C→A"], res.stderr[-5000:]
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
        # the old active was rebuilt, wiped, as the next standby after cycle 1 (the last cycle leaves it lost)
        assert [(c.get("standby_rebuild") or {}).get("cluster") for c in cycles] == ["A", None]
        assert res.returncode == 0, res.stderr[-3000:]
        kept = StackEnv(out / "stack", STACK)
        kept.update(kept_stack_env(out, STACK))
        with pytest.MonkeyPatch.context() as mp:
            for k, v in kept.items():
                mp.setenv(k, v)
            _tls_estate_as_an_operator_drives_it(kept, out, cycles[-1])
    finally:
        teardown_kept(tmp_path, out, STACK)
        assert not jvms_under(out), "the drill's estate left JVMs running"


def _write_through_published_file(env: StackEnv, app: str, count: int, tag: str) -> int:
    conf = json.loads((env.state / "clients" / f"{app}.json").read_text())
    conf.pop("group.id", None)
    errors: list[object] = []
    producer = Producer(conf)
    for i in range(count):
        producer.produce(
            "orders", key=f"{tag}-{i}".encode(), value=b"x", on_delivery=lambda e, _m: e and errors.append(e)
        )
    assert producer.flush(30) == 0 and not errors, errors[:3]
    return count


def _tls_estate_as_an_operator_drives_it(env: StackEnv, out: Path, last: dict[str, Any]) -> None:
    """On the estate the drill kept after its last cycle (``last``: source → target → standby, the target now
    active and fed to the standby, the new passive): the local TLS estate's operator checks."""
    active, passive = last["target"], last["chain"].split("→")[2]
    ca = out / "state" / "tls" / "local-ca.pem"  # the drill's own path: what the published files name
    estate = env.estate()
    assert estate.topology.active().name == active
    node = estate.local_cluster(active)
    context = ssl.create_default_context(cafile=str(ca))  # with a cafile: that CA only, no system roots
    raw = socket.create_connection(("127.0.0.1", node.spec.client_port(1)), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    # the last failover rewrote the published file for the new active: the application writes there, over TLS
    published = json.loads((env.state / "clients" / "orders-app.json").read_text())
    assert published["security.protocol"] == "SASL_SSL" and published["ssl.ca.location"] == str(ca)
    assert published["bootstrap.servers"].endswith(str(node.spec.client_port(1))), published["bootstrap.servers"]
    props = (env.state / "clients" / "orders-app.properties").read_text()
    assert "ssl.truststore.type=PEM" in props and f"ssl.truststore.location={ca}" in props
    assert _write_through_published_file(env, "orders-app", 50, "after-the-drill") == 50

    link = f"{active}-to-{passive}"
    res = drctl(env, "status", "--stack", STACK)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"link    {link}       running" in res.stdout, res.stdout[-2000:]
    assert estate.endpoint(passive).security_protocol == "SASL_SSL"
    assert link_copied(estate, link, ["orders"], 120), f"{passive} did not receive {active}'s records over TLS"
    # (no `estate preview` here: that the preview after each failover proposes nothing is the drill's graded check,
    # preview_after_failover, asserted above per cycle; seen through kept_stack_env's symlinked state directory,
    # every link's state_dir input would differ by its path alone)

    # a client given the wrong CA: the error names the cluster, the endpoint and the TLS cause
    kept = out / "ca-kept.pem"
    shutil.copy(ca, kept)
    try:
        ca.write_bytes(make_ca("an impostor CA").certificate_pem)
        res = drctl(env, "status", "--stack", STACK)
    finally:
        shutil.copy(kept, ca)
    a = node.bootstrap
    assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"cluster '{active}' ({a}): TLS to the brokers failed" in res.stderr, res.stderr[-3000:]
    assert "certificate verify failed" in res.stderr
    assert f"{active}'s brokers answer but TLS fails" in res.stderr and "Broker transport failure" not in res.stderr
    assert drctl(env, "status", "--stack", STACK).returncode == 0  # the right CA back: clean again
