"""Greedy backend: anchor the heaviest nodes, let followers adopt, then repair memory.

1. Anchors first: nodes are visited by decreasing cost spread (the matmuls of a
   kernel), each taking its best candidate given the neighbours already fixed
   (neighbours not yet fixed count at their best pair).
2. Coordinate descent: revisit nodes in schedule order and move each to its best
   candidate with the rest fixed, while the memory limit holds, until a pass
   changes nothing; then window moves (``window_moves``: a window of consecutive
   nodes re-optimised exactly, the rest fixed, which finds the changes that pay
   only together, such as a tiled loop) and descent again, until neither moves
   or their work budget is spent: ``window_work`` units (``window_moves``),
   by default ``WINDOW_SHARE`` of the limit at a nominal rate, so the plan is a
   function of the input and the limit; the clock only stops them as a safety
   net, and then ``stats["wall_limit_hit"]`` says so.
3. Memory: while a step is over the limit, take the change that frees the most
   bytes per unit of cost added (residency by benefit per byte).
4. Addresses by the placement engine, spilling the farthest-ending buffer when
   placement fails.

Always returns a valid assignment when one with zero memory exists.

Near-linear in the nodes: a node is re-examined only when a node its costs
depend on has moved or a move it wanted did not fit in memory (an unchanged
neighbourhood gives the same costs, so skipping it changes nothing), and the
local costs come from ``FastView``, which computes ``LocalView``'s values with
tables converted once instead of per call.
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.rates import WINDOW_UNITS_PER_SECOND
from spyreopt.solvers.addresses import spill_until_placed
from spyreopt.solvers.local import INF, LocalView
from spyreopt.solvers.window_moves import WIDTH, WindowSearch

ACCEPTS = frozenset({"window_work", "window"})  # options besides time_limit and seed (``registry.check_options``)
WINDOW_SHARE = 0.8  # window moves get this share of the time limit, leaving the rest to placement


class FastView(LocalView):
    """``LocalView`` with the same candidate costs, bit for bit (same float64 operations in the same
    order), from per-node lists of float tables built once: the hot loop of greedy and its repairs."""

    def __init__(self, f: Formulation):
        super().__init__(f)
        flt = self.as_float  # shared tables are converted once
        self._alts = [
            [
                (flt(alt.unary), [(f.edges[k].u, f.edges[k].v, flt(t)) for k, t in alt.edge_parts])
                for alt in m.alternatives
            ]
            for m in f.max_terms
        ]
        self._inc = [
            [(f.edges[k].u, f.edges[k].v, self.edge_costs[k], f.edges[k].allowed) for k in ks] for ks in self.incident
        ]

    def candidate_costs(self, i: int, a) -> np.ndarray:
        vec = self.node_costs[i].copy()
        for u, v, table, allowed in self._inc[i]:
            if u == i and v == i:
                vec += np.diagonal(table)
                bad = None if allowed is None else ~np.diagonal(allowed)
            elif u == i:
                vec += table[:, a[v]]
                bad = None if allowed is None else ~allowed[:, a[v]]
            else:
                vec += table[a[u], :]
                bad = None if allowed is None else ~allowed[a[u], :]
            if bad is not None:
                vec[bad] = INF
        for t in self.terms[i]:
            node = self.f.max_terms[t].node
            best = None
            for unary, parts in self._alts[t]:
                val = unary if node == i else float(unary[a[node]])
                for u, v, table in parts:
                    if u == i and v == i:
                        val = val + np.diagonal(table)
                    elif u == i:
                        val = val + table[:, a[v]]
                    elif v == i:
                        val = val + table[a[u], :]
                    else:
                        val = val + float(table[a[u], a[v]])
                best = val if best is None else np.maximum(best, val)
            if best is not None:
                vec += best
        return vec

    def dependents(self) -> list[list[int]]:
        """Per node j, the nodes whose candidate costs read j's choice."""
        f = self.f
        out: list[set[int]] = [set() for _ in f.nodes]
        for i in range(len(f.nodes)):
            for u, v, _, _ in self._inc[i]:
                out[u].add(i)
                out[v].add(i)
            for t in self.terms[i]:
                out[f.max_terms[t].node].add(i)
                for _, parts in self._alts[t]:
                    for u, v, _ in parts:
                        out[u].add(i)
                        out[v].add(i)
        return [sorted(x - {j}) for j, x in enumerate(out)]


