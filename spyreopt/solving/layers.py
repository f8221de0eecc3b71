"""The one layer decomposition: split, key, deduplicate, plan each distinct segment once, stitch.

The graph is split where one tensor crosses the schedule (``segments.split``); segments with the same canonical
key (identical layers) are planned once, and every copy reuses that plan relabelled to its own names. The stitched
plan is then re-derived on the full graph (its edges, lifetimes and cost come from the full Problem with every op
fixed to its segment's decision) and validated. ``Decomposition`` does all of that for both of its users, which
differ only in how one segment is planned: ``decompose="layers"`` (``solve`` below: one backend per distinct
segment, through the plan cache when one is given) and ``backend="auto"`` (``auto_layers``: stage budgets by
segment, then the cuts re-planned).

What the decomposition fixes: every tensor crossing a cut goes through device memory, stick on its last dim, and
so does every graph output's layout when the graph is split; no segment stages an input (``model.staging``). With
that fixed the problem separates exactly, so each segment's optimum is the optimum of the fixed problem; the
unrestricted whole-graph optimum may be lower (it may keep a crossing tensor in scratchpad). The stitched plan
therefore never claims "optimal" and carries no bound. ``time_limit`` applies to each distinct segment solve.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from spyreopt.cache.key import Canonical, digest, key_payload
from spyreopt.cache.relabel import to_canonical
from spyreopt.cache.store import PlanCache
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.errors import PlanError, SolverError
from spyreopt.model.formulation import Solution
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solving import cached, pipeline
from spyreopt.solving.segments import Segment, split

STATUS_ORDER = ("optimal", "feasible", "timeout")

PlanSegment = Callable[[int, str, Segment], "Plan | None"]  # (distinct index, key, segment) -> its plan, None: stop


@dataclass
class Decomposition:
    """A graph's segments, their canonical keys, the distinct ones (in schedule order) and their plans."""

    graph: Graph
    hw: HardwareSpec
    coef: Coefficients
    segs: list[Segment]
    keyed: list[tuple[str, Canonical, Segment]]  # per segment: its key and renaming
    distinct: dict[str, Segment]  # key -> the first segment with it
    solved: dict[str, dict] = field(default_factory=dict)  # key -> its plan in canonical names

    @classmethod
    def of(cls, graph: Graph, hw: HardwareSpec, coef: Coefficients, segs: list[Segment], backend: str, opts: dict):
        """Key every segment as ``backend`` with ``opts`` would solve it (the cache's key) and deduplicate."""
        keyed = []
        for seg in segs:
            payload, canon = key_payload(seg.graph, backend, opts, hardware=hw, coefficients=coef, extra=seg.extra())
            keyed.append((digest(payload), canon, seg))
        distinct: dict[str, Segment] = {}
        for key, _, seg in keyed:
            distinct.setdefault(key, seg)
        return cls(graph, hw, coef, segs, keyed, distinct)

    def canon(self, key: str) -> Canonical:
        return next(c for k, c, _ in self.keyed if k == key)

    def copies(self, key: str) -> int:
        return sum(k == key for k, _, _ in self.keyed)

    def plan(self, plan_segment: PlanSegment, progress: bool = False) -> bool:
        """Plan each distinct segment once (``plan_segment``), kept in canonical names; False when it stopped."""
        items = list(self.distinct.items())
        for n, (key, seg) in enumerate(
            tqdm(items, disable=not progress, desc="decompose", unit="segment", leave=False)
        ):
            plan = plan_segment(n, key, seg)
            if plan is None:
                return False
            self.solved[key] = to_canonical(plan, self.canon(key))
        return True

    def parts(self) -> list[tuple[dict, Canonical]]:
        return [(self.solved[key], canon) for key, canon, _ in self.keyed]

    def stitch(self, *, backend: str, seed: int, status: str, message: str) -> Plan:
        """One validated plan of the full graph from the segments' plans; PlanError when even fresh addresses
        cannot make it valid (the caller then re-plans the whole graph)."""
        return stitch(self.graph, self.hw, self.coef, self.parts(), backend=backend, seed=seed, status=status,
                      message=message)  # fmt: skip


