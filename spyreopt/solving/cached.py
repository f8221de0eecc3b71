"""One problem behind a PlanCache: look its canonical key up, solve only on a miss, store the plan."""

from __future__ import annotations

import time
from typing import Any

from spyreopt.cache.key import digest, key_payload
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solving import pipeline


def context(graph: Graph | Problem, hardware: HardwareSpec | None, coefficients: Coefficients | None):
    """The (graph, hardware, coefficients) a solve runs on, defaults filled in."""
    if isinstance(graph, Problem):
        return graph.graph, graph.hw, graph.coef
    return graph, hardware or HardwareSpec(), coefficients or default()


def through(
    store: PlanCache,
    graph: Graph | Problem,
    backend: str,
    *,
    time_limit: float,
    seed: int,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    **options: Any,
) -> tuple[Plan, bool]:
    """The plan of ``graph`` from ``store`` (relabelled to its names) or freshly solved and stored; and whether it hit.

    On a hit ``solve_seconds`` is the lookup time and ``stats["timing"]["cache"]``
    records the hit, the key and the seconds the stored plan originally took.
    The cache record sits with the timing so the plan JSON is byte-identical hit
    or miss.
    """
    start = time.perf_counter()
    g, hw, coef = context(graph, hardware, coefficients)
    opts = {"time_limit": time_limit, "seed": seed, **options}
    payload, canon = key_payload(graph, backend, opts, hardware=hw, coefficients=coef)
    key = digest(payload)
    plan = store.get(key, canon, g, hw, coef)
    if plan is not None:
        original = plan.solve_seconds
        plan.solve_seconds = round(time.perf_counter() - start, 6)
        plan.stats.setdefault("timing", {})["cache"] = {"hit": True, "key": key, "original_solve_seconds": original}
        return plan, True
    problem = graph if isinstance(graph, Problem) else Problem(g, hw, coef)
    plan = pipeline.run(problem, backend, time_limit=time_limit, seed=seed, **options)
    store.put(key, plan, canon)
    plan.stats.setdefault("timing", {})["cache"] = {"hit": False, "key": key}
    return plan, False
