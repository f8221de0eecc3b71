"""``spyreopt explain PLAN.json [--op NAME]``: why each op and each edge not in place has its decision."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyreopt.cli.progress import Progress
from spyreopt.errors import FormatError
from spyreopt.model.explain import explain
from spyreopt.model.plan import Plan

PROGRESS_OPS = 80  # a progress line on stderr above this many ops (a whole model takes tens of seconds)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="explain a plan: each op's best rejected alternatives and their cost, each edge not in place",
        description="For each op (or one): the chosen division, stick and residency with its time breakdown; "
        "the best alternative candidate, the fastest one alone and the other residency, each with the whole "
        "plan's cost when only that op changes and the price of every change (own time, each neighbouring "
        "edge), or why it is impossible (a loop's rule, scratchpad capacity at a named step with the live "
        "buffers, a pin or forbid). Then each edge that is not in place, and what would put it in place.",
    )
    p.add_argument("plan", help="plan JSON (from `spyreopt solve --out`)")
    p.add_argument("--op", help="explain only this op and its edges")
    p.set_defaults(func=_explain)


def _explain(args: argparse.Namespace) -> int:
    path = Path(args.plan)
    if not path.is_file():
        raise FormatError(f"plan file {str(path)!r} does not exist")
    plan = Plan.from_json(path.read_text())
    progress = Progress("explain", "ops") if len(plan.ops) > PROGRESS_OPS and args.op is None else None
    print(explain(plan, args.op, progress).text())
    return 0
