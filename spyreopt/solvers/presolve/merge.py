"""Structural reductions that fold tables together: self-loops and fixed ends, parallel edges, followers.

* folding: self-loops and edges to a one-candidate node become unary costs;
  parallel edges are summed;
* followers: when an edge allows exactly one ``v`` candidate per ``u``
  candidate, ``v`` is merged into ``u`` (its edges re-attach to ``u``; its
  memory moves to a self-loop on ``u`` over ``v``'s interval).

Each returns whether it changed the state; the inverse of a follower merge is
recorded in ``State.steps``.
"""

from __future__ import annotations

import numpy as np

from spyreopt.solvers.presolve.limits import sat_add
from spyreopt.solvers.presolve.state import EdgeState, State


def fold_edges(s: State) -> bool:
    """Self-loops and edges to a one-candidate node become unary costs of the other end."""
    changed = False
    for k in list(s.edges):
        e = s.edges.get(k)
        if e is None or e.protected:
            continue
        if e.u == e.v:
            n = s.nodes[e.u]
            costs, allowed, usages = s.oriented(k, e.u)
            if s.edge_memory(e):
                # memory over the node's own lifetime is node memory when no address is placed
                if s.f.placement is not None or e.interval != n.interval:
                    continue
                merged, over = sat_add(n.usages, usages[:, 0])
                if over.any():
                    continue
                n.usages = merged
            if not s.add_unary(e.u, costs[:, 0]):
                continue
            s.drop_edge(k)
            s.restrict(e.u, allowed[:, 0])
        elif len(s.nodes[e.v].keep) == 1 or len(s.nodes[e.u].keep) == 1:
            i, j = (e.u, e.v) if len(s.nodes[e.v].keep) == 1 else (e.v, e.u)
            costs, allowed, usages = s.oriented(k, i)
            if not s.add_unary(i, costs[:, 0]):
                continue
            s.drop_edge(k)
            if s.edge_memory(e):  # the pair's memory now depends on i alone
                s.add_loop(i, usages[:, 0], e.interval, e.origin)
            s.restrict(i, allowed[:, 0])
        else:
            continue
        s.counts["folded"] += 1
        changed = True
    return changed


def merge_parallel(s: State) -> bool:
    """Sum edges over the same nodes; memory carriers only without placement and over one interval."""
    groups: dict[tuple, list[int]] = {}
    for k, e in s.edges.items():
        memory = s.edge_memory(e)
        if e.protected or (memory and s.f.placement is not None) or (e.u == e.v and not memory):
            continue
        groups.setdefault((min(e.u, e.v), max(e.u, e.v), e.interval if memory else None), []).append(k)
    changed = False
    for (u, v, interval), ks in groups.items():
        if len(ks) < 2:
            continue
        shape = (len(s.nodes[u].keep), len(s.nodes[v].keep))
        costs, usages = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        allowed = np.ones(shape, bool)
        over = np.zeros(shape, bool)
        for k in ks:
            e = s.edges[k]
            c, a, us = (e.costs, e.allowed, e.usages) if u == v else s.oriented(k, u)
            costs, o1 = sat_add(costs, c)
            usages, o2 = sat_add(usages, 0 if us is None else us)
            allowed &= a
            over |= o1 | o2
        if (over & allowed).any():
            continue
        for k in ks:
            s.drop_edge(k)
        memory = interval is not None
        s.add_edge(EdgeState(u, v, costs, allowed, usages if memory else None, interval or (0, 0), None, False))
        s.counts["parallel"] += len(ks) - 1
        changed = True
    return changed


def merge_followers(s: State) -> bool:
    """Merge v into u when an edge allows exactly one candidate of v per candidate of u."""
    changed = False
    for k in list(s.edges):
        e = s.edges.get(k)
        if e is None or e.protected or e.u == e.v:
            continue
        for u, v in ((e.u, e.v), (e.v, e.u)):
            _, allowed, _ = s.oriented(k, u)
            if s.mergeable(v) and (allowed.sum(axis=1) == 1).all():
                if _merge_into(s, u, v, k, allowed.argmax(axis=1)):
                    s.counts["follower"] += 1
                    changed = True
                break
    return changed


def _merge_into(s: State, u: int, v: int, k: int, follow: np.ndarray) -> bool:
    """v takes candidate follow[a] whenever u takes a: fold v's costs, edges and memory into u."""
    nu, nv = s.nodes[u], s.nodes[v]
    costs, _, usages = s.oriented(k, u)
    rows = np.arange(len(nu.keep))
    unary, over = sat_add(nv.costs[follow], costs[rows, follow])
    total, over2 = sat_add(nu.costs, unary)
    if over.any() or over2.any():
        return False
    nu.costs = total
    e = s.edges[k]
    s.drop_edge(k)
    if s.edge_memory(e):
        s.add_loop(u, usages[rows, follow], e.interval, e.origin)
    usage = s.memory_choice_free(v)
    merged, over = sat_add(nu.usages, nv.usages[follow])
    if usage is None and nu.interval == nv.interval and s.f.placement is None and not over.any():
        nu.usages = merged  # same lifetime, no addresses: one buffer
        usage = 0
    elif usage is None:
        s.add_loop(u, nv.usages[follow], nv.interval, ("node", v))
        usage = 0
    for j in list(nv.edges):
        other = s.edges[j]
        c, a, us = s.oriented(j, v)
        s.drop_edge(j)
        if other.u == other.v:  # a loop of v: its diagonal follows u
            c, a = np.diag(c[follow, 0]), np.where(np.eye(len(follow), dtype=bool), a[follow, 0][:, None], True)
            us = None if us is None else np.diag(us[follow, 0])
            s.add_edge(EdgeState(u, u, c, a, us, other.interval, other.origin, False))
            continue
        w = other.v if other.u == v else other.u
        c, a, us = c[follow], a[follow], None if us is None else us[follow]
        if w == u:  # a parallel edge between u and v becomes a loop on u
            c = np.diag(c[rows, rows])
            a = np.where(np.eye(len(rows), dtype=bool), a[rows, rows][:, None], True)
            us = None if us is None else np.diag(us[rows, rows])
            s.add_edge(EdgeState(u, u, c, a, us, other.interval, other.origin, False))
        else:
            s.add_edge(EdgeState(u, w, c, a, us, other.interval, other.origin, False))
    s.steps.append((v, (u,), {(nu.keep[a],): nv.keep[b] for a, b in enumerate(follow)}))
    s.placeholder(v, usage)
    return True
