"""Why a plan is what it is: each op's choice against its best alternatives, each edge's mode, from the tables.

``explain(plan)`` rebuilds the plan's Problem (its graph, hardware and coefficients) and finds the plan's
assignment among the Formulation's candidates. An *alternative* is one op's other candidate (division, stick,
tiling, residency) with every other decision as planned: its cost is the Formulation's exact objective of that
assignment (the cheaper balance twin of every op it touches, as ``Problem.normalize`` picks), so it equals the
cost of the plan with that one decision pinned (``fixed_cost``). An alternative loses by the price of its own
time and of each neighbouring edge whose mode it changes, or is impossible: a pair the tables forbid (a loop's
rule, no legal edge mode), or the scratchpad over capacity at a named step, with the buffers live there.
Staging bits stay as planned. "Fits" means the usage at every step is within capacity; the addresses of the
changed plan would be placed anew (fragmentation is not checked). Rendering is ``model.explain_text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.model.formulation import affine_value
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.model.staging import plan_masks
from spyreopt.model.tiling import staged_tensors, staged_tensors_of

Tiling = tuple[str, int, tuple[str, ...]]  # (dim in the op's naming, tile count, staged tensor names)


@dataclass(frozen=True)
class Choice:
    """One op's decision: what ``pin`` names (division, residency, tiling) and the output stick dim."""

    division: dict[str, int]
    stick: int
    residency: str
    tiling: Tiling | None = None


@dataclass
class Alternative:
    kind: str  # "best" (cheapest other candidate) | "alone" (cheapest op time on its own) | "residency"
    choice: Choice
    alone_us: float  # the op's own time with this choice, its producers' edges left out
    cost_us: float | None  # the whole plan's cost with this choice, every other decision as planned; None: impossible
    reasons: list[str] = field(default_factory=list)  # the price of each change, or what makes it impossible


@dataclass
class OpExplanation:
    op: str
    kind: str
    chosen: Choice
    cores: int
    predicted_us: float
    breakdown: dict[str, float]
    alone_us: float
    alternatives: list[Alternative]
    note: str = ""  # pinned, or fixed outside the enumerated candidates


@dataclass
class EdgeExplanation:
    tensor: str
    producer: str
    consumer: str
    operand: int
    mode: str
    cost_us: float | None  # the edge's additive time plus its device-memory read (before overlap); None: staged
    reasons: list[str]


@dataclass
class Explanation:
    graph: str
    cost_us: float
    ops: list[OpExplanation]
    edges: list[EdgeExplanation]
    notes: list[str]

    def text(self, op: str | None = None) -> str:
        from spyreopt.model.explain_text import render

        return render(self, op)


def build_problem(plan: Plan, fixed: dict[str, tuple] | None = None) -> Problem:
    """The plan's Problem: every candidate of every op (but ``fixed`` ops), staging bits as the plan has them."""
    graph = Graph.from_dict(plan.graph)
    compute = [o for o in graph.ops.values() if o.kind != "view"]
    masks = plan_masks(graph, compute, plan.tensors, plan.edges)
    return Problem(
        graph, HardwareSpec.from_dict(plan.hardware), Coefficients.from_dict(plan.coefficients),
        fixed=fixed or None, stage_masks=masks,
    )  # fmt: skip


def plan_decisions(plan: Plan) -> dict[str, tuple]:
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


def fixed_cost(plan: Plan, op: str, choice: Choice) -> float:
    """The predicted cost (µs) of the plan with op's decision replaced by ``choice``, every other op fixed as
    planned: an independent Problem of one candidate per op, normalised and evaluated."""
    graph = Graph.from_dict(plan.graph)
    decisions = plan_decisions(plan)
    dims = op_space(graph, graph.ops[op]).dims
    decisions[op] = (tuple(choice.division[d] for d in dims), choice.stick, choice.residency, choice.tiling)
    problem = build_problem(plan, decisions)
    return problem.formulation.evaluate(problem.normalize([0] * len(problem.ops))) * COST_UNIT_US


def explain(plan: Plan, op: str | None = None, progress=None) -> Explanation:
    """Every op's explanation (or only ``op``'s and its edges'), and every edge not in place; ``progress(done,
    total)`` is called as ops are explained."""
    names = {o.name for o in plan.ops}
    if op is not None and op not in names:
        raise PlanError(
            f"plan has no op {op!r}; ops: {', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''}"
        )
    from spyreopt.model.explain_search import Search

    s = Search(plan)
    want = range(len(s.problem.ops)) if op is None else [s.problem.step[op]]
    ops = []
    for n, i in enumerate(want):
        if progress is not None:
            progress(n, len(want))
        ops.append(s.explain_op(i))
    if progress is not None:
        progress(len(want), len(want))
    edges = [
        s.explain_edge(e) for e in plan.edges if e.mode != "inplace" and (op is None or op in (e.producer, e.consumer))
    ]
    return Explanation(plan.graph.get("name", "graph"), plan.cost_us, ops, edges, s.notes)


def choice_of(problem: Problem, i: int, s: int) -> Choice:
    """Candidate s of op i as a Choice."""
    lay = problem.layout(i, s)
    oc = problem.cands[i]
    tiling = None
    if lay.tile is not None:
        tiling = (oc.space.dims[lay.tile.dim], lay.tile.tiles, tuple(staged_tensors(oc, lay)))
    return Choice(lay.division.as_dict(oc.space), lay.stick, problem.candidates[i][s].residency, tiling)


def locate(problem: Problem, plan: Plan) -> tuple[list[int], list[str]]:
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
