"""A lower bound on any plan's predicted time, per workload.

Per op: the cheapest candidate's additive cost plus its op time with only the
unavoidable device-memory traffic (graph inputs and weights read, graph outputs
written); every edge is taken as free (in place). Every term of the true cost
is at least this, so the sum bounds every plan.
"""

from __future__ import annotations

from spyreopt.costmodel import analytic as cm
from spyreopt.model.problem import Problem


def lower_bound_us(problem: Problem) -> float:
    coef = problem.coef
    total = 0
    for i, op in enumerate(problem.ops):
        best = None
        for s, cand in enumerate(problem.candidates[i]):
            additive, compute, _, leaf_bytes = problem.unary(i, s)
            lay = problem.layout(i, s)
            write = lay.write_bytes if op.output in problem.graph.outputs else 0
            mem = cm.ps(leaf_bytes / coef.hbm_bytes_per_ns) + cm.ps(write / coef.hbm_bytes_per_ns)
            value = additive + problem.op_time_ps(compute, mem)
            best = value if best is None else min(best, value)
        total += best or 0
    return total * cm.COST_UNIT_US
