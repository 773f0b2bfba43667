"""How the estate's cost grows with its size: N topics and N/5 applications, measured in one run
(not a test).

    .venv/bin/python benchmarks/scale_bench.py [--sizes 10,100] [--shapes named,prefix] [--json out.json]

For each size N and each shape of the same generated estate (N topics of 3 partitions in N/5 domains
``dNNN.t0..t4``; application ``appNNN`` produces its domain's 5 topics and consumes the next domain's 5,
with its own group ``appNNN``):

* ``named`` — today's format: every topic listed in ``produces``/``consumes`` (one ACL per application,
  topic and operation);
* ``prefix`` — the same estate, each application owning its domain by ``produces_prefix``/``consumes_prefix``
  (one prefixed ACL per application and operation);
* ``batched`` — ``prefix`` with ``kafka-dr:provisioning: batched``: each cluster's topics one resource and
  its ACLs one resource (:mod:`stacks.kafka_sets`), users still one each;
* ``platform`` — a platform team's estate instead (issue 46, :func:`benchmarks.scale_estate.platform_estate`):
  N/50 domains, 1 to 12 partitions per topic, N/5 applications each owning 1–4 topics and reading 2–8
  others by name, ``batched``.

A shape ending in ``+tls`` (``platform+tls``) runs the same estate with every cluster serving SASL_SSL with
a certificate of the estate's own CA (``local_tls``), so every client verifies it.

Each (N, shape) runs ``drctl drill`` in process with ``keep``: ``pulumi up`` from nothing (A with 3
brokers, B, users, topics, ACLs, MirrorMaker 2 A→B), the drill's traffic on one topic, a planned
failover A→B→C (application RTO, A→B→C, time per step); then on the failed-over estate a no-op
``preview``, a ``refresh``, a drift check (one application ACL deleted behind Pulumi's back: the
refreshing preview must see it) and ``destroy``. Peak resident memory of the engine (``pulumi``), the
Kafka provider, the dynamic-provider host and the inline program's language host (this process: with
the Automation API the program runs here) is sampled from /proc every 0.25 s, per phase.

Ports 25000-25299 (A, B, C at +0/+100/+200; tests/integration/ports.py RESERVED). Every process
started is stopped before it exits. Run it under the heavy lock.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.scale_estate import generate, generate_platform  # noqa: E402
from dr.base.stackref import StackRef  # noqa: E402
from dr.estate.estate import Estate  # noqa: E402
from dr.estate.stack import EstateStack  # noqa: E402
from dr.failover.drill.frame import DrillOptions, teardown  # noqa: E402
from dr.failover.kinds.active_passive.drill import run_drill  # noqa: E402
from dr.kafka.client import delete_acls  # noqa: E402
from dr.topology import load_stack_file  # noqa: E402

BASE = 25000
STACK = "scale"


# ---------------------------------------------------------------------------------- the estate
def estate_doc(n: int, shape: str, base: int = BASE) -> dict[str, Any]:
    """The generated stack file (:mod:`benchmarks.scale_estate`): the local stack's clusters and link,
    N topics, N/5 applications, every one of them named (``named``) or prefix-owning (``prefix``,
    ``batched``; ``batched`` also provisions topics and ACLs as one set per cluster), or the platform
    team's estate (``platform``); ``+tls``: every cluster serving SASL_SSL."""
    doc = yaml.safe_load((REPO_ROOT / "Pulumi.local.yaml").read_text())
    cfg = doc["config"]
    for i, c in enumerate(cfg["kafka-dr:clusters"]):
        c["base_port"] = base + 100 * i
    shape, tls, _ = shape.partition("+tls")
    if shape == "platform":
        generate_platform(cfg, n)
    else:
        generate(cfg, n, named=n if shape == "named" else 0)
    if shape == "batched":
        cfg["kafka-dr:provisioning"] = "batched"
    for c in cfg["kafka-dr:clusters"]:
        if tls:
            c["local_tls"] = True
    return doc


# ---------------------------------------------------------------------------------- memory
_KINDS = {  # the first of these found in a process's command line names its kind
    "pulumi-resource-kafka": "kafka provider",
    "pulumi-resource-pulumi-python": "dynamic providers",
    "pulumi-language-python": "language host",
}


