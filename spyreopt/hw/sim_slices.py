"""The simulator's own reading of a plan's divisions: which slice of every tensor each core touches.

Derived from the graph, the plan's decisions and the hardware spec alone, with
none of the planner's code (its candidates, iteration spaces or divisions), so
a slicing bug in the planner shows up as a disagreement instead of being
confirmed (the separate judge of MiniMalloc's validator):

* an op iterates over its output dims (a matmul over batch dims, ``m``, ``n``
  and ``k``; a reduction over its input's dims), named as in the plan;
* a factor ``f`` splits its dim of ``U`` whole units (a stick's worth of
  elements on a dim some operand or the output is stuck on, else one element)
  into blocks of ``ceil(U/f)`` units, the last one shorter; no block may be empty;
* cores are numbered row-major over the factors; a core's block of every
  operand follows its iteration block (broadcast dims read their one element,
  views permute dims, a reshape split along dim 0 reads the rows that line up);
* the cores with index 0 on every reduced dim own the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from spyreopt.errors import PlanError
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op
from spyreopt.model.hardware import HardwareSpec

Box = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Ref:
    """An op input read through views: the tensor holding the data, and operand dim j = base dim perm[j]."""

    base: str
    perm: tuple[int, ...]


def base_of(g: Graph, name: str) -> Ref:
    perm = tuple(range(len(g.tensors[name].shape)))
    while (producer := g.tensors[name].producer) is not None and g.ops[producer].kind == "view":
        view = g.ops[producer]
        perm = tuple(view.attrs["perm"][p] for p in perm)
        name = view.inputs[0]
    return Ref(name, perm)


@dataclass(frozen=True)
class Space:
    dims: tuple[str, ...]
    extents: tuple[int, ...]
    reduction: tuple[bool, ...]
    operand_maps: tuple[tuple[int | None, ...], ...]  # per operand dim: the iteration dim, None when broadcast
    output_map: tuple[int | None, ...]  # per output dim: the iteration dim, None when reduced
    reshape: bool = False


def _aligned(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int | None, ...]:
    """Numpy broadcasting: operand dims align right; a size-1 dim against a larger one is broadcast."""
    shift = len(out) - len(shape)
    return tuple(None if d == 1 and out[i + shift] != 1 else i + shift for i, d in enumerate(shape))


def space_of(g: Graph, op: Op) -> Space:
    out = g.tensors[op.output].shape
    if op.kind == "matmul":
        a, b = (g.tensors[x].shape for x in op.inputs)
        nb = len(out) - 2
        m, n, k = nb, nb + 1, nb + 2
        batch = (lambda s: _aligned(s[:-2], out[:nb])) if nb else (lambda s: ())
        dims = tuple(f"b{i}" for i in range(nb)) + ("m", "n", "k")
        red = tuple(d == k for d in range(nb + 3))
        maps = (batch(a) + (m, k), batch(b) + (k, n))
        return Space(dims, out[:nb] + (out[-2], out[-1], a[-1]), red, maps, tuple(range(nb)) + (m, n))
    if op.kind == "reduce":
        shape = g.tensors[op.inputs[0]].shape
        red = tuple(d in op.attrs["dims"] for d in range(len(shape)))
        dims = tuple(f"d{i}" for i in range(len(shape)))
        return Space(dims, shape, red, (tuple(range(len(shape))),), tuple(None if r else d for d, r in enumerate(red)))
    if op.kind in ("pointwise", "reshape"):
        dims = tuple(f"d{i}" for i in range(len(out)))
        plain = tuple(False for _ in dims)
        if op.kind == "reshape":
            return Space(dims, out, plain, ((),), tuple(range(len(out))), reshape=True)
        return Space(
            dims, out, plain, tuple(_aligned(g.tensors[x].shape, out) for x in op.inputs), tuple(range(len(out)))
        )
    raise PlanError(f"op {op.name!r}: the simulator does not know op kind {op.kind!r}")


def project(box: Box, dim_map: tuple[int | None, ...]) -> Box:
    """A tensor's block of an iteration block; broadcast (or reduced) dims hold one element."""
    return tuple((0, 1) if d is None else box[d] for d in dim_map)


@dataclass(frozen=True)
class Slicing:
    """Every core's blocks for one op under one decision."""

    factors: tuple[int, ...]
    stick: int  # output stick dim
    required: tuple[int | None, ...]  # per operand: the stick dim it must be read in (base dims), None: any
    boxes: tuple[Box, ...]  # iteration block per core
    owner_boxes: dict[int, Box]  # core -> output block it owns
    reads: tuple[tuple[tuple[int, Box], ...], ...]  # per operand: (core, block in base dims)
    k_split: int  # cores summing partial results per owner

    @property
    def cores(self) -> int:
        return prod(self.factors)


