"""The cost model and the simulator on a device sweep: predictions, per-family errors, decision accuracy,
grouped cross-validation and the fit on every row.

A row is priced as the model's cheapest of its configurations (``sweep.program``: the divisions
over its core count), from the coefficient-free terms of each (``fit.terms``), so pricing a whole
file is one vectorised evaluation and a fit is a least-squares problem over those terms. The
simulator runs the configuration the model picked, once per distinct configuration.

Decision accuracy (issue 25): the rows of one shape group (op, rows, cols, M, K) under two or more
configurations (cores, tiles, lx; repeated measurements merged by their median) are a decision;
the model picks its cheapest configuration (a tie within ``TIE`` goes against the model: the
slowest measured of the tied), and is right when that runs within ``RIGHT`` of the measured best.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from spyreopt.calibrate import fit as fitmod
from spyreopt.calibrate.sampling import Sample, reference_coefficients
from spyreopt.calibrate.sweep import FAMILIES, FAMILY, SweepProgram, SweepRow, program
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import InfeasibleError, PlanError

TIE = 0.005
RIGHT = 0.02
FOLDS = 5
SEED = 0


@dataclass
class SweepData:
    rows: list[SweepRow]
    programs: list[SweepProgram]
    mapped: np.ndarray  # indices of mapped rows
    terms: fitmod.Terms  # one sample per distinct configuration
    index: np.ndarray  # per configuration of a mapped row (in row order), its sample in ``terms``
    starts: np.ndarray  # per mapped row, its first configuration
    measured_us: np.ndarray  # per mapped row
    groups: list[tuple]  # per mapped row, its shape group

    @property
    def families(self) -> list[str]:
        return [self.rows[i].family for i in self.mapped]


def load(rows: list[SweepRow]) -> SweepData:
    legal: dict = {}
    progs = [program(r, legal=legal) for r in rows]
    mapped = np.array([i for i, p in enumerate(progs) if p.unmapped is None], dtype=int)
    configs, starts = [], []
    for i in mapped:
        starts.append(len(configs))
        configs += progs[i].configs
    key = {}  # a configuration repeated by several rows (repeats, an LX setting a single op ignores): terms once
    index = np.array([key.setdefault((c.built.to_json(), c.decisions), len(key)) for c in configs], dtype=int)
    unique = [None] * len(key)
    for c, n in zip(configs, index):
        unique[n] = c
    terms = fitmod.terms(unique) if configs else None
    measured = np.array([rows[i].kernel_us for i in mapped], dtype=float)
    return SweepData(rows, progs, mapped, terms, index, np.array(starts, dtype=int), measured,
                     [rows[i].shape_group for i in mapped])  # fmt: skip


def _config_us(c: dict, data: SweepData) -> np.ndarray:
    return fitmod._predict(c, data.terms)[data.index] * 1e-3


def predict(coefficients: Coefficients | dict, data: SweepData) -> tuple[np.ndarray, np.ndarray]:
    """Per mapped row, the model's time (µs) and the index of the configuration it prices (its cheapest)."""
    c = coefficients if isinstance(coefficients, dict) else coefficients.to_dict()
    us = _config_us(c, data)
    best = np.minimum.reduceat(us, data.starts)
    ends = np.append(data.starts[1:], len(us))
    pick = np.array([s + int(np.argmin(us[s:e])) for s, e in zip(data.starts, ends)], dtype=int)
    return best, pick


# ---- the fit --------------------------------------------------------------------------------
@dataclass
class RowFit:
    coefficients: Coefficients
    message: str
    nfev: int


def fit_rows(
    data: SweepData,
    train: np.ndarray,
    extra: list[Sample] = (),
    extra_weight: float = 1.0,
    free: tuple[str, ...] = fitmod.NAMES,
) -> RowFit:
    """Bounded least squares on the relative error of the ``train`` rows (indices into the mapped rows),
    plus ``extra`` samples (the published device rows) weighing ``extra_weight`` each; starts from the
    public figures with ``fit.START`` (a fit depends on its data only)."""
    c0 = {**reference_coefficients().to_dict(), **fitmod.START}
    lo = np.array([fitmod.BOUNDS[n][0] for n in free])
    hi = np.array([fitmod.BOUNDS[n][1] for n in free])
    x0 = np.clip(np.array([c0[n] for n in free]), lo, hi)
    et = fitmod.terms([s.config for s in extra]) if extra else None
    em = np.array([s.measured_us for s in extra]) * 1e3
    train = np.asarray(train, dtype=int)

    def residual(x: np.ndarray) -> np.ndarray:
        c = {**c0, **dict(zip(free, x))}
        us = _config_us(c, data)
        rows = np.minimum.reduceat(us, data.starts)[train] / data.measured_us[train] - 1.0
        if et is None:
            return rows
        return np.concatenate([rows, np.sqrt(extra_weight) * (fitmod._predict(c, et) / em - 1.0)])

    res = least_squares(residual, x0, bounds=(lo, hi), x_scale=np.maximum(np.abs(x0), 1e-3), max_nfev=400)
    fitted = {**c0, **dict(zip(free, res.x))}
    return RowFit(Coefficients.from_dict({k: float(v) for k, v in fitted.items()}), str(res.message), int(res.nfev))


