"""Window moves: re-optimise ``w`` consecutive nodes exactly, every other node fixed.

Why: coordinate descent moves one node at a time, so it never makes a change that
pays only when several consecutive nodes change together. A tiled loop is one:
a lone tiled op only adds overhead (and its guard pairs forbid it alone), the
loop pays when its whole run switches at once.

The window problem (minimise every objective term that reads a window node,
over the window's candidates, the rest fixed) is solved exactly by variable
elimination in schedule order: a Viterbi pass whose state is the candidates of
the window nodes that a later factor still reads. On a path (edges between
consecutive nodes) that is one node; an edge or max term skipping nodes extends
the state with its earlier end until its last node is reached. Before the pass,
candidates forbidden by a fixed neighbour or without an allowed partner inside
the window are dropped (arc consistency, exact). A window whose largest state
table would exceed ``CAP`` entries is shrunk, which bounds the work per window.

Memory is a constraint across the whole schedule, so the pass first ignores it;
when its optimum overflows, it runs again restricted to candidates and pairs
whose buffers do not grow (then no step can overflow). A move is accepted only
when ``Formulation.evaluate`` strictly decreases and the formulation's own
``violations`` (at the greedy's memory limit, addresses left to placement) are
empty.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from spyreopt.model.formulation import Formulation
from spyreopt.solvers.local import INF, LocalView

WIDTH = 8  # nodes per window
CAP = 1 << 22  # entries of the largest table one window may build (float64: 32 MiB)
PRICE_ROUNDS = 8  # re-solves of a window with memory priced, before the restricted one


@dataclass
class Factor:
    scope: tuple[int, ...]  # window positions, increasing
    table: np.ndarray  # float64 over the scope's domains (inf: forbidden)


@dataclass
class Window:
    """The window problem: per position the node, its remaining candidates, and the factors over them."""

    nodes: list[int]
    domains: list[np.ndarray]  # candidate indices per position
    factors: list[Factor]


def _held(cum: np.ndarray | None, interval: tuple[int, int]) -> float:
    """The memory price of one byte held over ``interval`` (prefix sums ``cum`` of the per-step prices)."""
    if cum is None or interval[1] <= interval[0]:
        return 0.0
    return float(cum[interval[1]] - cum[interval[0]])


def _unary(
    view: LocalView, a, nodes: list[int], pos: dict[int, int], restrict: bool, cum: np.ndarray | None
) -> list[np.ndarray]:
    """Per window node: node cost, self edges and edges to fixed nodes (inf where forbidden or, restricted, growing),
    plus the memory price of the buffers they hold."""
    f = view.f
    out = []
    for i in nodes:
        n = f.nodes[i]
        vec = view.node_costs[i].copy()
        if restrict and n.interval[1] > n.interval[0]:
            vec[n.usages > n.usages[a[i]]] = INF
        price = _held(cum, n.interval)
        if price:
            vec += price * n.usages
        for k in view.incident[i]:
            e = f.edges[k]
            if e.u == i and e.v == i:
                rows = np.arange(n.num_candidates)
                cols = rows
            elif (e.v if e.u == i else e.u) in pos:
                continue  # inside the window: a pair factor
            elif e.u == i:
                rows, cols = np.arange(n.num_candidates), np.full(n.num_candidates, a[e.v])
            else:
                rows, cols = np.full(n.num_candidates, a[e.u]), np.arange(n.num_candidates)
            vec += view.edge_costs[k][rows, cols]
            if e.allowed is not None:
                vec[~e.allowed[rows, cols]] = INF
            if e.usages is not None and e.interval[1] > e.interval[0]:
                if restrict:
                    vec[e.usages[rows, cols] > e.usages[a[e.u], a[e.v]]] = INF
                price = _held(cum, e.interval)
                if price:
                    vec += price * e.usages[rows, cols]
        out.append(vec)
    return out


def _pair_ok(f: Formulation, k: int, a, restrict: bool) -> np.ndarray:
    e = f.edges[k]
    ok = np.ones(e.costs.shape, dtype=bool) if e.allowed is None else e.allowed.copy()
    if restrict and e.usages is not None and e.interval[1] > e.interval[0]:
        ok &= e.usages <= e.usages[a[e.u], a[e.v]]
    return ok


def build_window(
    view: LocalView, a, nodes: list[int], restrict: bool = False, prices: np.ndarray | None = None
) -> Window | None:
    """The window problem over ``nodes`` (increasing schedule order), or None when no candidate combination is
    allowed (restricted: none keeps memory from growing). ``prices`` (per time step, cost per byte) adds the
    price of every window buffer to the objective: the Lagrangian of the memory limit."""
    f = view.f
    pos = {i: p for p, i in enumerate(nodes)}
    cum = None if prices is None else np.concatenate(([0.0], np.cumsum(prices)))
    unary = _unary(view, a, nodes, pos, restrict, cum)
    domains = [np.flatnonzero(np.isfinite(u)) for u in unary]
    inner = sorted({k for i in nodes for k in view.incident[i] if f.edges[k].u != f.edges[k].v}, key=int)
    inner = [k for k in inner if f.edges[k].u in pos and f.edges[k].v in pos]
    ok = {k: _pair_ok(f, k, a, restrict) for k in inner}
    changed = True
    while changed:  # arc consistency: drop candidates without an allowed partner inside the window
        changed = False
        for k in inner:
            e = f.edges[k]
            pu, pv = pos[e.u], pos[e.v]
            sub = ok[k][np.ix_(domains[pu], domains[pv])]
            keep_u, keep_v = sub.any(axis=1), sub.any(axis=0)
            if not keep_u.all() or not keep_v.all():
                domains[pu], domains[pv] = domains[pu][keep_u], domains[pv][keep_v]
                changed = True
    if any(len(d) == 0 for d in domains):
        return None
    factors = [Factor((p,), unary[p][domains[p]]) for p in range(len(nodes))]
    for k in inner:
        e = f.edges[k]
        pu, pv = pos[e.u], pos[e.v]
        table = np.where(ok[k], view.edge_costs[k], INF)
        price = _held(cum, e.interval) if e.usages is not None else 0.0
        if price:
            table = table + price * e.usages
        table = table[np.ix_(domains[pu], domains[pv])]
        factors.append(Factor((pu, pv), table) if pu < pv else Factor((pv, pu), table.T))
    terms = sorted({t for i in nodes for t in view.terms[i]})
    for t in terms:
        factors.append(_max_factor(f, t, a, pos, domains))
    return Window(nodes, domains, factors)


def _max_factor(f: Formulation, t: int, a, pos: dict[int, int], domains: list[np.ndarray]) -> Factor:
    """Max term ``t`` as a table over the window nodes it reads (the others at their fixed candidates)."""
    m = f.max_terms[t]
    ends = {m.node} | {x for alt in m.alternatives for k, _ in alt.edge_parts for x in (f.edges[k].u, f.edges[k].v)}
    scope = tuple(sorted(pos[x] for x in ends if x in pos))
    shape = tuple(len(domains[p]) for p in scope)

    def along(node: int, values: np.ndarray) -> np.ndarray:
        """A vector over ``node``'s domain shaped to broadcast over the scope."""
        p = pos[node]
        dims = [len(domains[q]) if q == p else 1 for q in scope]
        return values[domains[p]].astype(np.float64).reshape(dims)

    best = None
    for alt in m.alternatives:
        val = np.zeros(shape)
        val += along(m.node, alt.unary) if m.node in pos else float(alt.unary[a[m.node]])
        for k, table in alt.edge_parts:
            e = f.edges[k]
            if e.u in pos and e.v in pos and e.u != e.v:
                pu, pv = pos[e.u], pos[e.v]
                sub = table[np.ix_(domains[pu], domains[pv])].astype(np.float64)
                if pu > pv:
                    pu, pv, sub = pv, pu, sub.T
                dims = [sub.shape[0] if q == pu else sub.shape[1] if q == pv else 1 for q in scope]
                val += sub.reshape(dims)
            elif e.u in pos and e.u == e.v:
                val += along(e.u, np.diagonal(table))
            elif e.u in pos:
                val += along(e.u, table[:, a[e.v]])
            elif e.v in pos:
                val += along(e.v, table[a[e.u], :])
            else:
                val += float(table[a[e.u], a[e.v]])
        best = val if best is None else np.maximum(best, val)
    assert best is not None
    return Factor(scope, best)


