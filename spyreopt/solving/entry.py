"""``solve``: the one public entry. The options are read once into a ``Request``; then one path:

restriction (pin/forbid) -> the plan cache or the layer decomposition, when asked -> the method (``auto`` or one
backend) -> ``pipeline.finish`` (decode, validate) -> the restriction checked -> the deadline's report attached.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from spyreopt import limits
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import SolverError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.model.restrict import Restriction, check_backend, check_restriction, make_problem
from spyreopt.solvers.registry import check_options, reads_problem
from spyreopt.solving import auto, cached, layers, pipeline
from spyreopt.solving.stages import EXACT_OPS

DECOMPOSE = ("layers",)
AUTO_OPTIONS = ("progress", "on_stage")


@dataclass(frozen=True)
class Request:
    """What ``solve`` was asked, read and checked once, before any work."""

    backend: str  # the method that runs: "auto" or a registry name (auto's choice under a cache or decomposition)
    asked: str  # the backend the caller named
    time_limit: float
    seed: int
    hardware: HardwareSpec | None
    coefficients: Coefficients | None
    cache: PlanCache | str | os.PathLike | None
    decompose: str | None
    restriction: Restriction
    options: dict[str, Any]

    @classmethod
    def read(cls, graph: Graph | Problem, backend: str, time_limit: float, seed: int, hardware, coefficients,
             cache, decompose: str | None, pin, forbid, options: dict[str, Any]) -> Request:  # fmt: skip
        restriction = Restriction.of(pin, forbid)
        through = cache is not None or decompose is not None
        if not restriction.empty and (through or isinstance(graph, Problem)):
            raise SolverError("pin/forbid need a graph solved directly (no cache, decompose or built Problem)")
        if decompose is not None and decompose not in DECOMPOSE:
            raise SolverError(f"decompose={decompose!r}: expected one of {DECOMPOSE} or None")
        if decompose is not None and isinstance(graph, Problem):
            raise SolverError("decompose='layers' needs a Graph (it builds one Problem per segment), got a Problem")
        method = _auto_backend_for_each_problem(graph, decompose) if backend == "auto" and through else backend
        if method == "auto":
            unknown = sorted(set(options) - set(AUTO_OPTIONS))
            if unknown:
                raise SolverError(f"auto: unknown option(s) {', '.join(unknown)}; known: {', '.join(AUTO_OPTIONS)}")
        else:
            check_options(method, options)
            check_backend(restriction, method, reads_problem(method))
        return cls(method, backend, time_limit, seed, hardware, coefficients, cache, decompose, restriction, options)

    def common(self) -> dict[str, Any]:
        return dict(time_limit=self.time_limit, seed=self.seed, hardware=self.hardware,
                    coefficients=self.coefficients, **self.options)  # fmt: skip


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

    ``backend="auto"`` (the default) chooses the method per problem (``spyreopt.solving.auto``).
    ``solve_seconds`` is measured by the backend and so varies between runs;
    every decision in the plan is identical for the same input and seed.
    ``cache`` (a ``spyreopt.cache.PlanCache`` or a directory) returns the stored
    plan of the same canonical problem, relabelled, instead of solving again;
    ``decompose="layers"`` solves each distinct repeated segment once
    (``spyreopt.solving.layers``). ``pin`` and ``forbid`` restrict the decisions
    (``spyreopt.model.restrict``); the plan is checked to honour them. ``time_limit`` is a deadline from
    this call (``spyreopt.limits``); what it cut is in ``plan.stats["limits"]``.
    """
    with limits.deadline(limits.check_limit(time_limit)) as clock:  # the deadline counts from this call
        req = Request.read(graph, backend, time_limit, seed, hardware, coefficients, cache, decompose, pin, forbid,
                           options)  # fmt: skip
        plan = _plan(graph, req)
        limits.attach(plan, clock)
    return plan


def _plan(graph: Graph | Problem, req: Request) -> Plan:
    if not req.restriction.empty:
        problem = make_problem(graph, req.hardware, req.coefficients, pin=req.restriction.pin,
                               forbid=req.restriction.forbid)  # fmt: skip
        plan = _method(problem, req)
        check_restriction(plan, req.restriction)
        plan.stats["restriction"] = req.restriction.to_dict()
        return plan
    if req.cache is None and req.decompose is None:
        return _method(graph, req)
    store = None if req.cache is None else PlanCache.of(req.cache)
    try:
        if req.decompose is not None:
            plan = layers.solve(graph, req.backend, cache=store, **req.common())
        else:
            plan = cached.through(store, graph, req.backend, **req.common())[0]
    finally:
        if store is not None and store is not req.cache:
            store.close()
    if req.asked == "auto":
        why = "cache or decompose given: one backend for every problem solved"
        plan.stats["auto"] = {"method": req.backend, "why": why}
        plan.message = f"auto: {req.backend} for every problem the cache or decomposition solves" + (
            f"; {plan.message}" if plan.message else ""
        )
    return plan


def _method(target: Graph | Problem, req: Request) -> Plan:
    """The method on one graph or Problem: auto's stages, or one backend of the registry."""
    if req.backend == "auto":
        return auto.solve(target, **req.common())
    return pipeline.run(target, req.backend, **req.common())


def _auto_backend_for_each_problem(graph: Graph | Problem, decompose: str | None) -> str:
    """What auto runs when the cache or the layer decomposition drives: CP-SAT for a kernel or a layer
    (small problems, where it proves optimality), anneal for a whole graph too large to prove."""
    ops = graph.ops if isinstance(graph, Problem) else graph.compute_ops()
    return "cpsat" if decompose == "layers" or len(ops) <= EXACT_OPS else "anneal"
