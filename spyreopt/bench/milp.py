"""MILP backend benchmark: IOPDDL B and G and a 300-node synthetic instance.

For each instance and solver it prints the objective (checked against
``Formulation.evaluate``), the dual bound, the gap, the status, the wall time,
the model size after domain reduction, and where the answer came from (the
MILP, or the greedy start it could not beat).

    python benchmarks/bench_milp.py --data tests/data --time-limit 60
    python benchmarks/bench_milp.py --data tests/data --solvers highs,cbc --instances B,G,synthetic
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from spyreopt.bench.data import data_dir
from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.formats.iopddl import best_known, load_iopddl
from spyreopt.model.formulation import Formulation
from spyreopt.solvers import milp
from spyreopt.testing.synthetic import layered_dag


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
        "best_known": best_known(f.name),
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
    ap.add_argument("--data", help="directory with iopddl/*.json.gz (default: $SPYREOPT_DATA)")
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
            f = layered_dag(args.seed, placement=name.endswith("placed"))
        else:
            f = load_iopddl(data_dir(args.data, "iopddl") / f"asplos-2025-iopddl-{name}.json.gz")
        for solver in args.solvers.split(","):
            row = run_one(f, solver, args.time_limit, args.seed)
            rows.append(row)
            print(fmt(row), flush=True)
    known = ", ".join(
        f"{n} {best_known(f'asplos-2025-iopddl-{n}'):,}" for n in args.instances.split(",") if len(n) == 1
    )
    print(f"best known IOPDDL costs (contest): {known}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0