def core_index(factors: tuple[int, ...], core: int) -> tuple[int, ...]:
    idx = []
    for f in reversed(factors):
        idx.append(core % f)
        core //= f
    return tuple(reversed(idx))


def slicing(g: Graph, op: Op, space: Space, factors: tuple[int, ...], stick: int, hw: HardwareSpec) -> Slicing:
    """The blocks of a decision; PlanError names the rule a division or stick dim breaks."""
    out = g.tensors[op.output]
    refs = [base_of(g, x) for x in op.inputs]
    rank = len(out.shape)
    if not 0 <= stick < rank or (op.kind in ("matmul", "reshape") and stick != rank - 1):
        raise PlanError(f"op {op.name!r}: output stick dim {stick} is not one a {op.kind} of rank {rank} can write")
    if prod(factors) > hw.cores:
        raise PlanError(f"op {op.name!r}: division {factors} needs {prod(factors)} cores, the machine has {hw.cores}")
    split_red = [d for d, f, r in zip(space.dims, factors, space.reduction) if r and f > 1]
    if split_red and (op.kind != "matmul" or len(split_red) > 1):
        raise PlanError(f"op {op.name!r}: division splits reduced dim(s) {split_red}")
    required = tuple(_required(g, op, space, refs, j, stick) for j in range(len(refs)))
    units = [1] * len(factors)

    def stuck(it: int | None, elem_bytes: int) -> None:
        if it is not None:
            units[it] = max(units[it], max(hw.stick_bytes // elem_bytes, 1))

    stuck(space.output_map[stick], out.elem_bytes)
    for j, ref in enumerate(refs):
        if required[j] is not None and not space.reshape:
            stuck(space.operand_maps[j][ref.perm.index(required[j])], g.tensors[ref.base].elem_bytes)
    chunks = []
    for d, e, u, f in zip(space.dims, space.extents, units, factors):
        blocks = -(-e // u)
        size = -(-blocks // f) if f >= 1 else 0
        if size < 1 or -(-blocks // size) != f:
            raise PlanError(f"op {op.name!r}: factor {f} on dim {d} ({blocks} units of {u}) leaves a block empty")
        chunks.append(size * u)
    boxes = tuple(
        tuple((i * c, min((i + 1) * c, e)) for i, c, e in zip(core_index(factors, core), chunks, space.extents))
        for core in range(prod(factors))
    )
    red_idx = [d for d, r in enumerate(space.reduction) if r]
    owners = [c for c in range(len(boxes)) if all(core_index(factors, c)[d] == 0 for d in red_idx)]
    reads = tuple(
        tuple((c, _read(g, op, space, ref, j, box, factors)) for c, box in enumerate(boxes))
        for j, ref in enumerate(refs)
    )
    return Slicing(
        tuple(factors), stick, required, boxes, {c: project(boxes[c], space.output_map) for c in owners}, reads,
        prod(f for f, r in zip(factors, space.reduction) if r),
    )  # fmt: skip


def _required(g: Graph, op: Op, space: Space, refs: list[Ref], j: int, stick: int) -> int | None:
    """A matmul reads its operands stick-on-last (A on k, B on n), a reshape its input likewise; an
    elementwise op or reduction reads each operand on the dim it iterates with the output's stick dim."""
    shape = g.tensors[op.inputs[j]].shape
    if op.kind in ("matmul", "reshape"):
        view_dim: int | None = len(shape) - 1
    else:
        dim_map = space.operand_maps[j]
        view_dim = dim_map.index(stick) if stick in dim_map else None
        if view_dim is not None and shape[view_dim] == 1:
            view_dim = None
    return None if view_dim is None else refs[j].perm[view_dim]


def _read(g: Graph, op: Op, space: Space, ref: Ref, j: int, box: Box, factors: tuple[int, ...]) -> Box:
    base_shape = g.tensors[ref.base].shape
    if not space.reshape:
        view = project(box, space.operand_maps[j])
        out: list[tuple[int, int]] = [(0, 0)] * len(view)
        for d, p in enumerate(ref.perm):
            out[p] = view[d]
        return tuple(out)
    whole = tuple((0, d) for d in base_shape)
    row_out, row_in = prod(g.tensors[op.output].shape[1:]), prod(base_shape[1:])
    lo, hi = box[0][0] * row_out, box[0][1] * row_out
    if any(f > 1 for f in factors[1:]) or factors[0] == 1 or lo % row_in or hi % row_in:
        return whole  # the rows do not line up: every core reads the whole input
    return ((lo // row_in, hi // row_in),) + whole[1:]
