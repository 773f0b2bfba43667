"""False failovers with the machine loaded (issue 43): a healthy local estate in mode automatic, watched for
``--minutes`` by what a team runs — a controller beside A, one beside B, a third site's observer, on an etcd
witness (:class:`dr.failover.drill.unattended.Sites`, the automatic drill's) — while ``--burners`` busy loops
and the application on its published file (``--rate`` records/s on A) load the machine. Nothing is ever
lost, so every automatic failover is a false one.

    .venv/bin/python -m benchmarks.false_failover_bench [--minutes 60] [--burners 2] [--detect-after 30]

Counted from the controllers' own JSON-line logs and the application's own ledger: automatic failovers
started (target 0), ``cluster-down`` verdicts about A (false detections: each alone is harmless — two
observers must agree, and A's controller must lose its lease), A's lease lost and self-fences, and the
application's writes refused or left unanswered (beside those acknowledged, the baseline). Printed as counts
and per hour.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import yaml

STACK = "falsebench"


def _burn(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x = (x * 31 + 7) % 1_000_003


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--burners", type=int, default=2, help="busy-loop processes loading the machine")
    parser.add_argument("--rate", type=int, default=200, help="the application's records per second on A")
    parser.add_argument("--detect-after", type=float, default=30.0, help="the policy's detectAfterS")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    import tempfile

    from dr.base.stackref import StackRef
    from dr.estate.estate import Estate
    from dr.failover.drill.traffic import start_traffic
    from dr.failover.drill.unattended import Sites, drill_policy
    from dr.topology import load_stack_file
    from tests.integration.helpers import StackEnv, provisioned, write_local_stack
    from tests.integration.ports import windows

    with tempfile.TemporaryDirectory(prefix="kdr-false-bench-") as tmp, windows(3) as ports:
        root = Path(tmp)
        path = write_local_stack(root, STACK, ports, one_broker=("A", "B", "C"))
        doc = yaml.safe_load(path.read_text())
        doc["config"]["kafka-dr:failoverPolicy"] = {"detectAfterS": args.detect_after}
        doc["config"]["kafka-dr:failoverPolicy"] = drill_policy(doc["config"])
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        with provisioned(StackEnv(root, STACK)):
            ref = StackRef.resolve(STACK)
            topology = load_stack_file(ref.stack_file)
            estate = Estate(topology, ref.state_dir)
            sites = Sites(ref, topology, root / "bench", print)
            burners: list[multiprocessing.Process] = []
            try:
                sites.start()
                sites.wait_holding(estate.local_cluster("A"))
                traffic = start_traffic(estate, ref.state_dir, args.rate, "false-bench")
                stop_at = time.time() + args.minutes * 60
                burners = [multiprocessing.Process(target=_burn, args=(stop_at,)) for _ in range(args.burners)]
                for b in burners:
                    b.start()
                print(
                    f"watching for {args.minutes:g} min with {args.burners} burners and {args.rate} records/s",
                    flush=True,
                )
                while time.time() < stop_at:
                    time.sleep(10)
                traffic.stop()
                figures = _figures(sites, traffic, args.minutes)
                print(json.dumps(figures, indent=2), flush=True)  # before the teardown, which may fail
                if args.json:
                    args.json.write_text(json.dumps(figures, indent=2))
            finally:
                for b in burners:
                    b.terminate()
                    b.join()
                sites.stop()


def _figures(sites: Any, traffic: Any, minutes: float) -> dict[str, Any]:  # noqa: ANN401 - Sites, Traffic
    a, b, observer = sites.active, sites.passive, sites.observer
    events = {key: sites.events(key) for key in (a, b, observer)}

    def count(key: str, *names: str, cluster: str | None = None) -> int:
        return sum(
            1 for e in events[key] if e.get("event") in names and (cluster is None or e.get("cluster") == cluster)
        )

    hours = minutes / 60
    counts = {
        "automatic failovers started (false)": count(b, "automatic-failover-started"),
        f"'{a} down' verdicts by {b}'s controller": count(b, "cluster-down", cluster=a),
        f"'{a} down' verdicts by the observer": count(observer, "cluster-down", cluster=a),
        f"{a}'s lease lost": count(a, "lease-lost"),
        f"{a} self-fenced": count(a, "self-fenced"),
        "application writes acknowledged": len(traffic.producer.acked),
        "application writes refused or unanswered": len(traffic.producer.failed),
    }
    return {
        "minutes": minutes,
        "counts": counts,
        "per_hour": {k: round(v / hours, 2) for k, v in counts.items()},
        "log_lines": {key: len(v) for key, v in events.items()},
    }


if __name__ == "__main__":
    main()
