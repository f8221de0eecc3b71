"""Plans of chosen decisions, for measuring op families in isolation (cost-model fitting and tests).

``plan_for(graph, decisions)`` turns a decision per op (division, output stick
dim, residency) into a checked Plan, with addresses from the placement engine;
``simulate_op`` simulates it. The fitter builds one-op graphs (matmul, bmm,
pointwise, reduction, softmax) or two-op graphs whose edge forces a relayout or
restickify, and reads ``SimResult.breakdown[op]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import InfeasibleError, PlanError
from spyreopt.hw.sim_machine import SimParams
from spyreopt.hw.simulator import SimResult, simulate
from spyreopt.model.formulation import Solution
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solving import pipeline

Decision = tuple[Mapping[str, int] | tuple[int, ...], int, str]  # division, output stick dim, residency


def plan_for(
    graph: Graph,
    decisions: Mapping[str, Decision],
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
) -> Plan:
    """The validated Plan of the given decisions (every non-view op needs one).

    A division is a dict of split factors by iteration dim name (``{"m": 4, "n": 8}``,
    unnamed dims stay 1) or a tuple in iteration-dim order.
    """
    fixed = {}
    for o in graph.ops.values():
        if o.kind == "view":
            continue
        if o.name not in decisions:
            raise PlanError(f"plan_for: no decision for op {o.name!r}")
        division, stick, residency, *tiling = decisions[o.name]  # tiling: (dim name, tile count), optional
        dims = op_space(graph, o).dims
        if isinstance(division, Mapping):
            unknown = sorted(set(division) - set(dims))
            if unknown:
                raise PlanError(
                    f"op {o.name!r}: division names unknown dim(s) {unknown}; iteration dims are {list(dims)}"
                )
            division = tuple(int(division.get(d, 1)) for d in dims)
        fixed[o.name] = (tuple(division), int(stick), residency, *tiling)
    problem = Problem(graph, hardware, coefficients, fixed=fixed)
    assignment = problem.normalize([0] * len(problem.ops))
    f = problem.formulation
    offsets = place_assignment(f, assignment)
    if offsets is None:
        raise InfeasibleError(
            f"plan_for: the buffers of these decisions do not fit the scratchpad ({f.placement.capacity} bytes)"
        )
    sol = Solution(tuple(assignment), offsets, "feasible", f.evaluate(assignment), message="fixed decisions")
    return pipeline.finish(problem, sol, "fixed", 0, what="plan_for: the plan of these decisions is invalid")


def simulate_op(
    graph: Graph,
    decisions: Mapping[str, Decision],
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    params: SimParams | None = None,
) -> SimResult:
    """Simulate the plan of the given decisions (see ``plan_for``)."""
    return simulate(plan_for(graph, decisions, hardware, coefficients), params)
