"""MiniMalloc benchmark: the six "challenging" production allocation problems.

Each instance is solved within the time limit by each requested method, the
answer is checked with the independent validator, and one row is printed per
(instance, method) next to MiniMalloc's published C++ solve time. Wall seconds
and this process's CPU seconds are both shown: on a shared machine the wall
time also counts other processes.

    /work/venv/bin/python benchmarks/bench_minimalloc.py --methods auto search --time-limit 60
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from spyreopt.solvers.placement import METHODS, place, read_csv, validate

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "minimalloc" / "challenging"
# Moffitt, "MiniMalloc", ASPLOS 2023: solve times of the C++ solver on these instances.
PUBLISHED_SECONDS = {"A": 4.9, "B": 3.7, "C": 0.64, "D": 2.7, "E": 3.7, "F": 5.4}


def run_one(path: Path, method: str, time_limit: float) -> dict:
    name, capacity = re.fullmatch(r"(\w+)\.(\d+)\.csv", path.name).groups()
    buffers = read_csv(path)
    cpu = time.process_time()
    result = place(buffers, int(capacity), method=method, time_limit=time_limit)
    cpu = time.process_time() - cpu
    valid = result.status == "placed" and validate(buffers, result.offsets, int(capacity)) == []
    return {
        "instance": name,
        "buffers": len(buffers),
        "method": method,
        "decided_by": result.method,
        "status": result.status,
        "seconds": result.seconds,
        "cpu_seconds": cpu,
        "minimalloc_s": PUBLISHED_SECONDS.get(name),
        "valid": valid,
        "nodes": result.stats.get("nodes", ""),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["auto"])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--instances", nargs="*", help="names like A B (default: all in --dir)")
    args = parser.parse_args(argv)
    paths = sorted(args.dir.glob("*.csv"))
    if args.instances:
        paths = [p for p in paths if p.name.split(".")[0] in args.instances]
    header = "| instance | buffers | method | decided by | status | seconds | cpu s | MiniMalloc s | valid | nodes |"
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    all_valid = True
    for path in paths:
        for method in args.methods:
            r = run_one(path, method, args.time_limit)
            all_valid &= r["valid"]
            print(
                f"| {r['instance']} | {r['buffers']} | {r['method']} | {r['decided_by']} | {r['status']} "
                f"| {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | {r['minimalloc_s']} | {'yes' if r['valid'] else 'NO'} | {r['nodes']} |",
                flush=True,
            )
    return 0 if all_valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
