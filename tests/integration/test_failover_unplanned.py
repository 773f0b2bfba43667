"""The unplanned game day through ``drctl drill --unplanned``: A is SIGKILLed mid-traffic, the
failover completes without it, and once A is back the verification lists exactly the records
that never reached B; recovery replays them; nothing acknowledged is lost in the end.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.drill_runner import assert_drill_text, drctl_drill, drill_json
from tests.integration.helpers import jvms_under, write_local_stack

STACK = "gameday"


def test_unplanned_drill_completes_without_a_and_loses_nothing_after_recovery(
    tmp_path: Path, stack_ports: tuple[int, int, int]
) -> None:
    write_local_stack(tmp_path, STACK, stack_ports)
    out = tmp_path / "drill"
    res = drctl_drill(tmp_path, STACK, out, "--unplanned", "--warmup", "4", timeout=900)
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
        # every check but the RTO aim (a figure, reported by the drill and the notes, not a timed test)
        failed = [
            c["check"] for c in r["checks"] if c["result"] == "FAIL" and not c["check"].startswith("application RTO")
        ]
        assert not failed, r["checks"]
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
    finally:
        assert not jvms_under(out), "the drill left JVMs running"
