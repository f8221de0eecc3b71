"""``spyreopt show plan.json --png OUT.png``: the plan's table and its overview picture (per layer on whole models)."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyreopt.cli import read_file
from spyreopt.model.plan import Plan
from spyreopt.model.plan_summary import summary_line
from spyreopt.model.plan_table import AGGREGATE_OPS, edge_lines, group_table, notes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print a plan and draw its scratchpad and cost pictures")
    p.add_argument("plan", help="plan JSON (from `spyreopt solve --out`)")
    p.add_argument("--png", help="write the overview picture here")
    p.add_argument("--check", action="store_true", help="validate the plan first (every hard constraint re-derived)")
    p.add_argument(
        "--ops",
        action="store_true",
        help=f"print every op even above {AGGREGATE_OPS} ops (default: one row per layer)",
    )
    p.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    plan = read_file(Path(args.plan), Plan.from_json)
    if args.check:
        plan.validate()
    if len(plan.ops) > AGGREGATE_OPS and not args.ops:
        print(
            f"{plan.graph.get('name', 'graph')}: {len(plan.ops):,} ops, one row per layer or segment (--ops: every op)"
        )
        print(group_table(plan))
        print("\n".join(edge_lines(plan)))
        print(summary_line(plan))
        print("\n".join(notes(plan)))
    else:
        print(plan.table())
    print("validated: every hard constraint holds" if args.check else "not re-validated (--check validates)")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        from spyreopt import viz

        viz.plan_overview(plan).savefig(args.png, dpi=110)
        print(f"picture written to {args.png}")
    return 0
