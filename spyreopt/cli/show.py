"""``spyreopt show plan.json --png OUT.png``: the plan's table and its overview picture."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyreopt.cli import read_file
from spyreopt.model.plan import Plan


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print a plan and draw its scratchpad and cost pictures")
    p.add_argument("plan", help="plan JSON (from `spyreopt solve --out`)")
    p.add_argument("--png", help="write the overview picture here")
    p.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    plan = read_file(Path(args.plan), Plan.from_json)
    plan.validate()
    print(plan.table())
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        from spyreopt import viz

        viz.plan_overview(plan).savefig(args.png, dpi=110)
        print(f"picture written to {args.png}")
    return 0
