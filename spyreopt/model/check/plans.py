"""The plan check: every hard constraint of a plan re-derived from its own graph, hardware and coefficients,
independently of whichever solver made it, against the one-candidate Problem of the plan's choices.

The judge is given what it judges: ``check_plan(plan, problem)`` takes the plan and, when its caller holds it,
that Problem (``fixed_problem`` uses it only if it is exactly the one it would build); nothing is handed over
any other way.
"""

from __future__ import annotations

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, GraphError, PlanError
from spyreopt.model.candidates import resolve
from spyreopt.model.check.loops import check_loops
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.inplace import lifetime
from spyreopt.model.opspace import op_space
from spyreopt.model.plan_data import PlanData
from spyreopt.model.problem import Problem
from spyreopt.model.staging import decoded, plan_masks

COST_TOLERANCE_US = 1e-6


def fixed_problem(plan: PlanData, reuse: Problem | None = None) -> Problem:
    """The one-candidate Problem of the plan's choices (raises PlanError on an illegal choice). ``reuse``: a
    Problem the caller built with every op fixed (a planner's stitched whole model), returned when it is the one
    this would build (equal graph, hardware, coefficients, decisions and staging bits), saving half the check."""
    try:
        graph = Graph.from_dict(plan.graph)
        hw = HardwareSpec.from_dict(plan.hardware)
        coef = Coefficients.from_dict(plan.coefficients)
    except (FormatError, GraphError) as exc:
        raise PlanError(f"plan: {exc}") from exc
    ops = {o.name: o for o in plan.ops}
    compute = graph.compute_ops()
    missing = [o.name for o in compute if o.name not in ops]
    if missing:
        raise PlanError(f"plan: no decision for op(s) {missing}")
    extra = sorted(set(ops) - {o.name for o in compute})
    if extra:
        raise PlanError(f"plan: decisions for unknown op(s) {extra}")
    fixed = {}
    for o in compute:
        p = ops[o.name]
        dims = op_space(graph, o).dims
        if set(p.division) != set(dims):
            raise PlanError(f"op {o.name!r}: division names dims {sorted(p.division)}, iteration dims are {list(dims)}")
        tiling = None
        if p.loop is not None:
            if not 0 <= p.loop < len(plan.loops) or o.name not in plan.loops[p.loop].op_dims:
                raise PlanError(f"op {o.name!r}: loop {p.loop} does not list it")
            loop = plan.loops[p.loop]
            tiling = (loop.op_dims[o.name], loop.tiles, tuple(loop.staged))
        fixed[o.name] = (tuple(int(p.division[d]) for d in dims), int(p.stick), p.residency, tiling)
    masks = plan_masks(graph, compute, plan.tensors, plan.edges)
    if reuse is not None and (reuse.fixed, reuse.stage_masks or {}, reuse.hw, reuse.coef) == (fixed, masks, hw, coef):
        if reuse.graph.to_dict() == plan.graph:
            return reuse
    return Problem(graph, hw, coef, fixed=fixed, stage_masks=masks)


def check_plan(plan: PlanData, problem: Problem | None = None) -> None:
    """Raise PlanError naming the constraint, op, buffer and numbers if any hard constraint fails: the loops
    first (``check.loops``), then every decision against ``fixed_problem(plan, reuse=problem)``."""
    check_loops(plan)
    prob = fixed_problem(plan, reuse=problem)
    names = {t.name for t in plan.tensors}
    if len(names) != len(plan.tensors):
        raise PlanError("plan: duplicate tensor entries")
    missing = [o.output for o in prob.ops if o.output not in names]
    if missing:
        raise PlanError(f"plan: no decision for tensor(s) {missing}")
    base = [0] * len(prob.ops)
    decisions = {o.name: o for o in plan.ops}
    for i, o in enumerate(prob.ops):
        p = decisions[o.name]
        lay = prob.layout(i, 0)
        if p.cores != lay.division.cores:
            raise PlanError(f"op {o.name!r}: plan says {p.cores} cores, division uses {lay.division.cores}")
    assignment = prob.normalize(base)
    _check_edges(plan, prob, assignment)
    _check_buffers(plan, prob, assignment)
    cost = prob.total_ps(assignment) * 1e-6
    if abs(cost - plan.cost_us) > COST_TOLERANCE_US * max(1.0, cost):
        raise PlanError(f"plan: cost_us {plan.cost_us} but the cost model gives {cost} for these decisions")


