"""The unplanned game day with nobody at the keyboard, ``drctl drill --unplanned --automatic``: site A is lost
mid-traffic (its brokers and its controller SIGKILLed at one instant), the controller beside B — agreeing with
a third site's observer, on the drill's own etcd witness — runs the failover, which completes without A; once
A is back the verification lists exactly the records that never reached B; recovery replays them; nothing
acknowledged is lost in the end. (The drill without ``--automatic`` runs the same ``drctl failover --mode
unplanned`` itself instead of waiting for the controller: the same pipeline, proven here once.)

The detection is no earlier than the policy's ``detect_after_s``, and the application's first write on B
comes after the controller started the failover; A acknowledged nothing after B's promotion — counted from
the application's own ledger. The figures are printed; the one-minute aim is the drill's grade, not this test's.

The stack has a client endpoint (``Pulumi.local-endpoint.yaml``'s, HAProxy in front of the active cluster): the
drill's unmodified producer on it is never restarted, so after the promote step switches the endpoint it delivers
to B the records it created while A was gone — stamped before the verification's cut-off. B's end offsets taken
just before the promotion granted writes bound the verification (issue 43): a record beyond them that matches
none of A's was written after the promotion and is counted after the cut-off, not unexpected (the copies recovery
writes there still match) — the integrity step's verdict is clean, and the endpoint's unattended RTO is measured.

The same run is the estate's secret scan (issue 32): every process's command line is sampled five
times a second while the drill provisions A and B, fails over and builds C; then every file of the
drill's directory and every topic of every running cluster is searched for every generated password.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.failover.drill.frame import current_topology, teardown
from dr.topology import load_stack_file
from tests.integration.drill_runner import assert_drill_text, assert_graded, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack
from tests.integration.secret_scan import CommandLines, files_holding, open_to_others, topics_holding

STACK = "gameday"
POLICY = {"mode": "manual", "detectAfterS": 15, "leaseTtlS": 4, "marginS": 1, "maxRpoRecords": 100_000}
"""The stack's declared policy: the drill runs its copy in mode automatic with these figures."""


