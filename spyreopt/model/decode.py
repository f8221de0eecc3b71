"""From a Formulation solution back to a Spyre Plan: names, divisions, modes, addresses."""

from __future__ import annotations

from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model import staging
from spyreopt.model.bounds import candidate_scope
from spyreopt.model.formulation import Solution
from spyreopt.model.inplace import lifetime, writes_over
from spyreopt.model.plan import Plan
from spyreopt.model.plan_data import EdgePlan, OpPlan, TensorPlan
from spyreopt.model.problem import Problem
from spyreopt.model.tiling import decode_loops

# backend statistics measured in wall-clock time: kept under stats["timing"], out of deterministic JSON
WALL_CLOCK_STATS = {
    "seconds", "wall_time", "moves_per_second", "user_time", "timing", "placement_seconds", "solve_seconds",
    "lns_seconds", "model_seconds", "original_solve_seconds", "wall_limit_hit",
}  # fmt: skip


def _scoped(problem: Problem, sol: Solution) -> str:
    """The backend's message, plus what an "optimal" or a bound is relative to when there is one."""
    if sol.status != "optimal" and sol.bound is None:
        return sol.message
    return "; ".join(m for m in (sol.message, candidate_scope(problem, sol.status == "optimal")) if m)


def decode(problem: Problem, sol: Solution, *, backend: str, seed: int) -> Plan:
    """The Plan of a solution; the balance twins are normalised first so the cost is exact."""
    if len(sol.assignment) != len(problem.ops):
        error = InfeasibleError if sol.status == "infeasible" else SolverError
        raise error(f"{backend}: no plan for {problem.graph.name!r} ({sol.status}): {sol.message}")
    a = problem.normalize(sol.assignment)
    f = problem.formulation
    objective = f.evaluate(a)
    breakdown = problem.evaluate(a)
    loops, loop_of = decode_loops(problem, a, f)
    over = writes_over(problem, a)
    ops, tensors = [], []
    for i, o in enumerate(problem.ops):
        cand = problem.candidates[i][a[i]]
        lay = problem.layout(i, a[i])
        space = problem.cands[i].space
        b = breakdown[o.name]
        ops.append(
            OpPlan(
                name=o.name,
                kind=o.kind,
                division=lay.division.as_dict(space),
                cores=lay.division.cores,
                stick=lay.stick,
                residency=cand.residency,
                predicted_us=b.total,
                breakdown={k: v for k, v in vars(b).items()},
                loop=loop_of[i],
                inplace_over=over.get(i),
            )
        )
        held = int(f.nodes[i].usages[a[i]])  # a resident output, or a loop's accumulator
        lo, hi = lifetime(problem, i, a)  # through its last reader, or the loop it may share
        tensors.append(
            TensorPlan(
                name=o.output,
                producer=o.name,
                residency=cand.residency,
                stick=lay.stick,
                address=sol.offsets.get(("node", i)) if held else None,
                bytes_per_core=held,
                lifetime=[lo, hi] if held else [i, i + 1],
            )
        )
    edges = []
    for k, e in enumerate(problem.edges):
        info = problem.pair(k, a[e.producer], a[e.consumer])
        assert info is not None, "a backend returned a forbidden pair"
        edges.append(
            EdgePlan(
                tensor=e.tensor,
                producer=problem.ops[e.producer].name,
                consumer=problem.ops[e.consumer].name,
                operand=e.operand,
                mode=info.mode,
                restickify=info.restick,
                copy_address=sol.offsets.get(("edge", k)) if info.copy_bytes else None,
                copy_bytes_per_core=info.copy_bytes,
                lifetime=list(f.edges[k].interval),
                fan_in=info.fan_in,
            )
        )
    staged_tensors, staged_edges = staging.decoded(problem, a, sol.offsets)
    tensors += staged_tensors
    edges += staged_edges
    stats = {k: v for k, v in sol.stats.items() if k not in WALL_CLOCK_STATS}
    stats["timing"] = {k: v for k, v in sol.stats.items() if k in WALL_CLOCK_STATS}
    stats["timing"]["solve_seconds"] = sol.seconds
    stats["objective_units"] = objective
    stats["cost_unit_us"] = COST_UNIT_US
    return Plan(
        graph=problem.graph.to_dict(),
        hardware=problem.hw.to_dict(),
        coefficients=problem.coef.to_dict(),
        ops=ops,
        tensors=tensors,
        edges=edges,
        status=sol.status,
        cost_us=objective * COST_UNIT_US,
        bound_us=None if sol.bound is None else sol.bound * COST_UNIT_US,
        solve_seconds=round(sol.seconds, 6),
        backend=backend,
        seed=seed,
        message=_scoped(problem, sol),
        stats=stats,
        loops=loops,
    )
