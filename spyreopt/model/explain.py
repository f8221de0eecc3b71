"""Why a plan is what it is: each op's choice against its best alternatives, each edge's mode, from the tables.

``explain(plan)`` rebuilds the plan's Problem (its graph, hardware and coefficients) and finds the plan's
assignment among the Formulation's candidates. An *alternative* is one op's other candidate (division, stick,
tiling, residency) with every other decision as planned: its cost is the Formulation's exact objective of that
assignment (the cheaper balance twin of every op it touches, as ``Problem.normalize`` picks), so it equals the
cost of the plan with that one decision pinned (``fixed_cost``). An alternative loses by the price of its own
time and of each neighbouring edge whose mode it changes, or is impossible: a pair the tables forbid (a loop's
rule, no legal edge mode), or the scratchpad over capacity at a named step, with the buffers live there.
Staging bits stay as planned. "Fits" means the usage at every step is within capacity; the addresses of the
changed plan would be placed anew (fragmentation is not checked). The records and their text are
``model.explanation``; the rebuilt Problem ``model.explain_problem``; the one-op changes ``model.explain_search``.
"""

from __future__ import annotations

from spyreopt.errors import PlanError
from spyreopt.model.explain_search import Search
from spyreopt.model.explanation import Explanation
from spyreopt.model.plan_data import PlanData


def explain(plan: PlanData, op: str | None = None, progress=None) -> Explanation:
    """Every op's explanation (or only ``op``'s and its edges'), and every edge not in place; ``progress(done,
    total)`` is called as ops are explained."""
    names = {o.name for o in plan.ops}
    if op is not None and op not in names:
        raise PlanError(
            f"plan has no op {op!r}; ops: {', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''}"
        )
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
