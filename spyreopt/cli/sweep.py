"""``spyreopt sweep``: workloads x hardware variants x backends, locally or on a Dask scheduler."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack

from dask.utils import parse_bytes

from spyreopt import workloads
from spyreopt.batch import hardware_variants, solve_many, sweep_tasks, write_table
from spyreopt.errors import FormatError
from spyreopt.limits import check_limit
from spyreopt.solvers.registry import check_options


def _list(text: str, parse, what: str) -> list:
    try:
        return [parse(x.strip()) for x in text.split(",") if x.strip()]
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{what}: cannot parse {text!r} ({exc})") from exc


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "sweep",
        help="plan workloads over hardware variants and backends; write one results table",
        description="Every workload x hardware variant (scratchpad size or planner fraction x core count) x backend.",
    )
    s.add_argument("--workloads", default="all", help="comma-separated names, or 'all' (default)")
    s.add_argument("--backends", default="greedy", help="comma-separated backends (default greedy)")
    s.add_argument("--lx-bytes", default="", help="scratchpad sizes per core, e.g. 1MiB,2MiB,4MiB")
    s.add_argument("--planner-fraction", default="", help="fractions of the scratchpad the planner owns, e.g. 0.5,0.8")
    s.add_argument("--cores", default="", help="core counts, e.g. 16,32")
    s.add_argument("--time-limit", type=float, default=10.0, help="seconds per solve")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:port); default: run locally")
    s.add_argument(
        "--workers", type=int, default=1, help="local worker processes when no --scheduler (default 1: in process)"
    )
    s.add_argument("--retries", type=int, default=2, help="resubmissions of a task lost with its worker")
    s.add_argument(
        "--task-timeout",
        type=float,
        help="seconds before a task without result is reported (default 3 x time limit + 60)",
    )
    s.add_argument("--cache", help="plan cache directory shared by the workers")
    s.add_argument("--decompose", choices=["layers"], help="solve repeated layers once (see spyreopt.solving.layers)")
    s.add_argument("--csv", help="write the results table as CSV")
    s.add_argument("--json", help="write the results table as JSON")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    names = workloads.names() if args.workloads == "all" else _list(args.workloads, str, "--workloads")
    graphs = {name: workloads.get(name) for name in names}
    variants = hardware_variants(
        lx_bytes=_list(args.lx_bytes, parse_bytes, "--lx-bytes"),
        planner_fraction=_list(args.planner_fraction, float, "--planner-fraction"),
        cores=_list(args.cores, int, "--cores"),
    )
    backends = _list(args.backends, str, "--backends")
    check_limit(args.time_limit, "--time-limit")
    for b in backends:  # an unknown backend named before any work
        if b != "auto":
            check_options(b, {})
    tasks = sweep_tasks(graphs, variants, backends)
    opts = {"time_limit": args.time_limit, "seed": args.seed}
    if args.cache:
        opts["cache"] = args.cache
    if args.decompose:
        opts["decompose"] = args.decompose
    with ExitStack() as stack:
        executor = None
        if args.scheduler:
            import distributed

            executor = stack.enter_context(distributed.Client(args.scheduler))
        elif args.workers > 1:
            executor = stack.enter_context(ProcessPoolExecutor(args.workers))
        results = list(
            solve_many(
                tasks,
                executor,
                progress=not args.no_progress,
                retries=args.retries,
                task_timeout=args.task_timeout,
                **opts,
            )
        )
    rows = write_table(results, args.csv, args.json)
    print(f"{'workload':20s} {'hardware':32s} {'backend':8s} {'status':10s} {'cost_us':>12s} {'solve_s':>8s}  error")
    for r in rows:
        cost = f"{r['cost_us']:12.3f}" if r["cost_us"] is not None else f"{'-':>12s}"
        solve_s = f"{r['solve_s']:8.2f}" if r["solve_s"] is not None else f"{'-':>8s}"
        print(
            f"{r['workload']:20s} {r['hardware']:32s} {r['backend']:8s} {r['status']:10s} {cost} {solve_s}  {r['error'] or ''}"
        )
    failed = sum(r["error"] is not None for r in rows)
    print(f"{len(rows)} rows, {failed} without a plan", file=sys.stderr)
    for path in (args.csv, args.json):
        if path:
            print(f"results written to {path}", file=sys.stderr)
    return 0
