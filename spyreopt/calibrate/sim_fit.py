"""Calibrate the simulator's machine parameters (``SimParams``) on device sweep rows, judged out of sample.

The simulator stays an independent judge: it computes from the plan and the hardware spec alone. What is
fitted here are the knobs of its machine below the published figures (a core's DMA rate and request
latency, the per-op start cost, vector, transcendental and reduction cycles per stick, the PE pass bubble,
the multicast rate), never a cost-model coefficient. Each row runs the configuration the cost model picks
among its divisions (as ``spyreopt reproduce --sweep`` does); plans do not depend on the parameters, so
they are built once and only simulated again.

The simulator is costly (about 10 ms a plan), so a fit sees a subsample of its training rows: at most
``PER_FAMILY`` rows of each family, drawn with a fixed seed. The fit is bounded least squares on the
relative error (the figure it is judged by), finite differences at a step of ``DIFF_STEP`` of each parameter
(the simulator counts whole tiles and requests: a tiny step sees no change), at most ``MAX_NFEV`` steps. Cross-validation uses the cost model's
folds (``sweep_eval.folds``: shape groups, seed fixed); only held-out predictions are reported.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from spyreopt.calibrate import sweep_eval
from spyreopt.calibrate.sampling import reference_coefficients
from spyreopt.errors import InfeasibleError, PlanError
from spyreopt.hw.sim_machine import SimParams, device_machine

FREE = (
    "dma_latency_ns",
    "core_dma_gbps",
    "op_overhead_ns",
    "vector_cycles",
    "transcendental_cycles",
    "stick_reduce_extra_cycles",
    "pe_pass_bubble_cycles",
    "multicast_gbps",
)
BOUNDS = {
    "dma_latency_ns": (20.0, 5000.0),
    "core_dma_gbps": (5.0, 400.0),
    "op_overhead_ns": (0.0, 20000.0),
    "vector_cycles": (0.25, 16.0),
    "transcendental_cycles": (0.25, 32.0),
    "stick_reduce_extra_cycles": (0.0, 64.0),
    "pe_pass_bubble_cycles": (0.0, 64.0),
    "multicast_gbps": (2.0, 400.0),
}
START = {"core_dma_gbps": 60.0, "op_overhead_ns": 1000.0}  # the uncalibrated machine has no such limit or cost
PER_FAMILY = 20
DIFF_STEP = 0.05
MAX_NFEV = 10  # iterations (each also costs a finite-difference Jacobian: len(FREE) more simulations)


@dataclass
class SimRows:
    """The mapped rows of a sweep with the plan each one runs (None: the plan could not be built)."""

    data: sweep_eval.SweepData
    plans: list  # distinct plans
    plan_of: np.ndarray  # per mapped row, its plan (-1: none)
    why: list[str | None]  # per distinct plan, why it could not be built


def build(data: sweep_eval.SweepData, picks: np.ndarray) -> SimRows:
    """Plan every mapped row's picked configuration once (the plans do not depend on the simulator)."""
    from spyreopt.solving.fixed import plan_for  # plans sit above calibrate's imports

    configs = [c for i in data.mapped for c in data.programs[i].configs]
    key_of: dict = {}
    plans, why, plan_of = [], [], np.full(len(picks), -1, dtype=int)
    for n, s in enumerate(picks):
        config = configs[s]
        key = (config.built.to_json(), config.decisions)
        if key not in key_of:
            key_of[key] = len(plans)
            try:
                plans.append(plan_for(config.built, config.decision_map(), None, reference_coefficients()))
                why.append(None)
            except (PlanError, InfeasibleError) as exc:
                plans.append(None)
                why.append(str(exc))
        plan_of[n] = key_of[key] if plans[key_of[key]] is not None else -1
    return SimRows(data, plans, plan_of, why)


def simulate_rows(rows: SimRows, params: SimParams, which: np.ndarray) -> np.ndarray:
    """Simulated µs of the mapped rows ``which`` (NaN where there is no plan or the simulator rejects it)."""
    from spyreopt.hw.simulator import simulate

    times: dict[int, float] = {}
    out = np.full(len(which), np.nan)
    for n, i in enumerate(which):
        p = int(rows.plan_of[i])
        if p < 0:
            continue
        if p not in times:
            try:
                times[p] = simulate(rows.plans[p], params).time_us
            except PlanError:
                times[p] = np.nan
        out[n] = times[p]
    return out


def subsample(rows: SimRows, train: np.ndarray, per_family: int = PER_FAMILY, seed: int = sweep_eval.SEED):
    """At most ``per_family`` training rows of each family that have a plan, drawn with ``seed``."""
    fams = rows.data.families
    by: dict[str, list[int]] = {}
    for i in train:
        if rows.plan_of[i] >= 0:
            by.setdefault(fams[i], []).append(int(i))
    rng = random.Random(seed)
    out = []
    for fam in sorted(by):
        members = by[fam]
        out += members if len(members) <= per_family else sorted(rng.sample(members, per_family))
    return np.array(sorted(out), dtype=int)