def _optimistic_costs(view: LocalView, i: int, a: list[int | None]) -> np.ndarray:
    """Node i's candidate costs with unfixed neighbours at their best pair."""
    f = view.f
    filled: dict[int, int] = {}  # unfixed nodes given their best candidate for this one evaluation

    def fill(j: int) -> None:
        if a[j] is None and j not in filled:
            filled[j] = int(np.argmin(view.node_costs[j]))

    for k in view.incident[i]:
        e = f.edges[k]
        fill(e.v if e.u == i else e.u)
    for t in view.terms[i]:
        m = f.max_terms[t]
        fill(m.node)
        for alt in m.alternatives:
            for k, _ in alt.edge_parts:
                fill(f.edges[k].u)
                fill(f.edges[k].v)
    own = a[i]
    for j, s in filled.items():
        a[j] = s
    a[i] = 0
    try:
        costs = view.candidate_costs(i, a)
    finally:
        for j in filled:
            a[j] = None
        a[i] = own
    # a forbidden pair with an unfixed neighbour is not final: keep it finite but last
    for k in view.incident[i]:
        e = f.edges[k]
        other = e.v if e.u == i else e.u
        if a[other] is None and e.allowed is not None:
            ok = e.allowed.any(axis=1) if e.u == i else e.allowed.any(axis=0)
            if e.u == i and e.v == i:
                ok = np.diagonal(e.allowed)
            costs = np.where(np.isinf(costs) & ok, np.finfo(np.float64).max / 4, costs)
    return costs


def initial_assignment(view: LocalView) -> list[int]:
    f = view.f
    spread = [float(np.ptp(c)) if len(c) else 0.0 for c in view.node_costs]
    order = sorted(range(len(f.nodes)), key=lambda i: (-spread[i], i))
    a: list[int | None] = [None] * len(f.nodes)
    for i in order:
        costs = _optimistic_costs(view, i, a)
        usage = f.nodes[i].usages
        a[i] = int(np.lexsort((np.arange(len(costs)), usage, costs))[0])  # least (cost, usage, index)
    return [int(x) for x in a]  # type: ignore[arg-type]


def descend(
    view: FastView, a: list[int], prof: np.ndarray, deadline: float, dependents: list[list[int]], dirty: np.ndarray
) -> bool:
    """Best-improvement moves per node, in schedule order, until a pass changes nothing (True), or until the
    clock reaches ``deadline``, the safety net (False).

    A pass skips the nodes whose costs cannot have changed since they last found no
    improving candidate (no node they depend on moved, ``dirty`` says which may have
    at the start): the same moves as full passes.
    """
    improved = True
    while improved:
        if time.perf_counter() >= deadline:
            return False
        improved = False
        for i in range(len(a)):
            if not dirty[i]:
                continue
            dirty[i] = False
            costs = view.candidate_costs(i, a)
            cur = costs[a[i]]
            for s in np.argsort(costs, kind="stable"):
                s = int(s)
                if not costs[s] < cur:
                    break
                delta = view.usage_delta(i, a, s)
                if view.fits_after(prof, delta):
                    view.apply(prof, delta)
                    a[i] = s
                    improved = True
                    dirty[dependents[i]] = True
                    break
                dirty[i] = True  # a better candidate did not fit: memory may free up later
    return True


