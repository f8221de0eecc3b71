"""``spyreopt fit --sweep FILE --target simulator``: calibrate the simulator's machine on a device sweep.

Cross-validates by shape group (the cost model's folds), prints the held-out error per family beside the
uncalibrated machine's, then fits on every row and writes the parameters with this command (``--out``;
the shipped calibration is ``spyreopt/hw/sim_device.json``, the simulator's default machine).
"""

from __future__ import annotations

import argparse
import time

from spyreopt.calibrate import sim_fit, sweep_eval
from spyreopt.calibrate.sweep import read_sweep
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.hw.sim_machine import SimParams

PICKS = "spyre_device.json"  # each row runs the configuration the device-fitted cost model picks


def fit_simulator(args: argparse.Namespace) -> int:
    from importlib import resources

    import numpy as np

    start = time.perf_counter()
    data = sweep_eval.load(read_sweep(args.sweep))
    picks_from = resources.files("spyreopt.costmodel").joinpath(PICKS)
    _, picks = sweep_eval.predict(Coefficients.load(str(picks_from)), data)
    rows = sim_fit.build(data, picks)
    every = np.arange(len(data.mapped))
    print(f"{len(data.mapped)} mapped sweep rows, {sum(p is not None for p in rows.plans)} distinct plans "
          f"(configurations picked by {PICKS}); fitting {', '.join(sim_fit.FREE)}")  # fmt: skip
    before = sim_fit.family_scores(data, sim_fit.simulate_rows(rows, SimParams(), every))
    held, _ = sim_fit.cross_validate(rows, k=args.folds, seed=args.seed)
    after = sim_fit.family_scores(data, held)
    print(f"\nsimulator on the device rows: uncalibrated (SimParams()) and held out ({args.folds}-fold by shape "
          f"group, seed {args.seed}, at most {sim_fit.PER_FAMILY} training rows per family)")  # fmt: skip
    print(sim_fit.format_scores([("uncalibrated", before), ("held out", after)]))
    decided = sweep_eval.decisions(data.rows, data.mapped, np.where(np.isfinite(held), held, np.inf))
    print("\n" + sweep_eval.format_decisions([("simulator (held out)", decided)]))
    final = sim_fit.fit_params(rows, every, args.seed)
    print(f"\nfit on every row: {final.message} ({final.nfev} evaluations, {time.perf_counter() - start:.0f} s in all)")
    for n in sim_fit.FREE:
        print(f"  {n} = {getattr(final.params, n):.4g}  (uncalibrated {getattr(SimParams(), n):.4g})")
    if args.out:
        source = f"spyreopt fit --sweep {args.sweep} --target simulator --folds {args.folds} --seed {args.seed}"
        sim_fit.write(args.out, final, f"{source} --out {args.out}", after, before)
        print(f"parameters written to {args.out}")
    return 0
