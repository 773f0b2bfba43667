"""The unplanned game day through ``drctl drill --unplanned``: A is SIGKILLed mid-traffic, the
failover completes without it, and once A is back the verification lists exactly the records
that never reached B; recovery replays them; nothing acknowledged is lost in the end.

The same run is the estate's secret scan (issue 32): every process's command line is sampled five
times a second while the drill provisions A and B, fails over and builds C; then every file of the
drill's directory and every topic of every running cluster is searched for every generated password.
"""

from __future__ import annotations

import json
from pathlib import Path

from dr.base.stackref import StackRef
from dr.estate.estate import Estate
from dr.failover.drill.frame import current_topology, teardown
from dr.topology import load_stack_file
from tests.integration.drill_runner import assert_drill_text, assert_graded, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack
from tests.integration.secret_scan import CommandLines, files_holding, open_to_others, topics_holding

STACK = "gameday"


def test_unplanned_drill_completes_without_a_and_loses_nothing_after_recovery(
    tmp_path: Path, stack_ports: tuple[int, int, int]
) -> None:
    write_local_stack(tmp_path, STACK, stack_ports)
    out = tmp_path / "drill"
    # --keep: the clusters stay up for the secret scan below, then go the way the drill's own teardown takes
    with CommandLines() as command_lines:
        res = drctl_drill(tmp_path, STACK, out, "--unplanned", "--warmup", "4", "--keep", timeout=900)
    try:
        assert res.returncode == 0, res.stderr[-5000:]
        r = drill_json(out)
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
        assert Path(r["report_html"]).is_file()
        assert (out / "drill.json").is_file()
        assert "RPO estimate" in res.stderr, "the preflight of the run without A printed its RPO estimate"
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


def _teardown(stack_dir: Path, out: Path) -> None:
    """What the drill does at its end without --keep: ``pulumi destroy`` of its copy of the stack."""
    copy = out / "stack" / f"Pulumi.{STACK}.yaml"
    if copy.exists():
        original = load_stack_file(stack_dir / f"Pulumi.{STACK}.yaml")
        teardown(StackRef.of_file(copy, out / "state"), (original, *current_topology(copy)), print)
