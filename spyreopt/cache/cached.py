"""``solve`` through a PlanCache: look the canonical key up, solve only on a miss, store the plan."""

from __future__ import annotations

import os
import time
from typing import Any

from spyreopt.api import solve as solve_plain
from spyreopt.cache.key import digest, key_payload
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.errors import SolverError
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem

DECOMPOSE = ("layers",)


def context(graph: Graph | Problem, hardware: HardwareSpec | None, coefficients: Coefficients | None):
    """The (graph, hardware, coefficients) a solve runs on, defaults filled in."""
    if isinstance(graph, Problem):
        return graph.graph, graph.hw, graph.coef
    return graph, hardware or HardwareSpec(), coefficients or default()


def solve_through(
    store: PlanCache,
    graph: Graph | Problem,
    backend: str,
    *,
    time_limit: float,
    seed: int,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    extra: dict | None = None,
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
    payload, canon = key_payload(graph, backend, opts, hardware=hw, coefficients=coef, extra=extra)
    key = digest(payload)
    plan = store.get(key, canon, g, hw, coef)
    if plan is not None:
        original = plan.solve_seconds
        plan.solve_seconds = round(time.perf_counter() - start, 6)
        plan.stats.setdefault("timing", {})["cache"] = {"hit": True, "key": key, "original_solve_seconds": original}
        return plan, True
    problem = graph if isinstance(graph, Problem) else Problem(g, hw, coef)
    plan = solve_plain(problem, backend, time_limit=time_limit, seed=seed, **options)
    store.put(key, plan, canon)
    plan.stats.setdefault("timing", {})["cache"] = {"hit": False, "key": key}
    return plan, False


def solve_cached(
    graph: Graph | Problem,
    backend: str = "greedy",
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    cache: PlanCache | str | os.PathLike | None = None,
    decompose: str | None = None,
    **options: Any,
) -> Plan:
    """``spyreopt.solve`` with a plan cache (a PlanCache or a directory) and/or ``decompose="layers"``."""
    if decompose is not None and decompose not in DECOMPOSE:
        raise SolverError(f"decompose={decompose!r}: expected one of {DECOMPOSE} or None")
    store = None if cache is None else PlanCache.of(cache)
    try:
        common = dict(time_limit=time_limit, seed=seed, hardware=hardware, coefficients=coefficients, **options)
        if decompose is not None:
            if isinstance(graph, Problem):
                raise SolverError("decompose='layers' needs a Graph (it builds one Problem per segment), got a Problem")
            from spyreopt.cache.repeated import solve_repeated

            return solve_repeated(graph, backend, cache=store, **common)
        if store is None:
            return solve_plain(graph, backend, **common)
        return solve_through(store, graph, backend, **common)[0]
    finally:
        if store is not None and store is not cache:
            store.close()
