"""Python-side record fingerprints: the C XXH64 (``xxhash``) against the pure-Python reference.

The incremental audit (``drctl audit``), the integrity check started from an audit and recovery
fingerprint the records they read with confluent-kafka in Python
(:func:`verification.fingerprint.key_hash` + :func:`~verification.fingerprint.checksum`). This
times exactly that on the same generated records — keys of 8-24 bytes, values of ``--value-bytes``,
one record in ten with two headers — once with the XXH64 the product uses and once with
:func:`~verification.fingerprint.xxh64_reference` (the baseline, what the product used before),
checks both give the same numbers, and prints the ratio.

    .venv/bin/python benchmarks/fingerprint_bench.py [--records 200000] [--value-bytes 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verification import fingerprint as fp

Record = tuple[bytes, bytes, list[tuple[str, bytes | None]]]


def records(n: int, value_bytes: int, seed: int = 11) -> list[Record]:
    """``n`` generated (key, value, headers) records."""
    rng = random.Random(seed)
    out: list[Record] = []
    for i in range(n):
        headers: list[tuple[str, bytes | None]] = [("trace", rng.randbytes(16)), ("src", None)] if i % 10 == 0 else []
        out.append((rng.randbytes(rng.randint(8, 24)), rng.randbytes(value_bytes), headers))
    return out


def fingerprint_all(recs: list[Record]) -> tuple[float, int]:
    """Seconds to fingerprint ``recs`` as the audit does, and a digest of the numbers (to compare)."""
    t = time.perf_counter()
    digest = 0
    for key, value, headers in recs:
        digest ^= fp.key_hash("bench", key) * 31 + fp.checksum(value, headers)
    return time.perf_counter() - t, digest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3, help="alternate the two K times, keep each one's fastest")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    recs = records(args.records, args.value_bytes)
    product, reference = fp.xxh64, fp.xxh64_reference
    runs: dict[str, list[float]] = {"c": [], "reference": []}
    digests = {}
    try:
        for rep in range(args.repeat):
            for name, impl in (("c", product), ("reference", reference))[:: 1 if rep % 2 == 0 else -1]:
                fp.xxh64 = impl  # the module's hash, swapped for the baseline
                seconds, digests[name] = fingerprint_all(recs)
                runs[name].append(seconds)
    finally:
        fp.xxh64 = product
    if digests["c"] != digests["reference"]:
        raise SystemExit("the two XXH64 implementations gave different fingerprints")
    best = {k: min(v) for k, v in runs.items()}
    result = {
        "records": args.records,
        "value_bytes": args.value_bytes,
        "seconds": runs,
        "us_per_record": {k: round(v / args.records * 1e6, 2) for k, v in best.items()},
        "speedup": round(best["reference"] / best["c"], 1),
    }
    print(
        f"{args.records:,} records ({args.value_bytes} B values): C XXH64 {result['us_per_record']['c']} us/record, "
        f"reference {result['us_per_record']['reference']} us/record (baseline) -> {result['speedup']}x faster; "
        "same fingerprints"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
