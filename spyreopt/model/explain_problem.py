"""The plan's Problem and the plan's place in it, for ``model.explain``: the Problem rebuilt from the plan
(every candidate, or some ops fixed), each op's decision as ``Problem(fixed=...)`` takes it, the cost of one
changed decision, and the plan's assignment among the candidates."""

from __future__ import annotations

from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.explanation import Choice
from spyreopt.model.formulation import affine_value
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan_data import PlanData
from spyreopt.model.problem import Problem
from spyreopt.model.staging import plan_masks
from spyreopt.model.tiling import staged_tensors, staged_tensors_of


def build_problem(plan: PlanData, fixed: dict[str, tuple] | None = None) -> Problem:
    """The plan's Problem: every candidate of every op (but ``fixed`` ops), staging bits as the plan has them."""
    graph = Graph.from_dict(plan.graph)
    compute = graph.compute_ops()
    masks = plan_masks(graph, compute, plan.tensors, plan.edges)
    return Problem(
        graph, HardwareSpec.from_dict(plan.hardware), Coefficients.from_dict(plan.coefficients),
        fixed=fixed or None, stage_masks=masks,
    )  # fmt: skip


def plan_decisions(plan: PlanData) -> dict[str, tuple]:
    """Each op's decision as ``Problem(fixed=...)`` takes it: (factors, stick, residency, tiling or None)."""
    graph = Graph.from_dict(plan.graph)
    out = {}
    for o in plan.ops:
        dims = op_space(graph, graph.ops[o.name]).dims
        tiling = None
        if o.loop is not None:
            loop = plan.loops[o.loop]
            tiling = (loop.op_dims[o.name], loop.tiles, tuple(loop.staged))
        out[o.name] = (tuple(int(o.division[d]) for d in dims), int(o.stick), o.residency, tiling)
    return out


def fixed_cost(plan: PlanData, op: str, choice: Choice) -> float:
    """The predicted cost (µs) of the plan with op's decision replaced by ``choice``, every other op fixed as
    planned: an independent Problem of one candidate per op, normalised and evaluated."""
    graph = Graph.from_dict(plan.graph)
    decisions = plan_decisions(plan)
    dims = op_space(graph, graph.ops[op]).dims
    decisions[op] = (tuple(choice.division[d] for d in dims), choice.stick, choice.residency, choice.tiling)
    problem = build_problem(plan, decisions)
    return problem.formulation.evaluate(problem.normalize([0] * len(problem.ops))) * COST_UNIT_US


def choice_of(problem: Problem, i: int, s: int) -> Choice:
    """Candidate s of op i as a Choice."""
    lay = problem.layout(i, s)
    oc = problem.cands[i]
    tiling = None
    if lay.tile is not None:
        tiling = (oc.space.dims[lay.tile.dim], lay.tile.tiles, tuple(staged_tensors(oc, lay)))
    return Choice(lay.division.as_dict(oc.space), lay.stick, problem.candidates[i][s].residency, tiling)


def locate(problem: Problem, plan: PlanData) -> tuple[list[int], list[str]]:
    """The plan's assignment among the problem's candidates (-1 where an op's decision is not one of them)."""
    by_name = {o.name: o for o in plan.ops}
    out, missing = [], []
    for i, o in enumerate(problem.ops):
        p = by_name[o.name]
        oc = problem.cands[i]
        want_tile = None
        if p.loop is not None:
            loop = plan.loops[p.loop]
            d = oc.space.dims.index(loop.op_dims[o.name])
            want_tile = (d, loop.tiles, bool(set(loop.staged) & set(staged_tensors_of(oc, d))))
        want = (tuple(p.division[d] for d in oc.space.dims), p.stick, p.residency, want_tile)
        found = -1
        for s, c in enumerate(problem.candidates[i]):
            lay = oc.layouts[c.layout]
            tile = None if lay.tile is None else (lay.tile.dim, lay.tile.tiles, lay.tile.staged)
            if (lay.division.factors, lay.stick, c.residency, tile) == want:
                found = s
                break
        out.append(found)
        if found < 0:
            missing.append(o.name)
    return out, missing


def term_value(problem: Problem, t: int, a) -> int:
    f = problem.formulation
    m = f.max_terms[t]
    return max(affine_value(x, m.node, f.edges, a) for x in m.alternatives)