def _children() -> dict[int, int]:
    """pid -> parent pid of every process on the machine (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return parents


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _kind(pid: int) -> str | None:
    """Which Pulumi part a process is, from its command line (``comm`` is cut at 15 characters)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    line = " ".join(argv)
    found = next((kind for name, kind in _KINDS.items() if name in line), None)
    return found or ("engine" if Path(argv[0]).name == "pulumi" else None)


class MemorySampler(threading.Thread):
    """Peak RSS (MB) per kind of Pulumi process below this one, per phase (summed over processes of a kind)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.phase = "idle"
        self.peaks: dict[str, dict[str, float]] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._halt.wait(0.25):
            parents = _children()
            below = {me}
            grew = True
            while grew:
                grew = False
                for pid, ppid in parents.items():
                    if ppid in below and pid not in below:
                        below.add(pid)
                        grew = True
            sums: dict[str, float] = {"language host (this process)": _rss_mb(me)}
            for pid in below - {me}:
                kind = _kind(pid)
                if kind:
                    sums[kind] = sums.get(kind, 0.0) + _rss_mb(pid)
            peaks = self.peaks.setdefault(self.phase, {})
            for kind, mb in sums.items():
                peaks[kind] = round(max(peaks.get(kind, 0.0), mb), 1)

    def stop(self) -> None:
        self._halt.set()


# ---------------------------------------------------------------------------------- one run
@contextmanager
def _phase(sampler: MemorySampler, name: str, times: dict[str, float]) -> Iterator[None]:
    sampler.phase = name
    t0 = time.monotonic()
    try:
        yield
    finally:
        times[name] = round(time.monotonic() - t0, 1)


def _resources(stack: EstateStack) -> int:
    return len(stack._stack().export_stack().deployment.get("resources", []))


def measure(n: int, shape: str, rate: int, base: int = BASE) -> dict[str, Any]:
    """One size and shape from nothing to nothing (see the module doc); ``shape@P`` runs it with
    ``KDR_PULUMI_PARALLEL=P`` (the engine's default is 8 operations at once)."""
    shape, _, parallel = shape.partition("@")
    if parallel:
        os.environ["KDR_PULUMI_PARALLEL"] = parallel
    else:
        os.environ.pop("KDR_PULUMI_PARALLEL", None)
    # its own stack and backend (under the run's temp dir): a run beside another never meets its state
    stack_name = STACK if base == BASE else f"{STACK}{base}"
    os.environ.pop("PULUMI_BACKEND_URL", None)
    sampler = MemorySampler()
    sampler.start()
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=f"kdr-scale-{n}-{shape}-") as tmp:
        root = Path(tmp)
        (root / "stacks").mkdir()
        (root / "stacks" / f"Pulumi.{stack_name}.yaml").write_text(
            yaml.safe_dump(estate_doc(n, shape, base), sort_keys=False)
        )
        os.environ["KDR_STACK_DIR"] = str(root / "stacks")
        out = root / "out"
        stack_path = out / "stack" / f"Pulumi.{stack_name}.yaml"
        ref: StackRef | None = StackRef.of_file(stack_path, out / "state")

        t_start = time.monotonic()

        def progress(message: str) -> None:
            if message.startswith("drill cycle"):
                sampler.phase = "failover"
            print(f"  [{n}/{shape} {time.monotonic() - t_start:7.1f}s] {message}", flush=True)

        try:
            sampler.phase = "up"
            own = StackRef.resolve(stack_name)
            options = DrillOptions(stack=stack_name, out=out, keep=True, rate=rate)
            result = run_drill(own, load_stack_file(own.existing_stack_file()), options, progress)
            keep = Path(tempfile.gettempdir()) / f"kdr-scale-drill-{n}-{shape}.json"
            keep.write_text((out / "drill.json").read_text())  # the drill's whole result, kept for reading
            stack = EstateStack(StackRef.of_file(stack_path, out / "state"))
            cycle = result.cycles[0] if result.cycles else None
            resources_after_failover = _resources(stack)
            with _phase(sampler, "preview", times):
                preview = stack.preview()
            try:  # a refreshing preview of the failed-over estate (write-only SCRAM passwords)
                with _phase(sampler, "preview --refresh", times):
                    refreshing, refreshing_error = stack.preview(refresh=True).changes, None
            except Exception as exc:  # noqa: BLE001 - a finding to report, not a reason to lose the figures
                refreshing, refreshing_error = {}, str(exc).splitlines()[0][:300]
            topology = load_stack_file(stack_path)
            active = topology.active().name
            app = topology.principals.applications[0].name
            from dr.failover.act.fencing import _write_filter

            # drift: the first application's write ACL deleted behind Pulumi's back; refresh must see it
            removed = delete_acls(Estate(topology, out / "state").endpoint(active), [_write_filter(app)])
            with _phase(sampler, "refresh", times):
                refreshed = stack.refresh()
            try:
                drift_error = None
                drift = stack.preview().changes  # after the refresh: the deleted ACL is to be created again
            except Exception as exc:  # noqa: BLE001 - a finding to report, not a reason to lose the figures
                drift, drift_error = {}, str(exc).splitlines()[0][:300]
            with _phase(sampler, "destroy", times):
                stack.destroy()
            ref = None
        finally:
            if ref is not None:
                teardown(ref, tuple(t for t in [_load(stack_path)] if t is not None), progress)
            sampler.stop()
    steps = {s.name: s.seconds for s in cycle.failover.steps} if cycle else {}
    return {
        "n_topics": n,
        "n_applications": len(estate_doc(n, shape)["config"]["kafka-dr:principals"]["applications"]),
        "shape": shape,
        "pulumi_parallel": int(parallel) if parallel else 8,
        "grade": result.grade,
        "up_s": (result.provision_s or {}).get("pulumi up"),
        "resources_after_failover": resources_after_failover,
        "application_rto": {a.application + f" ({a.kind})": a.rto_s for a in cycle.application_rto} if cycle else {},
        "rto_probe_s": cycle.failover.rto_s if cycle else None,
        "write_outage_s": cycle.failover.write_outage_s if cycle else None,
        "a_b_c_s": cycle.failover.a_b_c_s if cycle else None,
        "steps_s": steps,
        "preview_after_failover": cycle.preview_after_failover if cycle else None,
        "lost_after_recovery": cycle.lost_after_recovery if cycle else None,
        "noop_preview_s": times.get("preview"),  # after the failover: B and C provisioned
        "noop_preview_changes": preview.changes,
        "preview_refresh_s": times.get("preview --refresh"),
        "preview_refresh_changes": refreshing,
        "preview_refresh_error": refreshing_error,
        "refresh_s": times.get("refresh"),
        "refresh_changes": refreshed,
        "drift_acls_deleted": removed,
        "drift_seen": drift,
        "drift_error": drift_error,
        "destroy_s": times.get("destroy"),
        "peak_rss_mb": sampler.peaks,
    }


