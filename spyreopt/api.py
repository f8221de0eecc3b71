"""``solve``: the one public entry. Through the plan cache when asked, else ``direct.solve_direct``."""

from __future__ import annotations

import os
from typing import Any

from spyreopt import limits
from spyreopt.cache.cached import solve_cached
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.direct import solve_direct
from spyreopt.errors import SolverError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.model.restrict import Restriction, check_backend, check_restriction, make_problem
from spyreopt.solvers.registry import get_problem_backend


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
    pin: dict[str, dict[str, Any]] | None = None,
    forbid: tuple[str, ...] | list[str] | str | None = None,
    **options: Any,
) -> Plan:
    """Plan a graph with one backend. The returned plan has passed ``validate``.

    ``backend="auto"`` (the default) chooses the method per problem (``spyreopt.auto``).
    ``solve_seconds`` is measured by the backend and so varies between runs;
    every decision in the plan is identical for the same input and seed.
    ``cache`` (a ``spyreopt.cache.PlanCache`` or a directory) returns the stored
    plan of the same canonical problem, relabelled, instead of solving again;
    ``decompose="layers"`` solves each distinct repeated segment once
    (``spyreopt.cache.solve_repeated``). ``pin`` and ``forbid`` restrict the decisions
    (``spyreopt.model.restrict``); the plan is checked to honour them. ``time_limit`` is a deadline from
    this call (``spyreopt.limits``); what it cut is in ``plan.stats["limits"]``.
    """
    with limits.deadline(limits.check_limit(time_limit)) as clock:  # the deadline counts from this call
        plan = _solve(graph, backend, time_limit, seed, hardware, coefficients, cache, decompose, pin, forbid, options)
        limits.attach(plan, clock)
    return plan


def _solve(graph, backend, time_limit, seed, hardware, coefficients, cache, decompose, pin, forbid, options) -> Plan:
    common = dict(time_limit=time_limit, seed=seed, hardware=hardware, coefficients=coefficients, **options)
    restriction = Restriction.of(pin, forbid)
    if not restriction.empty:
        if cache is not None or decompose is not None or isinstance(graph, Problem):
            raise SolverError("pin/forbid need a graph solved directly (no cache, decompose or built Problem)")
        problem = make_problem(graph, hardware, coefficients, pin=pin, forbid=forbid)
        if backend == "auto":
            plan = _solve_auto(problem, time_limit=time_limit, seed=seed, **options)
        else:
            check_backend(restriction, backend, get_problem_backend(backend) is not None)
            plan = solve_direct(problem, backend, **common)
        check_restriction(plan, restriction)
        plan.stats["restriction"] = restriction.to_dict()
        return plan
    if backend == "auto" and cache is None and decompose is None:  # chooses the method per problem: spyreopt.auto
        return _solve_auto(graph, **common)
    if cache is not None or decompose is not None:
        if backend != "auto":
            return solve_cached(graph, backend, cache=cache, decompose=decompose, **common)
        chosen = _auto_backend_for_each_problem(graph, decompose)
        plan = solve_cached(graph, chosen, cache=cache, decompose=decompose, **common)
        plan.stats["auto"] = {"method": chosen, "why": "cache or decompose given: one backend for every problem solved"}
        plan.message = f"auto: {chosen} for every problem the cache or decomposition solves" + (
            f"; {plan.message}" if plan.message else ""
        )
        return plan
    return solve_direct(graph, backend, **common)


def _solve_auto(graph: Graph | Problem, **kwargs: Any) -> Plan:
    from spyreopt.auto import solve as solve_auto  # imported on use: auto orchestrates backends and decomposition

    return solve_auto(graph, **kwargs)


def _auto_backend_for_each_problem(graph: Graph | Problem, decompose: str | None) -> str:
    """What auto runs when the cache or the layer decomposition drives: CP-SAT for a kernel or a layer
    (small problems, where it proves optimality), anneal for a whole graph too large to prove."""
    from spyreopt.auto import EXACT_OPS

    ops = graph.ops if isinstance(graph, Problem) else graph.compute_ops()
    return "cpsat" if decompose == "layers" or len(ops) <= EXACT_OPS else "anneal"
