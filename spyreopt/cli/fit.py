"""``spyreopt fit``: fit the cost model's coefficients to the simulator (or to a CSV of
device measurements) and print the held-out error per op family."""

from __future__ import annotations

import argparse
import sys
import time

from spyreopt.calibrate.fit import fit, format_table
from spyreopt.calibrate.sampling import FAMILIES, random_configs, read_csv, simulate_samples, write_csv


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="fit the cost model to the simulator or a CSV of measurements; print the held-out error per op family",
        description="Sample configurations per op family (matmul, bmm, pointwise, reduction, softmax, relayout, "
        "restickify) from the planner's own candidates, measure them on the simulator (or read measurements from "
        "--csv; columns in spyreopt.calibrate.sampling), fit the coefficients by bounded least squares on relative "
        "error, and print per family the RMS relative error and Spearman rank correlation on held-out configurations.",
    )
    p.add_argument("--samples", type=int, default=200, metavar="N", help="configurations per family (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the configurations and of the held-out split")
    p.add_argument("--csv", metavar="FILE", help="fit to these measurements instead of simulating")
    p.add_argument("--holdout", type=float, default=0.3, help="fraction of each family held out (default 0.3)")
    p.add_argument("--out", metavar="FILE", help="write the fitted coefficients here (loadable by Coefficients.load)")
    p.add_argument("--save-samples", metavar="FILE", help="write the simulated samples as a CSV (to rerun on a device)")
    p.add_argument("--device", action="store_true", help="also fit the published device rows (spyreopt reproduce)")
    p.add_argument("--device-weight", type=float, metavar="W", help="weight of a device row (default: as all samples)")
    p.add_argument(
        "--device-holdout", type=float, metavar="F", help="fraction of each device family held out (default --holdout)"
    )
    p.add_argument(
        "--sweep",
        metavar="CSV",
        help="fit to a torch-spyre device sweep (docs/device-sweep.md) and the published rows instead: print the "
        "grouped k-fold cross-validated error per family and the decision accuracy, then fit on every row",
    )
    p.add_argument("--folds", type=int, default=5, help="--sweep: folds of the grouped cross-validation (default 5)")
    p.add_argument(
        "--target",
        choices=("model", "simulator"),
        default="model",
        help="--sweep: fit the cost model's coefficients (default) or the simulator's machine parameters",
    )
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    if args.sweep and args.target == "simulator":
        from spyreopt.cli.fit_sim import fit_simulator

        return fit_simulator(args)
    if args.sweep:
        return _fit_sweep(args)
    if args.samples < 2:
        print("spyreopt fit: --samples must be at least 2", file=sys.stderr)
        return 2
    if not 0 <= args.holdout < 1:
        print("spyreopt fit: --holdout must be in [0, 1)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    if args.csv:
        samples = read_csv(args.csv)
        print(f"{len(samples)} measurements from {args.csv}")
    else:
        configs = random_configs(args.samples, args.seed)
        samples, rejected = simulate_samples(configs)
        print(f"{len(samples)} configurations simulated ({args.samples} per family x {len(FAMILIES)} families)")
        for config, why in rejected:
            print(f"  rejected by the simulator: {config.family} {config.decisions}: {why}")
        if args.save_samples:
            write_csv(samples, args.save_samples)
            print(f"samples written to {args.save_samples}")
    weights = None
    if args.device:  # imported here: spyreopt.reproduce plans with the full solver stack
        from spyreopt.reproduce import device_samples

        rows, skipped = device_samples()
        print(f"{len(rows)} published device rows; not fitted: " + "; ".join(skipped))
        w = args.device_weight or len(samples) / len(rows)
        weights = [1.0] * len(samples) + [w] * len(rows)
        samples = samples + rows
    if args.device_holdout is not None and not 0 <= args.device_holdout < 1:
        print("spyreopt fit: --device-holdout must be in [0, 1)", file=sys.stderr)
        return 2
    result = fit(samples, holdout=args.holdout, seed=args.seed, weights=weights, device_holdout=args.device_holdout)
    print(f"fit: {result.message} ({result.stats['nfev']} evaluations, {time.perf_counter() - start:.1f} s in all)")
    print("\nstarting point (public figures; START values for the terms they lack):")
    print(format_table(result.start_table))
    print(f"\nfitted ({'held-out' if result.n_test else 'training'} configurations):")
    print(result.format())
    if args.out:
        source = " ".join(["spyreopt", "fit", *_argv(args)])
        result.to_json(args.out, source=source)
        print(f"\ncoefficients written to {args.out}")
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    """The options that reproduce this fit (for the coefficient file's "source")."""
    out = ["--csv", args.csv] if args.csv else ["--samples", str(args.samples)]
    out += ["--device"] if args.device else []
    out += ["--device-weight", str(args.device_weight)] if args.device_weight else []
    out += ["--device-holdout", str(args.device_holdout)] if args.device_holdout is not None else []
    return out + ["--seed", str(args.seed), "--holdout", str(args.holdout), "--out", args.out]


def _fit_sweep(args: argparse.Namespace) -> int:
    """Cross-validate by shape group, report held-out figures only, then fit on every row (the shipped fit)."""
    import json
    from pathlib import Path

    from spyreopt.calibrate import sweep_eval
    from spyreopt.calibrate.sweep import read_sweep
    from spyreopt.reproduce import HELD_OUT, device_samples

    start = time.perf_counter()
    data = sweep_eval.load(read_sweep(args.sweep))
    published, skipped = device_samples()
    weight = args.device_weight or 1.0
    print(f"{len(data.mapped)} mapped sweep rows, {len(published)} published device rows (weight {weight:g} each)")
    held, _ = sweep_eval.cross_validate(data, published, weight, k=args.folds, seed=args.seed)
    final = sweep_eval.fit_rows(data, list(range(len(data.mapped))), published, weight)
    rep = sweep_eval.report(data, final.coefficients, model_us=held)
    loeo = {}  # per published experiment, the fit without its rows: what `spyreopt reproduce` prints as held out
    for key, family in HELD_OUT.items():
        rest = [s for s in published if s.config.family != family]
        loeo[key] = sweep_eval.fit_rows(data, list(range(len(data.mapped))), rest, weight).coefficients.to_dict()
    print(f"\nheld out ({args.folds}-fold by shape group, seed {args.seed}); simulator: its own parameters")
    print(rep.format())
    print(f"\nfit on every row: {final.message} ({final.nfev} evaluations, {time.perf_counter() - start:.1f} s in all)")
    if args.out:
        source = f"spyreopt fit --sweep {args.sweep} --folds {args.folds} --seed {args.seed}"
        source += f" --device-weight {weight:g} --out {args.out}"
        doc = {
            "source": source,
            "coefficients": final.coefficients.to_dict(),
            "fit": {
                "data": "torch-spyre cost-model sweep (sweep_train.csv) + spyreopt/costmodel/device_measurements.json",
                "start": "spyre_public.json with fit.START; simulator samples: none",
                "expected_error": f"held-out, {args.folds}-fold by shape group (op, rows, cols, M, K), seed {args.seed}",
                "families": [vars(r) for r in rep.families],
                "decisions": {name: vars(d) for name, d in rep.decided},
                "published_not_fitted": skipped,
                "held_out_coefficients": loeo,
            },
        }
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"coefficients written to {args.out}")
    return 0
