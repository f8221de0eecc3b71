"""What the loop judge reads from the graph and a plan: each op's iteration dims (``op_dims``), views followed
to the tensor holding the data (``base_tensor``), every core's block of a tile, and one loop's ops with their
dims, factors and tiled dim (``Loop``). Nothing here comes from the planner's candidates or iteration spaces."""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.errors import PlanError
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import Box, elems_per_stick
from spyreopt.model.plan_data import PlanData


@dataclass(frozen=True)
class OpDims:
    """An op's iteration dims as this judge reads them from the graph."""

    names: tuple[str, ...]
    extents: tuple[int, ...]
    reduced: tuple[bool, ...]
    operands: tuple[tuple[int | None, ...], ...]  # per operand dim (view coords): iteration dim, None if broadcast
    output: tuple[int | None, ...]  # per output dim: iteration dim, None if reduced
    stuck: tuple[tuple[int, str], ...]  # (iteration dim, tensor) pairs where that tensor's stick dim lies


def _right(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int | None, ...]:
    shift = len(out) - len(shape)
    return tuple(None if d == 1 and out[i + shift] != 1 else i + shift for i, d in enumerate(shape))


def base_tensor(g: Graph, name: str) -> tuple[str, tuple[int, ...]]:
    """The tensor holding ``name``'s data through views, and per view dim the base dim it reads."""
    perm = tuple(range(len(g.tensors[name].shape)))
    while (p := g.tensors[name].producer) is not None and g.ops[p].kind == "view":
        perm = tuple(g.ops[p].attrs["perm"][x] for x in perm)
        name = g.ops[p].inputs[0]
    return name, perm


def op_dims(g: Graph, op: Op, stick: int) -> OpDims:
    """Iteration dims of a compute op with output stick dim ``stick``; PlanError for an op a loop cannot tile."""
    out = g.tensors[op.output].shape
    if op.kind == "matmul":
        a, b = (g.tensors[x].shape for x in op.inputs)
        nb = len(out) - 2
        m, n, k = nb, nb + 1, nb + 2
        bat = (lambda s: _right(s[:-2], out[:nb])) if nb else (lambda s: ())
        stuck = ((k, base_tensor(g, op.inputs[0])[0]), (n, base_tensor(g, op.inputs[1])[0]), (n, op.output))
        return OpDims(
            tuple(f"b{i}" for i in range(nb)) + ("m", "n", "k"), out[:nb] + (out[-2], out[-1], a[-1]),
            tuple(d == k for d in range(nb + 3)), (bat(a) + (m, k), bat(b) + (k, n)), tuple(range(nb)) + (m, n), stuck,
        )  # fmt: skip
    names = tuple(f"d{i}" for i in range(len(out)))
    if op.kind == "pointwise":
        maps = tuple(_right(g.tensors[x].shape, out) for x in op.inputs)
        stuck = ((stick, op.output),) + tuple(
            (stick, base_tensor(g, x)[0]) for x, mp in zip(op.inputs, maps) if stick in mp
        )
        return OpDims(names, out, (False,) * len(out), maps, tuple(range(len(out))), stuck)
    if op.kind == "reduce":
        shape = g.tensors[op.inputs[0]].shape
        red = tuple(d in op.attrs["dims"] for d in range(len(shape)))
        stuck = ((stick, op.output), (stick, base_tensor(g, op.inputs[0])[0]))
        return OpDims(
            names, shape, red, (tuple(range(len(shape))),), tuple(None if r else d for d, r in enumerate(red)), stuck
        )
    raise PlanError(f"op {op.name!r}: a {op.kind} cannot be tiled in a loop (only matmul, pointwise and reduce ops)")