def repair_memory(view: LocalView, a: list[int], prof: np.ndarray) -> None:
    """Free memory at over-full steps, cheapest cost per byte first."""
    f = view.f
    limit = view.limit
    if limit is None:
        return
    node_span = np.array([n.interval for n in f.nodes], dtype=np.int64).reshape(-1, 2)
    held = [k for k, e in enumerate(f.edges) if e.usages is not None]  # edges that may hold a copy
    edge_span = np.array([f.edges[k].interval for k in held], dtype=np.int64).reshape(-1, 2)
    ends = np.array([(f.edges[k].u, f.edges[k].v) for k in held], dtype=np.int64).reshape(-1, 2)
    while prof.max(initial=0) > limit:
        t = int(np.argmax(prof))
        best = None
        touching = (node_span[:, 0] <= t) & (t < node_span[:, 1])  # live at t, or an incident copy is
        touching[ends[(edge_span[:, 0] <= t) & (t < edge_span[:, 1])].ravel()] = True
        for i in np.flatnonzero(touching).tolist():
            n = f.nodes[i]
            costs = view.candidate_costs(i, a)
            for s in range(n.num_candidates):
                if s == a[i] or not np.isfinite(costs[s]):
                    continue
                delta = view.usage_delta(i, a, s)
                freed = -sum(d for lo, hi, d in delta if lo <= t < hi)
                if freed <= 0 or not view.fits_after(prof, delta):  # never overfill another step: no cycling
                    continue
                key = ((costs[s] - costs[a[i]]) / freed, -freed, i, s)
                if best is None or key < best[0]:
                    best = (key, i, s, delta)
        if best is None:
            over = int(prof[t]) - limit
            raise InfeasibleError(
                f"no candidate frees memory at time step {t}: usage {int(prof[t])} exceeds limit {limit} by {over}",
                {"time_step": t, "usage": int(prof[t]), "limit": limit, "over": over},
            )
        _, i, s, delta = best
        view.apply(prof, delta)
        a[i] = s


def _touched(moved: list[int], dependents: list[list[int]], n: int) -> np.ndarray:
    """The nodes whose local costs may have changed after ``moved`` moved: them and their dependents."""
    out = np.zeros(n, dtype=bool)
    for i in moved:
        out[i] = True
        out[dependents[i]] = True
    return out


def work_for(seconds: float, share: float = 1.0) -> int:
    """The window work that ``share`` of a ``seconds`` limit buys at the nominal rate (``spyreopt.rates``)."""
    return int(share * WINDOW_SHARE * seconds * WINDOW_UNITS_PER_SECOND)


def solve(f: Formulation, *, time_limit: float = 10.0, seed: int = 0, **options) -> Solution:
    unknown = sorted(set(options) - ACCEPTS)
    if unknown:
        raise SolverError(f"greedy: unknown option(s) {', '.join(unknown)}; known: window, window_work")
    start = time.perf_counter()
    deadline = start + time_limit
    view = FastView(f)
    a = initial_assignment(view)
    prof = view.profile(a)
    repair_memory(view, a, prof)
    dependents = view.dependents()
    clock = not descend(view, a, prof, deadline, dependents, np.ones(len(a), dtype=bool))
    budget = options.get("window_work")
    if budget is None:
        budget = work_for(time_limit)
    windows = WindowSearch(view, width=options.get("window", WIDTH), budget=budget)
    active = np.ones(len(a), dtype=bool)
    stop = start + WINDOW_SHARE * time_limit  # the safety net; the rest of the time is placement's
    while not windows.spent:  # window moves, then descent from where they left, until neither moves
        if time.perf_counter() >= stop:
            clock = True
            break
        before = list(a)
        moved = windows.sweep(a, prof, active, stop)
        if not moved:
            break
        clock |= not descend(view, a, prof, deadline, dependents, _touched(moved, dependents, len(a)))
        active = _touched([i for i in range(len(a)) if a[i] != before[i]], dependents, len(a))
    if any(not np.isfinite(view.candidate_costs(i, a)[a[i]]) for i in range(len(a))):
        bad = [v for v in f.violations(a) if "not allowed" in v]
        raise InfeasibleError("greedy found no assignment with every edge pair allowed: " + "; ".join(bad[:3]))
    a, offsets, spills = spill_until_placed(f, view, a, deadline=deadline, seed=seed)
    status = "feasible" if time.perf_counter() <= deadline else "timeout"
    return Solution(
        assignment=tuple(a),
        offsets=offsets,
        status=status,
        objective=f.evaluate(a),
        seconds=time.perf_counter() - start,
        stats={
            "spills": spills,
            **windows.stats,
            "window_work": windows.work,  # not the budget: a plan that converged under two limits is one plan
            **({"wall_limit_hit": True} if clock or windows.stats.get("wall_limit_hit") else {}),
        },
    )
