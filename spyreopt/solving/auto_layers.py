"""auto's layered method: each distinct segment planned once by auto's stages, stitched, then the cuts re-planned.

The split, keys, deduplication, canonical names and stitching are the one decomposition's (``solving.layers``);
this module only budgets it: a share of the search per distinct segment (a floor, the rest by ops x copies),
then optionally the ops around the cuts re-planned on the full graph (``refine_cuts``) and greedy on the whole
graph (``whole_greedy``), each kept only when cheaper.
"""

from __future__ import annotations

import time

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.limits import SEARCH_SHARE
from spyreopt.model.candidates import resolve
from spyreopt.model.formulation import Solution
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.rates import BUILD_SECONDS_PER_OP, FINISH_SECONDS_PER_OP, WHOLE_SECONDS_PER_OP
from spyreopt.solving import pipeline
from spyreopt.solving.layers import Decomposition, restricted_problem
from spyreopt.solving.segments import Segment
from spyreopt.solving.stages import MIN_STAGE_SECONDS, STAGES, Run, better, plan_problem, report, slowdown, stage

REFINE_SHARE = 0.4  # of the layers method's search budget: the cut windows' (the rest: the distinct segments')
CUTS_BACKEND = "anneal"  # re-plans the cut windows (it reached CP-SAT's bound on an 8-layer decode; CP-SAT did not)
MIN_SEGMENT_SECONDS = 2.0  # the cut windows get a share only if every distinct segment keeps at least this
SEGMENT_FLOOR_SECONDS = 0.5  # each distinct segment's budget floor; the rest goes by ops x copies
WHOLE_SHARE = 0.5  # whole-graph greedy is a layers candidate when its nominal cost fits this share of the limit


def _compute_ops(graph: Graph) -> int:
    return len(graph.compute_ops())


def solve_layers(
    graph: Graph, segs: list[Segment], hw: HardwareSpec, coef: Coefficients, time_limit: float, seed: int, run: Run
) -> Plan:
    """Plan each distinct segment once, then stitch; budgets split over the distinct segments."""
    began = time.perf_counter()
    d = Decomposition.of(graph, hw, coef, segs, "auto", {"seed": seed})
    run.timed("keys", began)
    seg_ops = [_compute_ops(s.graph) for s in d.distinct.values()]
    free = cut_ops(graph, segs)
    n_ops = _compute_ops(graph)
    finish = FINISH_SECONDS_PER_OP * n_ops
    # the windows' problem (its freed ops repeat cut after cut: the build shares their tables), then its decode
    refine_cost = BUILD_SECONDS_PER_OP * len(free) * len(d.distinct) / len(segs) + 2 * finish
    whole = WHOLE_SECONDS_PER_OP * n_ops + finish
    whole = whole if whole <= WHOLE_SHARE * time_limit else 0.0
    nominal = BUILD_SECONDS_PER_OP * sum(seg_ops) + finish + whole
    search = SEARCH_SHARE * (time_limit - nominal - refine_cost)
    refine = REFINE_SHARE * search if search * (1 - REFINE_SHARE) >= len(d.distinct) * MIN_SEGMENT_SECONDS else 0.0
    if refine:  # planned, but the segments' safety net reserves only the stitch: the windows are optional
        search *= 1 - REFINE_SHARE
    else:
        search = SEARCH_SHARE * (time_limit - nominal)
    budgets = _segment_budgets(search, seg_ops, [d.copies(key) for key in d.distinct])
    run.bar.total = STAGES * len(d.distinct) + (1 if refine else 0) + (1 if whole else 0)
    methods = []

    def plan_segment(n: int, key: str, seg: Segment) -> Plan | None:
        if run.interrupted:
            return None
        run.reserve = BUILD_SECONDS_PER_OP * sum(seg_ops[n + 1 :]) + finish + whole
        try:
            began = time.perf_counter()
            problem = restricted_problem(seg, hw, coef)
            problem.formulation  # noqa: B018 -- built here (a lazy property), so the build is timed as such
            run.timed("build", began)
            run.slowdown = slowdown(run.phases["build"], BUILD_SECONDS_PER_OP * sum(seg_ops[: n + 1]))
        except KeyboardInterrupt:
            run.interrupted = True
            return None
        sol, method = plan_problem(problem, budgets[n], seed, run, segment=n)
        if sol is None:
            return None
        sol.stats = {}
        began = time.perf_counter()
        plan = pipeline.finish(problem, sol, "auto", seed, check=False)  # checked once stitched
        run.timed("decode", began)
        methods.append(method)
        return plan

    if not d.plan(plan_segment):
        raise KeyboardInterrupt  # interrupted before every distinct segment had a valid plan
    message = f"decomposed into {len(segs)} segments at {len(segs) - 1} cuts, crossing tensors in device memory"
    began = time.perf_counter()
    try:
        plan = d.stitch(backend="auto", seed=seed, status="feasible", message=message)
    except PlanError as exc:  # not even fresh addresses make it valid: the whole graph re-planned, never given up
        plan = _replanned(graph, hw, coef, seed, run, exc)
    run.timed("stitch", began)
    refined = None
    if refine and not run.interrupted:
        run.reserve = finish + whole  # the refined plan's decode, then the whole graph's greedy
        if run.left() < (refine_cost - finish) * run.slowdown:  # the clock says no: skipped, and said so
            run.cut("cuts")
        else:
            refined = refine_cuts(graph, plan, free, hw, coef, seed, run, refine)
    plan = refined or plan
    kept = None
    if whole and not run.interrupted:
        run.reserve = 0.0
        if run.left() < whole * run.slowdown:  # the clock says no: skipped, and said so
            run.cut("whole")
        else:
            kept = whole_greedy(graph, plan, hw, coef, seed, run, whole)
    plan = kept or plan
    plan.stats["auto"] = report(
        "layers/" + "+".join(sorted(set(methods))) + ("+cuts" if refine else "") + ("+whole" if whole else ""),
        run, segments=len(segs), distinct=len(d.distinct), segment_budgets_s=[round(b, 3) for b in budgets],
        cut_ops=len(free) if refine else 0, whole_greedy_kept=kept is not None,
    )  # fmt: skip
    return plan


