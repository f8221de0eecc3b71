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
while its optimum overflows, it runs again with each byte held at an overflowing
step priced (a Lagrangian, the price bisected between one that overflows and
one that fits or improves nothing), and last restricted to candidates and pairs
whose buffers do not grow (then no step can overflow). A move is
accepted only when the objective strictly decreases, counted in exact integers
over every term that reads the window (``local_objective``: the difference of
``Formulation.evaluate``, without its O(n) pass per move), every pair it touches
is allowed and the exact usage profile stays within greedy's memory limit
(addresses are left to placement, as for every greedy move).

Work is counted in deterministic units (``WindowSearch.work``): each table
entry a window's build holds or its elimination builds, plus ``BUILD_UNITS``
per build. A search given a ``budget`` starts no window once the count reaches
it, so where it stops depends on the input only, never on the machine's speed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from spyreopt.model.formulation import Formulation, affine_value
from spyreopt.solvers.local import INF, LocalView

WIDTH = 8  # nodes per window
STRIDE = 2  # windows start every STRIDE nodes: every run of WIDTH - STRIDE + 1 consecutive nodes is in one
CAP = 1 << 22  # entries of the largest table one window may build (float64: 32 MiB)
PRICE_ROUNDS = 8  # re-solves of a window with memory priced (bisecting the price), before the restricted one
BUILD_UNITS = 100_000  # work units of building one window, besides its tables' entries (about a millisecond)


@dataclass
class Factor:
    scope: tuple[int, ...]  # window positions, increasing
    table: np.ndarray  # float64 over the scope's domains (inf: forbidden)


@dataclass
class Window:
    """The window problem: per position the node, its remaining candidates, and the factors over them."""

    nodes: list[int]
    domains: list[np.ndarray]  # candidate indices per position
    factors: list[Factor]  # first one unary factor per position, in order
    held: list[tuple[int, tuple[int, int], np.ndarray]]  # buffers: (factor index, interval, bytes over its table)


def _unary(view: LocalView, a, nodes: list[int], pos: dict[int, int], restrict: bool):
    """Per window node: node cost, self edges and edges to fixed nodes (inf where forbidden or, restricted,
    growing), and the buffers it holds as (interval, bytes per candidate)."""
    f = view.f
    costs, held = [], []
    for i in nodes:
        n = f.nodes[i]
        vec = view.node_costs[i].copy()
        bufs = []
        if n.interval[1] > n.interval[0]:
            bufs.append((n.interval, n.usages))
            if restrict:
                vec[n.usages > n.usages[a[i]]] = INF
        for k in view.incident[i]:
            e = f.edges[k]
            if e.u == i and e.v == i:
                pick = np.diagonal  # a self edge: both ends are i
            elif (e.v if e.u == i else e.u) in pos:
                continue  # inside the window: a pair factor
            elif e.u == i:
                pick = _column(a[e.v])
            else:
                pick = _row(a[e.u])
            vec += pick(view.edge_costs[k])
            if e.allowed is not None:
                vec[~pick(e.allowed)] = INF
            if e.usages is not None and e.interval[1] > e.interval[0]:
                usage = pick(e.usages)
                bufs.append((e.interval, usage))
                if restrict:
                    vec[usage > e.usages[a[e.u], a[e.v]]] = INF
        costs.append(vec)
        held.append(bufs)
    return costs, held


def _column(j: int):
    return lambda table: table[:, j]


def _row(j: int):
    return lambda table: table[j, :]


def _pair_ok(f: Formulation, k: int, a, restrict: bool) -> np.ndarray:
    e = f.edges[k]
    ok = np.ones(e.costs.shape, dtype=bool) if e.allowed is None else e.allowed.copy()
    if restrict and e.usages is not None and e.interval[1] > e.interval[0]:
        ok &= e.usages <= e.usages[a[e.u], a[e.v]]
    return ok


