"""Compiled kernels of the contest search (numba): costs, usage profile, forest DP, repair, polish.

All kernels take the arrays of ``reduce.Reduced`` plus the adjacency of
``graph.Graph`` (CSR: for node ``i``, entries ``ptr[i]:ptr[i+1]`` give the
neighbour, the merged edge and whether ``i`` is the edge's first node) and a
current assignment ``x`` (reduced strategy index per node). Ties always keep
the current strategy or the lowest index, so a run is a function of its seed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

BLOCK = 64  # time steps per block of the profile's range-max structure


@njit(cache=True, inline="always")
def edge_entry(eoff, ecost, e, first, k_self, k_other, s_self, s_other):  # pragma: no cover - compiled
    if first:
        return ecost[eoff[e] + s_self * k_other + s_other]
    return ecost[eoff[e] + s_other * k_self + s_self]


@njit(cache=True)
def local_costs(i, x, k, off, cost, ptr, nbr, edg, fst, eoff, ecost, out):  # pragma: no cover - compiled
    """out[s] = unary cost of s plus every incident edge at the neighbours' current strategies."""
    ki = k[i]
    for s in range(ki):
        out[s] = cost[off[i] + s]
    for j in range(ptr[i], ptr[i + 1]):
        w = nbr[j]
        kw = k[w]
        xw = x[w]
        base = eoff[edg[j]]
        if fst[j]:
            for s in range(ki):
                out[s] += ecost[base + s * kw + xw]
        else:
            for s in range(ki):
                out[s] += ecost[base + xw * ki + s]


@njit(cache=True)
def total_cost(x, k, off, cost, ea, eb, eoff, ecost):  # pragma: no cover - compiled
    """Objective of the reduced problem (float64; equals the file's cost up to the folded constant)."""
    t = 0.0
    for i in range(len(k)):
        t += cost[off[i] + x[i]]
    for e in range(len(ea)):
        t += ecost[eoff[e] + x[ea[e]] * k[eb[e]] + x[eb[e]]]
    return t


@njit(cache=True)
def _find(uf, a):  # pragma: no cover - compiled
    while uf[a] != a:
        uf[a] = uf[uf[a]]
        a = uf[a]
    return a


@njit(cache=True)
def induced_forest(perm, k, ptr, nbr):  # pragma: no cover - compiled
    """Nodes taken in ``perm`` order unless they close a cycle; every edge among them is a tree edge."""
    n = len(k)
    uf = np.arange(n)
    ins = np.zeros(n, np.bool_)
    mark = np.full(n, -1, np.int64)
    for v in perm:
        if k[v] == 1:
            continue
        ok = True
        for j in range(ptr[v], ptr[v + 1]):
            w = nbr[j]
            if ins[w]:
                r = _find(uf, w)
                if mark[r] == v:
                    ok = False
                    break
                mark[r] = v
        if not ok:
            continue
        ins[v] = True
        for j in range(ptr[v], ptr[v + 1]):
            w = nbr[j]
            if ins[w]:
                uf[_find(uf, w)] = v
    tree = np.zeros(len(nbr), np.bool_)
    for v in range(n):
        if ins[v]:
            for j in range(ptr[v], ptr[v + 1]):
                tree[j] = ins[nbr[j]]
    return ins, tree


@njit(cache=True)
def spanning_forest(edge_perm, k, ptr, nbr, edg):  # pragma: no cover - compiled
    """Every free node, joined by the edges taken in ``edge_perm`` order unless they close a cycle (Kruskal)."""
    n = len(k)
    uf = np.arange(n)
    ins = k > 1
    take = np.zeros(edge_perm.max() + 1 if len(edge_perm) else 0, np.bool_)
    # endpoints of each edge from the adjacency
    ea = np.full(len(take), -1, np.int64)
    eb = np.full(len(take), -1, np.int64)
    for v in range(n):
        for j in range(ptr[v], ptr[v + 1]):
            e = edg[j]
            if ea[e] < 0:
                ea[e] = v
            else:
                eb[e] = v
    for e in edge_perm:
        a, b = ea[e], eb[e]
        if a < 0 or b < 0 or not (ins[a] and ins[b]):
            continue
        ra, rb = _find(uf, a), _find(uf, b)
        if ra != rb:
            uf[ra] = rb
            take[e] = True
    tree = np.zeros(len(nbr), np.bool_)
    for j in range(len(nbr)):
        tree[j] = take[edg[j]]
    return ins, tree


