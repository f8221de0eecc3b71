"""The simulator's own reading of a plan's tiled loops: per iteration, every core's blocks.

Tile ``t`` of a tiled dim of extent ``E`` over ``T`` tiles is ``[t*E/T, (t+1)*E/T)``;
the op's core division applies within the tile, so a core's block of tile ``t`` is
its division block scaled by ``1/T`` and shifted to the tile. Derived from the
trace (``hw.sim_trace``, the simulator's own slicing) and the loop records only:
never from the planner's candidates nor from the plan validator. A loop's steps
must be contiguous in the schedule (the validator says why, ``model.check.loops``);
here a loop that cannot be walked tile by tile is a PlanError naming the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spyreopt.errors import PlanError
from spyreopt.hw.sim_slices import Box, project
from spyreopt.hw.sim_trace import Operand, Step, Trace


@dataclass(frozen=True)
class Loop:
    index: int
    steps: tuple[Step, ...]
    dims: tuple[int, ...]  # per step: the tiled iteration dim (index into its space)
    tiles: int
    staged: frozenset[str]
    accumulate: bool
    footprint_bytes: int

    @property
    def label(self) -> str:
        return f"loop {self.index} ({', '.join(s.name for s in self.steps)})"

    @property
    def first(self) -> int:
        return self.steps[0].index

    def accumulates(self, k: int) -> bool:
        """Step ``k`` of the loop reduces over its tiled dim (partial results kept on chip)."""
        return self.steps[k].space.reduction[self.dims[k]]

    def varies(self, k: int, od: Operand) -> bool:
        """Operand ``od`` of step ``k`` changes from tile to tile (it has the tiled dim)."""
        return self.dims[k] in self.steps[k].space.operand_maps[od.index]

    def inside(self, od: Operand) -> bool:
        return od.producer is not None and od.producer in {s.index for s in self.steps}


def loops_of(trace: Trace) -> list[Loop]:
    """The plan's loops as walkable step sequences (PlanError if a loop cannot be walked)."""
    out = []
    for i, spec in enumerate(trace.plan.loops):
        label = f"loop {i} ({', '.join(spec.ops)})"
        unknown = [n for n in spec.ops if n not in trace.step_of]
        if unknown:
            raise PlanError(f"{label}: op(s) {unknown} are not compute ops of the graph")
        idx = [trace.step_of[n] for n in spec.ops]
        if idx != list(range(idx[0], idx[0] + len(idx))):
            raise PlanError(f"{label}: ops are not contiguous in schedule order")
        steps = tuple(trace.steps[x] for x in idx)
        dims = []
        for s in steps:
            name = spec.op_dims.get(s.name)
            if name not in s.space.dims:
                raise PlanError(f"{label}: op {s.name!r} tiles {name!r}, not one of its dims {list(s.space.dims)}")
            if s.space.reshape:
                raise PlanError(f"{label}: op {s.name!r} is a reshape, which a loop cannot tile")
            d = s.space.dims.index(name)
            e, f = s.space.extents[d], s.layout.factors[d]
            if spec.tiles < 1 or e % (spec.tiles * f):
                raise PlanError(f"{label}: op {s.name!r} dim {name!r} of {e} does not split into {spec.tiles} x {f}")
            dims.append(d)
        out.append(
            Loop(i, steps, tuple(dims), int(spec.tiles), frozenset(spec.staged), bool(spec.accumulate),
                 int(spec.footprint_bytes))
        )  # fmt: skip
    return out


def _tile(box: Box, dim: int, extent: int, tiles: int, t: int) -> Box:
    lo, hi = box[dim]
    base = t * (extent // tiles)
    return box[:dim] + ((base + lo // tiles, base + hi // tiles),) + box[dim + 1 :]


def _base(view_box: Box, perm: tuple[int, ...]) -> Box:
    out: list[tuple[int, int]] = [(0, 0)] * len(view_box)
    for d, p in enumerate(perm):
        out[p] = view_box[d]
    return tuple(out)


def _read(box: Box, dim_map: tuple[int | None, ...], perm: tuple[int, ...]) -> Box:
    """An operand's block (base coords) of an iteration block."""
    return _base(project(box, dim_map), perm)


def tile_step(loop: Loop, k: int, t: int) -> Step:
    """Step ``k`` of the loop restricted to tile ``t``: iteration, owner and operand boxes of that tile."""
    s, d = loop.steps[k], loop.dims[k]
    e = s.space.extents[d]
    boxes = tuple(_tile(b, d, e, loop.tiles, t) for b in s.boxes)
    owners = {c: project(boxes[c], s.space.output_map) for c in s.layout.owner_boxes}
    ops = tuple(
        replace(od, boxes=tuple((c, _read(boxes[c], s.space.operand_maps[od.index], od.ref.perm)) for c, _ in od.boxes))
        for od in s.operands
    )
    layout = replace(s.layout, boxes=boxes, owner_boxes=owners)
    return replace(s, layout=layout, boxes=boxes, operands=ops)


def staged_boxes(loop: Loop, tensor: str) -> dict[int, tuple[Box, int, int]]:
    """Per core, the bounding block of a staged tensor every op of the loop reads there, the stick dim
    the ops read it in and the one it is stored in."""
    out: dict[int, tuple[Box, int, int]] = {}
    for s in loop.steps:
        for od in s.operands:
            if od.ref.base != tensor:
                continue
            for c, b in od.boxes:
                old = out.get(c, (b,))[0]
                box = tuple((min(x0, y0), max(x1, y1)) for (x0, x1), (y0, y1) in zip(old, b))
                out[c] = (box, od.need_stick, od.stored_stick)
    return out