def build_window(view: LocalView, a, nodes: list[int], restrict: bool = False) -> Window | None:
    """The window problem over ``nodes`` (increasing schedule order), or None when no candidate combination is
    allowed (restricted: none keeps memory from growing)."""
    f = view.f
    pos = {i: p for p, i in enumerate(nodes)}
    unary, held_by_node = _unary(view, a, nodes, pos, restrict)
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
            sub = ok[k][domains[pu]][:, domains[pv]]
            keep_u, keep_v = sub.any(axis=1), sub.any(axis=0)
            if not keep_u.all() or not keep_v.all():
                domains[pu], domains[pv] = domains[pu][keep_u], domains[pv][keep_v]
                changed = True
    if any(len(d) == 0 for d in domains):
        return None
    factors = [Factor((p,), unary[p][domains[p]]) for p in range(len(nodes))]
    held = [(p, interval, usage[domains[p]]) for p, bufs in enumerate(held_by_node) for interval, usage in bufs]
    for k in inner:
        e = f.edges[k]
        pu, pv = pos[e.u], pos[e.v]
        table = np.where(ok[k], view.edge_costs[k], INF)[domains[pu]][:, domains[pv]]
        usage = None
        if e.usages is not None and e.interval[1] > e.interval[0]:
            usage = e.usages[domains[pu]][:, domains[pv]]
        if pu > pv:
            table, usage = table.T, None if usage is None else usage.T
        if usage is not None:
            held.append((len(factors), e.interval, usage))
        factors.append(Factor((min(pu, pv), max(pu, pv)), table))
    terms = sorted({t for i in nodes for t in view.terms[i]})
    for t in terms:
        factors.append(_max_factor(view, t, a, pos, domains))
    return Window(nodes, domains, factors, held)


def priced(w: Window, prices: np.ndarray) -> Window:
    """The window with every byte its buffers hold priced (``prices`` per time step, cost per byte): the
    Lagrangian of the memory limit. Unary factors come first, so a held buffer names its factor by index."""
    cum = np.concatenate(([0.0], np.cumsum(prices)))
    factors = list(w.factors)
    for index, (lo, hi), usage in w.held:
        price = float(cum[hi] - cum[lo])
        if price:
            fac = factors[index]
            factors[index] = Factor(fac.scope, fac.table + price * usage)
    return Window(w.nodes, w.domains, factors, w.held)


def _max_factor(view: LocalView, t: int, a, pos: dict[int, int], domains: list[np.ndarray]) -> Factor:
    """Max term ``t`` as a table over the window nodes it reads (the others at their fixed candidates).

    Tables are read from their float64 copies (``LocalView.as_float``, converted once): selecting then
    converting and converting then selecting give the same values."""
    f, flt = view.f, view.as_float
    m = f.max_terms[t]
    ends = {m.node} | {x for alt in m.alternatives for k, _ in alt.edge_parts for x in (f.edges[k].u, f.edges[k].v)}
    scope = tuple(sorted(pos[x] for x in ends if x in pos))
    shape = tuple(len(domains[p]) for p in scope)

    def along(node: int, values: np.ndarray) -> np.ndarray:
        """A vector over ``node``'s domain shaped to broadcast over the scope."""
        p = pos[node]
        dims = [len(domains[q]) if q == p else 1 for q in scope]
        return values[domains[p]].reshape(dims)

    best = None
    for alt in m.alternatives:
        val = np.zeros(shape)
        fixed = 0  # the parts reading no window node: one integer, added once
        if m.node in pos:
            val += along(m.node, flt(alt.unary))
        else:
            fixed += int(alt.unary[a[m.node]])
        for k, table in alt.edge_parts:
            e = f.edges[k]
            if e.u not in pos and e.v not in pos:
                fixed += int(table[a[e.u], a[e.v]])
            elif e.u in pos and e.v in pos and e.u != e.v:
                pu, pv = pos[e.u], pos[e.v]
                sub = flt(table)[np.ix_(domains[pu], domains[pv])]
                if pu > pv:
                    pu, pv, sub = pv, pu, sub.T
                dims = [sub.shape[0] if q == pu else sub.shape[1] if q == pv else 1 for q in scope]
                val += sub.reshape(dims)
            elif e.u in pos and e.u == e.v:
                val += along(e.u, np.diagonal(flt(table)))
            elif e.u in pos:
                val += along(e.u, flt(table)[:, a[e.v]])
            else:
                val += along(e.v, flt(table)[a[e.u], :])
        val += float(fixed)
        best = val if best is None else np.maximum(best, val)
    assert best is not None
    return Factor(scope, best)


def _last_use(w: Window) -> list[int]:
    last = list(range(len(w.nodes)))
    for fac in w.factors:
        for p in fac.scope:
            last[p] = max(last[p], fac.scope[-1])
    return last


