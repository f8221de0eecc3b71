"""Fit the analytic cost model's coefficients to measurements, and report its error.

Each configuration (``sampling.Config``) is turned into the coefficient-free
quantities the cost model combines (``terms``: MACs and rows per core, bytes and
DMA requests to and from device memory, streams, staged restickify traffic,
relayout runs and ring-link bytes, ...) by the planner's own ``Problem`` with the
configuration's decisions fixed: the very quantities its cost tables are made of.
``predict`` evaluates ``costmodel.spyre``'s composition on them for any
coefficients, vectorised; it equals ``Problem.evaluate`` (tests check it), so the
fitted error is the planner's error. ``fit`` minimises the relative error
``predicted / measured - 1`` on a seeded per-family training split with
``scipy.optimize.least_squares`` (bounded), and reports per family the RMS
relative error and the Spearman rank correlation on the held-out configurations.

The fit starts from the public figures (``spyre_public.json``) with the terms
they lack (DMA requests, stream latency, tile overlap, restickify round trip)
at rough physical guesses (``START``), so a fit is reproducible from its samples.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from spyreopt.calibrate.sampling import FAMILIES, Config, Sample, reference_coefficients
from spyreopt.costmodel import spyre
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.division import reduction_split
from spyreopt.model.geometry import layout_quantities
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.problem import Problem
from spyreopt.model.staging import edge_costs, effective_leaf

NAMES = tuple(f.name for f in fields(Coefficients))
BOUNDS: dict[str, tuple[float, float]] = {
    "hbm_bytes_per_ns": (10.0, 2000.0),
    "hbm_mixed_ns_per_byte": (0.0, 0.05),
    "hbm_request_ns": (0.0, 200.0),
    "hbm_latency_ns": (0.0, 5000.0),
    "hbm_shared_bytes_per_ns": (1.0, 1e4),
    "hbm_core_ns_per_byte": (0.0, 1.0),
    "macs_per_ns_per_core": (100.0, 10000.0),
    "matmul_batch_ns_per_elem": (0.0, 1000.0),
    "pt_underfill_c": (0.0, 3.0),
    "pt_underfill_p": (0.05, 3.0),
    "vector_elems_per_ns_per_core": (1.0, 4000.0),
    "transcendental_weight": (1.0, 20.0),
    "stick_reduce_penalty": (1.0, 40.0),
    "overlap_gamma": (0.0, 1.0),
    "overlap_tile_bytes": (0.0, 1e8),
    "relayout_run_ns": (-100.0, 100.0),
    "relayout_run_log_ns": (-100.0, 100.0),
    "relayout_bytes_per_ns": (10.0, 1e5),
    "relayout_link_bytes_per_ns": (10.0, 1e5),
    "relayout_hop_ns": (0.0, 100.0),
    "restick_bytes_per_ns": (10.0, 1e5),
    "restick_run_ns": (0.0, 1000.0),
    "restick_latency_ns": (0.0, 1e4),
    "psum_bytes_per_ns": (10.0, 1e5),
    "op_overhead_ns": (0.0, 1e4),
}
START = {
    "hbm_core_ns_per_byte": 0.01,  # a core's own DMA at 100 bytes/ns, about half the aggregate
    "hbm_shared_bytes_per_ns": 40.0,
    "matmul_batch_ns_per_elem": 1.0,  # a batch item's refill at about one element per ns per core
    "relayout_bytes_per_ns": 40.0,  # a core's ring ingress (the public 547 is a span rate, not an ingress rate)
    "hbm_request_ns": 2.0,
    "hbm_latency_ns": 100.0,
    "overlap_tile_bytes": 65536.0,
    "relayout_hop_ns": 1.0,
    "restick_latency_ns": 100.0,
}


# ---- coefficient-free terms -------------------------------------------------------
@dataclass
class Terms:
    """Per op (arrays over every op of every sample) what the cost model combines, plus per relayout edge."""

    sample: np.ndarray  # the sample each op belongs to
    weight: dict[str, np.ndarray]  # per target quantity ("op", "relayout", "restickify"): 1 where the op counts
    values: dict[str, np.ndarray]  # per term name, one value per op
    relayout_op: np.ndarray  # per relayout edge: its op's row
    relayout: dict[str, np.ndarray]  # runs, fan_in, ingress, link, hops per relayout edge
    read_op: np.ndarray  # per device-memory read (an op's leaf reads, or one edge's): its op's row
    reads: dict[str, np.ndarray]  # bytes, req, streams, shared per read
    n_samples: int


def _config_ops(config: Config, hw: HardwareSpec, coef: Coefficients) -> list[dict]:
    """One dict of terms per op of the configuration's plan."""
    problem = Problem(config.graph(), hw, coef, fixed=config.decision_map(), stage_masks=config.stage_masks())
    a = problem.normalize([0] * len(problem.ops))
    quantity, _, target_op = config.target.partition(":")
    rows = []
    for i, o in enumerate(problem.ops):
        t = _op_terms(problem, a, i)
        counts = quantity == "total" or o.name == target_op
        t["weight_op"] = float(counts and quantity in ("op", "total"))
        t["weight_relayout"] = float(counts and quantity == "relayout")
        t["weight_restickify"] = float(counts and quantity == "restickify")
        rows.append(t)
    return rows


