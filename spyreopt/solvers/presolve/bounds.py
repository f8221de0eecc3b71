"""Lower bounds over domains, and the two rules that prune by cost (bound pruning, huge costs)."""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.presolve.limits import I64_MAX
from spyreopt.solvers.presolve.masks import Domains

SENTINEL_RATIO = 1024


def term_minima_bound(f: Formulation, dom: Domains, effective: list[np.ndarray] | None = None) -> int:
    """A valid lower bound on the optimum: every cost term at its minimum over the domains (``effective``:
    ``dom.effective`` of every edge, when the caller has them)."""
    eff = effective if effective is not None else [dom.effective(f, k) for k in range(len(f.edges))]
    total = sum(int(n.costs[dom.masks[i]].min()) for i, n in enumerate(f.nodes))
    total += sum(int(e.costs[eff[k]].min()) for k, e in enumerate(f.edges))
    for m in f.max_terms:
        total += max(
            int(alt.unary[dom.masks[m.node]].min()) + sum(int(table[eff[k]].min()) for k, table in alt.edge_parts)
            for alt in m.alternatives
        )
    return total


def prune_by_bound(f: Formulation, dom: Domains, upper_bound: int) -> tuple[set[int], str | None]:
    """Drop candidates and forbid pairs whose lower bound exceeds ``upper_bound`` (a checked incumbent).

    The bound of a candidate is the term-minima bound with its node term and
    the rows of its incident edges at the candidate's value; the bound of a
    pair adds both endpoints' node terms. Returns the nodes whose candidates or
    incident pairs changed, and a conflict message when a domain empties.
    """
    effective = [dom.effective(f, k) for k in range(len(f.edges))]
    for k, eff in enumerate(effective):
        if not eff.any():
            e = f.edges[k]
            return set(), f"edge {k} ({f.nodes[e.u].name} -> {f.nodes[e.v].name}): no allowed pair"
    base = term_minima_bound(f, dom, effective)
    slack = upper_bound - base  # every candidate and pair may add at most this above its minimum
    if slack < 0:
        return set(), f"the lower bound {base} exceeds the incumbent's objective {upper_bound}"
    degree = max((len(f.incident_edges(i)) for i in range(len(f.nodes))), default=0)
    # excesses are clipped so sums stay in int64; a clipped sum only under-counts, which keeps the rule exact
    clip = min(slack + 1, (I64_MAX >> 2) // (degree + 3))
    node_ex = []
    for i, n in enumerate(f.nodes):
        ex = n.costs.astype(np.int64) - int(n.costs[dom.masks[i]].min())
        node_ex.append(np.minimum(np.where(dom.masks[i], ex, 0), clip))
    rows: list[list[np.ndarray]] = [[] for _ in f.nodes]
    edge_ex = []
    for e, eff in zip(f.edges, effective):
        low = int(e.costs[eff].min())
        ex = np.where(eff, np.minimum(np.asarray(e.costs, dtype=np.int64) - low, clip), clip)
        edge_ex.append(ex)
        if e.u == e.v:
            rows[e.u].append(np.diagonal(ex))
        else:
            rows[e.u].append(ex.min(axis=1))
            rows[e.v].append(ex.min(axis=0))
    touched: set[int] = set()
    for i in range(len(f.nodes)):
        extra = node_ex[i] + sum(rows[i], np.zeros_like(node_ex[i]))
        bad = dom.masks[i] & (extra > slack)
        if bad.any():
            dom.counts["bound"] += int(bad.sum())
            dom.masks[i] &= ~bad
            touched.add(i)
            if not dom.masks[i].any():
                return touched, f"node {i} ({f.nodes[i].name}): no candidate within the incumbent's objective"
    for k, e in enumerate(f.edges):
        if e.u == e.v:
            continue  # a loop's pairs are its node's candidates, pruned above
        pair = edge_ex[k] + node_ex[e.u][:, None] + node_ex[e.v][None, :]
        bad = dom.allowed[k] & dom.masks[e.u][:, None] & dom.masks[e.v][None, :] & (pair > slack)
        if bad.any():
            dom.allowed[k] &= ~bad
            touched.update((e.u, e.v))
    return touched, None


def _max_term_span(f: Formulation, dom: Domains) -> int:
    """Sum over max terms of (upper bound - lower bound) of their value over the domains."""
    total = 0
    for m in f.max_terms:
        los, his = [], []
        for alt in m.alternatives:
            u = alt.unary[dom.masks[m.node]]
            lo, hi = int(u.min()), int(u.max())
            for k, table in alt.edge_parts:
                vals = table[dom.effective(f, k)]
                lo, hi = lo + int(vals.min()), hi + int(vals.max())
            los.append(lo)
            his.append(hi)
        total += max(his) - max(los)
    return total


def forbid_sentinels(f: Formulation, dom: Domains) -> int | None:
    """The huge-cost rule (IOPDDL's 1e18 entries, no incumbent needed); the threshold, or None.

    Per cost term (node vector, edge table) take the excess over the term's
    minimum. If a threshold ``T`` satisfies ``T > SENTINEL_RATIO * (S(T) + M) > 0``,
    where ``S(T)`` sums each term's largest excess below ``T`` and ``M`` sums the
    spans of the max terms, any assignment that uses an excess ``>= T`` costs more
    than every assignment that uses none, so such entries are forbidden. Exact
    whenever the result is feasible; the caller retries without it otherwise, or
    claims optimality only for objectives at most ``Domains.floor``.
    """
    excess: list[np.ndarray] = []
    valid: list[np.ndarray] = []
    for i, n in enumerate(f.nodes):
        excess.append(n.costs - n.costs[dom.masks[i]].min())
        valid.append(dom.masks[i])
    for k, e in enumerate(f.edges):
        eff = dom.effective(f, k)
        excess.append(e.costs - e.costs[eff].min())
        valid.append(eff)
    values, owners = [], []
    for t, (ex, ok) in enumerate(zip(excess, valid)):
        u = np.unique(ex[ok])
        u = u[u > 0]
        values.append(u)
        owners.append(np.full(len(u), t))
    if not values:
        return None
    vals, owner = np.concatenate(values), np.concatenate(owners)
    order = np.argsort(vals, kind="stable")
    vals, owner = vals[order], owner[order]
    span = _max_term_span(f, dom)
    current = [0] * len(excess)
    below = 0  # S(T): sum of each term's largest excess below the candidate threshold
    threshold = None
    j = 0
    while j < len(vals):
        v = int(vals[j])
        if below + span > 0 and v > SENTINEL_RATIO * (below + span):
            threshold = v
            break
        while j < len(vals) and vals[j] == v:
            t = int(owner[j])
            below += v - current[t]
            current[t] = v
            j += 1
    if threshold is None:
        return None
    floor = term_minima_bound(f, dom) + threshold  # an assignment using a forbidden entry pays at least this
    dom.floor = floor if dom.floor is None else min(dom.floor, floor)
    for i in range(len(f.nodes)):
        hit = dom.masks[i] & (excess[i] >= threshold)
        dom.counts["sentinel"] += int(hit.sum())
        dom.masks[i] &= ~hit
    for k in range(len(f.edges)):
        hit = dom.allowed[k] & (excess[len(f.nodes) + k] >= threshold)
        dom.counts["sentinel"] += int(hit.sum())
        dom.allowed[k] &= ~hit
    return threshold
