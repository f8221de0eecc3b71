"""``solve``: graph -> Problem -> Formulation -> backend -> Plan, checked before it is returned."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.decode import decode
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solvers.registry import get_problem_backend, solve_formulation

if TYPE_CHECKING:
    from spyreopt.cache import PlanCache


def solve(
    graph: Graph | Problem,
    backend: str = "auto",
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    cache: PlanCache | str | os.PathLike | None = None,
    decompose: str | None = None,
    **options: Any,
) -> Plan:
    """Plan a graph with one backend. The returned plan has passed ``validate``.

    ``backend="auto"`` (the default) chooses the method per problem (``spyreopt.auto``).
    ``solve_seconds`` is measured by the backend and so varies between runs;
    every decision in the plan is identical for the same input and seed.
    ``cache`` (a ``spyreopt.cache.PlanCache`` or a directory) returns the stored
    plan of the same canonical problem, relabelled, instead of solving again;
    ``decompose="layers"`` solves each distinct repeated segment once
    (``spyreopt.cache.solve_repeated``).
    """
    if backend == "auto" and cache is None and decompose is None:  # chooses the method per problem: spyreopt.auto
        from spyreopt.auto import solve as solve_auto

        return solve_auto(
            graph, time_limit=time_limit, seed=seed, hardware=hardware, coefficients=coefficients, **options
        )
    if cache is not None or decompose is not None:
        from spyreopt.cache import solve_cached  # imported here: spyreopt.cache builds on this module

        return solve_cached(
            graph, backend, time_limit=time_limit, seed=seed, hardware=hardware, coefficients=coefficients,
            cache=cache, decompose=decompose, **options,
        )  # fmt: skip
    problem = graph if isinstance(graph, Problem) else Problem(graph, hardware, coefficients)
    baseline = get_problem_backend(backend)
    if baseline is not None:
        sol = baseline(problem, time_limit=time_limit, seed=seed, **options)
        sol.stats.setdefault("backend", backend)
    else:
        sol = solve_formulation(problem.formulation, backend, time_limit=time_limit, seed=seed, **options)
    plan = decode(problem, sol, backend=backend, seed=seed)
    try:
        plan.validate()
    except PlanError as exc:
        raise PlanError(f"backend {backend!r} returned an invalid plan: {exc}") from exc
    return plan
