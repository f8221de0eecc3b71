"""Large-neighbourhood search: re-optimise a connected region exactly (MILP), everything else fixed.

The region's problem is a ``Reduced`` of its own: each region group's unary
cost absorbs the edges to fixed neighbours at their current strategies, and
the usage of everything outside the region becomes one fixed pseudo-group
whose usage on each piece between the region's segment boundaries is the
outside profile's maximum there, so the MILP's limit rows are exact.
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.contest import kernels as K
from spyreopt.contest.exact import solve_exact
from spyreopt.contest.reduce import Reduced
from spyreopt.contest.search import Graph


def grow_region(r: Reduced, g: Graph, seed_group: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``size`` free groups reached breadth-first from ``seed_group`` (neighbours in random order)."""
    seen = {seed_group}
    frontier = [seed_group]
    while frontier and len(seen) < size:
        nxt = []
        for v in frontier:
            nb = g.nbr[g.ptr[v] : g.ptr[v + 1]]
            for w in rng.permutation(nb):
                w = int(w)
                if w not in seen and r.k[w] > 1 and len(seen) < size:
                    seen.add(w)
                    nxt.append(w)
        frontier = nxt
    return np.array(sorted(seen), np.int64)


def sub_problem(r: Reduced, g: Graph, x: np.ndarray, prof: np.ndarray, region: np.ndarray) -> Reduced:
    """The region's problem with everything else fixed at ``x`` (``prof`` is the profile of ``x``)."""
    inr = np.zeros(r.n, bool)
    inr[region] = True
    local = np.full(r.n, -1, np.int64)
    local[region] = np.arange(len(region))
    k = r.k[region]
    off = np.zeros(len(region) + 1, np.int64)
    np.cumsum(k, out=off[1:])
    cost = np.concatenate([r.cost[r.off[v] : r.off[v + 1]] for v in region])
    for i, v in enumerate(region):
        for j in range(g.ptr[v], g.ptr[v + 1]):
            w = g.nbr[j]
            if inr[w]:
                continue
            e = g.edg[j]
            t = r.ecost[r.eoff[e] : r.eoff[e + 1]].reshape(r.k[r.ea[e]], r.k[r.eb[e]])
            cost[off[i] : off[i + 1]] += t[:, x[w]] if g.fst[j] else t[x[w], :]
    inside = np.flatnonzero(inr[r.ea] & inr[r.eb])
    ea, eb = local[r.ea[inside]], local[r.eb[inside]]
    eoff = np.zeros(len(inside) + 1, np.int64)
    np.cumsum(k[ea] * k[eb], out=eoff[1:])
    ecost = np.concatenate([r.ecost[r.eoff[e] : r.eoff[e + 1]] for e in inside]) if len(inside) else np.zeros(0, float)
    # region segments, then the outside usage as a fixed pseudo-group
    segs = [np.arange(r.segptr[v], r.segptr[v + 1]) for v in region]
    own = np.concatenate(segs) if segs else np.zeros(0, np.int64)
    outside = prof.copy()
    for j, v in zip(own, np.repeat(region, [len(s) for s in segs])):
        outside[r.seglo[j] : r.seghi[j]] -= r.segu[r.segoff[j] + x[v]]
    cuts = np.unique(np.concatenate([r.seglo[own], r.seghi[own]]))
    piece_lo, piece_hi = cuts[:-1], cuts[1:]
    piece_use = np.maximum.reduceat(outside, piece_lo) if len(piece_lo) else np.zeros(0, np.int64)
    seglo = np.concatenate([r.seglo[own], piece_lo])
    seghi = np.concatenate([r.seghi[own], piece_hi])
    counts = [len(s) for s in segs] + [len(piece_lo)]
    segptr = np.zeros(len(region) + 2, np.int64)
    np.cumsum(counts, out=segptr[1:])
    segu = np.concatenate([r.segu[r.segoff[j] : r.segoff[j + 1]] for j in own] + [piece_use]).astype(np.int64)
    seglen = np.concatenate([np.repeat(k, [len(s) for s in segs]), np.ones(len(piece_lo), np.int64)])
    segoff = np.zeros(len(seglen) + 1, np.int64)
    np.cumsum(seglen, out=segoff[1:])
    kk = np.concatenate([k, [1]])
    offk = np.concatenate([off, [off[-1] + 1]])
    empty = np.zeros(0, np.int64)
    return Reduced(
        kk, offk, np.concatenate([cost, [0.0]]), segptr, seglo, seghi, segoff, segu, ea, eb, eoff, ecost,
        r.usage_limit, r.horizon, empty, np.zeros(1, np.int64), empty, {},
    )  # fmt: skip


def lns(r: Reduced, g: Graph, x: np.ndarray, deadline: float, rng: np.random.Generator, size: int = 60):
    """Improve the feasible ``x`` region by region until ``deadline``; returns ``(x, cost, regions solved)``."""
    x = x.copy()
    cost = K.total_cost(x, r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost)
    free = np.flatnonzero(r.k > 1)
    solved = 0
    while time.monotonic() < deadline - 0.5 and len(free):
        region = grow_region(r, g, int(rng.choice(free)), size, rng)
        prof = K.profile(x, r.segptr, r.seglo, r.seghi, r.segoff, r.segu, r.horizon)
        sub = sub_problem(r, g, x, prof, region)
        t0 = time.monotonic()
        y, optimal = solve_exact(sub, min(deadline, t0 + 5.0))
        solved += 1
        size = int(size * 1.15) + 1 if optimal and time.monotonic() - t0 < 1.0 else max(10, int(size * 0.8))
        if y is None:
            continue
        trial = x.copy()
        trial[region] = y[: len(region)]
        c = K.total_cost(trial, r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost)
        if c < cost:
            x, cost = trial, c
    return x, cost, solved