def _op_terms(problem: Problem, a, i: int) -> dict:
    """The coefficient-free quantities of op i's assigned candidate: the ones the Problem's own tables
    are made of (``Problem.layout_quantities`` and ``edge_quantities``), summed over its edges."""
    s = a[i]
    oc, cand = problem.cands[i], problem.candidates[i][s]
    li = cand.layout
    leaf = effective_leaf(problem, i, cand.stage)  # an input read from its kept slices is no device read
    lay = oc.layouts[li]
    lq = problem.layout_quantities(i) if leaf == problem.leaf[i] else layout_quantities(oc, leaf)
    if edge_costs(problem, a).get(i):
        raise ValueError(f"fit: op {problem.ops[i].name!r} relayouts a staged input, which no fit term holds")
    matmul, work, rows, trans, sred = oc.compute_terms(lay.division, lay.stick)
    t = dict.fromkeys(
        ("psum_bytes", "ksplit", "w_bytes", "w_req", "w_streams", "sw_bytes", "sw_req", "sw_streams", "rs_bytes",
         "rs_req", "rs_count"), 0.0,
    )  # fmt: skip
    t.update(matmul=float(matmul), work=work, rows=rows, trans=float(trans), sred=float(sred), stream=lay.stream_bytes)
    tile, base = lay.tile, lay if lay.tile is None else oc.layouts[lay.tile.base]
    t.update(tiles=1.0, rows_tiled=0.0, acc_elems=0.0, iter_streams=float(len(oc.refs) + 1))
    if tile is not None:  # a tiled loop (``costmodel.loops``): its compute per tile, iterations, accumulation
        t.update(tiles=float(tile.tiles), rows_tiled=float(matmul and tile.dim == len(oc.space.dims) - 3))
        t["acc_elems"] = float(base.footprint // oc.out.elem_bytes) if oc.space.reduction[tile.dim] else 0.0
    if matmul:
        t.update(psum_bytes=base.footprint, ksplit=reduction_split(oc.space, lay.division))
    t["r_bytes"] = t["leaf_bytes"] = int(lq.leaf_bytes[li])
    own_write = lay.write_bytes if cand.residency != "lx" else 0  # a lone core's write too (``own_parts``)
    t["core_bytes"] = (t["leaf_bytes"] + own_write) / lay.division.cores
    t["refill"], t["cores"] = float(oc.batch_refill_elems()), float(lay.division.cores)
    t["reads"] = [(t["r_bytes"], int(lq.leaf_requests[li]), float(lq.reads_leaf), int(lq.leaf_shared[li]))]
    for j in np.flatnonzero(lq.leaf_restick[li]):
        _add_restick(t, (int(lq.leaf_restick_bytes[li, j]), int(lq.leaf_restick_requests[li, j])))
    if cand.residency != "lx" and not lq.alone[li]:
        prefix = "sw" if lq.split[li] else "w"
        t[f"{prefix}_bytes"], t[f"{prefix}_req"], t[f"{prefix}_streams"] = lay.write_bytes, lay.write_requests, 1.0
    t["relayouts"] = []
    for k in problem.in_edges[i]:
        e = problem.edges[k]
        info = problem.pair(k, a[e.producer], s)
        q, lu = problem.edge_quantities(k), problem.candidates[e.producer][a[e.producer]].layout
        if info.mode in ("hbm", "spill"):
            t["r_bytes"] += int(q.read_bytes[lu, li])
            streams = 0.0 if lq.reads_leaf else 1.0
            t["reads"].append(
                (int(q.read_bytes[lu, li]), int(q.read_requests[lu, li]), streams, int(q.read_shared[lu, li]))
            )
        if info.mode == "hbm" and info.restick:
            _add_restick(t, (int(q.hbm_restick_bytes[lu, li]), int(q.hbm_restick_requests[lu, li])))
        if info.mode == "restickify":
            _add_restick(t, (int(q.lx_restick_bytes[lu, li]), int(q.lx_restick_requests[lu, li])))
        if info.mode == "relayout":
            t["relayouts"].append(tuple(int(x[lu, li]) for x in (q.runs, q.fan_in, q.ingress, q.link, q.hops)))
    return t


def _add_restick(t: dict, traffic: tuple[int, int]) -> None:
    t["rs_bytes"] += traffic[0]
    t["rs_req"] += traffic[1]
    t["rs_count"] += 1.0


def terms(configs: list[Config], hw: HardwareSpec | None = None) -> Terms:
    """The terms of every configuration's plan (derived with the reference coefficients, as it was measured)."""
    if not configs:
        raise ValueError("terms: no configurations")
    hw, coef = hw or HardwareSpec(), reference_coefficients()
    ops, owner = [], []
    for n, config in enumerate(configs):
        rows = _config_ops(config, hw, coef)
        ops += rows
        owner += [n] * len(rows)
    keys = [k for k in ops[0] if k not in ("relayouts", "reads") and not k.startswith("weight_")]
    values = {k: np.array([float(o[k]) for o in ops]) for k in keys}
    weight = {q: np.array([o[f"weight_{q}"] for o in ops]) for q in ("op", "relayout", "restickify")}
    edges = [(row, *r) for row, o in enumerate(ops) for r in o["relayouts"]]
    rl = np.array(edges, dtype=float).reshape(-1, 6)
    relayout = {k: rl[:, c + 1] for c, k in enumerate(("runs", "fan_in", "ingress", "link", "hops"))}
    reads = np.array([(row, *r) for row, o in enumerate(ops) for r in o["reads"]], dtype=float).reshape(-1, 5)
    read = {k: reads[:, c + 1] for c, k in enumerate(("bytes", "req", "streams", "shared"))}
    return Terms(
        np.array(owner, dtype=int),
        weight,
        values,
        rl[:, 0].astype(int),
        relayout,
        reads[:, 0].astype(int),
        read,
        len(configs),
    )


# ---- the model on the terms ----------------------------------------------------------
def predict_parts(c: dict, t: Terms) -> dict[str, np.ndarray]:
    """Per op, ns: the op's total, its relayout and its restickify (``costmodel.spyre.op_ns``)."""
    return spyre.op_ns(Coefficients(**c), t.values, t.relayout, t.relayout_op, t.reads, t.read_op)


def predict_us(coefficients: Coefficients, t: Terms) -> np.ndarray:
    """The model's value of every sample's target, in microseconds."""
    return _predict(coefficients.to_dict(), t) * 1e-3


def _predict(c: dict, t: Terms) -> np.ndarray:
    parts = predict_parts(c, t)
    out = np.zeros(t.n_samples)
    for q, arr in parts.items():
        np.add.at(out, t.sample, t.weight[q] * arr)
    return out


# ---- held-out split and scores ---------------------------------------------------------
DEVICE_PREFIX = "dev "  # families of published device rows (``spyreopt.reproduce.device_samples``)


def split(
    samples: list[Sample], holdout: float, seed: int, device_holdout: float | None = None
) -> tuple[list[int], list[int]]:
    """A seeded per-family split: ``holdout`` of each family's samples held out (deterministic);
    ``device_holdout`` (default ``holdout``) for the device families."""
    device_holdout = holdout if device_holdout is None else device_holdout
    for h in (holdout, device_holdout):
        if not 0 <= h < 1:
            raise ValueError(f"holdout must be in [0, 1), got {h}")
    train, test = [], []
    for family in sorted({s.config.family for s in samples}):
        idx = [n for n, s in enumerate(samples) if s.config.family == family]
        random.Random(f"{seed}:{family}").shuffle(idx)
        h = device_holdout if family.startswith(DEVICE_PREFIX) else holdout
        k = min(round(h * len(idx)), len(idx) - 1) if h > 0 else 0
        test += sorted(idx[:k])
        train += sorted(idx[k:])
    return sorted(train), sorted(test)


@dataclass(frozen=True)
class FamilyScore:
    family: str
    n_train: int
    n_test: int
    rms_rel: float  # RMS of predicted / measured - 1 on the held-out samples (the training ones when none is)
    spearman: float
    max_rel: float


def scores(
    predicted: np.ndarray, measured: np.ndarray, families: list[str], train: list[int], test: list[int]
) -> list[FamilyScore]:
    """Per family, the error on its held-out samples (on its training samples when none is held out)."""
    out = []
    for family in [f for f in FAMILIES if f in families] + sorted(set(families) - set(FAMILIES)):
        tr = [n for n in train if families[n] == family]
        te = [n for n in test if families[n] == family]
        scored = te or tr
        rel = predicted[scored] / measured[scored] - 1.0
        rho = float(spearmanr(predicted[scored], measured[scored]).statistic) if len(scored) > 2 else float("nan")
        rms = float(np.sqrt(np.mean(rel**2)))
        out.append(FamilyScore(family, len(tr), len(te), rms, rho, float(np.abs(rel).max())))
    return out


def format_table(rows: list[FamilyScore]) -> str:
    head = f"{'family':12s} {'n_train':>7s} {'n_test':>6s} {'RMS rel err':>11s} {'Spearman':>8s} {'max rel err':>11s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.family:12s} {r.n_train:7d} {r.n_test:6d} {r.rms_rel:11.1%} {r.spearman:8.4f} {r.max_rel:11.1%}"
        )
    return "\n".join(lines)


