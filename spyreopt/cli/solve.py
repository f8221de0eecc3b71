"""``spyreopt workloads`` and ``spyreopt solve WORKLOAD_OR_GRAPH.json``."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyreopt import workloads
from spyreopt.api import solve
from spyreopt.model.graph import Graph
from spyreopt.model.restrict import load_pin
from spyreopt.solvers.registry import names as backend_names


def load_graph(target: str) -> Graph:
    """A built-in workload name, or a path to a graph JSON file."""
    path = Path(target)
    if path.suffix == ".json" or path.exists():
        return Graph.from_json(path.read_text())
    return workloads.get(target)


def add_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("workloads", help="list the built-in workloads")
    w.set_defaults(func=_workloads)
    s = sub.add_parser("solve", help="plan a built-in workload or a graph JSON and print the plan")
    s.add_argument("target", help="workload name (see `spyreopt workloads`) or graph.json")
    s.add_argument("--backend", default="greedy", help=f"one of {', '.join(backend_names())}")
    s.add_argument("--time-limit", type=float, default=10.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", help="write the plan JSON here")
    s.add_argument("--cache", metavar="DIR", help="plan cache directory: reuse the plan of an identical problem")
    s.add_argument("--decompose", choices=["layers"], help="solve each distinct repeated layer once")
    s.add_argument("--pin", metavar="FILE.json", help='{op: {"division": {dim: parts}, "residency": "lx"|"hbm"}}')
    s.add_argument("--forbid", default="", help="capabilities, e.g. relayout,staging (see spyreopt.model.restrict)")
    s.set_defaults(func=_solve)


def _workloads(args: argparse.Namespace) -> int:
    for name in workloads.names():
        g = workloads.get(name)
        print(f"{name:20s} {len(g.ops):4d} ops   {(workloads.WORKLOADS[name].__doc__ or '').strip().splitlines()[0] if workloads.WORKLOADS[name].__doc__ else ''}")
    return 0


def _solve(args: argparse.Namespace) -> int:
    graph = load_graph(args.target)
    plan = solve(
        graph, backend=args.backend, time_limit=args.time_limit, seed=args.seed, cache=args.cache, decompose=args.decompose,
        pin=load_pin(args.pin) if args.pin else None, forbid=args.forbid,
    )  # fmt: skip
    print(f"{graph.name}: {len(plan.ops)} ops")
    cached = plan.stats.get("timing", {}).get("cache")
    if cached:
        print(f"plan cache {args.cache}: {'hit' if cached['hit'] else 'miss'}")
    print(plan.table())
    if args.out:
        Path(args.out).write_text(plan.to_json())
        print(f"plan written to {args.out}")
    return 0
