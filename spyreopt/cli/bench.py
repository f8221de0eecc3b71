"""``spyreopt bench``: every backend on a suite, one row per (workload, backend)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spyreopt import bench


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark backends against baselines, bounds and published results")
    p.add_argument("--suite", default="spyre", help="spyre | scaling | minimalloc | iopddl | all")
    p.add_argument("--backends", default=",".join(bench.SPYRE_BACKENDS))
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sizes", default="10,30,100,300,1000,3000", help="scaling suite: approximate op counts")
    p.add_argument("--json", help="write rows as JSON")
    p.add_argument("--markdown", help="write the tables as Markdown")
    p.add_argument("--plot", default="scaling.png", help="scaling suite: where to save the plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    backends = [b for b in args.backends.split(",") if b]
    suites = ["spyre", "scaling", "minimalloc", "iopddl"] if args.suite == "all" else args.suite.split(",")
    rows, facts = [], {}
    progress = not args.quiet
    for suite in suites:
        if suite == "spyre":
            r, facts = bench.spyre_suite(backends, args.time_limit, args.seed, progress)
        elif suite == "scaling":
            sizes = tuple(int(s) for s in args.sizes.split(","))
            r = bench.scaling_suite([b for b in backends if b not in ("hbm", "independent")], args.time_limit, sizes, args.seed, progress)
            bench.scaling_plot(r, args.plot)
            print(f"scaling plot written to {args.plot}")
        elif suite == "minimalloc":
            r = bench.minimalloc_suite(max(args.time_limit, 60.0), progress=progress)
        elif suite == "iopddl":
            r = bench.iopddl_suite(backends, args.time_limit, seed=args.seed, progress=progress)
        else:
            print(f"spyreopt bench: unknown suite {suite!r}")
            return 2
        rows.extend(r)
    text = bench.markdown(rows, facts)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(bench.to_json(rows, facts), indent=1, sort_keys=True))
    return 0 if all(r.valid for r in rows) else 1
