"""``spyreopt bench``: every backend on a suite, one row per (workload, backend)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from spyreopt.bench.data import ENV, data_dir
from spyreopt.bench.iopddl import contest_suite, iopddl_suite
from spyreopt.bench.minimalloc import minimalloc_suite
from spyreopt.bench.report import markdown, to_json
from spyreopt.bench.scaling import scaling_plot, scaling_suite
from spyreopt.bench.spyre import SPYRE_BACKENDS, spyre_suite
from spyreopt.limits import check_limit
from spyreopt.solvers.registry import check_options

SUITES = ("spyre", "scaling", "minimalloc", "iopddl", "models", "limits", "rates")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark backends against baselines, bounds and published results")
    p.add_argument("--suite", default="spyre", help=f"{' | '.join(SUITES)} | all, or a comma-separated list")
    p.add_argument("--backends", help=f"comma-separated (default {','.join(SPYRE_BACKENDS)}; limits: also auto, trws)")
    p.add_argument("--workloads", help="limits suite: comma-separated built-in workloads (default: every one)")
    p.add_argument(
        "--time-limit", type=float,
        help="seconds per solve (default 10; the iopddl suite's contest engine: each instance's contest limit)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sizes", default="10,30,100,300,1000,3000", help="scaling suite: approximate op counts")
    p.add_argument(
        "--data",
        help="minimalloc and iopddl suites: directory with minimalloc/challenging/*.csv and iopddl/*.json.gz "
        "(default: $SPYREOPT_DATA)",
    )
    p.add_argument("--json", help="write rows as JSON")
    p.add_argument("--markdown", help="write the tables as Markdown")
    p.add_argument("--plot", default="scaling.png", help="scaling suite: where to save the plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_bench)


def data_env() -> bool:
    return bool(os.environ.get(ENV))


def _bench(args: argparse.Namespace) -> int:
    backends = [b for b in (args.backends or ",".join(SPYRE_BACKENDS)).split(",") if b]
    suites = list(SUITES) if args.suite == "all" else args.suite.split(",")
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"spyreopt bench: unknown suite(s) {unknown}; known: {', '.join(SUITES)}, all", file=sys.stderr)
        return 2
    if args.time_limit is not None:
        check_limit(args.time_limit, "--time-limit")
    for b in backends:
        if b != "auto":
            check_options(b, {})  # an unknown backend named before any work
    rows, facts = [], {}
    limit = args.time_limit if args.time_limit is not None else 10.0
    progress = not args.quiet
    for suite in suites:
        if suite == "spyre":
            r, facts = spyre_suite(backends, limit, args.seed, progress)
        elif suite == "scaling":
            sizes = tuple(int(s) for s in args.sizes.split(","))
            formulation_backends = [b for b in backends if b not in ("hbm", "independent")]
            r = scaling_suite(formulation_backends, limit, sizes, args.seed, progress)
            scaling_plot(r, args.plot)
            print(f"scaling plot written to {args.plot}")
        elif suite == "models":  # whole decoders: auto within the limit (default 60 s) against anneal given 10x
            from spyreopt.bench.models import run as models_suite

            r = models_suite(time_limit=args.time_limit or 60.0, seed=args.seed, progress=progress)
        elif suite == "limits":  # wall from process start against 1.1 T + 0.5 s, and never worse than greedy
            from spyreopt.bench import limits as limits_suite

            names = args.workloads.split(",") if args.workloads else None
            every = list(dict.fromkeys(backends + ["auto", "trws"])) if args.backends is None else backends
            r = limits_suite.solve_rows(every, names=names, progress=progress)
            if args.data is not None or data_env():
                r += limits_suite.iopddl_rows(
                    limits_suite.iopddl_files(data_dir(args.data, "iopddl")), progress=progress
                )
        elif suite == "rates":  # the machine-calibrated rates of spyreopt.rates, measured on this machine
            from spyreopt.bench.rates import rate_rows

            r = rate_rows(seed=args.seed)
        elif suite == "minimalloc":
            directory = data_dir(args.data, "minimalloc", "challenging")
            r = minimalloc_suite(max(limit, 60.0), directory, progress=progress)
        else:
            directory = data_dir(args.data, "iopddl")
            r = contest_suite(directory, args.time_limit, seed=args.seed, progress=progress)
            r += iopddl_suite(backends, limit, directory, seed=args.seed, progress=progress)
        rows.extend(r)
    text = markdown(rows, facts)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(rows, facts), indent=1, sort_keys=True))
    return 0 if all(r.valid for r in rows) else 1
