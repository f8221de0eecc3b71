"""The ``trws`` backend: the contest engine as a start for every Formulation, then anneal.

The IOPDDL engine (``contest``: exact reductions, then usage prices over TRW-S
and exact forest DP, repair and polish) solves pairwise problems with a memory
limit on node buffers. A Formulation has two more features, so the conversion
(``to_instance``) approximates them, and only them:

* **max terms** (``max_k (unary_k + sum_e table_k,e)``) become an upper bound
  that is pairwise: per term, the node's unary parts are folded into the
  largest edge part incident to the node, and each factor (that pair, every
  other edge part, or the unary alone when no part touches the node) is
  charged at its maximum over the alternatives:
  ``max_k sum_g x_kg <= sum_g max_k x_kg``. Exact for a term over at most one
  edge incident to its node (the Spyre elementwise and single-input ops).
* **edge memory** (a relayout copy, ``Edge.usages``) depends on both ends, and
  the engine prices node buffers only: a first search leaves copies out; a
  second one (half the rounds) prices each copy on its consumer at the first
  answer's producer choice, as a buffer that follows the consumer (an extra
  node whose edge to it allows only equal choices, which the exact reductions
  merge into the consumer). Exact wherever the producers keep that choice.

Forbidden pairs become the contest's "never" cost (``contest.reduce.BIG``), so
its exact reductions drop them. Everything else (node and edge costs, node
usages and intervals, the memory limit) is carried over exactly: without max
terms, the engine's objective of an allowed assignment is
``Formulation.evaluate``, and with copies priced at that assignment so is its
usage profile.

Both answers are then judged by the Formulation alone: an over-limit plan
(copies not seen, or priced at another producer choice) is repaired and descended on anneal's exact
incremental state, addresses come from the placement engine
(``addresses.spill_until_placed``), and the objective is ``evaluate``. The
backend hands the better of this start and the hint (or greedy's plan) to
anneal, so it is never worse than its own start. Rounds are a deterministic
budget (nominal cost per table entry, never measured); the clock is only a
safety net. The engine's kernels are compiled by numba on first use and then
loaded from its disk cache; a run that pays the compile (a fresh clone) may
stop its rounds on the clock, and says so (``stats["engine"]["cut_by_clock"]``).
"""

from __future__ import annotations

import time

import numpy as np

from spyreopt.contest import warm
from spyreopt.contest.reduce import BIG, reduce_instance
from spyreopt.contest.search import Search, build_graph
from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.formats.iopddl import Instance
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.rates import ROUND_SECONDS_MIN, ROUND_SECONDS_PER_ENTRY
from spyreopt.solvers import greedy, options
from spyreopt.solvers.addresses import spill_until_placed
from spyreopt.solvers.anneal import search as anneal
from spyreopt.solvers.anneal.guide import covering_units, descend, repair
from spyreopt.solvers.anneal.model import CompiledModel
from spyreopt.solvers.anneal.state import SearchState
from spyreopt.solvers.anneal.units import singletons
from spyreopt.solvers.local import LocalView
from spyreopt.solvers.presolve.limits import memory_limit

ACCEPTS = anneal.ACCEPTS | options.TRWS  # options besides time_limit and seed
MAX_ROUNDS = 400  # enough for the prices to settle on the Spyre stacks; more only repeats
ENGINE_SHARE = 0.3  # of the backend's time limit: the engine's when anneal follows