def step_entries(w: Window) -> list[int]:
    """Per position, the largest table its elimination step builds: the state with the node entering it, or a
    factor ending there."""
    last = _last_use(w)
    sizes = [1] * len(w.nodes)
    for fac in w.factors:
        sizes[fac.scope[-1]] = max(sizes[fac.scope[-1]], fac.table.size)
    axes: list[int] = []
    for t in range(len(w.nodes)):
        axes.append(t)
        sizes[t] = max(sizes[t], int(np.prod([len(w.domains[p]) for p in axes], dtype=np.float64)))
        axes = [p for p in axes if last[p] > t]
    return sizes


def peak_entries(w: Window) -> int:
    """The largest table the elimination builds."""
    return max(step_entries(w), default=1)


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
        msg = msg[..., None]
        for j, fac in enumerate(by_end[t]):  # each holds t, so the first sum has every axis: add in place after
            table = fac.table.reshape([fac.table.shape[fac.scope.index(p)] if p in fac.scope else 1 for p in axes])
            if j:
                msg += table
            else:
                msg = msg + table
        gone = [p for p in axes if last[p] <= t]
        kept = [p for p in axes if last[p] > t]
        if gone:
            moved = np.moveaxis(msg, [axes.index(p) for p in gone], range(len(axes) - len(gone), len(axes)))
            flat = moved.reshape(moved.shape[: len(kept)] + (-1,))
            arg = np.argmin(flat, axis=-1)
            trail.append((tuple(kept), gone, moved.shape[len(kept) :], arg))
            msg = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
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


def local_objective(view: LocalView, a, nodes: list[int]) -> int:
    """Every objective term that reads a node of ``nodes``, exactly as ``Formulation.evaluate`` sums them: the
    objective of two assignments differing only there differs by exactly this much."""
    f = view.f
    edges = sorted({k for i in nodes for k in view.incident[i]})
    terms = sorted({t for i in nodes for t in view.terms[i]})
    total = sum(int(f.nodes[i].costs[a[i]]) for i in nodes)
    total += sum(int(f.edges[k].costs[a[f.edges[k].u], a[f.edges[k].v]]) for k in edges)
    for t in terms:
        m = f.max_terms[t]
        total += max(affine_value(alt, m.node, f.edges, a) for alt in m.alternatives)
    return total