def restricted_problem(seg: Segment, hw: HardwareSpec, coef: Coefficients) -> Problem:
    """The segment's Problem with each restricted op keeping only the candidates the cut allows, and no input
    staging: a tensor entering the segment is an input of the segment graph but an activation of the full graph,
    which cannot stage it, and ``stitch`` fixes every op with no staging bits; so the segment's optimum is the
    stitched plan's cost (identical layers keep one key, the first one included)."""
    p = Problem(seg.graph, hw, coef, staging=False)
    for tensor, (residencies, stick) in seg.restrict.items():
        i = p.step[seg.graph.tensors[tensor].producer]
        keep = [
            c for c in p.candidates[i] if c.residency in residencies and p.cands[i].layouts[c.layout].stick == stick
        ]
        if not keep:
            raise SolverError(
                f"decompose: op {p.ops[i].name!r} cannot write {tensor!r} to device memory stick-on-last "
                f"(needed to cut the schedule after it); solve without decompose"
            )
        p.candidates[i] = keep  # before the formulation is first built, so every table sees the restriction
    return p


def solve(
    graph: Graph,
    backend: str,
    *,
    time_limit: float,
    seed: int,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    cache: PlanCache | None = None,
    **options: Any,
) -> Plan:
    """``decompose="layers"``: plan each distinct segment with ``backend`` (through ``cache``), then stitch;
    ``plan.stats["decomposition"]`` says how many were solved vs reused. After Ctrl-C the remaining segments
    get greedy's plan (valid, fast, never cached)."""
    start = time.perf_counter()
    graph.check()
    hw, coef = hardware or HardwareSpec(), coefficients or default()
    segs = split(graph, hw, coef)
    if len(segs) == 1:
        common = dict(time_limit=time_limit, seed=seed, hardware=hw, coefficients=coef, **options)
        if cache is None:
            plan, hits = pipeline.run(graph, backend, **common), 0
        else:
            plan, hit = cached.through(cache, graph, backend, **common)
            hits = int(hit)
        plan.stats["decomposition"] = {"segments": 1, "distinct": 1, "reused": 0, "cuts": []}
        plan.stats.setdefault("timing", {})["decomposition"] = {"solved": 1 - hits, "cache_hits": hits}
        return plan
    d = Decomposition.of(graph, hw, coef, segs, backend, {"time_limit": time_limit, "seed": seed, **options})
    count = {"solved": 0, "hits": 0, "interrupted": False}

    def plan_segment(n: int, key: str, seg: Segment) -> Plan:
        plan = cache.get(key, d.canon(key), seg.graph, hw, coef) if cache is not None else None
        if plan is not None:
            count["hits"] += 1
            return plan
        try:
            plan = pipeline.run(restricted_problem(seg, hw, coef), "greedy" if count["interrupted"] else backend,
                                time_limit=time_limit, seed=seed, **({} if count["interrupted"] else options))  # fmt: skip
        except KeyboardInterrupt:
            count["interrupted"] = True
            plan = pipeline.run(restricted_problem(seg, hw, coef), "greedy", time_limit=time_limit, seed=seed)
        count["solved"] += 1
        if cache is not None and not count["interrupted"]:
            cache.put(key, plan, d.canon(key))
        return plan

    d.plan(plan_segment, progress=sys.stderr.isatty())
    statuses = [data["status"] for data, _ in d.parts()]
    worst = max(STATUS_ORDER.index(s) if s in STATUS_ORDER else len(STATUS_ORDER) for s in statuses)
    timeout = worst >= STATUS_ORDER.index("timeout")
    status = "interrupted" if count["interrupted"] else "timeout" if timeout else "feasible"
    message = (
        f"decomposed into {len(segs)} segments at {len(segs) - 1} cuts, {len(d.distinct)} distinct; "
        f"crossing tensors fixed to device memory stick-on-last, so optimal per segment at best"
    )
    try:
        plan = d.stitch(backend=backend, seed=seed, status=status, message=message)
    except PlanError as exc:  # not even fresh addresses make it valid: the whole graph re-planned, never given up
        plan = pipeline.run(graph, "greedy", time_limit=time_limit, seed=seed, hardware=hw, coefficients=coef)
        plan.message = f"the stitched plan was invalid ({exc}); the whole graph re-planned by greedy"
        plan.stats.setdefault("limits", {"cut": [], "fallback": None})["fallback"] = "greedy (whole graph)"
    plan.solve_seconds = round(time.perf_counter() - start, 6)
    plan.stats["decomposition"] = {
        "segments": len(segs),
        "distinct": len(d.distinct),
        "reused": len(segs) - len(d.distinct),
        "cuts": [
            [s.start, sorted(t for t in prev.restrict if t in s.graph.tensors)] for prev, s in zip(segs, segs[1:])
        ],
        "segment_status": statuses,
        "segments_cost_us": sum(data["cost_us"] for data, _ in d.parts()),
    }
    plan.stats["timing"]["decomposition"] = {
        "solved": count["solved"], "cache_hits": count["hits"], "seconds": plan.solve_seconds,
    }  # fmt: skip
    return plan


