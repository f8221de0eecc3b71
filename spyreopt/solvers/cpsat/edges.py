"""Per edge of the CP-SAT model: pair literals, their links to the endpoints, and the cost terms.

The cost tables (edge cost and max-term parts) are reparametrised
``t[a, b] = r[a] + c[b] + res[a, b]``; ``r``/``c`` go onto the endpoint
literals and a pair literal exists only where needed (module docstring of
``cpsat.model``: dense or sparse links).
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.cpsat.linear import reparam
from spyreopt.solvers.presolve.limits import live

DENSE_FACTOR = 4  # an edge gets every allowed pair when that is at most this many times the needed ones


def edge_terms(m, f, red, k, x, node_w, objective, alt_lin, parts, memory, cap):
    """Pair literals, links and objective/max-term terms of edge k.

    Returns (new pair literals, every pair literal, pair usages, number of link constraints).
    """
    e = f.edges[k]
    du, dv = red.domain(e.u), red.domain(e.v)
    if e.u == e.v:  # a self-loop reads the diagonal: a unary term on the node
        d = du
        ex = e.costs[d, d] - int(e.costs[d, d].min())
        objective.const += int(e.costs[d, d].min())
        if cap is not None:
            ex = np.minimum(ex, cap)
        for s, w in zip(d, ex):
            node_w[e.u][int(s)] += int(w)
        for t, a, table in parts:
            for s in d:
                alt_lin[t][a].add(x[e.u][int(s)], table[s, s])
        lits = {(int(s), int(s)): x[e.u][int(s)] for s in d}
        use = {}
        if memory and e.usages is not None and live(e.interval):
            use = {(int(s), int(s)): int(e.usages[s, s]) for s in d if e.usages[s, s] > 0}
        return {}, {p: lits[p] for p in use}, use, 0

    if len(du) == 1 or len(dv) == 1:
        return _edge_unary(f, red, k, x, node_w, objective, alt_lin, parts, memory, cap)
    ok = red.allowed[k][np.ix_(du, dv)]
    cost = e.costs[np.ix_(du, dv)]
    base = int(cost[ok].min())
    objective.const += base
    cost = cost - base
    if cap is not None:
        cost = np.minimum(cost, cap)
    r, c, res = reparam(cost, ok)
    for a, s in enumerate(du):
        node_w[e.u][int(s)] += int(r[a])
    for b, s in enumerate(dv):
        node_w[e.v][int(s)] += int(c[b])
    part_res = []
    for t, alt, table in parts:
        pr, pc, pres = reparam(table[np.ix_(du, dv)], ok)
        for a, s in enumerate(du):
            alt_lin[t][alt].add(x[e.u][int(s)], pr[a])
        for b, s in enumerate(dv):
            alt_lin[t][alt].add(x[e.v][int(s)], pc[b])
        part_res.append((t, alt, pres))
    need = ok & (res != 0)
    for _, _, pres in part_res:
        need |= ok & (pres != 0)
    usage = np.zeros_like(cost)
    if memory and e.usages is not None and live(e.interval):
        usage = np.where(ok, e.usages[np.ix_(du, dv)], 0)
        need |= usage > 0

    new: dict[tuple[int, int], object] = {}
    every: dict[tuple[int, int], object] = {}
    links = 0
    free_u, free_v = len(du) > 1, len(dv) > 1
    dense = free_u and free_v and ok.sum() <= DENSE_FACTOR * max(need.sum(), len(du) + len(dv))
    if dense:
        need = ok.copy()
    for a, b in zip(*np.nonzero(need)):
        key = (int(du[a]), int(dv[b]))
        if free_u and free_v:
            lit = m.new_bool_var(f"y{k}_{key[0]}_{key[1]}")
            new[key] = lit
        elif free_u:
            lit = x[e.u][key[0]]
        elif free_v:
            lit = x[e.v][key[1]]
        else:
            lit = 1
        every[key] = lit
    if dense:
        links += _link_dense(m, x[e.u], x[e.v], du, dv, new)
    elif free_u and free_v:
        links += _link(m, x[e.u], x[e.v], du, dv, need, new, ok)
    for (a, b), lit in zip(zip(*np.nonzero(need)), every.values()):
        objective.add(lit, res[a, b])
        for t, alt, pres in part_res:
            alt_lin[t][alt].add(lit, pres[a, b])
    use = {key: int(usage[a, b]) for (a, b), key in zip(zip(*np.nonzero(need)), every) if usage[a, b] > 0}
    return new, every, use, links


def _edge_unary(f, red, k, x, node_w, objective, alt_lin, parts, memory, cap):
    """An edge with a fixed end is a unary term on the other end: its pair literal is that end's literal."""
    e = f.edges[k]
    du, dv = red.domain(e.u), red.domain(e.v)
    if len(du) == 1:
        owner, own = e.v, dv
        keys = [(int(du[0]), int(b)) for b in dv]

        def row(table):
            return table[du[0], dv]
    else:
        owner, own = e.u, du
        keys = [(int(a), int(dv[0])) for a in du]

        def row(table):
            return table[du, dv[0]]

    lits = [x[owner][int(s)] for s in own]
    cost = row(e.costs)
    base = int(cost.min())
    objective.const += base
    cost = cost - base if cap is None else np.minimum(cost - base, cap)
    weights = node_w[owner]
    for s, c in zip(own.tolist(), cost.tolist()):
        weights[s] += c
    for t, alt, table in parts:
        for lit, c in zip(lits, row(table).tolist()):
            alt_lin[t][alt].add(lit, c)
    use: dict[tuple[int, int], int] = {}
    every: dict[tuple[int, int], object] = {}
    if memory and e.usages is not None and live(e.interval):
        for key, lit, size in zip(keys, lits, row(e.usages).tolist()):
            if size > 0:
                use[key] = size
                every[key] = lit
    return {}, every, use, 0


def _link_dense(m, xu, xv, du, dv, new) -> int:
    """The auto-sharding form: each row of pair literals sums to its u literal, each column to its v literal."""
    rows: dict[int, list] = {}
    cols: dict[int, list] = {}
    for (a, b), lit in new.items():
        rows.setdefault(a, []).append(lit)
        cols.setdefault(b, []).append(lit)
    for a, lits in rows.items():
        m.add(sum(lits) == xu[a])
    for b, lits in cols.items():
        m.add(sum(lits) == xv[b])
    return len(rows) + len(cols)


def _link(m, xu, xv, du, dv, need, new, ok) -> int:
    """Row and column links making each pair literal the AND of its endpoints; forbidden pairs excluded."""
    count = 0
    for axis, (d_this, d_other, x_this, x_other) in enumerate(((du, dv, xu, xv), (dv, du, xv, xu))):
        nz = need if axis == 0 else need.T
        allow = ok if axis == 0 else ok.T
        for a in range(len(d_this)):
            own = int(d_this[a])
            cols = np.flatnonzero(nz[a])
            if len(cols):
                ys = [new[(own, int(d_other[b])) if axis == 0 else (int(d_other[b]), own)] for b in cols]
                m.add(sum(ys) <= x_this[own])
                m.add(sum(ys) >= x_this[own] + sum(x_other[int(d_other[b])] for b in cols) - 1)
                count += 2
            if axis == 0 and not allow[a].all():  # forbidden pairs of this row
                bad, good = np.flatnonzero(~allow[a]), np.flatnonzero(allow[a])
                if len(bad) <= len(good):
                    m.add(x_this[own] + sum(x_other[int(d_other[b])] for b in bad) <= 1)
                else:
                    m.add(sum(x_other[int(d_other[b])] for b in good) >= x_this[own])
                count += 1
    return count
