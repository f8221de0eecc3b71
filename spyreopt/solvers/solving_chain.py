"""The one path from a Formulation to a backend and back: incumbent, reduction chain, search, exact inverse.

1. Incumbent: the caller's ``hint`` if ``f.violations`` finds it valid, else
   the greedy backend's plan (``CHAIN_GREEDY_SHARE`` of the time), checked the same
   way; for the exact backends (``EXACT``) anneal then improves it
   (``CHAIN_ANNEAL_SHARE``; skipped when the formulation has more than
   ``ANNEAL_CANDIDATES_PER_SECOND`` candidates per second of the limit, since
   its set-up alone would overrun) and the better checked plan is kept. Only a
   checked incumbent bounds the reductions.
2. ``presolve.reduce_formulation(f, upper_bound=incumbent)``: the shared
   domain rules and structural reductions, each exact; for the exact backends
   with LP reduced-cost fixing in the first pass (``CHAIN_LP_SHARE``). They stop at
   ``REDUCTION_SHARE`` of the limit past the steps before them (still exact;
   ``stats["presolve"]["cut_by_clock"]`` says so).
3. The backend searches the reduced formulation, warm-started with the
   incumbent projected onto it; greedy searches it from scratch.
4. ``Reduction.expand`` maps the answer back; the inverted plan is checked
   with ``f.violations`` and its objective is ``f.evaluate`` of it, which must
   equal the backend's objective on the reduced formulation. Because every
   reduction keeps the optimum, the backend's "optimal", "infeasible" and bound
   are statements about ``f``; the LP bound, also valid for ``f``, may close
   the gap. The answer is never worse than the incumbent.

Determinism: each step's time limit is its share of ``time_limit`` (a
function of the input only), and the backend gets the rest of the nominal
shares, unless the steps before it overran, in which case it gets what is left.
The LP rule's result does not depend on time when the LP finishes within its share.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Formulation, Solution, hint_start
from spyreopt.rates import ANNEAL_CANDIDATES_PER_SECOND
from spyreopt.solvers.presolve import Reduction, reduce_formulation

CHAIN_GREEDY_SHARE = 0.1
CHAIN_ANNEAL_SHARE = 0.1
CHAIN_LP_SHARE = 0.3
REDUCTION_SHARE = 0.2  # the reductions stop at this share past the steps before them (never reserved)
EXACT = ("cpsat", "milp")  # backends that prove: a better incumbent and the LP pay off in their proofs


def solve_chain(
    f: Formulation,
    backend: str,
    lookup: Callable[[str], Callable[..., Solution]],
    *,
    time_limit: float,
    seed: int,
    hint=None,
    **options,
) -> Solution:
    """Solve ``f`` with the backend ``lookup(backend)`` through the reduction chain (module docstring)."""
    start = time.perf_counter()
    stats: dict = {}
    exact = backend in EXACT
    improve = exact and sum(n.num_candidates for n in f.nodes) <= ANNEAL_CANDIDATES_PER_SECOND * time_limit
    work = options.get("window_work") if backend == "greedy" else None  # greedy's work fixed: its incumbent's too
    incumbent = _incumbent(f, hint, lookup, time_limit, seed, stats, improve, work)
    bound = None if incumbent is None else incumbent.objective
    lp_time = CHAIN_LP_SHARE * time_limit if exact and bound is not None else None
    shares = CHAIN_GREEDY_SHARE + (CHAIN_ANNEAL_SHARE if improve else 0.0) + (CHAIN_LP_SHARE if lp_time else 0.0)
    try:
        red = reduce_formulation(
            f, upper_bound=bound, lp_time=lp_time, deadline=start + (shares + REDUCTION_SHARE) * time_limit
        )
    except InfeasibleError:
        if incumbent is not None:
            raise SolverError(
                f"presolve: a reduction removed the checked incumbent of {f.name} (reduction bug)"
            ) from None
        raise
    g = red.formulation
    stats["presolve"] = dict(red.stats)  # no times: stats reach the plan, which must be byte-stable
    limit = min((1 - shares) * time_limit, time_limit - (time.perf_counter() - start))
    if limit <= 0:
        if incumbent is None:
            message = f"{backend}: the time limit {time_limit} s ran out in presolve, with no plan"
            return Solution((), {}, "timeout", None, red.stats["lp_bound"], time.perf_counter() - start, stats, message)
        return _finish(incumbent, "timeout", red.stats["lp_bound"], "the time limit ran out in presolve", stats, start)
    if backend != "greedy":
        inner_hint = _project(red, incumbent)
        if inner_hint is not None:
            options["hint"] = inner_hint
    inner = lookup(backend)(g, time_limit=limit, seed=seed, **options)
    stats.update(inner.stats)
    inner.bound = _best_bound(inner.bound, red.stats["lp_bound"])
    if len(inner.assignment) != len(g.nodes):  # no plan (timeout without one, or infeasible)
        if incumbent is not None:
            return _finish(incumbent, "feasible", inner.bound, f"{backend}: {inner.message}", stats, start)
        return Solution((), {}, inner.status, None, inner.bound, time.perf_counter() - start, stats, inner.message)
    return _invert(f, red, backend, inner, incumbent, stats, start)


def _best_bound(a: int | None, b: int | None) -> int | None:
    """The larger of two valid lower bounds."""
    return b if a is None else a if b is None else max(a, b)


def _incumbent(f: Formulation, hint, lookup, time_limit: float, seed: int, stats: dict, improve: bool, work=None):
    """A plan checked with ``f.violations``: the hint if valid, else greedy's (improved by anneal when
    ``improve``); None if there is none. ``work``: the greedy backend's window work, of which the incumbent gets
    its share (so a greedy run is a function of its work, the clock only its safety net)."""
    if hint is not None:
        assignment, offsets = hint_start(hint)
        try:
            bad = f.violations(assignment, offsets if f.placement else None)
        except ValueError as exc:
            raise SolverError(f"hint does not fit the formulation {f.name}: {exc}") from exc
        if not bad:
            stats["incumbent"] = "hint"
            return Solution(assignment, offsets, "feasible", f.evaluate(assignment))
        stats["hint"] = f"invalid, not used: {bad[0]}"
    try:
        own = {} if work is None else {"window_work": int(work * CHAIN_GREEDY_SHARE / (1 - CHAIN_GREEDY_SHARE))}
        best = _checked(f, lookup("greedy")(f, time_limit=max(CHAIN_GREEDY_SHARE * time_limit, 0.05), seed=seed, **own))
    except InfeasibleError as exc:
        stats["incumbent"] = f"none (greedy: {exc})"
        return None
    if best is None:
        stats["incumbent"] = "none (greedy's plan is invalid)"
        return None
    stats["incumbent"] = "greedy"
    stats["greedy_objective"] = best.objective
    if improve:
        better = _checked(f, lookup("anneal")(f, time_limit=CHAIN_ANNEAL_SHARE * time_limit, seed=seed, hint=best))
        if better is not None and better.objective < best.objective:
            best = better
            stats["incumbent"] = "anneal"
            stats["anneal_objective"] = best.objective
    return best


def _checked(f: Formulation, sol: Solution) -> Solution | None:
    """The plan as a fresh Solution when ``f.violations`` finds nothing wrong with it, else None."""
    if len(sol.assignment) != len(f.nodes) or f.violations(sol.assignment, sol.offsets if f.placement else None):
        return None
    return Solution(tuple(sol.assignment), dict(sol.offsets), "feasible", f.evaluate(sol.assignment))


def _project(red: Reduction, incumbent: Solution | None) -> Solution | None:
    """The incumbent as a plan of the reduced formulation, when it stays valid there."""
    if incumbent is None:
        return None
    a = red.project(incumbent.assignment)
    if a is None:
        return None
    g = red.formulation
    offsets = red.project_offsets(incumbent.offsets) if g.placement else {}
    if g.violations(a, offsets if g.placement else None):
        return None
    return Solution(a, offsets, "feasible", g.evaluate(a))


def _invert(f, red: Reduction, backend: str, inner: Solution, incumbent, stats: dict, start: float) -> Solution:
    """The backend's plan of the reduced formulation as a checked plan of ``f``."""
    a = red.expand(inner.assignment)
    offsets = red.expand_offsets(inner.offsets) if f.placement else {}
    bad = f.violations(a, offsets if f.placement else None)
    if bad:
        g = red.formulation
        own = g.violations(inner.assignment, inner.offsets if g.placement else None)
        culprit = (
            f"{backend}'s own plan is invalid (backend bug)" if own else "the inverted plan is invalid (reduction bug)"
        )
        raise SolverError(f"{backend}: {culprit} in {f.name}: {(own or bad)[:3]}")
    objective = f.evaluate(a)
    reduced = red.formulation.evaluate(inner.assignment)
    if objective != reduced:
        raise SolverError(f"{backend}: reduced objective {reduced} != original {objective} (reduction bug)") from None
    sol = Solution(a, offsets, inner.status, objective, inner.bound, 0.0, stats, inner.message)
    worse = incumbent is not None and (
        incumbent.objective < objective or (backend == "greedy" and incumbent.objective == objective)
    )
    if worse:
        u, source = f.cost_unit_us, stats.get("incumbent", "an earlier stage")
        note = (
            f"{backend} on the presolved problem ({objective * u:,.3f} µs) is no better than {source} on the "
            f"whole problem ({incumbent.objective * u:,.3f} µs), whose plan is kept"
        )
        if inner.status == "optimal":
            note += (
                f"; {backend}'s claim of optimality (bound {inner.bound * u:,.3f} µs) is false: the bound is dropped"
            )
            inner.bound = None
        return _finish(incumbent, "feasible", inner.bound, note, stats, start)
    if sol.bound is not None:
        sol.bound = min(sol.bound, objective)
        if sol.bound == objective and sol.status != "optimal":  # a valid bound meets the plan: proven
            sol.status = "optimal"
    sol.seconds = time.perf_counter() - start
    return sol


def _finish(plan: Solution, status: str, bound, message: str, stats: dict, start: float) -> Solution:
    """The incumbent as the answer."""
    stats["source"] = stats.get("incumbent", "incumbent")
    bound = None if bound is None else min(bound, plan.objective)
    status = "optimal" if bound is not None and bound >= plan.objective else status
    return Solution(
        plan.assignment, plan.offsets, status, plan.objective, bound, time.perf_counter() - start, stats, message
    )
