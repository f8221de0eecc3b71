"""Cost-model fit benchmark: the per-family error of the fitted model on held-out
configurations, and whether it ranks the backends' plans of every built-in workload
the way the simulator does.

Part 1 samples ``--samples`` configurations per op family from the planner's
candidates, simulates them, fits (the command that produced the shipped
coefficients is ``spyreopt fit --samples 200 --seed 0``) and prints the held-out
table; with ``--check N`` it also scores the shipped coefficients on N fresh
configurations per family drawn with another seed.

Part 2 solves every built-in workload with each backend (greedy, cpsat, milp,
anneal, independent, hbm), simulates each plan, and prints predicted and simulated
µs side by side with the rank agreement of the two columns (Spearman, and
``spyreopt.costmodel.ranking``: the ordered pairs, separated by more than
``--tolerance`` on both sides, and how many of them are inverted; tied pairs,
such as two backends returning one plan, are counted apart). One-op workloads,
where every backend finds the same plan, also rank every candidate layout.

    python benchmarks/bench_fit.py
    python benchmarks/bench_fit.py --samples 50 --check 0 --workloads softmax,mlp --time-limit 5
    python benchmarks/bench_fit.py --skip-fit --coefficients spyreopt/costmodel/spyre_public.json
"""

from __future__ import annotations

import argparse
import time

from scipy.stats import spearmanr

import spyreopt as so
from spyreopt.calibrate.fit import evaluate, fit, format_table
from spyreopt.calibrate.sampling import random_configs, simulate_samples
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.costmodel.ranking import rank_agreement, total
from spyreopt.model.division import label
from spyreopt.model.problem import Problem
from spyreopt.solving.fixed import plan_for

BACKENDS = ("greedy", "cpsat", "milp", "anneal", "independent", "hbm")


def fit_table(samples_per_family: int, seed: int, check: int) -> None:
    t0 = time.perf_counter()
    samples, rejected = simulate_samples(random_configs(samples_per_family, seed))
    print(f"{len(samples)} configurations simulated, {len(rejected)} rejected, {time.perf_counter() - t0:.1f} s")
    result = fit(samples, holdout=0.3, seed=seed)
    print(f"\nfitted on 70% per family, scored on the held-out 30% ({result.message}):")
    print(result.format())
    print("\nthe starting point (public figures) on the same held-out configurations:")
    print(format_table(result.start_table))
    if check:
        fresh, _ = simulate_samples(random_configs(check, seed + 1))
        print(f"\nshipped coefficients on {len(fresh)} fresh configurations (seed {seed + 1}):")
        print(format_table(evaluate(Coefficients.load(), fresh)))


def ranking(workloads: list[str], time_limit: float, tol: float, coefficients: Coefficients | None) -> None:
    summary = []
    for name in workloads:
        g = so.workloads.get(name)
        rows = []
        for backend in BACKENDS:
            t0 = time.perf_counter()
            plan = so.solve(g, backend=backend, time_limit=time_limit, seed=0, coefficients=coefficients)
            sim = so.simulate(plan).time_us
            rows.append((backend, plan.cost_us, sim, plan.status, time.perf_counter() - t0))
        pred, simt = [r[1] for r in rows], [r[2] for r in rows]
        rho = _spearman(pred, simt)
        agreement = rank_agreement(pred, simt, tol)
        by_pred = [r[0] for r in sorted(rows, key=lambda r: (r[1], r[0]))]
        by_sim = [r[0] for r in sorted(rows, key=lambda r: (r[2], r[0]))]
        print(f"\n{name}  ({len(g.ops)} ops)")
        print(
            f"  {'backend':12s} {'predicted us':>12s} {'simulated us':>12s} {'sim/pred':>8s} {'status':>9s} {'s':>6s}"
        )
        for backend, p, s, status, sec in rows:
            print(f"  {backend:12s} {p:12.3f} {s:12.3f} {s / p:8.3f} {status:>9s} {sec:6.1f}")
        print(f"  order by predicted: {' < '.join(by_pred)}")
        print(f"  order by simulated: {' < '.join(by_sim)}")
        print(f"  Spearman {rho}; {agreement.summary()} (a gap of {tol:.0%} or less is a tie)")
        summary.append((name, rho, agreement, min(simt) / simt[pred.index(min(pred))]))
    print(
        f"\n{'workload':18s} {'Spearman':>13s} {'inverted/ordered':>16s} {'best simulated / simulated of best predicted':>45s}"
    )
    for name, rho, a, ratio in summary:
        print(f"{name:18s} {rho:>13s} {f'{a.inversions}/{a.ordered}':>16s} {ratio:45.3f}")
    print(f"\nall workloads: {total(a for _, _, a, _ in summary).summary()}; a gap of {tol:.0%} or less is a tie")


def _spearman(pred: list[float], sim: list[float]) -> str:
    if len(set(pred)) < 2 or len(set(sim)) < 2:
        return "- (one plan)"
    return f"{spearmanr(pred, sim).statistic:.3f}"


def candidate_ranking(name: str, tol: float, coefficients: Coefficients | None) -> None:
    """Every layout of a one-op workload, planned alone: predicted against simulated."""
    g = so.workloads.get(name)
    problem = Problem(g, coefficients=coefficients)
    op = problem.ops[0].name
    rows = []
    for lay in problem.cands[0].layouts:
        plan = plan_for(g, {op: (lay.division.factors, lay.stick, "hbm")}, coefficients=coefficients)
        rows.append((lay.division.as_dict(problem.cands[0].space), plan.cost_us, so.simulate(plan).time_us))
    pred, sim = [r[1] for r in rows], [r[2] for r in rows]
    print(f"\n{name}: every candidate layout of {op!r}")
    print(f"  {'division':32s} {'predicted us':>12s} {'simulated us':>12s}")
    for div, p, t in sorted(rows, key=lambda r: r[2]):
        print(f"  {label(div):32s} {p:12.3f} {t:12.3f}")
    print(
        f"  Spearman {_spearman(pred, sim)}; {rank_agreement(pred, sim, tol).summary()}; "
        f"simulated spread worst/best {max(sim) / min(sim):.2f}x"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=200, help="configurations per family for the fit (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", type=int, default=100, help="fresh configurations per family to score the shipped fit")
    ap.add_argument("--skip-fit", action="store_true")
    ap.add_argument("--skip-ranking", action="store_true")
    ap.add_argument("--workloads", default=",".join(so.workloads.names()))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--tolerance", type=float, default=0.01, help="gaps below this are ties (default 1%%)")
    ap.add_argument("--coefficients", help="coefficient file for the ranking (default: the shipped fit)")
    args = ap.parse_args(argv)
    if not args.skip_fit:
        fit_table(args.samples, args.seed, args.check)
    if not args.skip_ranking:
        coef = Coefficients.load(args.coefficients) if args.coefficients else None
        names = args.workloads.split(",")
        ranking(names, args.time_limit, args.tolerance, coef)
        for name in names:
            if len(so.workloads.get(name).compute_ops()) == 1:
                candidate_ranking(name, args.tolerance, coef)