def to_instance(f: Formulation, anchor=None) -> Instance:
    """The Formulation as the engine's pairwise arrays (approximations: the module docstring).

    With ``anchor`` (an assignment) every copy is priced too, on its consumer: usage with the producer
    at the anchor's choice (exact near the anchor).
    """
    k = np.array([n.num_candidates for n in f.nodes], np.int64)
    off = np.zeros(len(k) + 1, np.int64)
    np.cumsum(k, out=off[1:])
    cost = np.concatenate([np.minimum(n.costs, BIG) for n in f.nodes]).astype(np.int64)
    usage = np.concatenate([n.usages for n in f.nodes]).astype(np.int64)
    lo = np.array([n.interval[0] for n in f.nodes], np.int64)
    hi = np.array([n.interval[1] for n in f.nodes], np.int64)
    tables = [np.minimum(e.costs, BIG).astype(np.int64) for e in f.edges]
    for t in f.max_terms:
        _add_max_term(f, t, cost[off[t.node] : off[t.node + 1]], tables)
    for e, table in zip(f.edges, tables):
        if e.allowed is not None:
            table[~e.allowed] = BIG
        np.minimum(table, BIG, out=table)
    np.minimum(cost, BIG, out=cost)
    ends = [(e.u, e.v) for e in f.edges]
    if anchor is not None:  # each copy as a follower of its consumer: usage[anchor's producer choice, s_v]
        extra = _anchored_copies(f, anchor)
        ends += [(v, len(k) + j) for j, (v, _, _) in enumerate(extra)]
        tables += [np.where(np.eye(len(use), dtype=bool), 0, BIG).astype(np.int64) for _, use, _ in extra]
        k = np.concatenate([k, [len(use) for _, use, _ in extra]]).astype(np.int64)
        off = np.zeros(len(k) + 1, np.int64)
        np.cumsum(k, out=off[1:])
        cost = np.concatenate([cost, np.zeros(int(off[-1]) - len(cost), np.int64)])
        usage = np.concatenate([usage] + [use for _, use, _ in extra]).astype(np.int64)
        lo = np.concatenate([lo, [iv[0] for _, _, iv in extra]]).astype(np.int64)
        hi = np.concatenate([hi, [iv[1] for _, _, iv in extra]]).astype(np.int64)
    eu = np.array([u for u, _ in ends], np.int64)
    ev = np.array([v for _, v in ends], np.int64)
    eoff = np.zeros(len(ends) + 1, np.int64)
    np.cumsum([t.size for t in tables], out=eoff[1:])
    ecost = np.concatenate([t.ravel() for t in tables]) if tables else np.zeros(0, np.int64)
    return Instance.pairwise(f.name, k, off, cost, usage, lo, hi, eu, ev, eoff, ecost, memory_limit(f))


def _anchored_copies(f: Formulation, anchor) -> list[tuple[int, np.ndarray, tuple[int, int]]]:
    """(consumer, usage per consumer candidate with the producer at the anchor, interval) of every live copy."""
    out = []
    for e in f.edges:
        if e.usages is None or e.interval[1] <= e.interval[0] or e.u == e.v:
            continue
        use = np.asarray(e.usages[anchor[e.u], :], np.int64)
        if use.any():
            out.append((e.v, use, e.interval))
    return out


def _add_max_term(f: Formulation, term, unary: np.ndarray, tables: list[np.ndarray]) -> None:
    """Add the pairwise upper bound of one max term to the node's costs (``unary``, a view) and the tables."""
    i = term.node
    parts = sorted({e for a in term.alternatives for e, _ in a.edge_parts})
    incident = [e for e in parts if (f.edges[e].u == i) != (f.edges[e].v == i)]
    main = max(incident, key=lambda e: max(int(t.max()) for a in term.alternatives for x, t in a.edge_parts if x == e)) if incident else None  # fmt: skip
    for e in parts:
        shape = f.edges[e].costs.shape
        rows = []
        for a in term.alternatives:
            val = np.zeros(shape, np.int64)
            for x, t in a.edge_parts:
                if x == e:
                    val = val + t
            if e == main:
                val = val + (a.unary[:, None] if f.edges[e].u == i else a.unary[None, :])
            rows.append(val)
        tables[e] += np.max(rows, axis=0)
    if main is None:
        unary += np.max([a.unary for a in term.alternatives], axis=0)


def instance_cost(inst: Instance, assignment) -> int:
    """The engine's objective of an assignment in Python integers (the conversion's check)."""
    x = np.asarray(assignment, np.int64)
    total = int(inst.cost[inst.off[:-1] + x].sum(dtype=object)) if len(x) else 0
    kv = inst.k[inst.ev]
    idx = inst.eoff[:-1] + x[inst.eu] * kv + x[inst.ev]
    return total + int(inst.ecost[idx].sum(dtype=object))


def nominal_rounds(inst: Instance, seconds: float) -> int:
    """Engine rounds worth ``seconds`` at the nominal cost per table entry (deterministic, never measured)."""
    per_round = max(ROUND_SECONDS_PER_ENTRY * (len(inst.ecost) + len(inst.cost)), ROUND_SECONDS_MIN)
    return int(min(max(seconds / per_round, 1), MAX_ROUNDS))