class WindowSearch:
    """Slides windows over the schedule, accepting exact window optima that strictly improve and stay feasible."""

    def __init__(
        self, view: LocalView, width: int = WIDTH, cap: int = CAP, stride: int = STRIDE, budget: int | None = None
    ):
        self.view, self.width, self.cap, self.stride = view, width, cap, stride
        self.budget = budget  # work units (None: unbounded): no window starts once ``work`` reaches it
        self.work = 0
        self.stats = dict.fromkeys(
            (
                "windows",
                "accepted",
                "accepted_free",
                "accepted_priced",
                "accepted_restricted",
                "rejected_memory",
                "shrunk",
            ),
            0,
        )

    @property
    def spent(self) -> bool:
        """The work budget is used up: no further window starts."""
        return self.budget is not None and self.work >= self.budget

    def _build(self, a, nodes: list[int], restrict: bool = False) -> Window | None:
        w = build_window(self.view, a, nodes, restrict)
        self.work += BUILD_UNITS + (0 if w is None else sum(int(fac.table.size) for fac in w.factors))
        return w

    def _solve(self, w: Window) -> tuple[float, list[int]]:
        self.work += sum(step_entries(w))
        return solve_window(w)

    def _profile_after(self, a, prof: np.ndarray, nodes: list[int], cands: list[int]) -> np.ndarray:
        view, trial, new = self.view, list(a), prof.copy()
        for i, s in zip(nodes, cands):
            view.apply(new, view.usage_delta(i, trial, s))
            trial[i] = s
        return new

    def _accept(self, a: list[int], prof: np.ndarray, nodes: list[int], cands: list[int], new_prof, how: str) -> bool:
        """Make the move when it strictly lowers the objective (exact integers) and breaks no constraint: every
        pair it touches allowed, every step within the memory limit (``new_prof``, the exact profile after it)."""
        f, view = self.view.f, self.view
        trial = list(a)
        for i, s in zip(nodes, cands):
            trial[i] = s
        touched = {k for i in nodes for k in view.incident[i]}
        if not all(f.edges[k].is_allowed(trial[f.edges[k].u], trial[f.edges[k].v]) for k in touched):
            return False
        if view.limit is not None and new_prof.max(initial=0) > view.limit:
            return False
        if not local_objective(view, trial, nodes) < local_objective(view, a, nodes):
            return False
        a[:] = trial
        prof[:] = new_prof
        self.stats["accepted"] += 1
        self.stats[f"accepted_{how}"] += 1
        return True

    def try_window(self, a: list[int], prof: np.ndarray, nodes: list[int], w: Window | None = None) -> bool:
        """Move ``nodes`` to their exact window optimum when that strictly improves and stays feasible.

        The optimum ignoring memory first; while it overflows, a bisection over one price per byte held at
        the steps that overflowed (``_priced_move``); last, the optimum among the moves whose buffers do not
        grow."""
        self.stats["windows"] += 1
        w = w or self._build(a, nodes)
        if w is None:
            return False
        current = [a[i] for i in nodes]
        value, cands = self._solve(w)
        base = window_value(w, current)
        if not value < base:
            return False  # not even ignoring memory: nothing better here
        new_prof = self._profile_after(a, prof, nodes, cands)
        limit = self.view.limit
        if limit is None or new_prof.max(initial=0) <= limit:
            return self._accept(a, prof, nodes, cands, new_prof, "free")
        self.stats["rejected_memory"] += 1
        best = self._priced_move(a, prof, w, nodes, new_prof, base - value)
        if best is not None and self._accept(a, prof, nodes, best[1], best[2], "priced"):
            return True
        if self.spent:
            return False
        tight = self._build(a, nodes, restrict=True)
        if tight is None:
            return False
        value, cands = self._solve(tight)
        if not value < window_value(tight, current):
            return False
        return self._accept(a, prof, nodes, cands, self._profile_after(a, prof, nodes, cands), "restricted")

    def _priced_move(self, a, prof, w: Window, nodes: list[int], over_prof: np.ndarray, gain: float):
        """The best improving move within the memory limit found by pricing each byte held at a step where a
        window optimum overflowed (the Lagrangian of the limit), or None.

        One price for all those steps, bisected (geometrically) between a price whose optimum overflows and
        one whose optimum improves nothing or fits: a price only raised overshoots when the moves that fit hold
        more bytes than the current one (a loop keeping its tiles on chip where the untiled plan held none),
        so every byte they add is charged and none looks better than staying."""
        limit, view = self.view.limit, self.view
        steps = over_prof > limit
        lo, hi, price = 0.0, None, gain / float(np.maximum(over_prof - limit, 0).sum())
        best = None  # (local objective, candidates, profile)
        for _ in range(PRICE_ROUNDS):
            if self.spent:  # a window's rounds may cost many times its first solve: the budget is checked per round
                break
            paid = priced(w, np.where(steps, price, 0.0))
            value, cands = self._solve(paid)
            new_prof = self._profile_after(a, prof, nodes, cands)
            if new_prof.max(initial=0) > limit:
                steps |= new_prof > limit
                lo = price
            else:
                trial = list(a)
                for i, s in zip(nodes, cands):
                    trial[i] = s
                obj = local_objective(view, trial, nodes)
                if obj < local_objective(view, a, nodes) and (best is None or obj < best[0]):
                    best = (obj, cands, new_prof)
                hi = price
            price = price * 2.0 if hi is None else (hi / 4.0 if lo == 0.0 else float(np.sqrt(lo * hi)))
        return best

    def sweep(self, a: list[int], prof: np.ndarray, active: np.ndarray, deadline: float) -> list[int]:
        """One pass of windows ``[p, p + width)`` (every ``stride`` nodes, and the last) over the schedule,
        visiting those holding an active node (one whose window problem may have changed); a window too big for
        ``cap`` is cut before its first step over it. The nodes moved."""
        n = len(a)
        before = list(a)
        last = max(n - self.width, 0)
        starts = sorted(set(range(0, last + 1, self.stride)) | {last}) if n >= 2 else []
        for p in starts:
            if self.spent:
                break
            if time.perf_counter() >= deadline:  # the safety net: where it stops depends on the machine
                self.stats["wall_limit_hit"] = True
                break
            width = min(self.width, n - p)
            if not active[p : p + width].any():
                continue
            while width >= 2:
                w = self._build(a, list(range(p, p + width)))
                if w is None:
                    break
                sizes = step_entries(w)
                if max(sizes) <= self.cap:
                    break
                # cut before the first step over the cap (a shorter window may prune less: checked again)
                width = min(width - 1, max(next(t for t, size in enumerate(sizes) if size > self.cap), 2))
                self.stats["shrunk"] += 1
            if width >= 2 and w is not None:
                self.try_window(a, prof, list(range(p, p + width)), w)
        return [i for i in range(n) if a[i] != before[i]]
