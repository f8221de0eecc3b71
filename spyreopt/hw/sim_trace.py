"""A plan re-derived for execution: per op, its per-core iteration boxes, owner
boxes, and for every operand where the data comes from and in which stick layout.

Slices come from the graph and the plan's divisions alone (the layout
functions of ``model.candidates`` with the span limit lifted, so the simulator
checks spans itself and names the core); addresses, edge modes and residency
are taken from the plan as written, never from its byte counts or its own
validation. Both the timing simulator and numeric execution walk this trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, GraphError, PlanError
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.candidates import Layout, OpCandidates, OperandRef, resolve
from spyreopt.model.division import core_index, iteration_box, owners
from spyreopt.model.graph import Graph, Op, Tensor
from spyreopt.model.layout import Box, span_bytes
from spyreopt.model.opspace import OpSpace, op_space
from spyreopt.model.plan import Plan

LX_MODES = ("inplace", "relayout", "restickify")
DEVICE_MODES = ("hbm", "spill")


@dataclass(frozen=True)
class Operand:
    """How operand ``j`` of an op reaches its cores."""

    index: int
    ref: OperandRef  # base tensor and view permutation
    mode: str  # leaf | inplace | relayout | restickify | hbm | spill
    producer: int | None  # op step of the base tensor's producer
    stored_stick: int  # stick dim of the base tensor where it lives
    need_stick: int  # stick dim this op reads it in (base coords)
    copy_address: int | None  # relayout / restickify copy on the consumer cores
    boxes: tuple[tuple[int, Box], ...]  # per consumer core, the box it reads (base coords)


@dataclass(frozen=True)
class Step:
    index: int
    op: Op
    space: OpSpace
    layout: Layout
    boxes: tuple[Box, ...]  # iteration box per core
    owners: tuple[int, ...]
    residency: str  # hbm | lx | lx+hbm (of the output, from the plan's tensor record)
    address: int | None
    free_step: int  # the output's scratchpad buffer is released before this step
    operands: tuple[Operand, ...]

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def cores(self) -> int:
        return self.layout.division.cores

    def peers(self, owner: int) -> list[int]:
        """Cores whose partial sums reduce onto ``owner`` (the owner first)."""
        div, red = self.layout.division, self.space.reduction
        key = [i for i, r in zip(core_index(div, owner), red) if not r]
        return [c for c in range(div.cores) if [i for i, r in zip(core_index(div, c), red) if not r] == key]


class Trace:
    def __init__(self, plan: Plan):
        try:
            self.graph = Graph.from_dict(plan.graph)
            self.hw = HardwareSpec.from_dict(plan.hardware)
            coef = Coefficients.from_dict(plan.coefficients)
        except (FormatError, GraphError) as exc:
            raise PlanError(f"plan: {exc}") from exc
        self.plan = plan
        # slices only: lift the span limit (checked below with the core named) and the capacity
        loose = self.hw.with_(span_limit_bytes=1 << 62)
        ops = [o for o in self.graph.ops.values() if o.kind != "view"]
        self.step_of = {o.name: i for i, o in enumerate(ops)}
        decisions = {o.name: o for o in plan.ops}
        missing = [o.name for o in ops if o.name not in decisions]
        if missing:
            raise PlanError(f"plan: no decision for op(s) {missing}")
        tensors = {t.name: t for t in plan.tensors}
        edges = {(e.consumer, e.operand): e for e in plan.edges}
        self.steps: list[Step] = []
        for i, o in enumerate(ops):
            d = decisions[o.name]
            space = op_space(self.graph, o)
            if set(d.division) != set(space.dims):
                raise PlanError(
                    f"op {o.name!r}: division names dims {sorted(d.division)}, iteration dims are {list(space.dims)}"
                )
            factors = tuple(int(d.division[x]) for x in space.dims)
            lay = OpCandidates(self.graph, o, loose, coef, 1, fixed=(factors, int(d.stick))).layouts[0]
            if o.output not in tensors:
                raise PlanError(f"op {o.name!r}: the plan has no record of its output tensor {o.output!r}")
            t = tensors[o.output]
            if t.residency != d.residency:
                raise PlanError(
                    f"op {o.name!r}: residency {d.residency!r}, but its tensor {t.name!r} says {t.residency!r}"
                )
            div = lay.division
            boxes = tuple(iteration_box(space, div, c) for c in range(div.cores))
            operands = tuple(self._operand(o, j, lay, edges) for j in range(len(o.inputs)))
            free = int(t.lifetime[1]) if t.residency != "hbm" and len(t.lifetime) == 2 else i + 1
            step = Step(i, o, space, lay, boxes, tuple(owners(space, div)), t.residency, t.address, free, operands)
            self._check_spans(step)
            self.steps.append(step)

    def tensor(self, name: str) -> Tensor:
        return self.graph.tensors[name]

    def _operand(self, o: Op, j: int, lay: Layout, edges: dict) -> Operand:
        ref = resolve(self.graph, o.inputs[j])
        base = self.graph.tensors[ref.base]
        last = len(base.shape) - 1
        if base.producer is None:  # graph inputs and weights live in device memory, stick on their last dim
            need = last if lay.required[j] is None else lay.required[j]
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