def whole_greedy(graph: Graph, plan: Plan, hw, coef, seed: int, run: Run, planned: float) -> Plan | None:
    """Greedy on the whole graph: its window moves may cross the cuts, where the stitched plan keeps every crossing
    tensor in device memory. Its plan if cheaper than ``plan`` (ties keep the layered one), else None."""
    began = time.perf_counter()
    try:
        problem = Problem(graph, hw, coef)
        problem.formulation  # noqa: B018 -- built here (a lazy property), so the build is timed as such
    except KeyboardInterrupt:
        run.interrupted = True
        return None
    run.timed("whole_build", began)
    start = stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, segment="whole")
    sol = better(start, stage(run, problem, "greedy", planned, seed, start, segment="whole"))
    run.done("whole: greedy")
    if sol is None:
        return None
    began = time.perf_counter()
    sol.stats = {}
    candidate = pipeline.finish(problem, sol, "auto", seed, check=False)  # checked below only if it is kept
    run.timed("whole_decode", began)
    if candidate.cost_us >= plan.cost_us:
        return None
    pipeline.check_plan(candidate, problem, "auto: the whole graph's greedy plan is invalid")
    candidate.status = plan.status  # the layers method claims feasibility only
    candidate.message = plan.message + "; whole-graph greedy was cheaper than the stitched plan, kept"
    return candidate


def _replanned(graph: Graph, hw, coef, seed: int, run: Run, why: PlanError) -> Plan:
    """Greedy on the whole graph, when the stitched plan is invalid there; recorded as a fallback."""
    problem = Problem(graph, hw, coef)
    sol = better(stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, segment="whole"),
                  stage(run, problem, "greedy", MIN_STAGE_SECONDS, seed, None, segment="whole"))  # fmt: skip
    sol.stats = {}
    plan = pipeline.finish(problem, sol, "auto", seed, what="auto: the whole graph's re-planned plan is invalid")
    plan.status, plan.message = "feasible", f"the stitched plan was invalid ({why}); the whole graph re-planned"
    if run.clock is not None:
        run.clock.fall_back("greedy (whole graph)")
    return plan