# ---- the fit --------------------------------------------------------------------------
@dataclass
class FitResult:
    coefficients: Coefficients
    table: list[FamilyScore]  # held-out scores of the fitted coefficients
    start_table: list[FamilyScore]  # the same for the starting coefficients
    n_samples: int
    n_train: int
    n_test: int
    holdout: float
    seed: int
    message: str  # the optimiser's status
    stats: dict = field(default_factory=dict)

    def format(self) -> str:
        return format_table(self.table)

    def to_json(self, path: str | Path | None = None, source: str = "") -> str:
        """A coefficient file (loadable by ``Coefficients.load``) with its fit report; written to ``path`` if given."""
        data = {
            "source": source or f"spyreopt fit on {self.n_samples} configurations",
            "coefficients": self.coefficients.to_dict(),
            "fit": {
                "holdout": self.holdout,
                "seed": self.seed,
                "n_samples": self.n_samples,
                "families": [vars(r) for r in self.table],
            },
        }
        text = json.dumps(data, indent=2) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text


def fit(
    samples: list[Sample],
    *,
    holdout: float = 0.3,
    seed: int = 0,
    start: Coefficients | None = None,
    hw: HardwareSpec | None = None,
    free: tuple[str, ...] = NAMES,
    weights: np.ndarray | None = None,
    device_holdout: float | None = None,
) -> FitResult:
    """Fit the coefficients in ``free`` to ``samples`` on a seeded per-family split; score on the held-out rest.

    ``start`` defaults to the public figures with ``START`` for the terms they lack;
    coefficients not in ``free`` keep their starting value. ``weights`` (one per sample,
    default 1) scale each sample's squared relative error: device rows weigh more; ``device_holdout`` (default
    ``holdout``) is the fraction of each device family held out (0: every published row trains the fit).
    """
    if not samples:
        raise ValueError("fit: no samples")
    unknown = sorted(set(free) - set(NAMES))
    if unknown:
        raise ValueError(f"fit: unknown coefficient(s) {unknown}; known: {', '.join(NAMES)}")
    c0 = (start or reference_coefficients()).to_dict()
    if start is None:
        c0.update(START)
    t = terms([s.config for s in samples], hw)
    measured = np.array([s.measured_us for s in samples]) * 1e3
    families = [s.config.family for s in samples]
    train, test = split(samples, holdout, seed, device_holdout)
    sel = np.zeros(len(samples), dtype=bool)
    sel[train] = True
    lo = np.array([BOUNDS[n][0] for n in free])
    hi = np.array([BOUNDS[n][1] for n in free])
    x0 = np.clip(np.array([c0[n] for n in free]), lo, hi)

    def coefs(x: np.ndarray) -> dict:
        return {**c0, **dict(zip(free, x))}

    scale = np.sqrt(np.ones(len(samples)) if weights is None else np.asarray(weights, dtype=float))[sel]

    def residual(x: np.ndarray) -> np.ndarray:
        return scale * (_predict(coefs(x), t)[sel] / measured[sel] - 1.0)

    res = least_squares(
        residual,
        x0,
        bounds=(lo, hi),
        x_scale=np.maximum(np.abs(x0), 1e-3),
        ftol=1e-12,
        xtol=1e-12,
        gtol=1e-12,
        max_nfev=2000,
    )
    fitted = coefs(res.x)
    return FitResult(
        coefficients=Coefficients.from_dict({k: float(v) for k, v in fitted.items()}),
        table=scores(_predict(fitted, t), measured, families, train, test),
        start_table=scores(_predict(c0, t), measured, families, train, test),
        n_samples=len(samples),
        n_train=len(train),
        n_test=len(test),
        holdout=holdout,
        seed=seed,
        message=str(res.message),
        stats={"nfev": int(res.nfev), "cost": float(res.cost), "status": int(res.status)},
    )


def evaluate(coefficients: Coefficients, samples: list[Sample], hw: HardwareSpec | None = None) -> list[FamilyScore]:
    """Per-family error of given coefficients on all ``samples`` (no fitting)."""
    t = terms([s.config for s in samples], hw)
    measured = np.array([s.measured_us for s in samples])
    everything = list(range(len(samples)))
    return scores(predict_us(coefficients, t), measured, [s.config.family for s in samples], [], everything)
