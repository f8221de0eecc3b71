"""What "optimal" and a bound cover, and a lower bound on any plan's predicted time, per workload.

Candidate enumeration prunes (``model/candidates.py``), and no dominance
argument shows the pruned divisions are never better. So every claim here and
every backend's "optimal" and ``bound_us`` hold over the enumerated candidates
only, as ``candidate_scope`` says in the plan's message.

``lower_bound_us``: per op, the cheapest enumerated candidate's additive cost
plus its op time with only its own device-memory traffic (graph inputs and
weights read, its output written unless it stays resident) and the most
overlap; every edge is taken as free (in place). Every term of the true cost
is at least this, so the sum bounds every plan built from those candidates.
"""

from __future__ import annotations

from spyreopt.costmodel import analytic as cm
from spyreopt.model.problem import Problem
from spyreopt.model.tiling import KEEP_PER_TILING


def candidate_scope(problem: Problem, optimal: bool = True) -> str:
    """The set of plans an "optimal" or a bound is about, in words (appended to such a plan's message); a plan
    not proven optimal (``optimal`` False) is told only what its bound is about."""
    n, half = problem.max_layouts, max(problem.max_layouts // 2, 1)  # even and uneven quotas (``OpCandidates``)
    return (
        f"{'optimal and bound' if optimal else 'the bound is'} over the enumerated candidates: per op and output "
        "stick dim, the "
        f"{n} even divisions fastest alone and the {half} fastest in compute, and the {half} uneven ones (a shorter "
        f"last part) fastest alone and the {max(half // 2, 1)} fastest in compute, each among those using at least "
        "a quarter of the most cores a legal division of its kind can use; stick on the last "
        "dim (or the second-to-last for pointwise ops and reductions)" + _tiling_scope(problem)
    )


def _tiling_scope(problem: Problem) -> str:
    """The tiled candidates, when the problem has any (``model.tiling``)."""
    if not problem.tile_scope:
        return ""
    counts = ", ".join(str(t) for t in problem.tile_counts)
    return (
        f"; tiled loops over {counts} tiles only around intermediates over half a scratchpad per core split evenly "
        "or over a whole one in their producing matmul's fastest layout, per (dim, count, staged) the "
        f"{KEEP_PER_TILING} even and {KEEP_PER_TILING // 2} uneven layouts fastest alone and those with every core "
        "on one dim"
    )


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
