"""Sequential tree-reweighted message passing (TRW-S, Kolmogorov 2006) for the priced problem.

The priced problem (cost + usage prices, no limit) is a pairwise random field
with many cycles on the Gemma instances; greedy and forest moves stop in poor
local minima there. TRW-S passes messages forward and backward along the group
order; each pass never lowers its lower bound, and decoding in the forward pass
(every group takes its best strategy given the groups already decoded and the
messages of those still to come) gives the assignment.

Messages use the layout of ``search.Graph``: ``msg[moff[j] + s]`` is the message
along adjacency entry j (owner -> neighbour) over the neighbour's strategies.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from spyreopt.contest.kernels import edge_entry


@njit(cache=True)
def _pass(msg, moff, rev, theta, forward, x, k, off, ptr, nbr, edg, fst, eoff, ecost):  # pragma: no cover
    n = len(k)
    kmax = k.max()
    bel = np.empty(kmax, np.float64)
    dec = np.empty(kmax, np.float64)
    for idx in range(n):
        v = idx if forward else n - 1 - idx
        kv = k[v]
        if kv == 1:
            x[v] = 0
            continue
        before = 0
        after = 0
        for s in range(kv):
            bel[s] = theta[off[v] + s]
            dec[s] = theta[off[v] + s]
        for j in range(ptr[v], ptr[v + 1]):
            w = nbr[j]
            mi = moff[rev[j]]
            for s in range(kv):
                bel[s] += msg[mi + s]
            if w < v:
                before += 1
                if forward:
                    for s in range(kv):
                        dec[s] += edge_entry(eoff, ecost, edg[j], fst[j], kv, k[w], s, x[w])
            else:
                after += 1
                if forward:
                    for s in range(kv):
                        dec[s] += msg[mi + s]
        if forward:
            b = 0
            for s in range(1, kv):
                if dec[s] < dec[b]:
                    b = s
            x[v] = b
        gamma = 1.0 / max(before, after, 1)
        for j in range(ptr[v], ptr[v + 1]):
            w = nbr[j]
            if (w > v) != forward:
                continue
            kw = k[w]
            mi = moff[rev[j]]
            mo = moff[j]
            lo = np.inf
            for sw in range(kw):
                best = np.inf
                for sv in range(kv):
                    val = gamma * bel[sv] - msg[mi + sv] + edge_entry(eoff, ecost, edg[j], fst[j], kv, kw, sv, sw)
                    if val < best:
                        best = val
                msg[mo + sw] = best
                if best < lo:
                    lo = best
            for sw in range(kw):
                msg[mo + sw] -= lo


@njit(cache=True)
def trws_iterate(msg, moff, rev, theta, iters, x, k, off, ptr, nbr, edg, fst, eoff, ecost):  # pragma: no cover
    """``iters`` forward + backward passes; x gets the last forward pass's decoding."""
    for h in range(2 * iters):  # one call site with a run-time direction: compiled once, not per literal
        _pass(msg, moff, rev, theta, h % 2 == 0, x, k, off, ptr, nbr, edg, fst, eoff, ecost)