def tile_box(box: Box, dim: int, extent: int, tiles: int, t: int) -> Box:
    """A core's block within tile ``t``: the division's block of dim ``dim`` scaled into the tile."""
    lo, hi = box[dim]
    step = extent // tiles
    new = (t * step + lo // tiles, t * step + hi // tiles)
    return box[:dim] + (new,) + box[dim + 1 :]


def blocks(extents: tuple[int, ...], factors: tuple[int, ...], units: tuple[int, ...]) -> list[Box]:
    """Every core's iteration block, cores row-major over the factors: each factor splits its dim into blocks
    of ``ceil(units / f)`` whole units (a stick's worth of elements on a dim some tensor is stuck on), the last
    one shorter (uneven) or clamped to the extent."""
    boxes: list[Box] = [()]
    for e, f, u in zip(extents, factors, units):
        whole = -(-e // u)  # the dim's whole units
        c = -(-whole // f) * u
        boxes = [b + ((i * c, min((i + 1) * c, e)),) for b in boxes for i in range(f)]
    return boxes


def project(box: Box, dim_map: tuple[int | None, ...]) -> Box:
    """A box of the iteration space seen by a tensor whose dims map to ``dim_map`` (None: broadcast)."""
    return tuple((0, 1) if d is None else box[d] for d in dim_map)


def to_base(view_box: Box, perm: tuple[int, ...]) -> Box:
    """A box of a view in its base tensor's dims."""
    out: list[tuple[int, int]] = [(0, 0)] * len(view_box)
    for d, p in enumerate(perm):
        out[p] = view_box[d]
    return tuple(out)


def readers_of(g: Graph) -> dict[str, list[tuple[Op, int]]]:
    """Tensor -> the compute ops reading it (through views) with the operand index: built once per check, since
    a scan per question took 7 of the 16 s of validating llama-3-8b's stitched plan (64 loops)."""
    index: dict[str, list[tuple[Op, int]]] = {}
    for op in g.compute_ops():
        for j, x in enumerate(op.inputs):
            index.setdefault(base_tensor(g, x)[0], []).append((op, j))
    return index


class Loop:
    """One loop's ops with their dims, factors and tiled dim, read from the plan and the graph; ``readers``:
    ``readers_of(g)``, passed when several loops of one graph are read."""

    def __init__(self, plan: PlanData, g: Graph, hw: HardwareSpec, index: int, readers: dict | None = None):
        self.g, self.hw, self.index = g, hw, index
        self.readers = readers_of(g) if readers is None else readers
        self.spec = plan.loops[index]
        self.decisions = {o.name: o for o in plan.ops}
        self.edges = {(e.consumer, e.operand): e for e in plan.edges}
        self.tensors = {t.name: t for t in plan.tensors}
        self.names = list(self.spec.ops)
        self.dims = {n: op_dims(g, g.ops[n], int(self.decisions[n].stick)) for n in self.names}
        self.it: dict[str, int] = {}
        for n in self.names:
            name = self.spec.op_dims.get(n)
            if name not in self.dims[n].names:
                raise self.error(
                    f"op {n!r} tiles dim {name!r}, which is not one of its iteration dims {list(self.dims[n].names)}"
                )
            self.it[n] = self.dims[n].names.index(name)

    def error(self, text: str) -> PlanError:
        return PlanError(f"loop {self.index} ({', '.join(self.spec.ops)}): {text}")

    def factors(self, n: str) -> tuple[int, ...]:
        return tuple(int(self.decisions[n].division.get(d, 1)) for d in self.dims[n].names)

    def reduces(self, n: str) -> bool:
        return self.dims[n].reduced[self.it[n]]

    def core_boxes(self, n: str) -> list[Box]:
        """Each core's iteration block within tile 0."""
        d = self.dims[n]
        return [
            tile_box(b, self.it[n], d.extents[self.it[n]], self.spec.tiles, 0)
            for b in blocks(d.extents, self.factors(n), self.units(n))
        ]

    def units(self, n: str) -> tuple[int, ...]:
        """Per iteration dim, the elements of one stick of the widest-stick tensor stuck on it, else 1."""
        d, sb = self.dims[n], self.hw.stick_bytes
        eps = [elems_per_stick(self.g.tensors[t].elem_bytes, sb) for _, t in d.stuck]
        return tuple(max([e for (dim, _), e in zip(d.stuck, eps) if dim == i], default=1) for i in range(len(d.names)))

    def owner_boxes(self, n: str) -> dict[int, Box]:
        """Core -> the block of the output it holds in tile 0 (the cores at index 0 of every reduced dim)."""
        d, f = self.dims[n], self.factors(n)
        red = [i for i, r in enumerate(d.reduced) if r]
        out = {}
        for c, box in enumerate(self.core_boxes(n)):
            idx, rest = [], c
            for x in reversed(f):
                idx.append(rest % x)
                rest //= x
            if all(idx[::-1][i] == 0 for i in red):
                out[c] = project(box, d.output)
        return out
