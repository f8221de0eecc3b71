"""``solve_cached``: ``spyreopt.solve`` with a plan cache and/or ``decompose="layers"``."""

from __future__ import annotations

import os
from typing import Any

from spyreopt.cache.lookup import solve_through
from spyreopt.cache.repeated import solve_repeated
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.direct import solve_direct
from spyreopt.errors import SolverError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem

DECOMPOSE = ("layers",)


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
            return solve_repeated(graph, backend, cache=store, **common)
        if store is None:
            return solve_direct(graph, backend, **common)
        return solve_through(store, graph, backend, **common)[0]
    finally:
        if store is not None and store is not cache:
            store.close()