def _check_edges(plan: PlanData, prob: Problem, a) -> None:
    by_key = {(e.consumer, e.operand): e for e in plan.edges}
    if len(by_key) != len(plan.edges):
        raise PlanError("plan: duplicate edge entries")
    _check_staged(plan, prob, a)
    for k, e in enumerate(prob.edges):
        cons, prod_ = prob.ops[e.consumer].name, prob.ops[e.producer].name
        pe = by_key.get((cons, e.operand))
        if pe is None:
            raise PlanError(f"edge {prod_!r} -> {cons!r} (operand {e.operand}): missing from the plan")
        info = prob.pair(k, a[e.producer], a[e.consumer])
        if info is None:
            res = prob.candidates[e.producer][0].residency
            raise PlanError(
                f"edge {prod_!r} -> {cons!r}: tensor {e.tensor!r} is resident ({res}) but the consumer's slices do not "
                f"match and no legal relayout exists (destination cores must be a multiple of source cores, fan-in <= "
                f"{prob.hw.relayout_fan_in}); it must go through device memory"
            )
        if pe.mode != info.mode:
            raise PlanError(f"edge {prod_!r} -> {cons!r}: plan says mode {pe.mode!r}, the decisions give {info.mode!r}")
        if pe.copy_bytes_per_core != info.copy_bytes:
            raise PlanError(
                f"edge {prod_!r} -> {cons!r}: copy of {pe.copy_bytes_per_core} bytes per core, needs {info.copy_bytes}"
            )
    outputs = {t.output for t in prob.ops}
    staged_reads = sum(1 for e in plan.edges if e.tensor not in outputs)
    if len(plan.edges) - staged_reads != len(prob.edges):
        raise PlanError(f"plan: {len(plan.edges) - staged_reads} edges, graph has {len(prob.edges)}")


def _check_buffers(plan: PlanData, prob: Problem, a) -> None:
    """Every resident buffer and copy: size, lifetime, alignment, capacity, no overlap while live."""
    f = prob.formulation
    cap, align = prob.hw.planner_lx_bytes, prob.hw.stick_bytes
    buffers = []
    records = {t.name: t for t in plan.tensors}
    for i, o in enumerate(prob.ops):
        t = records[o.output]
        n = f.nodes[i]
        size = int(n.usages[a[i]])
        if t.residency != prob.candidates[i][0].residency:
            raise PlanError(
                f"tensor {t.name!r}: residency {t.residency!r} differs from its op's {prob.candidates[i][0].residency!r}"
            )
        if size == 0:
            if t.address is not None:
                raise PlanError(f"tensor {t.name!r}: in device memory but has scratchpad address {t.address}")
            continue
        if t.bytes_per_core != size:
            raise PlanError(f"tensor {t.name!r}: {t.bytes_per_core} bytes per core recorded, slice needs {size}")
        lo, hi = lifetime(prob, i, a)
        if len(t.lifetime) != 2 or t.lifetime[0] > lo or t.lifetime[1] < hi:
            raise PlanError(f"tensor {t.name!r}: lifetime {t.lifetime} does not cover producer to last use {[lo, hi]}")
        buffers.append((f"tensor {t.name!r}", t.address, size, tuple(t.lifetime)))
    outputs = {o.output for o in prob.ops}
    for t in plan.tensors:  # kept graph inputs (``model.staging``), checked equal to the decisions' by _check_staged
        if t.name not in outputs:
            buffers.append((f"staged input {t.name!r}", t.address, t.bytes_per_core, tuple(t.lifetime)))
    for e in plan.edges:  # relayout copies of staged inputs (checked equal to the decisions' by _check_staged)
        if e.tensor not in outputs and e.copy_bytes_per_core:
            buffers.append(
                (
                    f"copy of staged input {e.tensor!r} for {e.consumer!r}",
                    e.copy_address,
                    e.copy_bytes_per_core,
                    tuple(e.lifetime),
                )
            )
    by_key = {(e.consumer, e.operand): e for e in plan.edges}
    for k, e in enumerate(prob.edges):
        pe = by_key[(prob.ops[e.consumer].name, e.operand)]
        if pe.copy_bytes_per_core:
            buffers.append(
                (
                    f"copy of {e.tensor!r} for {pe.consumer!r}",
                    pe.copy_address,
                    pe.copy_bytes_per_core,
                    f.edges[k].interval,
                )
            )
    for name, addr, size, _ in buffers:
        if addr is None:
            raise PlanError(f"{name}: resident but has no scratchpad address")
        if addr % align:
            raise PlanError(f"{name}: address {addr} is not a multiple of the {align}-byte stick")
        if addr < 0 or addr + size > cap:
            raise PlanError(f"{name}: [{addr}, {addr + size}) lies outside the scratchpad capacity {cap}")
    shared, wrong = check_inplace(plan, prob)
    _check_overlaps(buffers, shared, wrong)
    if wrong:
        raise PlanError(next(iter(wrong.values())))


