"""Exact re-optimisation of a region: the MILP over a few groups, everything else fixed at the incumbent.

The search's relaxation (TRW-S under usage prices) and its best feasible
solution disagree on some groups; that is where an exact step can pay. A
region grows from a disagreeing group through the merged edges (disagreeing
neighbours first) up to a size the MILP can finish; the groups outside are
fixed at the incumbent, so their edges into the region become unary costs and
their live usage a fixed background, one extra group with a single strategy.
The answer is kept only when it is feasible and cheaper, so a step never
loses; a step that HiGHS did not finish says so (``finished``), and the
caller shrinks its next region.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from spyreopt.contest import kernels as K
from spyreopt.contest.exact import solve_exact
from spyreopt.contest.reduce import Reduced


@dataclass
class Step:
    """One region step: the candidate (the incumbent when nothing better), and whether HiGHS finished."""

    x: np.ndarray
    improved: bool
    finished: bool
    size: int


def pick_region(r: Reduced, ptr, nbr, best: np.ndarray, relaxed: np.ndarray, size: int, rng, step=None) -> np.ndarray:
    """Up to ``size`` free groups, connected through the merged edges, grown from the groups live at time
    ``step`` (a step where memory binds: usage can only be traded among groups live together) or else from
    one group where ``relaxed`` differs from ``best``; disagreeing groups first."""
    free = r.k > 1
    if step is not None:
        seg_group = np.repeat(np.arange(r.n), np.diff(r.segptr))
        at = seg_group[(r.seglo <= step) & (step < r.seghi)]
        pool = np.unique(at[free[at]])
        pool = np.concatenate([pool[relaxed[pool] != best[pool]], pool[relaxed[pool] == best[pool]]])
        pool = pool[: max(size // 2, 1)]
    else:
        differ = np.flatnonzero(free & (relaxed != best))
        pool = differ if len(differ) else np.flatnonzero(free)
        pool = pool[rng.integers(len(pool)) :][:1] if len(pool) else pool
    if not len(pool):
        return pool
    taken = set(pool.tolist())
    near, far = deque(pool.tolist()), deque()
    while (near or far) and len(taken) < size:
        i = near.popleft() if near else far.popleft()
        for j in nbr[ptr[i] : ptr[i + 1]].tolist():
            if j in taken or not free[j]:
                continue
            taken.add(j)
            (near if relaxed[j] != best[j] else far).append(j)
            if len(taken) >= size:
                break
    return np.array(sorted(taken), np.int64)


def subproblem(r: Reduced, x: np.ndarray, region: np.ndarray) -> Reduced:
    """The region's groups (in order) and one fixed background group; costs and usage exact given ``x``."""
    inside = np.zeros(r.n, bool)
    inside[region] = True
    local = np.full(r.n, -1, np.int64)
    local[region] = np.arange(len(region))
    k = np.append(r.k[region], 1)
    off = np.zeros(len(k) + 1, np.int64)
    np.cumsum(k, out=off[1:])
    cost = np.concatenate([r.cost[r.off[i] : r.off[i + 1]] for i in region.tolist()] + [np.zeros(1)])
    ea, eb, tables = [], [], []
    for e in np.flatnonzero(inside[r.ea] | inside[r.eb]).tolist():
        a, b = int(r.ea[e]), int(r.eb[e])
        t = r.ecost[r.eoff[e] : r.eoff[e + 1]].reshape(r.k[a], r.k[b])
        if inside[a] and inside[b]:
            ea.append(local[a])
            eb.append(local[b])
            tables.append(t.ravel())
        elif inside[a]:
            cost[off[local[a]] : off[local[a] + 1]] += t[:, x[b]]
        else:
            cost[off[local[b]] : off[local[b] + 1]] += t[x[a], :]
    eoff = np.zeros(len(ea) + 1, np.int64)
    np.cumsum([len(t) for t in tables], out=eoff[1:])
    # memory: the region's own segments, then the background (every other group at x)
    segs = [(r.segptr[i], r.segptr[i + 1]) for i in region.tolist()]
    seg_idx = np.concatenate([np.arange(a, b) for a, b in segs]) if segs else np.zeros(0, np.int64)
    counts = [b - a for a, b in segs]
    mine = x.copy()
    prof = K.profile(mine, r.segptr, r.seglo, r.seghi, r.segoff, r.segu, r.horizon).astype(np.int64)
    for i, (a, b) in zip(region.tolist(), segs):
        for j in range(a, b):
            prof[r.seglo[j] : r.seghi[j]] -= r.segu[r.segoff[j] + x[i]]
    # within a span where the region's live segments do not change, only the background's peak can bind
    cuts = np.unique(np.concatenate([r.seglo[seg_idx], r.seghi[seg_idx]]))
    peak = np.maximum.reduceat(prof[: cuts[-1]], cuts[:-1]) if len(cuts) > 1 else np.zeros(0, np.int64)
    starts = cuts[:-1]
    live = np.searchsorted(np.sort(r.seglo[seg_idx]), starts, "right") - np.searchsorted(
        np.sort(r.seghi[seg_idx]), starts, "right"
    )
    keep = (peak > 0) & (live > 0)
    runs = list(zip(starts[keep].tolist(), cuts[1:][keep].tolist()))
    tops = peak[keep].tolist()
    seglo = np.concatenate([r.seglo[seg_idx], [s for s, _ in runs]]).astype(np.int64)
    seghi = np.concatenate([r.seghi[seg_idx], [t for _, t in runs]]).astype(np.int64)
    segptr = np.zeros(len(k) + 1, np.int64)
    np.cumsum(counts + [len(runs)], out=segptr[1:])
    seglen = np.concatenate([np.repeat(r.k[region], counts), np.ones(len(runs), np.int64)]).astype(np.int64)
    segoff = np.zeros(len(seglen) + 1, np.int64)
    np.cumsum(seglen, out=segoff[1:])
    segu = np.concatenate(
        [r.segu[r.segoff[j] : r.segoff[j + 1]] for j in seg_idx.tolist()] + [np.array(tops, np.int64)]
    )
    empty = np.zeros(0, np.int64)
    return Reduced(k, off, cost, segptr, seglo, seghi, segoff, segu.astype(np.int64), np.array(ea, np.int64),
                   np.array(eb, np.int64), eoff, np.concatenate(tables) if tables else np.zeros(0), r.usage_limit,
                   r.horizon, empty, np.zeros(1, np.int64), empty, {})  # fmt: skip


def improve(r: Reduced, x: np.ndarray, cost_of, region: np.ndarray, seconds: float) -> Step:
    """The MILP over ``region`` with the rest fixed at ``x`` (HiGHS, at most ``seconds``); kept when cheaper and
    within the limit."""
    sub = subproblem(r, x, region)
    y_sub, finished = solve_exact(sub, time.monotonic() + seconds)
    if y_sub is None:
        return Step(x, False, finished, len(region))
    y = x.copy()
    y[region] = y_sub[: len(region)]
    prof = K.profile(y, r.segptr, r.seglo, r.seghi, r.segoff, r.segu, r.horizon)
    better = cost_of(y) < cost_of(x) and (prof <= r.usage_limit).all()
    return Step(y if better else x, better, finished, len(region))
