"""``spyreopt iopddl FILE``: solve an IOPDDL contest instance and score it like the contest."""

from __future__ import annotations

import argparse
import sys
import time

from spyreopt.contest import warm
from spyreopt.contest.solve import solve_instance, stderr_progress
from spyreopt.errors import FormatError, InfeasibleError, SolverError
from spyreopt.formats.iopddl import (
    Instance,
    contest_table,
    evaluate_iopddl,
    format_score,
    load_iopddl,
    read_instance,
    save_solution,
    score,
)
from spyreopt.limits import check_limit, command_start, limited, summary
from spyreopt.rates import GREEDY_SECONDS_PER_ENTRY
from spyreopt.solvers.registry import check_options, solve_formulation

DEFAULT_LIMIT = 60.0  # for an instance that is not one of the contest's 25
ANSWER_SECONDS = 0.3  # kept back from a library backend's clock for writing and judging the answer


def add_parser(subparsers) -> None:
    """Register the ``iopddl`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "iopddl",
        help="solve an IOPDDL contest instance (JSON or JSON.gz)",
        description="Solve an IOPDDL instance, write the strategy of every node as a JSON list, and print its "
        "cost, feasibility (checked by the contest's rules) and score. By default the contest engine runs "
        "(exact reductions, usage-priced forest DP on both cores, HiGHS's MILP alongside when the reduced problem "
        "is small) "
        "within the instance's contest time limit, counted from process start.",
    )
    p.add_argument("file", help="instance, .json or .json.gz")
    p.add_argument(
        "--backend", default="contest", help="contest (default) or a library backend: greedy, anneal, cpsat, milp"
    )
    p.add_argument("--time-limit", type=float, default=None, help="seconds (default: the instance's contest limit)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reduce", action="store_true", help="library backends only: solve the exactly reduced problem")
    p.add_argument("--out", required=True, help="where to write the solution (JSON list of strategy indices)")
    p.add_argument(
        "--strict", action="store_true", help="exit 3 when the answer is below what the method normally reaches "
        "(a fallback answered: the kernels were not compiled in time; a stage was cut by the clock)",
    )  # fmt: skip
    p.set_defaults(func=run)


def _process_start() -> float:
    """The command's start on the ``time.monotonic`` clock: as the program, the process's (the contest counts
    interpreter start-up and imports); called from Python, the call's (``limits.command``)."""
    return time.monotonic() - (time.perf_counter() - command_start())


def _greedy(inst: Instance, seconds: float) -> tuple[list[int], float, str] | None:
    """The library's greedy, when its set-up (nominally ``GREEDY_SECONDS_PER_ENTRY`` per cost entry) takes at most
    half of ``seconds``: the contest engine's fallback; None (numpy's least-usage strategies answer) otherwise."""
    if (len(inst.cost) + len(inst.ecost)) * GREEDY_SECONDS_PER_ENTRY > 0.5 * seconds:
        return None
    f = load_iopddl(inst)
    sol = solve_formulation(f, "greedy", time_limit=seconds, presolve=False)
    if len(sol.assignment) != len(f.nodes):
        return None
    return [int(s) for s in sol.assignment], float(sol.objective), "greedy"


def _fresh_line() -> str:
    """A newline after an overwritten progress line on a terminal, nothing otherwise (one line per error)."""
    return "\n" if sys.stderr.isatty() else ""


def run(args: argparse.Namespace) -> int:
    """0 when a feasible solution was written, 1 when the answer is infeasible, 2 on bad input or solver error,
    3 under ``--strict`` when the answer is limited (a fallback or a cut stage)."""
    start = _process_start()
    report = {"cut": [], "fallback": None}
    try:
        if args.time_limit is not None:
            check_limit(args.time_limit, "--time-limit")
        if args.backend != "contest":
            check_options(args.backend, {})
        compiling = warm.begin() if args.backend == "contest" else []  # kernels compile while the file is read
        inst = read_instance(args.file)
        name = inst.name
        known = contest_table().get(name)
        limit = args.time_limit if args.time_limit is not None else (known["time_limit"] if known else DEFAULT_LIMIT)
        if args.backend == "contest":
            out = solve_instance(
                inst,
                limit,
                seed=args.seed,
                start=start,
                progress=stderr_progress,
                fallback=_greedy,
                compiling=compiling,
            )
            solution, method, report = out.solution, out.method, out.limits
        else:
            f = load_iopddl(inst)
            left = start + limit - time.monotonic() - ANSWER_SECONDS  # the limit counts from process start
            if left <= 0.05:
                report["cut"].append({"stage": "load", "by": "clock", "reached_us": None})
            sol = solve_formulation(f, args.backend, time_limit=max(left, 0.05), seed=args.seed, presolve=args.reduce)
            if len(sol.assignment) != len(f.nodes):
                print(f"no solution ({sol.status}): {sol.message}", file=sys.stderr)
                return 1
            solution, method, out = [int(s) for s in sol.assignment], args.backend, None
        save_solution(args.out, solution)
    except InfeasibleError as exc:
        print(f"{_fresh_line()}spyreopt iopddl: infeasible: {exc}", file=sys.stderr)
        return 1
    except (FormatError, SolverError, OSError) as exc:
        text = str(exc) if str(exc).startswith(str(args.file)) else f"{args.file}: {exc}"
        print(f"{_fresh_line()}spyreopt iopddl: {type(exc).__name__}: {text}", file=sys.stderr)
        return 2
    wall = time.monotonic() - start
    if sys.stderr.isatty():
        print(file=sys.stderr)
    cost, feasible, details = evaluate_iopddl(inst, solution)
    print(f"instance: {name}")
    print(f"method: {method}  time limit: {limit:g} s  wall clock from process start to solution written: {wall:.1f} s")
    if out is not None:
        print(f"load+reduce: {out.seconds_load:.1f} s  best found at: {out.seconds_to_best:.1f} s  {out.stats}")
        print(
            "stopped by the wall clock (another run may differ)"
            if out.cut_by_clock
            else "finished before the clock (same seed, same solution)"
        )
    limit_text = "no limit" if details["usage_limit"] is None else f"limit {details['usage_limit']:,}"
    print(f"cost: {cost}")
    print(f"feasible: {feasible}  (peak usage {details['peak_usage']:,} of {limit_text})")
    if known:
        print(f"best known: {known['best_cost']}  score: {format_score(score(name, cost, feasible))}")
    else:
        print("best known: unknown (not a contest instance)  score: n/a")
    print(f"solution: {args.out}")
    if limited(report):
        print(summary(report))
    if not feasible:
        return 1
    return 3 if args.strict and limited(report) else 0
