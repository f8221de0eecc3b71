"""``spyreopt reproduce``: every published Spyre device measurement next to the model's prediction."""

from __future__ import annotations

import argparse
import json
import time
from importlib import resources
from pathlib import Path

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.reproduce import EXPERIMENTS, run, table

DEVICE_FIT = "spyre_device.json"  # `spyreopt fit --sweep` on the device sweep and the published rows
HELP = "rebuild the published Spyre device measurements and print predicted next to published"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help=HELP,
        description="Rebuild each published Spyre device experiment (softmax scratchpad stages, Granite decode "
        "projections with forced divisions, an on-chip relayout, the blog's co-optimised MLP) with pin/forbid, "
        "plan it, and print the published figure, the prediction and the relative error. Figures and sources: "
        "spyreopt/costmodel/device_measurements.json.",
    )
    p.add_argument("--backend", default="cpsat", help="backend planning each experiment (default cpsat)")
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--coefficients",
        metavar="FILE",
        help="cost-model coefficients (default: the shipped ones; with --sweep: the device fit, spyre_device.json); "
        "a file of `spyreopt fit --sweep` also gives each published experiment's held-out prediction",
    )
    p.add_argument("--only", choices=sorted(EXPERIMENTS), nargs="+", help="run only these experiments")
    p.add_argument("--json", metavar="FILE", help="write the rows {experiment, quantity, unit, published, ...} here")
    p.add_argument(
        "--sweep",
        metavar="CSV",
        help="instead: predict every row of a torch-spyre cost-model sweep (docs/device-sweep.md) with the model and "
        "the simulator; print per family their errors beside torch-spyre's, and the decision accuracy; --json then "
        "holds one record per row {id, op, predicted_us, simulated_us, unmapped}",
    )
    p.set_defaults(func=_reproduce)


def _reproduce(args: argparse.Namespace) -> int:
    coef = Coefficients.load(args.coefficients) if args.coefficients else None
    if args.sweep:
        return _sweep(args, coef)
    rows = run(
        backend=args.backend,
        time_limit=args.time_limit,
        seed=args.seed,
        coefficients=coef,
        only=args.only,
        coefficients_path=args.coefficients,
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        print(f"{len(rows)} rows written to {args.json}")
    return 0


def _sweep(args: argparse.Namespace, coef: Coefficients | None) -> int:
    from spyreopt.calibrate import sweep_eval
    from spyreopt.calibrate.sweep import read_sweep

    start = time.perf_counter()
    if coef is None:  # the device fit, not the planner's default (docs/device-model.md says why)
        coef = Coefficients.load(resources.files("spyreopt.costmodel").joinpath(DEVICE_FIT))
        print(f"coefficients: {DEVICE_FIT} (the device fit; the planner's default is spyre_default.json)")
    data = sweep_eval.load(read_sweep(args.sweep))
    rep = sweep_eval.report(data, coef)
    print(rep.format())
    print(f"({time.perf_counter() - start:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rep.records(), indent=1) + "\n")
        print(f"{len(data.rows)} records written to {args.json}")
    return 0
