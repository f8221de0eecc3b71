"""One problem, one method: build -> backend -> decode -> validate. The only place that decodes and validates a plan.

``finish`` turns a Solution into a checked Plan for every path (a backend, auto's stages, a segment, the stitched
plan, chosen decisions); ``run`` is the path of one named backend on one problem: the Problem built inside the
limit, the backend's budget planned from the limit at nominal rates (deterministic) and cut to the time left when
the clock is shorter (recorded). A search backend starts from greedy's plan at the same limit (the very call
``backend="greedy"`` makes), so its answer is never worse than greedy's; when that plan is returned,
``plan.backend`` says "greedy" and ``stats["requested_backend"]`` names the backend asked for.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from spyreopt import limits
from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import InfeasibleError, PlanError
from spyreopt.model.decode import decode
from spyreopt.model.formulation import Solution
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.rates import FINISH_SECONDS, FINISH_SECONDS_PER_OP
from spyreopt.solvers import greedy, registry
from spyreopt.solvers.solving_chain import CHAIN_GREEDY_SHARE

START_SHARE = 0.4  # of the planned search budget: greedy's start, before the backend asked for
MIN_BACKEND_SECONDS = 0.05  # a search backend left less than this after greedy's start is not run (fallback)


def finish(problem: Problem, sol: Solution, backend: str, seed: int, *, check: bool = True, what: str = "") -> Plan:
    """The Plan of ``sol``, checked (``check_plan``) unless ``check`` is False: a segment's plan is checked once
    stitched, a candidate plan only if it is kept."""
    plan = decode(problem, sol, backend=backend, seed=seed)
    if check:
        check_plan(plan, problem, what or f"backend {backend!r} returned an invalid plan")
    return plan


def check_plan(plan: Plan, problem: Problem, what: str) -> None:
    """``Plan.validate``, its PlanError prefixed by ``what``; ``problem`` is the one the plan was decoded from."""
    try:
        plan.validate(problem)  # the check reuses this Problem when it is the one it would build (half its time)
    except PlanError as exc:
        raise PlanError(f"{what}: {exc}") from exc


def run(
    graph: Graph | Problem,
    backend: str,
    *,
    time_limit: float,
    seed: int,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    **options: Any,
) -> Plan:
    """Plan a graph (or a built Problem) with one backend of the registry; the returned plan has passed
    ``validate``, and carries what the deadline cut (``spyreopt.limits``; stored with it in a plan cache)."""
    with _built_objects_not_rescanned() as built_now, limits.deadline(limits.check_limit(time_limit)) as clock:
        built = not isinstance(graph, Problem)
        problem = Problem(graph, hardware, coefficients) if built else graph
        problem.formulation  # noqa: B018 -- built here, inside the limit (a lazy property)
        built_now()
        planned = limits.search_budget(time_limit, len(problem.ops), built=built)
        reserve = FINISH_SECONDS + FINISH_SECONDS_PER_OP * len(problem.ops)
        sol, used = _search(problem, backend, planned, reserve, seed, clock, options)
        plan = finish(problem, sol, used, seed)
        if used != backend:
            plan.stats["requested_backend"] = backend
        limits.attach(plan, clock)
    return plan


@contextmanager
def _built_objects_not_rescanned() -> Iterator[Callable[[], None]]:
    """The cyclic garbage collector off while the Problem is built; calling the yielded function (once the
    Problem and its Formulation exist) freezes the objects alive then (``gc.freeze``: never walked again)
    and turns the collector back on until the solve ends. Nothing changes when the collector is off or the
    caller froze objects already.

    Why: the build allocates millions of small objects (layouts, candidates, tables) that live until the solve
    ends and form no cycles, and every full collection walked all of them: 23% of a 5,005-op greedy solve
    (1.28 of 5.50 CPU s, ``benchmarks/bench_greedy_scaling.py``'s decoder). The search's own garbage is
    collected as usual; reference counting frees everything that is not a cycle meanwhile."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield lambda: None
        return
    state = {"frozen": False}

    def built() -> None:
        if not state["frozen"]:
            state["frozen"] = True
            gc.freeze()
            gc.enable()

    gc.disable()
    try:
        yield built
    finally:
        if state["frozen"]:
            gc.unfreeze()
        gc.enable()


def _search(problem: Problem, backend: str, planned: float, reserve: float, seed: int, clock, options):
    """The backend's solution and the name of the method whose plan it is."""
    if registry.reads_problem(backend):  # a baseline is a fixed reference point: never replaced by another plan
        return registry.solve(problem, backend, time_limit=max(clock.left(), 0.05), seed=seed, **options), backend
    f = problem.formulation
    if backend == "greedy":
        options.setdefault("window_work", greedy_work(planned))  # its work fixed: the clock only a safety net
        try:
            sol = registry.solve(problem, "greedy", time_limit=max(clock.left() - reserve, 0.02), seed=seed, **options)
        except InfeasibleError:  # greedy's memory repair is not exact: nothing on chip is a plan, and said so
            sol = None
        if sol is None or len(sol.assignment) != len(f.nodes):  # (or the clock left it no plan)
            clock.fall_back("hbm")
            return hbm(problem, seed), "hbm"
        _note(clock, "greedy", sol, False)
        return sol, "greedy"
    if options.get("hint") is not None:  # the caller's start replaces greedy's
        left = clock.left() - reserve
        sol = registry.solve(problem, backend, time_limit=max(left, 0.02) if left < planned else planned, seed=seed,
                             **options)  # fmt: skip
        _note(clock, backend, sol, False)
        return sol, backend
    options.pop("hint", None)
    safety = max(clock.left() - reserve, 0.02)  # greedy's work is fixed by the plan: the clock only a safety net
    try:
        start = registry.solve(problem, "greedy", time_limit=safety, seed=seed, window_work=greedy_work(planned))
    except InfeasibleError:  # greedy's memory repair is not exact: the backend starts from nothing on chip
        start = None
    first = "greedy"
    if start is None or len(start.assignment) != len(f.nodes):  # (or the clock left greedy no plan)
        start, first = hbm(problem, seed), "hbm"
    else:
        _note(clock, "greedy", start, False)
    left = clock.left() - reserve
    if left < MIN_BACKEND_SECONDS:  # no time for the backend asked for: the start answers, and says so
        clock.fall_back(first)
        clock.cut(backend, "clock", start.objective * COST_UNIT_US)
        return start, first
    nominal = (1 - START_SHARE) * planned
    hint = Solution(start.assignment, dict(start.offsets), "feasible", start.objective)
    sol = registry.solve(problem, backend, time_limit=min(nominal, left), seed=seed, hint=hint, **options)
    _note(clock, backend, sol, left < nominal)
    if tuple(sol.assignment) == tuple(start.assignment):  # the start came back (perhaps proven optimal)
        sol.stats["plan_from"] = first
        if first == "hbm":
            clock.fall_back("hbm")
        return sol, first
    return sol, backend


def hbm(problem: Problem, seed: int) -> Solution:
    """The hbm baseline's plan (nothing on chip: valid whenever any plan is), placed for the formulation."""
    return registry.solve(problem, "hbm", time_limit=1.0, seed=seed)


def _note(clock, stage: str, sol: Solution, short: bool) -> None:
    """Record a stage given less than its plan or stopped on the clock (the backends' own flags)."""
    if short or clock_cut(sol):
        clock.cut(stage, "clock", None if sol.objective is None else sol.objective * COST_UNIT_US)


def greedy_work(planned: float) -> int:
    """The window work greedy gets at a limit of ``planned`` seconds (its search after the chain's incumbent),
    passed explicitly so that a clock shorter than the plan changes no decision unless it stops greedy (which
    greedy then says: ``wall_limit_hit``)."""
    return greedy.work_for(planned, share=1 - CHAIN_GREEDY_SHARE)


def clock_cut(sol: Solution) -> bool:
    """Whether a backend's solution says the clock, not its work budget, stopped it."""
    s = sol.stats
    return bool(
        s.get("budget_done") is False
        or s.get("wall_limit_hit")
        or s.get("engine", {}).get("cut_by_clock")
        or s.get("presolve", {}).get("cut_by_clock")
        or (sol.status == "timeout" and s.get("backend") == "greedy")  # its placement passed the deadline
    )
