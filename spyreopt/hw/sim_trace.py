"""A plan re-derived for execution: per op, its per-core iteration boxes, owner
boxes, and for every operand where the data comes from and in which stick layout.

Slices come from the graph and the plan's divisions alone, by the simulator's
own reading of them (``hw.sim_slices``, sharing no code with the planner's
candidates; spans are checked here with the core named); addresses, edge modes
and residency are taken from the plan as written, never from its byte counts or
its own validation. Both the timing simulator and numeric execution walk this trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.errors import FormatError, GraphError, PlanError
from spyreopt.hw.sim_slices import Box, Ref, Slicing, Space, base_of, core_index, slicing, space_of
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op, Tensor
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import span_bytes
from spyreopt.model.plan import Plan

LX_MODES = ("inplace", "relayout", "restickify")
DEVICE_MODES = ("hbm", "spill")


@dataclass(frozen=True)
class Operand:
    """How operand ``j`` of an op reaches its cores."""

    index: int
    ref: Ref  # base tensor and view permutation
    mode: str  # leaf | leaf+keep | kept | kept+relayout | inplace | relayout | restickify | hbm | spill
    # (``model.staging``: a leaf+keep operand is a graph input read from device memory and kept at
    # ``kept_address`` until ``keep_until``; a kept one is read there in place, a kept+relayout one gathered
    # from there into the copy at ``copy_address``; ``producer`` is then the loader's step)
    producer: int | None  # op step of the base tensor's producer
    stored_stick: int  # stick dim of the base tensor where it lives
    need_stick: int  # stick dim this op reads it in (base coords)
    copy_address: int | None  # relayout / restickify copy on the consumer cores
    boxes: tuple[tuple[int, Box], ...]  # per consumer core, the box it reads (base coords)
    keep_until: int = 0
    kept_address: int | None = None


@dataclass(frozen=True)
class Step:
    index: int
    op: Op
    space: Space
    layout: Slicing
    boxes: tuple[Box, ...]  # iteration box per core
    owners: tuple[int, ...]
    residency: str  # hbm | lx | lx+hbm (of the output, from the plan's tensor record)
    address: int | None
    free_step: int  # the output's scratchpad buffer is released before this step
    operands: tuple[Operand, ...]
    inplace_over: int | None = None  # the operand whose dying buffer the output is written over (as planned)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def cores(self) -> int:
        return self.layout.cores

    def peers(self, owner: int) -> list[int]:
        """Cores whose partial sums reduce onto ``owner`` (the owner first)."""
        factors, red = self.layout.factors, self.space.reduction
        key = [i for i, r in zip(core_index(factors, owner), red) if not r]
        return [c for c in range(self.cores) if [i for i, r in zip(core_index(factors, c), red) if not r] == key]


class Trace:
    def __init__(self, plan: Plan):
        try:
            self.graph = Graph.from_dict(plan.graph)
            self.hw = HardwareSpec.from_dict(plan.hardware)
        except (FormatError, GraphError) as exc:
            raise PlanError(f"plan: {exc}") from exc
        self.plan = plan
        ops = self.graph.compute_ops()
        self.step_of = {o.name: i for i, o in enumerate(ops)}
        decisions = {o.name: o for o in plan.ops}
        missing = [o.name for o in ops if o.name not in decisions]
        if missing:
            raise PlanError(f"plan: no decision for op(s) {missing}")
        tensors = {t.name: t for t in plan.tensors}
        edges = {(e.consumer, e.operand): e for e in plan.edges}
        self.staged = {
            t.name: t
            for t in plan.tensors
            if t.name in self.graph.tensors and self.graph.tensors[t.name].producer is None
        }
        self.steps: list[Step] = []
        for i, o in enumerate(ops):
            d = decisions[o.name]
            space = space_of(self.graph, o)
            if set(d.division) != set(space.dims):
                raise PlanError(
                    f"op {o.name!r}: division names dims {sorted(d.division)}, iteration dims are {list(space.dims)}"
                )
            factors = tuple(int(d.division[x]) for x in space.dims)
            lay = slicing(self.graph, o, space, factors, int(d.stick), self.hw)
            if o.output not in tensors:
                raise PlanError(f"op {o.name!r}: the plan has no record of its output tensor {o.output!r}")
            t = tensors[o.output]
            if t.residency != d.residency:
                raise PlanError(
                    f"op {o.name!r}: residency {d.residency!r}, but its tensor {t.name!r} says {t.residency!r}"
                )
            operands = tuple(self._operand(o, j, lay, edges) for j in range(len(o.inputs)))
            free = int(t.lifetime[1]) if t.residency != "hbm" and len(t.lifetime) == 2 else i + 1
            step = Step(
                i,
                o,
                space,
                lay,
                lay.boxes,
                tuple(lay.owner_boxes),
                t.residency,
                t.address,
                free,
                operands,
                d.inplace_over,
            )
            self._check_spans(step)
            self.steps.append(step)

    def tensor(self, name: str) -> Tensor:
        return self.graph.tensors[name]

    def _operand(self, o: Op, j: int, lay: Slicing, edges: dict) -> Operand:
        ref = base_of(self.graph, o.inputs[j])
        base = self.graph.tensors[ref.base]
        last = len(base.shape) - 1
        if base.producer is None:  # graph inputs and weights live in device memory, stick on their last dim
            need = last if lay.required[j] is None else lay.required[j]
            kept, e = self.staged.get(ref.base), edges.get((o.name, j))
            first = next(k for k, x in enumerate(o.inputs) if base_of(self.graph, x).base == ref.base)
            if kept is not None and kept.producer == o.name and j == first:
                until = int(kept.lifetime[1]) if len(kept.lifetime) == 2 else 0
                return Operand(j, ref, "leaf+keep", None, last, need, None, lay.reads[j], until, kept.address)
            if e is not None:
                if kept is None or e.mode not in ("inplace", "relayout"):
                    raise PlanError(
                        f"op {o.name!r}: operand {j} ({ref.base!r}) is a graph input with edge mode {e.mode!r}, but the plan stages no such input"
                    )
                mode, loader = ("kept" if e.mode == "inplace" else "kept+relayout"), self.step_of.get(kept.producer)
                copy = e.copy_address if e.mode == "relayout" else None
                return Operand(j, ref, mode, loader, int(kept.stick), need, copy, lay.reads[j], 0, kept.address)
            return Operand(j, ref, "leaf", None, last, need, None, lay.reads[j])
        e = edges.get((o.name, j))
        if e is None:
            raise PlanError(f"op {o.name!r}: operand {j} ({ref.base!r}) has no edge in the plan")
        producer = self.step_of[base.producer]
        stored = self.steps[producer].layout.stick
        need = stored if lay.required[j] is None else lay.required[j]
        copy = e.copy_address if e.mode in ("relayout", "restickify") else None
        return Operand(j, ref, e.mode, producer, stored, need, copy, lay.reads[j])

    def _check_spans(self, s: Step) -> None:
        """A core may address at most ``span_limit_bytes`` of one tensor in device memory."""
        limit, sb = self.hw.span_limit_bytes, self.hw.stick_bytes
        out = self.tensor(s.op.output)
        checks = []
        if s.residency != "lx":
            checks += [(c, out, box, s.layout.stick) for c, box in s.layout.owner_boxes.items()]
        for od in s.operands:
            if od.mode in ("leaf", "hbm", "spill"):
                checks += [(c, self.tensor(od.ref.base), box, od.need_stick) for c, box in od.boxes]
        for c, t, box, stick in checks:
            span = span_bytes(box, t.shape, stick, t.elem_bytes, sb)
            if span > limit:
                raise PlanError(
                    f"op {s.name!r} at step {s.index}: core {c} addresses a span of {span} bytes of tensor {t.name!r} "
                    f"in device memory, above the span limit {limit}; the division must split it further"
                )


def kept_slices(trace: Trace, od: Operand) -> dict[int, Box]:
    """Core -> box of a staged input its loader keeps (``od.producer`` is the loader's step), one core per
    distinct box (the lowest: a replicated slice is gathered from one holder)."""
    loader = trace.steps[od.producer]
    keep = next(x for x in loader.operands if x.mode == "leaf+keep" and x.ref.base == od.ref.base)
    out: dict[int, Box] = {}
    for c, box in sorted(keep.boxes):
        if box not in out.values():
            out[c] = box
    return out
