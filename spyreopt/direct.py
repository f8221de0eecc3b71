"""One solve without cache or decomposition: graph -> Problem -> backend -> decode -> validated Plan.

``spyreopt.solve`` and the plan cache both end here, so the cache depends on this
module and never on ``spyreopt.api``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.decode import decode
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solvers.registry import get_problem_backend, solve_formulation


def solve_direct(
    graph: Graph | Problem,
    backend: str = "greedy",
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    **options: Any,
) -> Plan:
    """Plan a graph with one backend; the returned plan has passed ``validate``."""
    with _built_objects_not_rescanned() as built:
        return _solve(graph, backend, time_limit, seed, hardware, coefficients, options, built)


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


def _solve(graph, backend, time_limit, seed, hardware, coefficients, options, built) -> Plan:
    problem = graph if isinstance(graph, Problem) else Problem(graph, hardware, coefficients)
    baseline = get_problem_backend(backend)
    if baseline is not None:
        built()
        sol = baseline(problem, time_limit=time_limit, seed=seed, **options)
        sol.stats.setdefault("backend", backend)
    else:
        f = problem.formulation
        built()
        sol = solve_formulation(f, backend, time_limit=time_limit, seed=seed, **options)
    plan = decode(problem, sol, backend=backend, seed=seed)
    try:
        plan.validate()
    except PlanError as exc:
        raise PlanError(f"backend {backend!r} returned an invalid plan: {exc}") from exc
    return plan
