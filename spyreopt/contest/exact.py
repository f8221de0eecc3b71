"""The whole reduced problem as one MILP (HiGHS), when the follower merges leave it small.

Binaries pick a strategy per group; a binary per finite entry of every edge
table is tied to both ends (its row sums to the first end's choice, its column
to the second's), so the objective is exact and linear. The usage limit is
checked at every segment start (live usage only rises there), where the worst
case could exceed it.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from spyreopt.contest.merge import FINITE
from spyreopt.contest.reduce import Reduced


def model_size(r: Reduced) -> int:
    """Number of edge binaries the model would need (the measure of whether it is worth building)."""
    return int((r.ecost < FINITE).sum())


def solve_exact(r: Reduced, deadline: float):
    """``(x, proven_optimal)`` for the reduced problem, or ``(None, False)`` when HiGHS finds nothing by ``deadline``.

    ``deadline`` is on ``time.monotonic()``; building the model counts against it.
    """
    free = r.k > 1
    xcol = np.full(len(r.cost), -1, np.int64)  # column of every free strategy
    nx = int(r.k[free].sum())
    xcol[np.repeat(free, r.k)] = np.arange(nx)
    obj = [r.cost[np.repeat(free, r.k)]]
    upper = [np.where(obj[0] >= FINITE, 0.0, 1.0)]
    rows, cols, vals, lo, hi = [], [], [], [], []
    nrow = 0
    for g in np.flatnonzero(free):  # exactly one strategy per group
        c = xcol[r.off[g] : r.off[g + 1]]
        rows.append(np.full(len(c), nrow))
        cols.append(c)
        vals.append(np.ones(len(c)))
        nrow += 1
    lo += [1.0] * int(free.sum())
    hi += [1.0] * int(free.sum())
    ncol = nx
    for e in range(len(r.ea)):
        a, b = int(r.ea[e]), int(r.eb[e])
        ka, kb = int(r.k[a]), int(r.k[b])
        t = r.ecost[r.eoff[e] : r.eoff[e + 1]]
        ok = np.flatnonzero(t < FINITE)
        ycols = ncol + np.arange(len(ok))
        ncol += len(ok)
        obj.append(t[ok])
        upper.append(np.ones(len(ok)))
        sa, sb = ok // kb, ok % kb
        # row sa of the table sums to x[a][sa]; column sb to x[b][sb]
        rows += [nrow + sa, nrow + np.arange(ka), nrow + ka + sb, nrow + ka + np.arange(kb)]
        cols += [ycols, xcol[r.off[a] : r.off[a + 1]], ycols, xcol[r.off[b] : r.off[b + 1]]]
        vals += [np.ones(len(ok)), -np.ones(ka), np.ones(len(ok)), -np.ones(kb)]
        nrow += ka + kb
        lo += [0.0] * (ka + kb)
        hi += [0.0] * (ka + kb)
    nrow = _memory(r, xcol, rows, cols, vals, lo, hi, nrow)
    a_mat = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(nrow, ncol))
    res = milp(
        np.concatenate(obj),
        integrality=np.ones(ncol),
        bounds=Bounds(np.zeros(ncol), np.concatenate(upper)),
        constraints=LinearConstraint(a_mat.tocsr(), np.array(lo), np.array(hi)),
        options={
            "time_limit": max(0.85 * (deadline - time.monotonic()), 0.1),
            "disp": False,
        },  # HiGHS overruns under load
    )
    if res.x is None:
        return None, False
    x = np.zeros(r.n, np.int64)
    for g in np.flatnonzero(free):
        x[g] = int(np.argmax(res.x[xcol[r.off[g] : r.off[g + 1]]]))
    return x, res.status == 0


def _peaks(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Segment starts after which the next boundary is an end: the live sets there contain all others."""
    bounds = np.unique(np.concatenate([lo, hi]))
    is_start = np.isin(bounds[:-1], lo)
    ends_next = np.isin(bounds[1:], hi)
    return bounds[:-1][is_start & ends_next]


def _memory(r: Reduced, xcol, rows, cols, vals, lo, hi, nrow: int) -> int:
    """Live usage <= limit wherever the live set is maximal and the worst case could exceed the limit."""
    seg_group = np.repeat(np.arange(r.n), np.diff(r.segptr))
    free_seg = r.k[seg_group] > 1
    first = r.segu[r.segoff[:-1]]
    umin = np.minimum.reduceat(r.segu, r.segoff[:-1]) if len(first) else first
    umax = np.maximum.reduceat(r.segu, r.segoff[:-1]) if len(first) else first
    for t in _peaks(r.seglo, r.seghi):
        live = (r.seglo <= t) & (t < r.seghi)
        fixed = int(first[live & ~free_seg].sum()) + int(umin[live & free_seg].sum())
        worst = int((umax - umin)[live & free_seg].sum())
        if fixed + worst <= r.usage_limit:
            continue
        cs, vs = [], []
        for j in np.flatnonzero(live & free_seg & (umax > umin)):
            g = int(seg_group[j])
            u = r.segu[r.segoff[j] : r.segoff[j + 1]]
            cs.append(xcol[r.off[g] : r.off[g + 1]])
            vs.append((u - u.min()).astype(np.float64))
        c = np.concatenate(cs)
        rows.append(np.full(len(c), nrow))
        cols.append(c)
        vals.append(np.concatenate(vs))
        lo.append(-np.inf)
        hi.append(float(r.usage_limit - fixed))
        nrow += 1
    return nrow
