"""Greedy backend: anchor the heaviest nodes, let followers adopt, then repair memory.

1. Anchors first: nodes are visited by decreasing cost spread (the matmuls of a
   kernel), each taking its best candidate given the neighbours already fixed
   (neighbours not yet fixed count at their best pair).
2. Coordinate descent: revisit nodes in schedule order and move each to its best
   candidate with the rest fixed, while the memory limit holds, until a pass
   changes nothing.
3. Memory: while a step is over the limit, take the change that frees the most
   bytes per unit of cost added (residency by benefit per byte).
4. Addresses by the placement engine, spilling the farthest-ending buffer when
   placement fails.

Always returns a valid assignment when one with zero memory exists.
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.errors import InfeasibleError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.solvers.addresses import spill_until_placed
from spyreopt.solvers.local import LocalView


def _optimistic_costs(view: LocalView, i: int, a: list[int | None]) -> np.ndarray:
    """Node i's candidate costs with unfixed neighbours at their best pair."""
    f = view.f
    filled = list(a)
    for k in view.incident[i]:
        e = f.edges[k]
        other = e.v if e.u == i else e.u
        if filled[other] is None:
            filled[other] = int(np.argmin(view.node_costs[other]))
    for t in view.terms[i]:
        m = f.max_terms[t]
        if filled[m.node] is None:
            filled[m.node] = int(np.argmin(view.node_costs[m.node]))
        for alt in m.alternatives:
            for k, _ in alt.edge_parts:
                for j in (f.edges[k].u, f.edges[k].v):
                    if filled[j] is None:
                        filled[j] = int(np.argmin(view.node_costs[j]))
    filled[i] = 0
    costs = view.candidate_costs(i, filled)
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
        a[i] = int(min(range(len(costs)), key=lambda s: (costs[s], usage[s], s)))
    return [int(x) for x in a]  # type: ignore[arg-type]


def descend(view: LocalView, a: list[int], prof: np.ndarray, deadline: float) -> None:
    """Best-improvement moves per node until a full pass changes nothing."""
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for i in range(len(a)):
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
                    break


def repair_memory(view: LocalView, a: list[int], prof: np.ndarray) -> None:
    """Free memory at over-full steps, cheapest cost per byte first."""
    f = view.f
    limit = view.limit
    if limit is None:
        return
    while prof.max(initial=0) > limit:
        t = int(np.argmax(prof))
        best = None
        for i, n in enumerate(f.nodes):
            touches = n.interval[0] <= t < n.interval[1] or any(
                f.edges[k].interval[0] <= t < f.edges[k].interval[1] and f.edges[k].usages is not None
                for k in view.incident[i]
            )
            if not touches:
                continue
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


def solve(f: Formulation, *, time_limit: float = 10.0, seed: int = 0, **options) -> Solution:
    start = time.perf_counter()
    deadline = start + time_limit
    view = LocalView(f)
    a = initial_assignment(view)
    prof = view.profile(a)
    repair_memory(view, a, prof)
    descend(view, a, prof, deadline)
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
        stats={"spills": spills},
    )
