"""Leaf and series elimination of nodes whose memory does not depend on their choice.

The node's best choice is folded into its neighbour's costs (leaf) or into a
new edge between its two neighbours (series); the choice is recorded in
``State.steps`` as a table over the neighbours' candidates, which is the
exact inverse.
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.presolve.limits import I64_MAX, sat_add
from spyreopt.solvers.presolve.state import EdgeState, State


def eliminate(s: State) -> bool:
    """Leaf and series elimination of nodes whose memory does not depend on their choice."""
    changed = False
    for v, n in enumerate(s.nodes):
        if not s.mergeable(v) or len(n.edges) not in (1, 2):
            continue
        usage = s.memory_choice_free(v)
        ks = sorted(n.edges)
        if usage is None or any(s.edges[k].u == s.edges[k].v or s.edge_memory(s.edges[k]) for k in ks):
            continue
        ends = [s.edges[k].v if s.edges[k].u == v else s.edges[k].u for k in ks]
        if len(ks) == 1:
            ok = _eliminate_leaf(s, v, ks[0], ends[0])
        elif ends[0] != ends[1]:
            ok = _eliminate_series(s, v, ks, ends)
        else:
            continue
        if ok:
            s.placeholder(v, usage)
            changed = True
    return changed


def _eliminate_leaf(s: State, v: int, k: int, u: int) -> bool:
    costs, allowed, _ = s.oriented(k, u)
    total, over = sat_add(costs, s.nodes[v].costs[None, :])
    if (over & allowed).any() or not allowed.any(axis=1).all():
        return False  # rows without a partner go first, by arc consistency
    total = np.where(allowed, total, I64_MAX)
    best = total.argmin(axis=1)
    if not s.add_unary(u, total[np.arange(len(best)), best]):
        return False
    s.drop_edge(k)
    s.steps.append((v, (u,), {(s.nodes[u].keep[a],): s.nodes[v].keep[b] for a, b in enumerate(best)}))
    s.counts["leaf"] += 1
    return True


def _eliminate_series(s: State, v: int, ks: list[int], ends: list[int]) -> bool:
    u, w = ends
    c1, a1, _ = s.oriented(ks[0], u)  # [S_u, S_v]
    c2, a2, _ = s.oriented(ks[1], v)  # [S_v, S_w]
    total, over = sat_add(c1[:, :, None], s.nodes[v].costs[None, :, None])
    total, over2 = sat_add(total, c2[None, :, :])
    allowed = a1[:, :, None] & a2[None, :, :]
    if ((over | over2) & allowed).any():
        return False
    total = np.where(allowed, total, I64_MAX)
    best = total.argmin(axis=1)  # [S_u, S_w]
    pair_allowed = allowed.any(axis=1)
    cost = np.take_along_axis(total, best[:, None, :], axis=1)[:, 0, :]
    if not pair_allowed.any():
        return False
    cost = np.where(pair_allowed, cost, cost[pair_allowed].max())  # any finite value: never chosen
    for k in ks:
        s.drop_edge(k)
    s.add_edge(EdgeState(u, w, cost, pair_allowed, None, (0, 0), None, False))
    keep_u, keep_v, keep_w = s.nodes[u].keep, s.nodes[v].keep, s.nodes[w].keep
    table = {(keep_u[a], keep_w[c]): keep_v[best[a, c]] for a in range(len(keep_u)) for c in range(len(keep_w))}
    s.steps.append((v, (u, w), table))
    s.counts["series"] += 1
    return True