def _load(path: Path) -> Any:
    try:
        return load_stack_file(path)
    except Exception:  # noqa: BLE001 - teardown goes on
        return None


def _growth(rows: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    if len(values) < 2 or not values[0]:
        return "—"
    return f"{values[-1] / values[0]:.1f}×"


def _s(value: Any) -> str:
    return "—" if value is None else f"{value:.1f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The figures as docs/scale.md's table (one column per size and shape) and the peak memory."""
    heads = [
        f"{r['n_topics']} topics / {r['n_applications']} apps, {r['shape']} (-p {r['pulumi_parallel']})" for r in rows
    ]
    lines = ["| step | " + " | ".join(heads) + " |", "|---|" + "---|" * len(rows)]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("resources after the failover", [str(r["resources_after_failover"]) for r in rows])
    row("`pulumi up` from nothing (s)", [_s(r["up_s"]) for r in rows])
    row("no-op preview (s)", [_s(r["noop_preview_s"]) for r in rows])
    row("refresh (s)", [_s(r["refresh_s"]) for r in rows])
    row(
        "`preview --refresh` after the failover",
        [
            "—"
            if "preview_refresh_changes" not in r
            else (
                "FAILED: " + r["preview_refresh_error"]
                if r.get("preview_refresh_error")
                else f"{_s(r['preview_refresh_s'])} s, {r['preview_refresh_changes'] or 'clean'}"
            )
            for r in rows
        ],
    )
    for label in sorted({k for r in rows for k in r["application_rto"]}, key=lambda k: "reads" in k):
        kind = "writes" if "writes" in label else "reads"
        row(
            f"application RTO, {kind} (s)",
            [_s(next((v for k, v in r["application_rto"].items() if kind in k), None)) for r in rows],
        )
        if kind == "reads":
            break
    row(
        "RTO: fence → first write acknowledged on B, the failover's probe (s)",
        [_s(r.get("write_outage_s")) for r in rows],
    )
    row("RTO probe: the run's start → that write (s)", [_s(r["rto_probe_s"]) for r in rows])
    row("A→B→C (s)", [_s(r["a_b_c_s"]) for r in rows])
    for step in dict.fromkeys(k for r in rows for k in r["steps_s"]):
        row(f"· step {step} (s)", [_s(r["steps_s"].get(step)) for r in rows])
    row("`destroy` (s)", [_s(r["destroy_s"]) for r in rows])
    row("preview after the failover", [str(r["preview_after_failover"] or "clean") for r in rows])
    row("refresh after an ACL deleted behind Pulumi", [str(r["refresh_changes"]) for r in rows])
    row(
        "preview after that refresh",
        [str(r["drift_seen"] or ("FAILED: " + r["drift_error"] if r.get("drift_error") else "NOT SEEN")) for r in rows],
    )
    row("acknowledged records lost", [str(r["lost_after_recovery"]) for r in rows])
    row("drill grade", [r["grade"].split(" (")[0] for r in rows])
    kinds = sorted({k for r in rows for phase in r["peak_rss_mb"].values() for k in phase})
    for kind in kinds:
        row(
            f"peak RSS {kind} (MB, up / failover / destroy)",
            [
                " / ".join(_s(r["peak_rss_mb"].get(ph, {}).get(kind)) for ph in ("up", "failover", "destroy"))
                for r in rows
            ],
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100", help="comma-separated topic counts (N/5 applications each)")
    ap.add_argument(
        "--shapes",
        default="named,prefix",
        help="named (one ACL per topic), prefix, batched (prefix + provisioning: batched) and/or platform "
        "(a platform team's estate, batched); shape+tls: every cluster SASL_SSL; shape@P: P operations at once",
    )
    ap.add_argument("--rate", type=int, default=500, help="records per second of the drill's producer")
    ap.add_argument(
        "--base-port",
        default=str(BASE),
        help="first port of A (B, C at +100/+200); 'auto': a free window of tests/integration/ports.py, "
        "for a second run beside one at the default",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    ap.add_argument(
        "--table", type=Path, nargs="+", default=None, help="print the table of these --json files; run nothing"
    )
    args = ap.parse_args()
    if args.table:
        print(markdown([row for path in args.table for row in json.loads(path.read_text())]))
        return
    # a `timeout` or Ctrl-C still runs the teardown in `measure`'s finally: no JVM outlives the run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.base_port == "auto":
        from tests.integration.ports import free_window

        base = free_window(300)  # held by this process until it ends
    else:
        base = int(args.base_port)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for shape in args.shapes.split(","):
            t0 = time.monotonic()
            rows.append(measure(n, shape, args.rate, base))
            print(f"{n} topics / {shape}: done in {time.monotonic() - t0:.0f}s", flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2))
    print(json.dumps(rows, indent=2))
    print(markdown(rows))
    for shape in args.shapes.split(","):
        mine = [r for r in rows if f"{r['shape']}@{r['pulumi_parallel']}".startswith(shape)]
        print(f"growth {mine[0]['n_topics']}→{mine[-1]['n_topics']} topics ({shape}):", end=" ")
        print(", ".join(f"{k} {_growth(mine, k)}" for k in ("up_s", "noop_preview_s", "a_b_c_s", "destroy_s")))


if __name__ == "__main__":
    main()
