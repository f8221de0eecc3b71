"""``spyreopt simulate PLAN.json``: the simulator's verdict on a plan, total and per op."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from spyreopt.cli import read_file
from spyreopt.cli.progress import Progress
from spyreopt.errors import FormatError
from spyreopt.hw.simulator import simulate
from spyreopt.model.plan import Plan


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a plan JSON and print total and per-op simulated microseconds",
        description="Simulate a plan (written by `spyreopt solve --out`) on the hardware it was made for; "
        "print per-op simulated and predicted microseconds with the phase breakdown, and the total. "
        "An illegal plan is reported with the op, buffer, core, address and step.",
    )
    p.add_argument("plan", help="plan JSON file")
    p.add_argument(
        "--full", action="store_true", help="simulate every instance of a repeated tiled loop (slower on whole models)"
    )
    p.set_defaults(func=_simulate)


def _simulate(args: argparse.Namespace) -> int:
    path = Path(args.plan)
    if not path.is_file():
        raise FormatError(f"plan file {str(path)!r} does not exist")
    plan = read_file(path, Plan.from_json)
    start = time.perf_counter()
    result = simulate(plan, repeats=not args.full, progress=Progress("simulate", "steps", start))
    print(f"{plan.graph.get('name', 'graph')}: {len(plan.ops)} ops, plan from {plan.backend}")
    print(result.table({o.name: o.predicted_us for o in plan.ops}))
    if result.repeated_loops:
        print(
            f"{result.repeated_loops} of {len(result.loops)} tiled loops repeat a loop simulated before and take its "
            f"times (identical ops, slices, addresses and scratchpad load: the same timing; their scratchpad "
            f"checks are not repeated; --full simulates every one)"
        )
    ratio = result.time_us / plan.cost_us if plan.cost_us else float("nan")
    print(
        f"predicted {plan.cost_us:,.3f} µs   simulated {result.time_us:,.3f} µs   (simulated / predicted {ratio:.3f})"
        f"   [{time.perf_counter() - start:.1f} s]"
    )
    return 0
