"""Problem build and greedy time against graph size: layer_stack of about 300, 1,000 and 3,000 ops.

Prints, per size, the ops, the build (Graph -> Problem -> Formulation) and greedy seconds, wall clock
and process CPU time (the CPU figure is the one to trust on a shared, loaded machine), and the growth
of build + greedy from the smallest size relative to the growth of the op count.

    python benchmarks/scaling_build.py [--layers 10 33 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import spyreopt as so
from spyreopt.model.problem import Problem
from spyreopt.solvers import greedy


def measure(layers: int) -> dict:
    g = so.workloads.get("layer_stack", layers=layers)
    wall, cpu = time.perf_counter(), time.process_time()
    problem = Problem(g)
    f = problem.formulation
    wall_b, cpu_b = time.perf_counter(), time.process_time()
    sol = greedy.solve(f, time_limit=600.0, seed=0)
    wall_g, cpu_g = time.perf_counter(), time.process_time()
    return {
        "layers": layers,
        "ops": len(problem.ops),
        "edges": len(problem.edges),
        "build_s": wall_b - wall,
        "greedy_s": wall_g - wall_b,
        "build_cpu_s": cpu_b - cpu,
        "greedy_cpu_s": cpu_g - cpu_b,
        "cost_us": sol.objective * f.cost_unit_us,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[10, 33, 100], help="layer_stack sizes (30 ops a layer)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = [measure(n) for n in args.layers]
    if args.json:
        print(json.dumps(rows, indent=1))
        return rows
    print(f"{'ops':>6s} {'build s':>8s} {'greedy s':>8s} {'build cpu':>9s} {'greedy cpu':>10s} {'growth/ops':>10s}")
    first = rows[0]
    for r in rows:
        grow = (r["build_cpu_s"] + r["greedy_cpu_s"]) / (first["build_cpu_s"] + first["greedy_cpu_s"])
        print(
            f"{r['ops']:6d} {r['build_s']:8.2f} {r['greedy_s']:8.2f} {r['build_cpu_s']:9.2f} {r['greedy_cpu_s']:10.2f}"
            f" {grow / (r['ops'] / first['ops']):10.2f}"
        )
    return rows


if __name__ == "__main__":
    main()