def _segment_budgets(search: float, ops: list[int], copies: list[int]) -> list[float]:
    """Each distinct segment's share of ``search`` seconds: a floor, the rest by ops x copies (a gain on a
    segment that repeats 32 times counts 32 times)."""
    floor = min(SEGMENT_FLOOR_SECONDS, max(search, 0.0) / len(ops))
    weights = [o * c for o, c in zip(ops, copies)]
    rest = max(search - floor * len(ops), 0.0)
    return [max(floor + rest * w / sum(weights), MIN_STAGE_SECONDS) for w in weights]


def cut_ops(graph: Graph, segs) -> set[str]:
    """The ops whose decisions the cuts restrict: the producer of each tensor crossing a cut and its consumers."""
    leaving = {t for seg in segs for t in seg.restrict if t not in graph.outputs}
    return {
        o.name
        for o in graph.ops.values()
        if o.kind != "view" and (o.output in leaving or any(resolve(graph, x).base in leaving for x in o.inputs))
    }


def _tiling_key(layout, space) -> tuple[str, int] | None:
    """A layout's tiled loop as a plan names it: (its tiled dim, the tile count), None when untiled."""
    return None if layout.tile is None else (space.dims[layout.tile.dim], layout.tile.tiles)


def refine_cuts(graph: Graph, plan: Plan, free: set[str], hw, coef, seed: int, run: Run, planned: float) -> Plan | None:
    """Re-plan the ops around the cuts on the full graph, every other op fixed to the stitched plan.

    The stitched plan is the start (so the result is never worse); None if it cannot be expressed (a
    stitched choice outside a freed op's candidates) or nothing better was found."""
    began = time.perf_counter()
    decided = {o.name: o for o in plan.ops}
    loops = plan.loops  # a fixed op keeps its tiled loop: (its tiled dim, the tile count, the staged tensors)
    tiling = {n: (x.op_dims[n], x.tiles, tuple(x.staged)) for x in loops for n in x.ops}
    fixed = {
        name: (
            tuple(o.division[d] for d in op_space(graph, graph.ops[name]).dims),
            o.stick,
            o.residency,
            tiling.get(name),
        )
        for name, o in decided.items()
        if name not in free
    }
    problem = Problem(graph, hw, coef, fixed=fixed)
    start = []
    for i, o in enumerate(problem.ops):
        d, space = decided[o.name], problem.cands[i].space
        match = [
            s
            for s, c in enumerate(problem.candidates[i])
            if c.residency == d.residency
            and problem.layout(i, s).stick == d.stick
            and problem.layout(i, s).division.as_dict(space) == d.division
            and _tiling_key(problem.layout(i, s), space) == (tiling[o.name][:2] if o.name in tiling else None)
        ]
        if not match:
            return None
        start.append(match[0])
    start = list(problem.normalize(start))
    address = {t.name: t.address for t in plan.tensors}
    copies = {(e.consumer, e.operand): e.copy_address for e in plan.edges}
    offsets = {("node", i): address[o.output] for i, o in enumerate(problem.ops) if address.get(o.output) is not None}
    for k, e in enumerate(problem.edges):
        if copies.get((problem.ops[e.consumer].name, e.operand)) is not None:
            offsets[("edge", k)] = copies[(problem.ops[e.consumer].name, e.operand)]
    hint = Solution(tuple(start), offsets, "feasible", problem.formulation.evaluate(start))
    run.timed("cuts_build", began)
    sol = stage(run, problem, CUTS_BACKEND, planned, seed, hint, segment="cuts")
    run.done(f"cuts: {CUTS_BACKEND}")
    if sol is None or sol.objective >= hint.objective:
        return None
    began = time.perf_counter()
    sol.stats = {}
    refined = pipeline.finish(problem, sol, "auto", seed, what="auto: the plan with re-planned cuts is invalid")
    run.timed("cuts_decode", began)
    refined.status = plan.status  # the layers method claims feasibility, whatever the windows' solver said
    refined.message = plan.message + f"; {len(free)} ops around the cuts re-planned on the full graph"
    return refined
