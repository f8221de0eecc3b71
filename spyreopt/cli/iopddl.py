"""``spyreopt iopddl FILE``: solve an IOPDDL contest instance and score it like the contest."""

from __future__ import annotations

import argparse
import sys

from spyreopt.errors import FormatError, InfeasibleError, SolverError
from spyreopt.formats.iopddl import (
    BEST_KNOWN,
    evaluate_iopddl,
    load_iopddl,
    parse_problem,
    read_json,
    save_solution,
    score,
)
from spyreopt.solvers.registry import solve_formulation


def add_parser(subparsers) -> None:
    """Register the ``iopddl`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "iopddl",
        help="solve an IOPDDL contest instance (JSON or JSON.gz)",
        description="Solve an IOPDDL instance with one backend, write the strategy of every node as a "
        "JSON list, and print its cost, feasibility (checked by the contest's rules) and score.",
    )
    p.add_argument("file", help="instance, .json or .json.gz")
    p.add_argument("--backend", default="greedy", help="solver backend (greedy, anneal, cpsat, milp)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--reduce",
        action="store_true",
        help="solve the exactly reduced problem (greedy bound, dominance, follower merges) and map back",
    )
    p.add_argument("--out", required=True, help="where to write the solution (JSON list of strategy indices)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """0 when a feasible solution was written, 1 when the answer is infeasible, 2 on bad input or solver error."""
    try:
        problem = parse_problem(read_json(args.file))
        f = load_iopddl(problem)
        sol = solve_formulation(f, args.backend, time_limit=args.time_limit, seed=args.seed, presolve=args.reduce)
    except InfeasibleError as exc:
        print(f"infeasible: {exc}", file=sys.stderr)
        return 1
    except (FormatError, SolverError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(sol.assignment) != len(f.nodes):
        print(f"no solution ({sol.status}): {sol.message}", file=sys.stderr)
        return 1
    save_solution(args.out, sol.assignment)
    cost, feasible, details = evaluate_iopddl(problem, sol.assignment)
    best = BEST_KNOWN.get(problem.name)
    value = score(problem.name, cost, feasible)
    print(f"instance: {problem.name}")
    print(
        f"backend: {args.backend}{' (reduced)' if args.reduce else ''}  status: {sol.status}  seconds: {sol.seconds:.1f}"
    )
    if sol.message:
        print(f"message: {sol.message}")
    print(f"cost: {cost}")
    print(f"feasible: {feasible}  (peak usage {details['peak_usage']} of limit {details['usage_limit']})")
    print(f"best known: {best if best is not None else 'unknown'}")
    print(f"score: {'n/a' if value is None else f'{value:.4f}'}")
    print(f"solution: {args.out}")
    if sol.objective != cost:
        print(
            f"error: the backend reported objective {sol.objective}, the contest's evaluation gives {cost}",
            file=sys.stderr,
        )
        return 2
    return 0 if feasible else 1