def engine_assignments(f: Formulation, *, seed: int, rounds: int, deadline: float) -> tuple[list[list[int]], dict]:
    """The engine's answers (formulation numbering) and its stats: without copies, one; with copies, also
    the answer of a second problem that prices them at the first answer (``to_instance(f, anchor)``), with
    half the rounds. The caller judges them exactly.
    """
    r = reduce_instance(to_instance(f))
    stats = {"groups": r.n, "free_groups": int((r.k > 1).sum()), "rounds_budget": rounds, "exact": not f.max_terms}
    if not (r.k > 1).any():
        return [r.expand(np.zeros(r.n, np.int64))], {**stats, "rounds": 0, "cut_by_clock": False}
    copies = any(e.usages is not None and e.usages.any() for e in f.edges)
    first = max(rounds // 2, 1) if copies else rounds
    res = Search(r, build_graph(r), seed).run(deadline, first, explore=False)
    stats.update(rounds=res.rounds, cut_by_clock=res.cut_by_clock)
    if res.x is None:
        return [], stats
    found = [r.expand(res.x)]
    if rounds > first:
        r2 = reduce_instance(to_instance(f, anchor=found[0]))
        res2 = Search(r2, build_graph(r2), seed).run(deadline, rounds - first, explore=False)
        stats.update(priced_rounds=res2.rounds, cut_by_clock=res.cut_by_clock or res2.cut_by_clock)
        if res2.x is not None:
            found.append(r2.expand(res2.x)[: len(f.nodes)])
    return found, stats


def make_valid(f: Formulation, a: list[int], *, deadline: float) -> list[int] | None:
    """Repair the memory the engine did not see (copies) and descend, on anneal's exact state; None if stuck."""
    model = CompiledModel(f, singletons(f))
    state = SearchState(model, a)
    limit = memory_limit(f)
    stop = lambda: time.perf_counter() > deadline  # noqa: E731
    if limit is not None and int(state.prof.max(initial=0)) > limit and not repair(state, covering_units(model), stop):
        return None
    if state.nbad:
        return None
    descend(state, np.flatnonzero(model.sizes > 1), stop)
    return [int(s) for s in state.assignment]


def engine_solution(f: Formulation, *, seed: int, rounds: int, deadline: float) -> Solution | None:
    """The engine's best answer made valid and placed, judged by ``evaluate``; None when it found none."""
    began = time.perf_counter()
    found, stats = engine_assignments(f, seed=seed, rounds=rounds, deadline=deadline)
    stats["engine_objectives"] = [f.evaluate(a) for a in found]
    valid = [v for v in (make_valid(f, a, deadline=deadline) for a in found) if v is not None]
    if not valid:
        return None
    values = [f.evaluate(v) for v in valid]
    pick = int(np.argmin(values))
    stats["valid_objectives"], stats["picked"] = values, pick
    a = valid[pick]
    offsets: dict = {}
    if f.placement is not None:
        try:
            a, offsets, spills = spill_until_placed(f, LocalView(f), a, deadline=deadline, seed=seed)
        except InfeasibleError:
            return None
        stats["spills"] = spills
    if f.violations(a, offsets):
        return None
    stats["seconds"] = round(time.perf_counter() - began, 3)
    return Solution(tuple(a), offsets, "feasible", f.evaluate(a), stats={"engine": stats})


def solve(
    f: Formulation,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hint=None,
    rounds: int | None = None,
    budget: float | None = None,
    then_anneal: bool = True,
    **options,
) -> Solution:
    """The engine's start, then (``then_anneal``) anneal from the better of it and the hint (or greedy's plan).

    ``rounds`` None: worth ``budget`` nominal seconds (default: ``ENGINE_SHARE`` of the time limit, all of
    it without anneal), never measured. Other options go to anneal.
    """
    start = time.perf_counter()
    if rounds is not None and rounds < 1:
        raise SolverError(f"trws: rounds must be >= 1, got {rounds}")
    share = ENGINE_SHARE if then_anneal else 1.0
    if rounds is None:
        rounds = nominal_rounds(to_instance(f), share * time_limit if budget is None else budget)
    planned = share * time_limit if budget is None else min(budget, share * time_limit)
    compiled = warm.ready(start + planned - time.perf_counter())  # never waited for past its planned share
    own = engine_solution(f, seed=seed, rounds=rounds, deadline=start + share * time_limit) if compiled else None
    if hint is not None and not isinstance(hint, Solution):
        raise SolverError("trws: hint must be a Solution (a valid plan with addresses)")
    other = hint if hint is not None else greedy.solve(f, time_limit=max(0.1 * time_limit, 0.05), seed=seed)
    best = own if own is not None and (other is None or own.objective < other.objective) else other
    engine_stats = own.stats["engine"] if own is not None else {"found": False}
    if not compiled:  # the kernels were not compiled in time: the hint (or greedy's plan) answers, said so
        engine_stats.update(kernels="not compiled in time", cut_by_clock=True)
    engine_stats["used"] = best is own
    if not then_anneal:
        out = Solution(best.assignment, dict(best.offsets), best.status, best.objective, stats={"engine": engine_stats})
        out.seconds = time.perf_counter() - start
        return out
    left = max(time_limit - (time.perf_counter() - start), 0.1)
    sol = anneal.solve(f, time_limit=left, seed=seed, hint=best, **options)
    sol.stats["engine"] = engine_stats
    sol.seconds = time.perf_counter() - start
    return sol