@pytest.mark.timeout(1500)  # above the 1200 s its command may take
def test_unplanned_drill_completes_without_a_and_loses_nothing_after_recovery(
    tmp_path: Path, stack_ports: tuple[int, int, int], port_window: int
) -> None:
    path = write_local_stack(tmp_path, STACK, stack_ports, example="Pulumi.local-endpoint.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["config"]["kafka-dr:failoverPolicy"] = POLICY
    # the endpoint on a window of its own: bootstrap, then one port per broker slot (A cut to one broker)
    doc["config"]["kafka-dr:endpoint"] = {
        "address": "127.0.0.1",
        "bootstrapPort": port_window,
        "brokerPorts": [port_window + 1],
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "drill"
    # --keep: the clusters stay up for the secret scan below, then go the way the drill's own teardown takes
    with CommandLines() as command_lines:
        res = drctl_drill(
            tmp_path, STACK, out, "--unplanned", "--automatic", "--warmup", "4", "--rate", "100", "--keep", timeout=1200
        )
    try:
        assert res.returncode == 0, res.stderr[-5000:]
        r = drill_json(out)
        u = r["unattended"]
        print(
            f"\nunattended: detection {u['detection_s']}s (detect_after_s {u['detect_after_s']}), promotion "
            f"{u['promotion_s']}s, first write on B {u['unattended_rto_s']}s after the loss; by {u['acted_by']}"
        )
        assert u["detect_after_s"] == POLICY["detectAfterS"]
        assert u["acted_by"].startswith("controller drill-B"), u
        assert u["fencing_token"], "the failover carried the lease's revision"
        assert u["detection_s"] >= POLICY["detectAfterS"], "a controller acted before A was down for detect_after_s"
        assert u["promotion_s"] >= u["detection_s"] and u["unattended_rto_s"] >= u["detection_s"], u
        assert u["writes_on_source_after_promotion"] == 0
        # the unmodified producer on the endpoint, never restarted: its first write through B is measured
        assert u["endpoint_unattended_rto_s"] is not None and u["endpoint_unattended_rto_s"] >= u["detection_s"], u
        assert r["endpoint_clients"]["acknowledged_lost"] == 0, r["endpoint_clients"]
        assert "unattended: site A lost" in res.stdout
        assert not _controllers_left(out), "the drill left a controller or its witness running"
        assert_drill_text(res.stdout, r)
        f = r["failover"]
        print(
            f"\nunplanned drill: RTO {f['rto_s']}s, A→B→C {f['a_b_c_s']}s, total {f['total_s']}s; "
            f"RPO estimate {r['rpo']['estimate']}–{r['rpo']['estimate_upper_bound']}, "
            f"never replicated {r['rpo']['actual_never_replicated']}, "
            f"acknowledged lost before recovery {r['lost_before_recovery']}; consumer {r['consumer']}; "
            + ", ".join(f"{st['name']} {st['seconds']}s" for st in f["steps"])
        )
        print(
            "application RTO: "
            + "; ".join(f"{a['application']} {a['kind']} {a['rto_s']}s ({a['measured']})" for a in r["application_rto"])
        )
        assert_graded(r["checks"])
        rto = {a["kind"]: a for a in r["application_rto"]}
        assert set(rto) == {"writes", "reads"}
        for a in rto.values():  # measured on the applications' own traffic, in the right order
            assert a["rto_s"] is not None and a["last_on_source"] < a["first_on_target"], a
        assert r["producer"]["moved_at"], "the producer moved by itself when B's configuration was published"
        # run 1 completes without A; run 2 (A back) verifies; a run 3 follows the recovery only when
        # some records never reached B (MM2 may have copied everything before the kill)
        assert f["mode"] == "unplanned" and f["status"] == "completed"
        assert f["runs"] == (3 if r["never_reached_target"] else 2)
        assert f["steps"][0]["summary"].count("A UNREACHABLE") == 1
        assert r["rpo"]["estimate"] is not None, "the RPO estimate was printed from A's last snapshot"
        assert r["verification_exact"] is True
        assert (r.get("recovery") or {}).get("written", 0) == r["never_reached_target"]
        assert r["lost_after_recovery"] == 0
        assert r["consumer"]["skipped"] == 0 and r["consumer"]["read_on_target"] > 0
        assert r["producer"]["acked_on_target"] > 0
        # the verification of run 2 lists what never reached B; after the recovery run 3 verifies clean
        assert [v["clean"] for v in r["verdicts"]] == ([False, True] if r["never_reached_target"] else [True])
        # nothing on B counted unexpected: the endpoint producer's late deliveries lie beyond B's bound (issue 43),
        # counted after the cut-off. How many there were depends on librdkafka and the timing (records it created
        # while A was gone and did not expire before the switch): printed, not asserted.
        set_apart = [line for line in res.stderr.splitlines() if "beyond the target's bound" in line]
        print("late deliveries set apart by the verifications: " + (" | ".join(set_apart) or "none"))
        assert all(v["counts"]["unexpected"] == 0 for v in r["verdicts"]), r["verdicts"]
        integrity = next(st for st in f["steps"] if st["name"] == "integrity")
        assert integrity["status"] == "done" and "verdict CLEAN" in integrity["summary"], integrity
        assert Path(r["report_html"]).is_file()
        assert (out / "drill.json").is_file()
        ran_without_a = "".join(p.read_text() for p in (out / "state" / "controller").glob("failover-*.log"))
        assert "RPO estimate" in ran_without_a, "the preflight of the run without A printed its RPO estimate"
        _assert_no_secret_readable(out, command_lines)
    finally:
        _teardown(tmp_path, out)
        assert not jvms_under(out), "the drill left JVMs running"


# The files meant to hold a secret (each must be 0600, under a directory closed to other users), relative
# to the drill's output directory: the estate's generated passwords, each broker's configuration (the
# inter-broker password), each link's replicator password (its config provider's file), the applications'
# published client configurations, and the Pulumi passphrase of the drill's backend.
SECRET_HOLDERS = (
    "state/credentials.json",
    "state/clusters/*/node-*/server.properties",
    "state/links/*/secrets/replicator.properties",
    "state/clients/*.properties",
    "state/clients/*.json",
    "passphrase",
)


def _assert_no_secret_readable(out: Path, command_lines: CommandLines) -> None:
    """No generated password (or the stack's passphrase) on any command line sampled during estate up, the
    failover and the drill, in any file of the drill's directory but :data:`SECRET_HOLDERS` (0600), or in
    any record of any topic of any running cluster (issue 32)."""
    generated = json.loads((out / "state" / "credentials.json").read_text())
    secrets = {f"password of {user}": pw for user, pw in generated.items()}
    if (out / "passphrase").exists():  # generated unless the caller's environment names one
        secrets["Pulumi passphrase"] = (out / "passphrase").read_text().strip()
    assert len(secrets) >= 6 and command_lines.samples > 100, (sorted(secrets), command_lines.samples)
    holders = files_holding(out, secrets)
    allowed = {p for pattern in SECRET_HOLDERS for p in out.glob(pattern)}
    topology = load_stack_file(out / "stack" / f"Pulumi.{STACK}.yaml")
    estate = Estate(topology, out / "state")
    running = [c.name for c in topology.clusters if c.is_local and estate.local_cluster(c.name).is_running()]
    assert len(running) >= 2, running
    found = {
        "command lines": command_lines.holding(secrets),
        "files": {str(p.relative_to(out)): names for p, names in holders.items() if p not in allowed},
        "modes": open_to_others(out, holders),
        # every topic, internal ones (mm2-*, __consumer_offsets, ...) and the applications' alike
        "topics": {c: t for c in running if (t := topics_holding(estate.endpoint(c), secrets))},
    }
    print(
        f"\nsecret scan: {len(secrets)} secrets; {command_lines.samples} samples of every command line "
        f"({len(command_lines.seen)} distinct); {len(holders)} files hold one, all 0600 holders: "
        f"{sorted(str(p.relative_to(out)) for p in holders)}; topics of {running} read"
    )
    assert not any(found.values()), found


def _controllers_left(out: Path) -> list[str]:
    """The drill's controllers and etcd witness still running: their command lines name the stack or ``out``."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [
        line
        for line in ps.splitlines()
        if f"controller --stack {STACK} " in line or ("etcd" in line and str(out) in line)
    ]


def _teardown(stack_dir: Path, out: Path) -> None:
    """What the drill does at its end without --keep: ``pulumi destroy`` of its copy of the stack."""
    copy = out / "stack" / f"Pulumi.{STACK}.yaml"
    if copy.exists():
        original = load_stack_file(stack_dir / f"Pulumi.{STACK}.yaml")
        teardown(StackRef.of_file(copy, out / "state"), (original, *current_topology(copy)), print)
