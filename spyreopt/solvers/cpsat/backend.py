"""CP-SAT backend: the exact model of ``cpsat.model``, warm-started, deterministic, never worse than its start.

1. Warm start: the ``hint`` (a Solution or an assignment) or else the greedy
   backend's plan, checked with ``Formulation.violations`` (an invalid one only
   guides the search) and mapped through the dominance replacements (no worse,
   still valid). It is the incumbent: whatever CP-SAT returns is kept only if
   it is at least as good, otherwise the incumbent comes back with status
   ``"feasible"`` and ``stats["source"] == "greedy-hint"`` (or ``"hint"``).
   Every variable of the model, auxiliary ones included, is hinted.
2. The shared presolve (``presolve.domains``, bounded by the checked warm
   start) and the model (``cpsat.model``). The sentinel rule (IOPDDL's
   1e18 costs) is exact when the reduced model is feasible; if CP-SAT proves it
   infeasible, the model is rebuilt without that rule and, if its objective
   would leave int64, with every cost excess capped (a surrogate objective:
   solutions are still evaluated exactly, but neither optimality nor a bound
   is claimed).
3. Search. A model whose estimated size (variables plus constraints) is at most
   ``FULL_MODEL_SIZE_PER_SECOND`` (``..._PLACED`` with addresses) per second of
   the limit is solved whole.
   A larger one is solved by large-neighbourhood search: a window of nodes
   keeps its candidates, every other node is fixed to the incumbent, and
   buffers not live during the window keep their addresses; each window's
   domains come from the shared ``presolve.domains``, bounded by the incumbent.
   Windows rotate between a slice of the schedule (nodes in interval order,
   sliding by half a width), the graph neighbourhood of a costly term of the
   incumbent (terms by decreasing excess over their minimum) and, when the
   graph has layers, the next layer; an improved layer's choices are copied
   onto the layers of the same shape when that is valid and better (identical
   layers). Windows grow after one is solved to optimality quickly and shrink
   after one times out without gain. A window
   that covers every node is the whole model, so "optimal" is still reported
   when proven. Whenever CP-SAT gives no bound (LNS, or no solution in time)
   the bound reported is the sum of the cost terms' minima.
4. Determinism: CP-SAT runs with ``num_workers=workers`` (``interleave_search``
   when more than one), ``random_seed=seed`` and a deterministic-time limit that
   depends only on ``time_limit`` and on the mode (``DTIME_PER_SECOND``, or
   ``DTIME_PER_SECOND_PLACED`` for a whole model with addresses; each LNS window is also
   charged ``WINDOW_COST`` per node and edge for its Python work). The
   wall-clock limit is a safety net at the deadline, and
   ``stats["wall_limit_hit"]`` says when it (and not the deterministic budget)
   stopped a search, the one case where a rerun may differ. The option
   ``deterministic=False`` gives the search the whole wall-clock budget instead.
5. Parameters: ``linearization_level=2`` (the LP of the pair links is what
   proves IOPDDL-like instances) and no probing in presolve (it can spend a
   whole budget before the hint is tried).

The reported objective is always ``Formulation.evaluate`` of the returned
assignment; the bound is CP-SAT's best objective bound in the Formulation's
unit (rounded up: objectives are integers).
"""

from __future__ import annotations

import math
import time

import numpy as np

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Formulation, Solution, hint_start
from spyreopt.solvers import options
from spyreopt.solvers.cpsat.search import Incumbent, Run, Search
from spyreopt.solvers.presolve import Domains, domains, memory_limit, term_minima_bound

WARM_START_SHARE = 0.25  # share of the time limit the greedy warm start may use (its window moves need it)
OPTIONS = {"deterministic", "lns", "log", "window"}
ACCEPTS = options.CPSAT  # options besides time_limit and seed
assert ACCEPTS == OPTIONS | {"workers", "hint"}