@dataclass
class SimFit:
    params: SimParams
    message: str
    nfev: int
    rows: int  # training rows the fit saw


def fit_params(rows: SimRows, train: np.ndarray, seed: int = sweep_eval.SEED, max_nfev: int = MAX_NFEV) -> SimFit:
    """Least squares on the relative error of a seeded subsample of the ``train`` rows."""
    sample = subsample(rows, train, seed=seed)
    base = device_machine()
    lo = np.array([BOUNDS[n][0] for n in FREE])
    hi = np.array([BOUNDS[n][1] for n in FREE])
    x0 = np.clip([START.get(n, getattr(base, n)) for n in FREE], lo, hi)
    measured = rows.data.measured_us[sample]

    def residual(x: np.ndarray) -> np.ndarray:
        sim = simulate_rows(rows, replace(base, **dict(zip(FREE, map(float, x)))), sample)
        return np.nan_to_num(sim / measured - 1.0, nan=0.0)

    res = least_squares(residual, x0, bounds=(lo, hi), x_scale=np.maximum(np.abs(x0), 1.0), diff_step=DIFF_STEP,
                        max_nfev=max_nfev)  # fmt: skip
    fitted = replace(base, **{n: float(v) for n, v in zip(FREE, res.x)})
    return SimFit(fitted, str(res.message), int(res.nfev), len(sample))


def cross_validate(rows: SimRows, k: int = sweep_eval.FOLDS, seed: int = sweep_eval.SEED, log=print):
    """Held-out simulated µs of every mapped row (each from the fit without its fold) and each fold's fit."""
    f = sweep_eval.folds(rows.data.groups, k, seed)
    held, fits = np.full(len(rows.data.mapped), np.nan), []
    for n in range(k):
        train, test = np.flatnonzero(f != n), np.flatnonzero(f == n)
        fit = fit_params(rows, train, seed)
        held[test] = simulate_rows(rows, fit.params, test)
        fits.append(fit)
        log(f"  fold {n}: {fit.rows} training rows, {fit.nfev} evaluations, {fit.message}")
    return held, fits


# ---- scores -------------------------------------------------------------------------------------
def family_scores(data: sweep_eval.SweepData, sim_us: np.ndarray) -> list[dict]:
    """Per family (and all): mapped rows, rows simulated, RMS and median relative error, Spearman."""
    from scipy.stats import spearmanr

    fams = np.array(data.families)
    out = []
    for family in [*dict.fromkeys(fams), "all"]:
        sel = np.ones(len(fams), dtype=bool) if family == "all" else fams == family
        ok = sel & np.isfinite(sim_us)
        rel = sim_us[ok] / data.measured_us[ok] - 1
        rho = float(spearmanr(sim_us[ok], data.measured_us[ok]).statistic) if ok.sum() > 2 else float("nan")
        out.append({"family": family, "mapped": int(sel.sum()), "simulated": int(ok.sum()),
                    "rms": float(np.sqrt(np.mean(rel**2))) if len(rel) else float("nan"),
                    "median": float(np.median(np.abs(rel))) if len(rel) else float("nan"), "spearman": rho})  # fmt: skip
    return out


def format_scores(named: list[tuple[str, list[dict]]]) -> str:
    """Side by side: per family, each named column set's RMS / median / Spearman."""
    head = ["family", "mapped"] + [f"{name} {x}" for name, _ in named for x in ("RMS", "median", "Spearman")]
    body = [head]
    for n, row in enumerate(named[0][1]):
        line = [row["family"], str(row["mapped"])]
        for _, table in named:
            r = table[n]
            line += [sweep_eval._pct(r["rms"]), sweep_eval._pct(r["median"]), f"{r['spearman']:.3f}"]
        body.append(line)
    return sweep_eval._grid(body)


def write(path: str | Path, fit: SimFit, source: str, held: list[dict], before: list[dict]) -> None:
    """The calibrated machine's one data file: the parameters, the command, the held-out error."""
    doc = {
        "source": source,
        "machine": "HardwareSpec() (the spyre preset); these are SimParams, the simulator's own knobs",
        "params": {n: getattr(fit.params, n) for n in FREE},
        "fit": {
            "free": list(FREE),
            "rows": fit.rows,
            "message": fit.message,
            "evaluations": fit.nfev,
            "defaults_before": {n: v for n, v in asdict(SimParams()).items() if n in FREE},
            "expected_error": "held out, the cost model's folds (shape groups), seed as in source",
            "families_held_out": held,
            "families_uncalibrated": before,
        },
    }
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")
