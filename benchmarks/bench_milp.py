"""MILP backend benchmark: IOPDDL B and G and a 300-node synthetic instance.

For each instance and solver it prints the objective (checked against
``Formulation.evaluate``), the dual bound, the gap, the status, the wall time,
the model size after domain reduction, and where the answer came from (the
MILP, or the greedy start it could not beat).

    /work/venv/bin/python benchmarks/bench_milp.py --time-limit 60
    /work/venv/bin/python benchmarks/bench_milp.py --solvers highs,cbc --instances B,G,synthetic
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.formats.iopddl import BEST_KNOWN, load_iopddl
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement
from spyreopt.solvers import milp

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "iopddl"


def synthetic(seed: int = 0, num_nodes: int = 300, placement: bool = False) -> Formulation:
    """A layered, transformer-like DAG: local edges plus a few skips, 4-16 candidates per node.

    Edges cost nothing when both ends pick "compatible" candidates (same index
    modulo 4, a stand-in for matching layouts) and a relayout otherwise, which
    also holds memory over the consumer's step; a third of the nodes carry a
    compute-versus-memory max term; memory is tight (35% of the all-resident peak).
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(4, 17, size=num_nodes)
    pairs = set()
    for v in range(1, num_nodes):
        for _ in range(int(rng.integers(1, 3))):
            pairs.add((int(rng.integers(max(0, v - 6), v)), v))
        if rng.random() < 0.05 and v > 20:
            pairs.add((int(rng.integers(v - 40 if v > 40 else 0, v - 10)), v))
    pairs = sorted(pairs)
    last_use = list(range(1, num_nodes + 1))
    for u, v in pairs:
        last_use[u] = max(last_use[u], v + 1)
    nodes = []
    for i, s in enumerate(sizes):
        usages = rng.integers(0, 9, size=s) * 128
        usages[0] = 0
        costs = rng.integers(100, 1000, size=s) + (usages // 128) * rng.integers(-40, 0)  # resident: cheaper
        nodes.append(Node(f"op{i}", np.maximum(costs, 0).astype(np.int64), usages.astype(np.int64), (i, last_use[i])))
    edges = []
    for u, v in pairs:
        su, sv = int(sizes[u]), int(sizes[v])
        same = (np.arange(su)[:, None] % 4) == (np.arange(sv)[None, :] % 4)
        relayout = rng.integers(50, 400, size=(su, sv))
        costs = np.where(same, 0, relayout).astype(np.int64)
        usages = np.where(same, 0, rng.integers(0, 3, size=(su, sv)) * 128).astype(np.int64)
        usages[0, :] = 0
        usages[:, 0] = 0
        allowed = rng.random((su, sv)) > 0.1
        allowed[0, :] = True
        allowed[:, 0] = True
        edges.append(Edge(u, v, costs, allowed, usages, (v, v + 1)))
    terms = []
    for i in range(num_nodes):
        if rng.random() < 1 / 3:
            incoming = [k for k, e in enumerate(edges) if e.v == i]
            compute = Affine(rng.integers(200, 800, size=sizes[i]).astype(np.int64))
            memory = Affine(
                rng.integers(0, 400, size=sizes[i]).astype(np.int64),
                tuple((k, rng.integers(0, 300, size=edges[k].costs.shape).astype(np.int64)) for k in incoming),
            )
            terms.append(MaxTerm(i, (compute, memory)))
    peak = sum(int(n.usages.max()) for n in nodes) + sum(int(e.usages.max()) for e in edges)
    limit = int(peak * 0.35) // 128 * 128
    return Formulation(
        tuple(nodes),
        tuple(edges),
        usage_limit=limit,
        max_terms=tuple(terms),
        placement=Placement(limit, 128) if placement else None,
        name=f"synthetic-{num_nodes}{'-placed' if placement else ''}",
    )


def run_one(f: Formulation, solver: str, time_limit: float, seed: int) -> dict:
    row = {"instance": f.name, "solver": solver, "nodes": len(f.nodes), "edges": len(f.edges)}
    start = time.perf_counter()
    try:
        sol = milp.solve(f, time_limit=time_limit, seed=seed, solver=solver)
    except (SolverError, InfeasibleError) as exc:
        return {**row, "status": "error", "note": str(exc)}
    seconds = time.perf_counter() - start
    problems = f.violations(sol.assignment, sol.offsets)
    exact = f.evaluate(sol.assignment)
    st = sol.stats
    return {
        **row,
        "status": sol.status,
        "objective": sol.objective,
        "bound": sol.bound,
        "gap": st.get("gap"),
        "seconds": round(seconds, 1),
        "variables": st.get("variables"),
        "integer_variables": st.get("integer_variables"),
        "constraints": st.get("constraints"),
        "removed": st.get("removed"),
        "start_objective": st.get("start_objective"),
        "source": st.get("source"),
        "placement_rounds": st.get("placement_rounds"),
        "valid": not problems and exact == sol.objective,
        "best_known": BEST_KNOWN.get(f.name),
        "note": sol.message if not problems else f"INVALID: {problems[0]}",
    }


def fmt(row: dict) -> str:
    def num(x):
        if x is None or isinstance(x, (bool, str)):
            return "" if x is None else str(x)
        return f"{x:,}" if isinstance(x, int) else f"{x:.2e}"

    cols = ["instance", "solver", "status", "objective", "bound", "gap", "seconds", "variables", "constraints"]
    cols += ["start_objective", "source", "valid", "note"]
    return "| " + " | ".join(num(row.get(c)) if c != "seconds" else str(row.get(c, "")) for c in cols) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="folder of the IOPDDL *.json.gz instances")
    ap.add_argument("--instances", default="B,G,synthetic", help="IOPDDL letters and/or synthetic, synthetic-placed")
    ap.add_argument("--solvers", default="highs", help="highs and/or cbc")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    print(
        "| instance | solver | status | objective | bound | gap | s | vars | rows | greedy start | source | valid | note |"
    )
    print("| --- " * 13 + "|", flush=True)
    rows = []
    for name in args.instances.split(","):
        if name.startswith("synthetic"):
            f = synthetic(args.seed, placement=name.endswith("placed"))
        else:
            f = load_iopddl(args.dir / f"asplos-2025-iopddl-{name}.json.gz")
        for solver in args.solvers.split(","):
            row = run_one(f, solver, args.time_limit, args.seed)
            rows.append(row)
            print(fmt(row), flush=True)
    known = ", ".join(f"{k.rsplit('-', 1)[-1]} {v:,}" for k, v in BEST_KNOWN.items())
    print(f"best known IOPDDL costs (contest): {known}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