def stitch(
    graph: Graph,
    hw: HardwareSpec,
    coef: Coefficients,
    parts: list[tuple[dict, Canonical]],
    *,
    backend: str,
    seed: int,
    status: str,
    message: str,
) -> Plan:
    """One plan of the full graph from stored segment plans (canonical names, with each segment's renaming):
    decisions and addresses carried over, edges, lifetimes and costs re-derived on the full graph."""
    decisions, addresses, copies, tilings = {}, {}, {}, {}
    for data, canon in parts:
        ops = {v: k for k, v in canon.op_names.items()}
        tensors = {v: k for k, v in canon.tensor_names.items()}
        decisions.update({ops[o["name"]]: o for o in data["ops"]})
        for o in data["ops"]:  # a segment's tiled loop: the op's tiled dim and count, the loop's staged tensors
            if o.get("loop") is not None:
                x = data["loops"][o["loop"]]
                tilings[ops[o["name"]]] = (x["op_dims"][o["name"]], x["tiles"], tuple(tensors[t] for t in x["staged"]))
        addresses.update({tensors[t["name"]]: t["address"] for t in data["tensors"]})
        copies.update({(ops[e["consumer"]], e["operand"]): e["copy_address"] for e in data["edges"]})
    fixed = {}
    for name, o in decisions.items():
        dims = op_space(graph, graph.ops[name]).dims
        fixed[name] = (tuple(o["division"][d] for d in dims), o["stick"], o["residency"], tilings.get(name))
    problem = Problem(graph, hw, coef, fixed=fixed)
    assignment = problem.normalize([0] * len(problem.ops))
    offsets = {}
    for i, o in enumerate(problem.ops):
        if addresses.get(o.output) is not None:
            offsets[("node", i)] = addresses[o.output]
    for k, e in enumerate(problem.edges):
        addr = copies.get((problem.ops[e.consumer].name, e.operand))
        if addr is not None:
            offsets[("edge", k)] = addr
    objective = problem.formulation.evaluate(assignment)
    sol = Solution(tuple(assignment), offsets, status, objective, message=message)
    try:
        return pipeline.finish(problem, sol, backend, seed, what="decompose: the stitched plan is invalid")
    except PlanError as exc:
        return _replaced(problem, sol, backend, seed, exc.__cause__ or exc)


def _replaced(problem: Problem, sol: Solution, backend: str, seed: int, why: BaseException) -> Plan:
    """The stitched decisions with addresses placed afresh on the full graph: the segments' addresses can be
    wrong there, since the fixed full Problem may pair ops the segments' Problems did not (an op's interval is
    widened over a loop only while a tiled candidate of it exists, so fixing it untiled makes it the last reader
    of a donor, ``model.inplace``: its output must then take that operand's address). Raises PlanError when the
    decisions cannot be placed either."""
    offsets = place_assignment(problem.formulation, sol.assignment, seed=seed)
    if offsets is None:
        raise PlanError(f"decompose: the stitched plan is invalid ({why}) and its buffers cannot be placed afresh")
    note = f"; addresses re-placed on the full graph (the segments' were invalid there: {why})"
    fresh = Solution(sol.assignment, offsets, sol.status, sol.objective, message=sol.message + note)
    plan = pipeline.finish(
        problem, fresh, backend, seed, what="decompose: the stitched plan is invalid even with fresh addresses"
    )
    plan.stats["stitch_repair"] = {"replaced_addresses": True, "why": str(why)}
    return plan