def _check_overlaps(buffers: list, shared: set[tuple[str, str]] = frozenset(), wrong: dict | None = None) -> None:
    """No two buffers live at the same step overlap in address; the first such pair in order is named.
    ``shared``: (buffer written over, output) label pairs of legal in-place writes, which may; ``wrong``: why
    the other claimed in-place writes are not legal, by label pair (added to the overlap's message).

    A sweep over lifetimes: only pairs live together are compared (not every pair)."""
    order = sorted(range(len(buffers)), key=lambda x: buffers[x][3][0])
    live: list[int] = []
    clash = None
    for x in order:
        _, ax, sx, lx = buffers[x]
        live = [y for y in live if buffers[y][3][1] > lx[0]]
        for y in live:
            _, ay, sy, ly = buffers[y]
            if lx[0] < ly[1] and ly[0] < lx[1] and ax < ay + sy and ay < ax + sx:
                if (buffers[y][0], buffers[x][0]) in shared or (buffers[x][0], buffers[y][0]) in shared:
                    continue
                pair = (min(x, y), max(x, y))
                clash = pair if clash is None else min(clash, pair)
        live.append(x)
    if clash is not None:
        (na, aa, sa, la), (nb, ab, sb, lb) = buffers[clash[0]], buffers[clash[1]]
        step = max(la[0], lb[0])
        why = (wrong or {}).get((na, nb)) or (wrong or {}).get((nb, na))
        raise PlanError(
            f"{na} at [{aa}, {aa + sa}) and {nb} at [{ab}, {ab + sb}) overlap in scratchpad at step {step}"
            + (f" ({why})" if why else "")
        )


def check_inplace(plan: PlanData, prob: Problem) -> tuple[set[tuple[str, str]], dict[tuple[str, str], str]]:
    """Every op writing in place (``OpPlan.inplace_over``) does it legally: a pointwise op whose output has the
    operand's shape and dtype, read element for element; the operand is an op's on-chip output (not a graph
    output) or a staged input, read in place here for the last time; each core writes its output slice, in
    the operand's stick and size, at the operand's address over exactly the slice it read. Returns the
    (operand buffer, output buffer) label pairs that may then share addresses at this op's step, and why each
    other claimed pair is not a legal in-place write."""
    records = {t.name: t for t in plan.tensors}
    edges = {(e.consumer, e.operand): e for e in plan.edges}
    outputs = {o.output for o in prob.ops}
    decisions = {p.name: p for p in plan.ops}
    shared: set[tuple[str, str]] = set()
    wrong: dict[tuple[str, str], str] = {}
    readers: dict[str, list[int]] = {}  # base tensor -> the ops reading it, in schedule order (once each)
    for i, o in enumerate(prob.ops):
        for base in dict.fromkeys(resolve(prob.graph, x).base for x in o.inputs):
            readers.setdefault(base, []).append(i)
    for i, o in enumerate(prob.ops):
        j = decisions[o.name].inplace_over
        if j is None:
            continue
        base = resolve(prob.graph, o.inputs[j]).base if 0 <= j < len(o.inputs) else "?"
        pair = (f"tensor {base!r}" if base in outputs else f"staged input {base!r}", f"tensor {o.output!r}")
        why = _inplace_error(plan, prob, i, j, records, edges, readers)
        if why:
            wrong[pair] = f"op {o.name!r} writes in place over operand {j}: {why}"
        else:
            shared.add(pair)
    return shared, wrong


