"""Anneal backend benchmark: IOPDDL contest instances and a synthetic layer stack.

IOPDDL B and G: cost, feasibility (checked by the contest evaluator) and score
= best contest cost / cost. Layer stack: a 320-op transformer-like stack with
every feature of the Formulation (max terms, forbidden pairs, relayout copies
with memory, a tight limit, address placement), compared with greedy; reports
moves per second.

    /work/venv/bin/python benchmarks/bench_anneal.py --time-limit 60
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from spyreopt.formats.iopddl import BEST_KNOWN, evaluate_iopddl, load_iopddl, parse_problem, read_json
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement
from spyreopt.solvers import anneal, greedy

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "iopddl"
STICK = 128


def layer_stack(layers: int = 32, ops: int = 10, seed: int = 0, tight: float = 0.35) -> Formulation:
    """A stack of layers, each a chain of ops with a residual edge from its first to its last op.

    Candidates are division (4) x stick dim (2) x residency (2). Costs in ns:
    compute per division; an op's time is max(compute, device-memory traffic)
    (a max term: the memory alternative reads every non-resident input); a
    stick mismatch costs a restickify, a division mismatch between resident
    ends a relayout whose copy holds memory while it runs, and a resident
    producer cannot be both relaid out and restickified (forbidden pair).
    """
    rng = np.random.default_rng(seed)
    n = layers * ops
    cands = [(d, s, r) for d in range(4) for s in range(2) for r in range(2)]
    size = len(cands)
    bytes_ = (rng.integers(2, 16, size=n) * 64 * 1024).astype(np.int64)
    cores = np.array([32, 16, 8, 4])
    edges_uv = [(i, i + 1) for i in range(n - 1)]
    edges_uv += [(layer * ops, layer * ops + ops - 1) for layer in range(layers)]
    last_use = np.arange(1, n + 1)
    for u, v in edges_uv:
        last_use[u] = max(last_use[u], v + 1)
    nodes, compute, write = [], [], []
    for i in range(n):
        base = float(rng.uniform(200, 4000))
        eff = rng.uniform(0.6, 1.0, size=4) * np.array([1.0, 0.95, 0.9, 0.8])
        comp = np.array([base * 32 / cores[d] / eff[d] / 8 for d, _, _ in cands])
        stick_pen = np.array([0.0 if s == i % 2 else 0.15 * base for _, s, _ in cands])
        spill = np.array([0.0 if r else bytes_[i] / 150.0 for _, _, r in cands])
        usage = np.array([-(-int(bytes_[i] // cores[d]) // STICK) * STICK if r else 0 for d, _, r in cands])
        nodes.append(Node(f"op{i}", stick_pen.astype(np.int64), usage.astype(np.int64), (i, int(last_use[i]))))
        compute.append(comp.astype(np.int64))
        write.append(spill.astype(np.int64))
    edges = []
    for u, v in edges_uv:
        cost = np.zeros((size, size), dtype=np.int64)
        allowed = np.ones((size, size), dtype=bool)
        use = np.zeros((size, size), dtype=np.int64)
        for a, (du, su, ru) in enumerate(cands):
            for b, (dv, sv, _) in enumerate(cands):
                if su != sv:
                    cost[a, b] += int(bytes_[u] / 116.0)
                if ru and du != dv:
                    cost[a, b] += int(800 + bytes_[u] / cores[du] / 547.0)
                    use[a, b] = -(-int(bytes_[u] // cores[dv]) // STICK) * STICK
                    allowed[a, b] = su == sv
        edges.append(Edge(u, v, cost, allowed, use, (v, v + 1)))
    terms = []
    for v in range(n):
        incoming = [k for k, (_, w) in enumerate(edges_uv) if w == v]
        reads = []
        for k in incoming:
            u = edges_uv[k][0]
            table = np.array([[0 if cands[a][2] else int(bytes_[u] / 150.0) for _ in cands] for a in range(size)])
            reads.append((k, table.astype(np.int64)))
        terms.append(MaxTerm(v, (Affine(compute[v]), Affine(write[v], tuple(reads)))))
    profile = np.zeros(n + 1, dtype=np.int64)
    for nd in nodes:
        profile[nd.interval[0] : nd.interval[1]] += nd.usages.max()
    limit = int(profile.max() * tight) // STICK * STICK
    return Formulation(tuple(nodes), tuple(edges), limit, tuple(terms), Placement(limit, STICK), 1e-3, "layer-stack")


def run_iopddl(directory: Path, names: list[str], time_limit: float, seed: int) -> None:
    print("| instance | status | seconds | cost | feasible | score | units | rounds (best) | steps | moves/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        path = directory / f"asplos-2025-iopddl-{name}.json.gz"
        problem = parse_problem(read_json(path))
        f = load_iopddl(problem)
        sol = anneal.solve(f, time_limit=time_limit, seed=seed)
        cost, feasible, _ = evaluate_iopddl(problem, sol.assignment)
        assert cost == sol.objective, (cost, sol.objective)
        st = sol.stats
        print(
            f"| {name} | {sol.status} | {sol.seconds:.1f} | {cost:,} | {feasible} "
            f"| {BEST_KNOWN[problem.name] / cost:.4f} | {st['units']} | {st['rounds']} ({st['best_round']}) "
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--instances", nargs="*", default=["B", "G"])
    parser.add_argument("--layers", type=int, default=32, help="layers of 10 ops in the synthetic stack (0: skip)")
    parser.add_argument(
        "--spyre-layers", type=int, default=0, help="also plan so.workloads.layer_stack(layers=N) on the Spyre preset"
    )
    args = parser.parse_args()
    if args.instances:
        run_iopddl(args.dir, args.instances, args.time_limit, args.seed)
    if args.layers:
        run_stack(layer_stack(layers=args.layers, seed=args.seed), args.time_limit, args.seed)
    if args.spyre_layers:
        from spyreopt import workloads
        from spyreopt.model.problem import Problem

        run_stack(Problem(workloads.layer_stack(layers=args.spyre_layers)).formulation, args.time_limit, args.seed)


if __name__ == "__main__":
    main()
