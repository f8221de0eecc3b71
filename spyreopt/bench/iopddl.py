"""IOPDDL benchmark: every backend on the ASPLOS 2025 contest instances, scored like the contest.

``iopddl_suite`` gives the rows of ``spyreopt bench --suite iopddl``. ``main``
(``benchmarks/bench_iopddl.py``): for each instance and backend (and, with
``--reduce both``, each of the plain and the exactly reduced problem) it solves
within the time limit, checks the answer with the independent contest evaluator
and prints cost, feasibility and score = best contest cost / cost. Backends that
cannot be imported are skipped with the reason.

    python benchmarks/bench_iopddl.py --time-limit 60 --data tests/data
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from spyreopt.bench.data import data_dir
from spyreopt.bench.report import Row
from spyreopt.errors import InfeasibleError, SolverError, SpyreoptError
from spyreopt.formats.iopddl import (
    best_known,
    contest_table,
    evaluate_iopddl,
    format_score,
    load_iopddl,
    read_instance,
    score,
)
from spyreopt.solvers.registry import get_backend, solve_formulation


def iopddl_suite(
    backends: Iterable[str],
    time_limit: float,
    directory: Path,
    seed: int = 0,
    progress: bool = True,
    reduce: bool = True,
) -> list[Row]:
    """Solve the IOPDDL contest instances; cost checked by the contest-identical evaluator.

    With ``reduce`` the exact reductions (dominance, follower merges, eliminations) run first.
    """
    files = sorted(directory.glob("*.json*"))
    backends = [b for b in backends if b not in ("hbm", "independent")]
    rows = []
    bar = tqdm(total=len(files) * len(backends), disable=not progress, desc="iopddl", unit="solve")
    for path in files:
        data = read_instance(path)
        f = load_iopddl(data)
        for backend in backends:
            start = time.perf_counter()
            try:
                sol = solve_formulation(f, backend, time_limit=time_limit, seed=seed, presolve=reduce)
                cost, feasible, _ = evaluate_iopddl(data, list(sol.assignment))
                s = score(f.name, cost, feasible)
                label = f"{backend}+reduce" if reduce else backend
                rows.append(Row("iopddl", f.name, label, sol.status, float(cost), None, None, time.perf_counter() - start,
                                feasible, len(f.nodes), f"score {format_score(s)}" if s is not None else ""))  # fmt: skip
            except SpyreoptError as exc:
                rows.append(Row.failed("iopddl", f.name, backend, time.perf_counter() - start, len(f.nodes), exc))
            bar.update()
    bar.close()
    return rows


def contest_suite(
    directory: Path,
    time_limit: float | None = None,
    seed: int = 0,
    progress: bool = True,
    fractions: tuple[float, ...] = (0.1, 1.0),
) -> list[Row]:
    """The default method (``spyreopt iopddl``'s contest engine) on every contest instance found in
    ``directory`` and its ``production/`` folder, at each fraction of its contest time limit (or at
    ``time_limit``), judged independently: score and seconds to the best answer, from the start of reading."""
    from spyreopt.contest.suite import NAMES, find_instance, run

    names = [n for n in NAMES if _exists(directory, n, find_instance)]
    table = contest_table()
    runs = [(n, None) for n in names] if time_limit is not None else [(n, f) for f in fractions for n in names]
    rows = []
    for letter, fraction in tqdm(runs, disable=not progress, desc="iopddl contest", unit="run"):
        limit = time_limit if fraction is None else fraction * table[f"asplos-2025-iopddl-{letter}"]["time_limit"]
        (r,) = run(directory, [letter], seed=seed, time_limit=limit)
        at = "" if fraction is None else f" @{fraction:.0%}"
        note = (
            f"score {format_score(r['score'])}; limit {r['time_limit']:g} s; load {r['load_s']} s; "
            f"best at {r['best_s']} s; {r['edges']:,} edges; {r['method']}"
        )
        rows.append(Row("iopddl", letter + at, "contest", "feasible" if r["feasible"] else "infeasible",
                        float(r["cost"]), None, None, r["wall_s"], r["feasible"], r["nodes"], note))  # fmt: skip
    return rows


def _exists(directory: Path, letter: str, find) -> bool:
    try:
        find(directory, letter)
    except FileNotFoundError:
        return False
    return True


def run_one(problem, f, backend: str, reduced: bool, time_limit: float, seed: int) -> dict:
    row = {"instance": problem.name, "backend": backend, "reduced": reduced}
    try:
        sol = solve_formulation(f, backend, time_limit=time_limit, seed=seed, presolve=reduced)
    except (SolverError, InfeasibleError) as exc:
        return {**row, "status": "error", "note": str(exc)}
    if len(sol.assignment) != len(f.nodes):
        return {**row, "status": sol.status, "seconds": round(sol.seconds, 1), "note": f"no assignment: {sol.message}"}
    cost, feasible, _ = evaluate_iopddl(problem, sol.assignment)
    note = sol.message
    if sol.objective != cost:
        note = f"reported objective {sol.objective} != contest cost {cost}; " + note
    return {
        **row,
        "status": sol.status,
        "seconds": round(sol.seconds, 1),
        "cost": cost,
        "feasible": feasible,
        "score": score(problem.name, cost, feasible),
        "bound": sol.bound,
        "note": note,
    }


def fmt(row: dict) -> str:
    cost, sc, bound = row.get("cost"), row.get("score"), row.get("bound")
    return (
        f"| {row['instance'].rsplit('-', 1)[-1]} | {row['backend']}{' +reduce' if row['reduced'] else ''} "
        f"| {row['status']} | {row.get('seconds', '')} | {'' if cost is None else f'{cost:,}'} "
        f"| {row.get('feasible', '')} | {'' if sc is None else format_score(sc)} "
        f"| {'' if bound is None else f'{bound:,}'} | {row.get('note', '')[:90]} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="directory with iopddl/*.json.gz (default: $SPYREOPT_DATA)")
    ap.add_argument("--instances", default="B,G", help="instance letters (default B,G)")
    ap.add_argument("--backends", default="greedy,anneal,cpsat,milp")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reduce", choices=["off", "on", "both"], default="both")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    backends = []
    for name in args.backends.split(","):
        try:
            get_backend(name)
            backends.append(name)
        except SolverError as exc:
            print(f"skipping {name}: {exc}", flush=True)
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.reduce]
    rows = []
    print("| instance | backend | status | s | cost | feasible | score | bound | note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for letter in args.instances.split(","):
        path = data_dir(args.data, "iopddl") / f"asplos-2025-iopddl-{letter}.json.gz"
        problem = read_instance(path)
        f = load_iopddl(problem)
        for name in backends:
            for reduced in modes:
                row = run_one(problem, f, name, reduced, args.time_limit, args.seed)
                rows.append(row)
                print(fmt(row), flush=True)
    known = ", ".join(f"{n} {best_known(f'asplos-2025-iopddl-{n}'):,}" for n in args.instances.split(","))
    print(f"best known: {known}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0