@njit(cache=True)
def tree_dp(x, pens, perm, ins, tree, share, k, off, cost, ptr, nbr, edg, fst, eoff, ecost):  # pragma: no cover
    """Minimise cost + ``pens`` over the nodes ``ins`` along the adjacency entries ``tree`` (a forest).

    Edges to nodes outside ``ins`` count at their current strategy; an edge between two nodes of
    ``ins`` that is not a tree edge counts half on each side at the other's current strategy (exact
    when there is none, as for an induced forest). Returns the new assignment.
    """
    n = len(k)
    order = np.empty(n, np.int64)
    parent = np.full(n, -1, np.int64)
    pedge = np.zeros(n, np.int64)
    pfirst = np.zeros(n, np.bool_)
    seen = np.zeros(n, np.bool_)
    cnt = 0
    for r in perm:
        if not ins[r] or seen[r]:
            continue
        seen[r] = True
        order[cnt] = r
        head = cnt
        cnt += 1
        while head < cnt:
            v = order[head]
            head += 1
            for j in range(ptr[v], ptr[v + 1]):
                w = nbr[j]
                if tree[j] and not seen[w]:
                    seen[w] = True
                    parent[w] = v
                    pedge[w] = edg[j]
                    pfirst[w] = fst[j]  # v (the parent) is the edge's first node
                    order[cnt] = w
                    cnt += 1
    acc = np.empty(len(cost), np.float64)
    for h in range(cnt):
        v = order[h]
        kv = k[v]
        for s in range(kv):
            acc[off[v] + s] = cost[off[v] + s] + pens[off[v] + s]
        for j in range(ptr[v], ptr[v + 1]):
            if tree[j]:
                continue
            w = nbr[j]
            half = share if ins[w] else 1.0
            for s in range(kv):
                acc[off[v] + s] += half * edge_entry(eoff, ecost, edg[j], fst[j], kv, k[w], s, x[w])
    aoff = np.zeros(n + 1, np.int64)
    for h in range(cnt):
        v = order[h]
        aoff[v + 1] = k[parent[v]] if parent[v] >= 0 else 0
    aoff = np.cumsum(aoff)
    arg = np.empty(aoff[-1], np.int32)
    for h in range(cnt - 1, -1, -1):
        v = order[h]
        p = parent[v]
        if p < 0:
            continue
        kv, kp = k[v], k[p]
        e = pedge[v]
        for sp in range(kp):
            best_s = x[v]
            best = acc[off[v] + best_s] + edge_entry(eoff, ecost, e, not pfirst[v], kv, kp, best_s, sp)
            for sv in range(kv):
                val = acc[off[v] + sv] + edge_entry(eoff, ecost, e, not pfirst[v], kv, kp, sv, sp)
                if val < best:
                    best = val
                    best_s = sv
            acc[off[p] + sp] += best
            arg[aoff[v] + sp] = best_s
    y = x.copy()
    for h in range(cnt):
        v = order[h]
        p = parent[v]
        if p < 0:
            s = x[v]
            best = acc[off[v] + s]
            for t in range(k[v]):
                if acc[off[v] + t] < best:
                    best = acc[off[v] + t]
                    s = t
        else:
            s = arg[aoff[v] + y[p]]
        y[v] = s
    return y


@njit(cache=True)
def priced_cost(x, pens, k, off, cost, ea, eb, eoff, ecost):  # pragma: no cover - compiled
    """Cost plus usage prices: the relaxed objective the DP minimises."""
    t = total_cost(x, k, off, cost, ea, eb, eoff, ecost)
    for i in range(len(k)):
        t += pens[off[i] + x[i]]
    return t


@njit(cache=True)
def profile(x, segptr, seglo, seghi, segoff, segu, horizon):  # pragma: no cover - compiled
    """Live usage at every time step."""
    d = np.zeros(horizon + 1, np.int64)
    for g in range(len(x)):
        for j in range(segptr[g], segptr[g + 1]):
            u = segu[segoff[j] + x[g]]
            d[seglo[j]] += u
            d[seghi[j]] -= u
    return np.cumsum(d)[:horizon]


@njit(cache=True)
def penalties(csum, k, off, segptr, seglo, seghi, segoff, segu):  # pragma: no cover - compiled
    """Price of every strategy: its usage in each segment times the summed step prices (``csum`` is cumulative)."""
    pens = np.zeros(off[-1], np.float64)
    for g in range(len(k)):
        for j in range(segptr[g], segptr[g + 1]):
            w = csum[seghi[j]] - csum[seglo[j]]
            if w == 0.0:
                continue
            for s in range(k[g]):
                pens[off[g] + s] += segu[segoff[j] + s] * w
    return pens


# ---- the usage profile in blocks: range add and range max in O(T / BLOCK + BLOCK)
@njit(cache=True)
def _blocks(prof):  # pragma: no cover - compiled
    nb = (len(prof) + BLOCK - 1) // BLOCK
    bmax = np.empty(nb, np.int64)
    for b in range(nb):
        bmax[b] = prof[b * BLOCK : min((b + 1) * BLOCK, len(prof))].max()
    return bmax, np.zeros(nb, np.int64)


@njit(cache=True)
def _range_max(prof, bmax, lazy, a, b):  # pragma: no cover - compiled
    m = -(2**62)
    t = a
    while t < b:
        blk = t // BLOCK
        if t % BLOCK == 0 and t + BLOCK <= b:
            m = max(m, bmax[blk] + lazy[blk])
            t += BLOCK
        else:
            m = max(m, prof[t] + lazy[blk])
            t += 1
    return m


