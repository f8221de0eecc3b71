"""Anneal backend benchmark: IOPDDL contest instances and a synthetic layer stack.

IOPDDL B and G: cost, feasibility (checked by the contest evaluator) and score
= best contest cost / cost. Layer stack: a 320-op transformer-like stack with
every feature of the Formulation (max terms, forbidden pairs, relayout copies
with memory, a tight limit, address placement), compared with greedy; reports
moves per second.

    python benchmarks/bench_anneal.py --time-limit 60 --data tests/data
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from spyreopt.bench.data import data_dir
from spyreopt.formats.iopddl import best_known, evaluate_iopddl, load_iopddl, read_instance
from spyreopt.model.formulation import Formulation
from spyreopt.solvers import anneal, greedy
from spyreopt.testing.synthetic import residual_stack


def run_iopddl(directory: Path, names: list[str], time_limit: float, seed: int) -> None:
    print("| instance | status | seconds | cost | feasible | score | units | rounds (best) | steps | moves/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        path = directory / f"asplos-2025-iopddl-{name}.json.gz"
        problem = read_instance(path)
        f = load_iopddl(problem)
        sol = anneal.solve(f, time_limit=time_limit, seed=seed)
        cost, feasible, _ = evaluate_iopddl(problem, sol.assignment)
        assert cost == sol.objective, (cost, sol.objective)
        st = sol.stats
        print(
            f"| {name} | {sol.status} | {sol.seconds:.1f} | {cost:,} | {feasible} "
            f"| {best_known(problem.name) / cost:.6f} | {st['units']} | {st['rounds']} ({st['best_round']}) "
            f"| {st['steps']} | {st['moves_per_second']:.0f} |"
        )


def run_stack(f: Formulation, time_limit: float, seed: int) -> None:
    began = time.perf_counter()
    start = greedy.solve(f, time_limit=time_limit, seed=seed)
    greedy_s = time.perf_counter() - began
    sol = anneal.solve(f, time_limit=time_limit, seed=seed, hint=start)
    assert f.violations(sol.assignment, sol.offsets) == [] and sol.objective == f.evaluate(sol.assignment)
    st = sol.stats
    print(
        f"\n{f.name}: {len(f.nodes)} nodes, {len(f.edges)} edges, {len(f.max_terms)} max terms, "
        f"limit {f.usage_limit:,} B, placement capacity {f.placement.capacity:,} B"
    )
    print(
        "| backend | status | seconds | objective (us) | vs greedy | moves/s | steps | accepted | reheats | best at step | spills |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print(f"| greedy | {start.status} | {greedy_s:.1f} | {f.objective_us(start.assignment):,.1f} | 1.000 | | | | | | |")
    print(
        f"| anneal | {sol.status} | {sol.seconds:.1f} | {f.objective_us(sol.assignment):,.1f} "
        f"| {sol.objective / start.objective:.3f} | {st['moves_per_second']:.0f} | {st['steps']} | {st['accepted']} "
        f"| {st['reheats']} | {st['best_step']} | {st['spills']} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help="directory with iopddl/*.json.gz (default: $SPYREOPT_DATA)")
    parser.add_argument("--instances", nargs="*", default=["B", "G"])
    parser.add_argument("--layers", type=int, default=32, help="layers of 10 ops in the synthetic stack (0: skip)")
    parser.add_argument(
        "--spyre-layers", type=int, default=0, help="also plan so.workloads.layer_stack(layers=N) on the Spyre preset"
    )
    args = parser.parse_args(argv)
    if args.instances:
        run_iopddl(data_dir(args.data, "iopddl"), args.instances, args.time_limit, args.seed)
    if args.layers:
        run_stack(residual_stack(layers=args.layers, seed=args.seed), args.time_limit, args.seed)
    if args.spyre_layers:
        from spyreopt import workloads
        from spyreopt.model.problem import Problem

        run_stack(Problem(workloads.layer_stack(layers=args.spyre_layers)).formulation, args.time_limit, args.seed)