def folds(groups: list[tuple], k: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """Each row's fold: its shape group's position in a seeded shuffle of the sorted groups, modulo ``k``."""
    distinct = sorted(set(groups), key=repr)
    random.Random(seed).shuffle(distinct)
    fold = {g: n % k for n, g in enumerate(distinct)}
    return np.array([fold[g] for g in groups], dtype=int)


def cross_validate(
    data: SweepData, extra: list[Sample] = (), extra_weight: float = 1.0, k: int = FOLDS, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out predictions of every mapped row (each from the fit without its fold) and their picks."""
    f = folds(data.groups, k, seed)
    held, picks = np.zeros(len(data.mapped)), np.zeros(len(data.mapped), dtype=int)
    for n in range(k):
        train, test = np.flatnonzero(f != n), np.flatnonzero(f == n)
        coef = fit_rows(data, train, extra, extra_weight).coefficients
        us, pick = predict(coef, data)
        held[test], picks[test] = us[test], pick[test]
    return held, picks


# ---- the simulator ---------------------------------------------------------------------------
def simulate_rows(data: SweepData, picks: np.ndarray, hw=None) -> tuple[np.ndarray, list[str | None]]:
    """The simulator's time of each mapped row's picked configuration (NaN with the reason if it rejects it)."""
    from spyreopt.hw.simulator import simulate
    from spyreopt.solving.fixed import plan_for  # plans and the simulator sit beside calibrate: imported late

    configs = [c for i in data.mapped for c in data.programs[i].configs]
    cache: dict = {}
    out, why = np.full(len(picks), np.nan), [None] * len(picks)
    for n, s in enumerate(picks):
        config = configs[s]
        key = (config.built.to_json(), config.decisions)
        if key not in cache:
            try:
                plan = plan_for(config.built, config.decision_map(), hw, reference_coefficients())
                cache[key] = (simulate(plan).time_us, None)
            except (PlanError, InfeasibleError) as exc:
                cache[key] = (np.nan, str(exc))
        out[n], why[n] = cache[key]
    return out, why


# ---- scores ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FamilyRow:
    family: str
    rows: int  # usable rows (a timing)
    mapped: int
    model_rms: float
    model_median: float
    spearman: float
    sim_rms: float
    torch_rms: float  # torch-spyre's own model (err_pct) on the same mapped rows


def _rms(rel: np.ndarray) -> float:
    rel = rel[np.isfinite(rel)]
    return float(np.sqrt(np.mean(rel**2))) if len(rel) else float("nan")


def family_table(data: SweepData, model_us: np.ndarray, sim_us: np.ndarray) -> list[FamilyRow]:
    fams = np.array(data.families)
    torch = np.array([data.rows[i].err_pct / 100 for i in data.mapped])
    out = []
    for family in [*FAMILIES, "all"]:
        usable = sum(1 for r in data.rows if r.kernel_us is not None and (family == "all" or r.family == family))
        sel = np.ones(len(fams), dtype=bool) if family == "all" else fams == family
        if not usable:
            continue
        m, meas = model_us[sel], data.measured_us[sel]
        rel = m / meas - 1
        rho = float(spearmanr(m, meas).statistic) if sel.sum() > 2 else float("nan")
        out.append(FamilyRow(family, usable, int(sel.sum()), _rms(rel), float(np.median(np.abs(rel))) if len(rel)
                             else float("nan"), rho, _rms(sim_us[sel] / meas - 1), _rms(torch[sel])))  # fmt: skip
    return out


def format_families(table: list[FamilyRow]) -> str:
    head = ["family", "rows", "mapped", "model RMS", "model median", "Spearman", "sim RMS", "torch-spyre RMS"]
    body = [head] + [
        [
            r.family,
            str(r.rows),
            str(r.mapped),
            _pct(r.model_rms),
            _pct(r.model_median),
            f"{r.spearman:.3f}",
            _pct(r.sim_rms),
            _pct(r.torch_rms),
        ]  # fmt: skip
        for r in table
    ]
    return _grid(body)


@dataclass
class Decisions:
    groups: int
    right: int
    mean_regret: float
    worst_regret: float
    per_family: dict[str, tuple[int, int, float]] = field(default_factory=dict)  # groups, right, mean regret


def decisions(rows: list[SweepRow], index: np.ndarray, predicted: np.ndarray) -> Decisions:
    """Decision accuracy of ``predicted`` (per row of ``index``, indices into ``rows``)."""
    by: dict[tuple, dict[tuple, list[tuple[float, float]]]] = {}
    for i, p in zip(index, predicted):
        r = rows[i]
        by.setdefault(r.shape_group, {}).setdefault(r.configuration, []).append((r.kernel_us, p))
    regrets, fam = [], {}
    for group, configs in sorted(by.items(), key=lambda kv: repr(kv[0])):
        if len(configs) < 2:
            continue
        meas = np.array([np.median([m for m, _ in v]) for v in configs.values()])
        pred = np.array([np.median([p for _, p in v]) for v in configs.values()])
        tied = pred <= pred.min() * (1 + TIE)
        regret = float(meas[tied].max() / meas.min() - 1)
        regrets.append(regret)
        fam.setdefault(FAMILY.get(group[0], "other"), []).append(regret)
    regrets = np.array(regrets)
    per = {k: (len(v), int(sum(x <= RIGHT for x in v)), float(np.mean(v))) for k, v in fam.items()}
    if not len(regrets):
        return Decisions(0, 0, float("nan"), float("nan"), per)
    return Decisions(len(regrets), int((regrets <= RIGHT).sum()), float(regrets.mean()), float(regrets.max()), per)


def format_decisions(named: list[tuple[str, Decisions]]) -> str:
    head = ["model", "groups", "right", "right %", "mean regret", "worst regret"]
    body = [head]
    for name, d in named:
        pct = d.right / d.groups if d.groups else float("nan")
        body.append([name, str(d.groups), str(d.right), _pct(pct), _pct(d.mean_regret), _pct(d.worst_regret)])
    return _grid(body)


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _grid(body: list[list[str]]) -> str:
    widths = [max(len(b[i]) for b in body) for i in range(len(body[0]))]
    lines = ["  ".join(c.rjust(w) if n else c.ljust(w) for n, (c, w) in enumerate(zip(b, widths))) for b in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---- one report -----------------------------------------------------------------------------
@dataclass
class Report:
    data: SweepData
    model_us: np.ndarray  # per mapped row
    sim_us: np.ndarray
    sim_why: list[str | None]
    families: list[FamilyRow]
    decided: list[tuple[str, Decisions]]

    def records(self) -> list[dict]:
        """One record per input row: {id, op, predicted_us, simulated_us, unmapped}."""
        at = {int(i): n for n, i in enumerate(self.data.mapped)}
        out = []
        for i, (r, p) in enumerate(zip(self.data.rows, self.data.programs)):
            n = at.get(i)
            sim = None if n is None or not np.isfinite(self.sim_us[n]) else float(self.sim_us[n])
            out.append({"id": r.id, "op": r.op, "predicted_us": None if n is None else float(self.model_us[n]),
                        "simulated_us": sim, "unmapped": p.unmapped})  # fmt: skip
        return out

    def format(self) -> str:
        unmapped: dict[str, int] = {}
        for p in self.data.programs:
            if p.unmapped is not None:
                key = f"{p.row.op}: {p.unmapped}"
                unmapped[key] = unmapped.get(key, 0) + 1
        usable = sum(1 for r in self.data.rows if r.kernel_us is not None)
        lines = [
            f"{len(self.data.rows)} rows, {usable} with a timing, {len(self.data.mapped)} mapped "
            f"({len(self.data.mapped) / max(usable, 1):.1%} of the timed rows)",
            "",
            format_families(self.families),
            "",
            "decisions (shape groups with >= 2 configurations; right = the pick runs within 2% of the best):",
            format_decisions(self.decided),
            "",
            "not mapped:",
            *(f"  {n:4d} x {why}" for why, n in sorted(unmapped.items())),
        ]
        rejected = sum(w is not None for w in self.sim_why)
        if rejected:
            lines.append(f"  the simulator rejected {rejected} mapped rows' configurations (no simulated time)")
        return "\n".join(lines)


def report(data: SweepData, coefficients: Coefficients, model_us: np.ndarray | None = None, hw=None) -> Report:
    """The model (``model_us`` if given, e.g. held-out predictions; else priced with ``coefficients``) and
    the simulator on every mapped row, beside torch-spyre's own model on the same rows."""
    us, pick = predict(coefficients, data)
    if model_us is not None:
        us = model_us
    sim, why = simulate_rows(data, pick, hw)
    torch = np.array([data.rows[i].kernel_us * (1 + data.rows[i].err_pct / 100) for i in data.mapped])
    decided = [
        ("spyreopt model", decisions(data.rows, data.mapped, us)),
        ("simulator", decisions(data.rows, data.mapped, np.where(np.isfinite(sim), sim, np.inf))),
        ("torch-spyre (err_pct)", decisions(data.rows, data.mapped, torch)),
    ]
    return Report(data, us, sim, why, family_table(data, us, sim), decided)