def _last_use(w: Window) -> list[int]:
    last = list(range(len(w.nodes)))
    for fac in w.factors:
        for p in fac.scope:
            last[p] = max(last[p], fac.scope[-1])
    return last


def peak_entries(w: Window) -> int:
    """The largest table the elimination builds: the state, plus the node entering it."""
    last = _last_use(w)
    axes: list[int] = []
    peak = max((fac.table.size for fac in w.factors), default=1)
    for t in range(len(w.nodes)):
        axes.append(t)
        peak = max(peak, int(np.prod([len(w.domains[p]) for p in axes], dtype=np.float64)))
        axes = [p for p in axes if last[p] > t]
    return peak


def solve_window(w: Window) -> tuple[float, list[int]]:
    """Exact minimum of the window's factors and a minimising candidate per position (first in index order)."""
    last = _last_use(w)
    by_end: list[list[Factor]] = [[] for _ in w.nodes]
    for fac in w.factors:
        by_end[fac.scope[-1]].append(fac)
    axes: list[int] = []
    msg = np.zeros(())
    trail = []  # per step: kept axes, eliminated axes and their shape, argmin over the eliminated per kept state
    for t in range(len(w.nodes)):
        axes.append(t)
        msg = msg[..., None] + np.zeros(len(w.domains[t]))
        for fac in by_end[t]:
            msg = msg + fac.table.reshape([fac.table.shape[fac.scope.index(p)] if p in fac.scope else 1 for p in axes])
        gone = [p for p in axes if last[p] <= t]
        kept = [p for p in axes if last[p] > t]
        if gone:
            moved = np.moveaxis(msg, [axes.index(p) for p in gone], range(len(axes) - len(gone), len(axes)))
            flat = moved.reshape(moved.shape[: len(kept)] + (-1,))
            trail.append((tuple(kept), gone, moved.shape[len(kept) :], np.argmin(flat, axis=-1)))
            msg = flat.min(axis=-1)
        axes = list(kept)
    choice: dict[int, int] = {}
    for kept, gone, shape, arg in reversed(trail):
        flat = int(arg[tuple(choice[p] for p in kept)])
        for p, x in zip(gone, np.unravel_index(flat, shape)):
            choice[p] = int(x)
    return float(msg), [int(w.domains[p][choice[p]]) for p in range(len(w.nodes))]