def _inplace_error(
    plan: PlanData, prob: Problem, i: int, j: int, records: dict, edges: dict, readers: dict
) -> str | None:
    """Why op i's write over operand j is not a legal in-place write (None: it is)."""
    g, o = prob.graph, prob.ops[i]
    if not 0 <= j < len(o.inputs):
        return f"it has {len(o.inputs)} operands"
    ref = resolve(g, o.inputs[j])
    donor, out = g.tensors[ref.base], g.tensors[o.output]
    if o.kind != "pointwise":
        return f"only a pointwise op may, this is a {o.kind}"
    if donor.shape != out.shape or donor.dtype != out.dtype or ref.perm != tuple(range(len(out.shape))):
        return f"{ref.base!r} {donor.shape} {donor.dtype} is not read element for element like its output {out.shape}"
    if ref.base in g.outputs:
        return f"{ref.base!r} is a graph output"
    later = [prob.ops[k].name for k in readers.get(ref.base, ()) if k > i]
    if later:
        return f"{ref.base!r} is still read later, by {later}"
    d, t = records.get(ref.base), records[o.output]
    if d is None or d.residency == "hbm" or d.address is None:
        return f"{ref.base!r} is not in the scratchpad"
    js = [k for k, x in enumerate(o.inputs) if resolve(g, x).base == ref.base]
    for k in js:
        e = edges.get((o.name, k))
        if e is None or e.mode != "inplace":
            return f"operand {k} ({ref.base!r}) is not read in place (mode {None if e is None else e.mode!r})"
    if "lx" not in t.residency or t.address != d.address or t.bytes_per_core != d.bytes_per_core:
        return (
            f"its output ({t.residency}, address {t.address}, {t.bytes_per_core} bytes) is not on chip at "
            f"{ref.base!r}'s address {d.address} with its size {d.bytes_per_core}"
        )
    lay = prob.layout(i, 0)
    if lay.tile is not None or o.name in {n for lp in plan.loops for n in lp.ops}:
        return "it runs in a tiled loop"
    if lay.stick != d.stick or any(dict(lay.reads[k]) != lay.owner_boxes for k in js):
        return f"its per-core output slices (stick {lay.stick}) are not the slices it reads (stick {d.stick})"
    if list(d.lifetime) != [d.lifetime[0], i + 1] or t.lifetime[0] != i:
        return f"{ref.base!r} must live until this op (lifetime {d.lifetime}) and its output start here ({t.lifetime})"
    return None


def _check_staged(plan: PlanData, prob: Problem, a) -> None:
    """The plan's staged inputs and their reads are exactly those its decisions give (size, stick, lifetime,
    and every read allowed: the loader keeps the slices each reader core needs)."""
    f = prob.formulation
    for k in range(len(prob.edges), len(f.edges)):
        edge = f.edges[k]
        if not edge.is_allowed(a[edge.u], a[edge.v]):
            raise PlanError(
                f"op {prob.ops[edge.v].name!r}: reads a staged input whose loader {prob.ops[edge.u].name!r} does not "
                f"keep the slices it needs (same cores, boxes and stick)"
            )
    outputs = {o.output for o in prob.ops}
    want_t, want_e = decoded(prob, a, {})
    got_t = sorted(((t.name, t.producer, t.residency, t.stick, t.bytes_per_core, list(t.lifetime)) for t in plan.tensors
                    if t.name not in outputs), key=str)  # fmt: skip
    exp_t = sorted(
        ((t.name, t.producer, t.residency, t.stick, t.bytes_per_core, list(t.lifetime)) for t in want_t), key=str
    )
    if got_t != exp_t:
        raise PlanError(f"plan: staged inputs {got_t} differ from what the decisions give {exp_t}")
    got_e = sorted(_staged_read(e) for e in plan.edges if e.tensor not in outputs)
    exp_e = sorted(_staged_read(e) for e in want_e)
    if got_e != exp_e:
        raise PlanError(f"plan: reads of staged inputs {got_e} differ from what the decisions give {exp_e}")


def _staged_read(e) -> tuple:
    return (e.tensor, e.producer, e.consumer, e.operand, e.mode, e.copy_bytes_per_core, list(e.lifetime), e.fan_in)