def solve(f: Formulation, *, time_limit: float, seed: int, workers: int = 1, hint=None, **options) -> Solution:
    """Best plan within ``time_limit`` (module docstring). Options: ``lns`` ("auto", True, False),
    ``window`` (first LNS window width), ``deterministic`` (default True), ``log`` (CP-SAT's search log)."""
    start = time.perf_counter()
    deadline = start + time_limit
    unknown = set(options) - OPTIONS
    if unknown:
        raise SolverError(f"cpsat: unknown option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
    if not isinstance(workers, int) or workers < 1:
        raise SolverError(f"cpsat: workers must be a positive integer, got {workers!r}")
    lns = options.get("lns", "auto")
    if lns not in ("auto", True, False):
        raise SolverError(f"cpsat: option lns must be 'auto', True or False, got {lns!r}")
    window = options.get("window")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise SolverError(f"cpsat: option window must be a positive integer, got {window!r}")

    stats: dict = {"workers": workers, "seed": seed}
    warm = _warm_start(f, hint, time_limit, seed, stats)
    bound = warm.objective if warm is not None and warm.valid else None  # checked by _warm_start
    red = domains(f, upper_bound=bound, forbid_huge=True)
    if red.conflict and red.threshold is not None:
        stats["sentinel_rule"] = f"dropped: {red.conflict}"
        red = domains(f, upper_bound=bound)
    stats["reductions"] = dict(red.counts)
    stats["sentinel_threshold"] = red.threshold
    if red.conflict:
        if warm is not None and warm.valid:
            raise SolverError(f"cpsat: reductions found a conflict ({red.conflict}) but the warm start is valid")
        return _infeasible(f, red, red.conflict, stats, start)
    incumbent = _mapped(f, red, warm, stats)
    guide = incumbent or warm

    seconds = time_limit * (1 - WARM_START_SHARE)  # what the search may use; greedy had the rest
    if not options.get("deterministic", True):  # the whole wall-clock budget, at the price of run-to-run differences
        seconds = math.inf
    search = Search(f, seed, workers, deadline, bool(options.get("log", False)))
    run = search.run(red, incumbent, guide, seconds, lns, window)
    if run.status == "infeasible" and red.threshold is not None:
        stats["sentinel_rule"] = "dropped: the model without sentinel entries is infeasible"
        red = domains(f, upper_bound=bound)
        incumbent = _mapped(f, red, warm, stats)
        run = search.run(red, incumbent, incumbent or warm, seconds, lns, window)
    stats.update(run.stats)
    if run.bound is None and run.status != "infeasible":
        run.bound = term_minima_bound(f, red)  # CP-SAT gave none (LNS, or no solution): the trivial bound
        stats["bound_source"] = "term minima"
    if run.status == "infeasible":
        if incumbent is not None:
            raise SolverError("cpsat: CP-SAT proved the model infeasible but the warm start is valid (model bug)")
        return _infeasible(f, red, "CP-SAT proved that no assignment satisfies the constraints", stats, start)
    return _report(f, run, incumbent, stats, start)


# ---------------------------------------------------------------- warm start
def _warm_start(f: Formulation, hint, time_limit: float, seed: int, stats: dict) -> Incumbent | None:
    """The hint, or greedy's plan; None (said in stats) when neither gives a valid plan."""
    if hint is not None:
        assignment, offsets = hint_start(hint)
        try:
            bad = f.violations(assignment, offsets)
        except ValueError as exc:
            raise SolverError(f"cpsat: hint does not fit the formulation: {exc}") from exc
        if bad:
            stats["hint"] = f"invalid, used only as a search hint: {bad[0]}"
            return Incumbent(assignment, offsets, f.evaluate(assignment), "hint", valid=False)
        stats["hint"] = "given"
        return Incumbent(assignment, offsets, f.evaluate(assignment), "hint")
    try:
        from spyreopt.solvers import greedy
    except ImportError as exc:
        stats["hint"] = f"greedy unavailable: {exc}"
        return None
    try:
        sol = greedy.solve(f, time_limit=max(WARM_START_SHARE * time_limit, 0.05), seed=seed)
    except InfeasibleError as exc:
        stats["hint"] = f"greedy found no plan: {exc}"
        return None
    assignment, offsets = tuple(sol.assignment), dict(sol.offsets)
    bad = f.violations(assignment, offsets)
    stats["greedy_objective"] = sol.objective
    if bad:  # never trusted blindly: an invalid greedy plan only guides the search
        stats["hint"] = f"greedy plan invalid, used only as a search hint: {bad[0]}"
        return Incumbent(assignment, offsets, f.evaluate(assignment), "greedy-hint", valid=False)
    stats["hint"] = "greedy"
    return Incumbent(assignment, offsets, f.evaluate(assignment), "greedy-hint")


def _mapped(f: Formulation, red: Domains, warm: Incumbent | None, stats: dict) -> Incumbent | None:
    """The warm start with dominated candidates replaced, when that stays valid and is no worse."""
    if warm is None or not warm.valid:
        return None
    a = tuple(red.map_assignment(warm.assignment))
    if a == warm.assignment:
        return warm
    offsets = {b.key: warm.offsets[b.key] for b in f.buffers(a) if b.key in warm.offsets}
    if f.violations(a, offsets if f.placement else None):
        return warm
    value = f.evaluate(a)
    if value > warm.objective:
        return warm
    stats["hint_mapped_gain"] = warm.objective - value
    return Incumbent(a, offsets, value, warm.source)


# ---------------------------------------------------------------- search


# ---------------------------------------------------------------- reporting
def _report(f: Formulation, run: Run, incumbent: Incumbent | None, stats: dict, start: float) -> Solution:
    best, status = run.best, run.status
    if best is None or (incumbent is not None and incumbent.objective < best.objective):
        if incumbent is None:
            stats["source"] = "none"
            return Solution(
                (),
                {},
                "timeout",
                None,
                run.bound,
                time.perf_counter() - start,
                stats,
                "cpsat found no solution within the time limit and no warm start was available",
            )
        best = incumbent
        status = "optimal" if status == "optimal" else "feasible"
        message = f"CP-SAT found nothing better than the {incumbent.source} plan; returning it"
    else:
        message = {"optimal": "proven optimal", "timeout": "time limit reached; best plan found"}.get(status, "")
    stats["source"] = best.source
    bound = run.bound
    if bound is not None:
        bound = min(bound, best.objective)
        stats["gap"] = (best.objective - bound) / max(1, abs(best.objective))
    return Solution(
        assignment=best.assignment,
        offsets=best.offsets if f.placement else {},
        status=status,
        objective=best.objective,
        bound=bound,
        seconds=time.perf_counter() - start,
        stats=stats,
        message=message,
    )


def _infeasible(f: Formulation, red: Domains, reason: str, stats: dict, start: float) -> Solution:
    """An infeasible result with a diagnosis: the step whose unavoidable usage is largest."""
    limit = memory_limit(f)
    diagnosis: dict = {"reason": reason}
    if limit is not None and f.num_steps:
        floor = np.zeros(f.num_steps, dtype=np.int64)
        for i, n in enumerate(f.nodes):
            lo, hi = n.interval
            if hi > lo and red.masks[i].any():
                floor[lo:hi] += int(n.usages[red.masks[i]].min())
        t = int(np.argmax(floor))
        mandatory = [
            f.nodes[i].name
            for i, n in enumerate(f.nodes)
            if n.interval[0] <= t < n.interval[1] and red.masks[i].any() and n.usages[red.masks[i]].min() > 0
        ]
        diagnosis.update(
            time_step=t,
            min_usage=int(floor[t]),
            limit=limit,
            over=max(0, int(floor[t]) - limit),
            min_limit_at_least=int(floor.max()),
            unavoidable_buffers=mandatory,
        )
        reason += (
            f"; the smallest possible usage at step {t} is {int(floor[t])} (limit {limit}), "
            f"so the limit must be at least {int(floor.max())}"
            + (
                " and the conflict involves edge copies, forbidden pairs or address fragmentation"
                if floor.max() <= limit
                else ""
            )
        )
    stats["diagnosis"] = diagnosis
    stats["source"] = "none"
    return Solution((), {}, "infeasible", None, None, time.perf_counter() - start, stats, reason)