def window_value(w: Window, cands: list[int]) -> float:
    """The window's factors at one candidate per position (inf when one is outside its domain)."""
    idx = []
    for p, s in enumerate(cands):
        hit = np.flatnonzero(w.domains[p] == s)
        if not len(hit):
            return INF
        idx.append(int(hit[0]))
    return float(sum(fac.table[tuple(idx[p] for p in fac.scope)] for fac in w.factors))


class WindowSearch:
    """Slides windows over the schedule, accepting exact window optima that strictly improve and stay feasible."""

    def __init__(self, view: LocalView, width: int = WIDTH, cap: int = CAP):
        self.view, self.width, self.cap = view, width, cap
        f = view.f
        self.check = replace(f, placement=None, usage_limit=view.limit, _incident={})  # addresses: later, by placement
        self.stats = {"windows": 0, "accepted": 0, "rejected_memory": 0, "shrunk": 0}

    def _best(
        self, a, nodes: list[int], restrict: bool = False, prices: np.ndarray | None = None, w: Window | None = None
    ) -> tuple[float, float, list[int]] | None:
        """(optimum, current value, optimal candidates) of the window problem, None when it is empty or too big."""
        w = w or build_window(self.view, a, nodes, restrict, prices)
        if w is None or peak_entries(w) > self.cap:
            return None
        value, cands = solve_window(w)
        return value, window_value(w, [a[i] for i in nodes]), cands

    def _profile_after(self, a, prof: np.ndarray, nodes: list[int], cands: list[int]) -> np.ndarray:
        view, trial, new = self.view, list(a), prof.copy()
        for i, s in zip(nodes, cands):
            view.apply(new, view.usage_delta(i, trial, s))
            trial[i] = s
        return new

    def _accept(self, a: list[int], prof: np.ndarray, nodes: list[int], cands: list[int], new_prof) -> bool:
        """Make the move when the formulation itself says it strictly improves and breaks no constraint."""
        trial = list(a)
        for i, s in zip(nodes, cands):
            trial[i] = s
        if not (self.check.evaluate(trial) < self.check.evaluate(a) and not self.check.violations(trial)):
            return False
        a[:] = trial
        prof[:] = new_prof
        self.stats["accepted"] += 1
        return True

    def try_window(self, a: list[int], prof: np.ndarray, nodes: list[int], w: Window | None = None) -> bool:
        """Move ``nodes`` to their exact window optimum when that strictly improves and stays feasible.

        The optimum ignoring memory first; while it overflows, the optimum with every byte held at an
        overflowing step priced (prices doubling each round); last, the optimum among the moves whose
        buffers do not grow."""
        self.stats["windows"] += 1
        found = self._best(a, nodes, w=w)
        if found is None or not found[0] < found[1]:
            return False  # not even ignoring memory: nothing better here
        gain = found[1] - found[0]
        prices = np.zeros(len(prof))
        limit = self.view.limit
        for round_ in range(PRICE_ROUNDS):
            new_prof = self._profile_after(a, prof, nodes, found[2])
            if limit is None or new_prof.max(initial=0) <= limit:
                return self._accept(a, prof, nodes, found[2], new_prof)
            self.stats["rejected_memory"] += 1
            over = np.maximum(new_prof - limit, 0).astype(np.float64)
            prices[over > 0] += gain / over.sum() * 2.0**round_
            found = self._best(a, nodes, prices=prices)
            if found is None or not found[0] < found[1]:
                break
        found = self._best(a, nodes, restrict=True)
        if found is None or not found[0] < found[1]:
            return False
        return self._accept(a, prof, nodes, found[2], self._profile_after(a, prof, nodes, found[2]))

    def sweep(self, a: list[int], prof: np.ndarray, active: np.ndarray, deadline: float) -> list[int]:
        """One pass of windows ``[p, p + width)`` over the schedule, visiting those holding an active node (one
        whose window problem may have changed); a window too big for ``cap`` is shrunk from its end. The nodes
        moved."""
        n = len(a)
        before = list(a)
        for p in range(max(n - self.width, 0) + 1 if n >= 2 else 0):
            if time.perf_counter() >= deadline:
                break
            width = min(self.width, n - p)
            if not active[p : p + width].any():
                continue
            while width >= 2:
                w = build_window(self.view, a, list(range(p, p + width)))
                if w is None or peak_entries(w) <= self.cap:
                    break
                width -= 1
                self.stats["shrunk"] += 1
            if width >= 2 and w is not None:
                self.try_window(a, prof, list(range(p, p + width)), w)
        return [i for i in range(n) if a[i] != before[i]]
