"""A lower bound on any plan's predicted time, per workload.

Per op: the cheapest candidate's additive cost plus its op time with only its
own device-memory traffic (graph inputs and weights read, its output written
unless it stays resident) and the most overlap; every edge is taken as free
(in place). Every term of the true cost is at least this, so the sum bounds
every plan.
"""

from __future__ import annotations

from spyreopt.costmodel import analytic as cm
from spyreopt.model.problem import Problem


def lower_bound_us(problem: Problem) -> float:
    total = 0
    for i in range(len(problem.ops)):
        best = None
        for s in range(len(problem.candidates[i])):
            additive, compute, mem, _ = problem.unary(i, s)
            value = additive + problem.op_time_ps(compute, mem)
            best = value if best is None else min(best, value)
        total += best or 0
    return total * cm.COST_UNIT_US