@njit(cache=True)
def _range_add(prof, bmax, lazy, a, b, d):  # pragma: no cover - compiled
    t = a
    while t < b:
        blk = t // BLOCK
        if t % BLOCK == 0 and t + BLOCK <= b:
            lazy[blk] += d
            t += BLOCK
        else:
            prof[t] += d
            t += 1
    for blk in (a // BLOCK, (b - 1) // BLOCK):
        bmax[blk] = prof[blk * BLOCK : min((blk + 1) * BLOCK, len(prof))].max()


@njit(cache=True)
def _argmax(prof, bmax, lazy):  # pragma: no cover - compiled
    bb = np.argmax(bmax + lazy)
    a = bb * BLOCK
    return a + np.argmax(prof[a : min(a + BLOCK, len(prof))])


@njit(cache=True)
def _rooms(g, prof, bmax, lazy, limit, segptr, seglo, seghi, room):  # pragma: no cover - compiled
    for j in range(segptr[g], segptr[g + 1]):
        room[j - segptr[g]] = limit - _range_max(prof, bmax, lazy, seglo[j], seghi[j])


@njit(cache=True)
def _fits(g, cur, s, room, skip, segptr, segoff, segu):  # pragma: no cover - compiled
    """Moving g from cur to s raises no segment (other than ``skip``) above its room."""
    for j in range(segptr[g], segptr[g + 1]):
        if j == skip:
            continue
        d = segu[segoff[j] + s] - segu[segoff[j] + cur]
        if d > 0 and d > room[j - segptr[g]]:
            return False
    return True


@njit(cache=True)
def _apply(g, cur, s, prof, bmax, lazy, segptr, seglo, seghi, segoff, segu):  # pragma: no cover - compiled
    for j in range(segptr[g], segptr[g + 1]):
        d = segu[segoff[j] + s] - segu[segoff[j] + cur]
        if d != 0:
            _range_add(prof, bmax, lazy, seglo[j], seghi[j], d)


@njit(cache=True)
def repair(
    x, prof, limit, k, off, cost, segptr, seglo, seghi, segoff, segu, ptr, nbr, edg, fst, eoff, ecost
):  # pragma: no cover
    """Lower the peak until it fits: at the worst step, the move with least cost per unit of usage freed.

    A move never raises another segment above the limit. Returns False when no move frees usage there.
    """
    prof = prof.copy()
    bmax, lazy = _blocks(prof)
    tmp = np.empty(k.max(), np.float64)
    maxseg = 1
    for g in range(len(k)):
        maxseg = max(maxseg, segptr[g + 1] - segptr[g])
    room = np.empty(maxseg, np.int64)
    while True:
        t = _argmax(prof, bmax, lazy)
        excess = prof[t] + lazy[t // BLOCK] - limit
        if excess <= 0:
            return True
        best, bg, bs = np.inf, -1, -1
        for g in range(len(k)):
            if k[g] == 1:
                continue
            for j in range(segptr[g], segptr[g + 1]):
                if not (seglo[j] <= t < seghi[j]):
                    continue
                cur = x[g]
                cu = segu[segoff[j] + cur]
                local_costs(g, x, k, off, cost, ptr, nbr, edg, fst, eoff, ecost, tmp)
                _rooms(g, prof, bmax, lazy, limit, segptr, seglo, seghi, room)
                for s in range(k[g]):
                    freed = cu - segu[segoff[j] + s]
                    if freed <= 0 or not _fits(g, cur, s, room, j, segptr, segoff, segu):
                        continue
                    r = (tmp[s] - tmp[cur]) / min(freed, excess)
                    if r < best:
                        best, bg, bs = r, g, s
        if bg < 0:
            return False
        _apply(bg, x[bg], bs, prof, bmax, lazy, segptr, seglo, seghi, segoff, segu)
        x[bg] = bs


@njit(cache=True)
def polish(
    x, prof0, limit, order, passes, k, off, cost, segptr, seglo, seghi, segoff, segu, ptr, nbr, edg, fst, eoff, ecost
):  # pragma: no cover - compiled
    """Best-improvement one-node moves that keep every step within the limit, until none improves."""
    prof = prof0.copy()
    bmax, lazy = _blocks(prof)
    tmp = np.empty(k.max(), np.float64)
    maxseg = 1
    for g in range(len(k)):
        maxseg = max(maxseg, segptr[g + 1] - segptr[g])
    room = np.empty(maxseg, np.int64)
    moves = 0
    for _ in range(passes):
        improved = 0
        for g in order:
            if k[g] == 1:
                continue
            local_costs(g, x, k, off, cost, ptr, nbr, edg, fst, eoff, ecost, tmp)
            cur = x[g]
            best, bs = tmp[cur], cur
            ready = False
            for s in range(k[g]):
                if tmp[s] < best:
                    if not ready:
                        _rooms(g, prof, bmax, lazy, limit, segptr, seglo, seghi, room)
                        ready = True
                    if _fits(g, cur, s, room, -1, segptr, segoff, segu):
                        best, bs = tmp[s], s
            if bs != cur:
                _apply(g, cur, bs, prof, bmax, lazy, segptr, seglo, seghi, segoff, segu)
                x[g] = bs
                improved += 1
        moves += improved
        if improved == 0:
            break
    return moves
