"""Baseline planners, run through the same path as every backend (``so.solve(g, backend="hbm")``).

* ``hbm``: nothing resident; every op takes its own best division with all
  tensors in device memory; ties between equal-cost divisions go to the one
  that slices like its producers (so that it could read them in place).
* ``independent``: what the Spyre compiler did before co-optimisation: each op
  its own best division (as in ``hbm``); a tensor stays in LX only if the
  producer and every consumer slice it identically (every edge in place) and it
  fits (placed by the placement engine; the latest-added buffer is dropped when
  placement fails).

They read the Spyre Problem (residency and slice matching), not only the
Formulation: the registry's table marks them ``module:function``.
"""

from __future__ import annotations

import time

from spyreopt.errors import SolverError
from spyreopt.model.formulation import Solution
from spyreopt.model.problem import Candidate, Problem
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solvers.local import LocalView

ACCEPTS: frozenset[str] = frozenset()  # the baselines take no option besides time_limit and seed


def _own_best(problem: Problem) -> list[int]:
    """Each op's best device-memory candidate given its producers' choices (schedule order).

    Among equal-cost candidates the op keeps its producers' slicing (most
    incoming edges that could be used in place), then the lowest index: the
    first implementation, given a tie, would not re-slice.
    """
    f = problem.formulation
    view = LocalView(f)
    a = [min(range(len(c)), key=lambda s, c=c: (c[s].residency != "hbm", s)) for c in problem.candidates]
    for i, cands in enumerate(problem.candidates):
        costs = view.candidate_costs(i, a)
        # an op pinned on chip (a restriction, a segment's boundary) keeps what it may: its own candidates
        # baselines never stage a graph input (``model.staging``)
        hbm = [s for s, c in enumerate(cands) if c.residency == "hbm" and not c.stage] or list(range(len(cands)))
        least = min(costs[s] for s in hbm)
        a[i] = min((s for s in hbm if costs[s] == least), key=lambda s: (-_kept_slicings(problem, a, i, s), s))
    return list(problem.normalize(a))


def _kept_slicings(problem: Problem, a: list[int], i: int, s: int) -> int:
    """How many of op i's producers, kept on chip with their chosen layout, candidate s would read in place."""
    kept = 0
    for k in problem.in_edges[i]:
        e = problem.edges[k]
        cands = problem.candidates[e.producer]
        resident = Candidate(cands[a[e.producer]].layout, "lx", "-")
        if resident in cands:
            info = problem.pair(k, cands.index(resident), s)
            kept += info is not None and info.mode == "inplace"
    return kept


def _solution(problem: Problem, a: list[int], offsets, start: float, stats: dict) -> Solution:
    f = problem.formulation
    return Solution(tuple(a), offsets, "feasible", f.evaluate(a), seconds=time.perf_counter() - start, stats=stats)


def hbm(problem: Problem, *, time_limit: float, seed: int, **options) -> Solution:
    if options:
        raise SolverError(f"hbm: unknown option(s) {', '.join(sorted(options))}; it takes none")
    start = time.perf_counter()
    a = _own_best(problem)
    return _solution(problem, a, {}, start, {"resident": 0})


def independent(problem: Problem, *, time_limit: float, seed: int, **options) -> Solution:
    if options:
        raise SolverError(f"independent: unknown option(s) {', '.join(sorted(options))}; it takes none")
    start = time.perf_counter()
    f = problem.formulation
    a = _own_best(problem)
    added: list[int] = []
    for i, cands in enumerate(problem.candidates):
        cur = cands[a[i]]
        out_edges = problem.out_edges[i]
        if not out_edges:
            continue
        for residency in ("lx", "lx+hbm"):
            key = Candidate(cur.layout, residency, cur.branch if residency != "lx" else "-")
            if key not in cands:
                continue
            s = cands.index(key)
            trial = list(a)
            trial[i] = s
            modes = [problem.pair(k, s, a[problem.edges[k].consumer]) for k in out_edges]
            if all(m is not None and m.mode == "inplace" for m in modes) and _fits(f, trial):
                a = list(problem.normalize(trial))
                added.append(i)
                break
    offsets = place_assignment(f, a, time_limit=max(time_limit / 2, 0.5), seed=seed)
    while offsets is None and added:
        i = added.pop()
        layout = problem.candidates[i][a[i]].layout
        a[i] = next(s for s, c in enumerate(problem.candidates[i]) if c.layout == layout and c.residency == "hbm")
        a = list(problem.normalize(a))
        offsets = place_assignment(f, a, time_limit=max(time_limit / 2, 0.5), seed=seed)
    return _solution(problem, a, offsets or {}, start, {"resident": len(added)})


def _fits(f, a) -> bool:
    return f.usage_limit is None or int(LocalView(f).profile(a).max(initial=0)) <= f.usage_limit
