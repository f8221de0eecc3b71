"""One solve without cache or decomposition: graph -> Problem -> backend -> decode -> validated Plan.

``spyreopt.solve`` and the plan cache both end here, so the cache depends on this
module and never on ``spyreopt.api``.
"""

from __future__ import annotations

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
