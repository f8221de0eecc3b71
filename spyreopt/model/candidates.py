"""Per-op layout candidates (division x output stick dim) with their slices and costs.

This is where Spyre's per-op rules live: stick requirements of each op kind, the
span limit, padded slice sizes and DMA requests. What a pair of layouts takes
(in place, relayout, restickify) is ``model.edge_analysis``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from copy import copy
from dataclasses import dataclass
from functools import lru_cache
from math import ceil, prod
from operator import itemgetter

from spyreopt.costmodel import analytic as cm
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import PlanError
from spyreopt.model import memo
from spyreopt.model.division import (
    Division,
    chunk,
    enumerate_divisions,
    fills,
    label,
    largest,
    legal_factors,
    parse_label,
    project,
    reduction_split,
)
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import TRANSCENDENTAL, Op, Tensor
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import (
    Box,
    box_extents,
    box_padded_bytes,
    contiguous_runs,
    elems_per_stick,
    span_bytes,
)
from spyreopt.model.opspace import OpSpace, op_space
from spyreopt.model.tiling_rules import Tile, first_tile, invariant, rereads


@dataclass(frozen=True)
class OperandRef:
    """An op input resolved through views to the tensor that holds the data."""

    base: str
    perm: tuple[int, ...]  # operand dim j is base dim perm[j]

    def to_base(self, box: Box) -> Box:
        out: list[tuple[int, int]] = [(0, 0)] * len(box)
        for j, d in enumerate(self.perm):
            out[d] = box[j]
        return tuple(out)


def resolve(g: Graph, name: str) -> OperandRef:
    perm = tuple(range(len(g.tensors[name].shape)))
    while True:
        producer = g.tensors[name].producer
        if producer is None or g.ops[producer].kind != "view":
            return OperandRef(name, perm)
        view = g.ops[producer]
        perm = tuple(view.attrs["perm"][p] for p in perm)
        name = view.inputs[0]


@dataclass(frozen=True)
class Layout:
    """One (division, output stick dim) choice of an op, with everything derived from it."""

    division: Division
    stick: int  # output stick dim
    compute_ns: float
    psum_ns: float
    owner_boxes: dict[int, Box]  # core -> output box
    footprint: int  # LX bytes per core of the output slice (padded)
    write_bytes: int  # padded bytes written when the output goes to device memory
    reads: tuple[tuple[tuple[int, Box], ...], ...]  # per operand: (core, box in base coords)
    required: tuple[int | None, ...]  # per operand: required stick dim in base coords (None: any)
    write_requests: int  # DMA requests of that write
    stream_bytes: int  # most bytes one core streams (its operand slices, or its output slice): sets the overlap
    tile: Tile | None = None  # run inside a tiled loop (``model.tiling``); slices and boxes stay the untiled ones


def op_signature(g: Graph, op: Op) -> tuple:
    """Everything an op's layouts depend on besides the hardware: kind, attributes, output shape and
    dtype, and per operand its view shape, view permutation, base shape and dtype (never a name)."""
    ins = []
    for x in op.inputs:
        ref = resolve(g, x)
        base = g.tensors[ref.base]
        ins.append((g.tensors[x].shape, ref.perm, base.shape, base.dtype))
    out = g.tensors[op.output]
    return (op.kind, repr(sorted(op.attrs.items())), out.shape, out.dtype, tuple(ins))


class OpCandidates:
    """All legal layouts of one op.

    Layouts, enumerations and read sizes are pure functions of the op's signature, the hardware and the
    coefficients, so every op with the same three shares them process-wide (``model.memo``): a segment, the
    stitched whole graph and the plan check of a model enumerate each distinct op once."""

    def __init__(
        self,
        g: Graph,
        op: Op,
        hw: HardwareSpec,
        coef: Coefficients,
        max_layouts: int,
        fixed: tuple[tuple[int, ...], int] | None = None,
    ):
        self.op = op
        self.space: OpSpace = op_space(g, op)
        self.out: Tensor = g.tensors[op.output]
        self.refs = tuple(resolve(g, x) for x in op.inputs)
        self.g, self.hw, self.coef = g, hw, coef
        self.memo = memo.op_memo((op_signature(g, op), hw, coef))
        self._sizes: dict[tuple, tuple[int, int, int]] = self.memo.sizes
        if fixed is not None:
            self.layouts = [self.checked_layout(*fixed)]
        else:
            if max_layouts not in self.memo.enumerated:
                self.memo.enumerated[max_layouts] = tuple(self._enumerate(max_layouts))
            self.layouts = list(self.memo.enumerated[max_layouts])

    def like(self, g: Graph, op: Op) -> OpCandidates:
        """The candidates of another op with the same ``op_signature``: layouts and sizes shared, not recomputed."""
        twin = copy(self)
        twin.op, twin.out, twin.g = op, g.tensors[op.output], g
        twin.refs = tuple(resolve(g, x) for x in op.inputs)
        return twin

    def checked_layout(self, factors: tuple[int, ...] | str, stick: int) -> Layout:
        """The layout of a given division (factors, or a label such as ``"m:4 x n:8"``) and stick dim,
        or PlanError saying which rule it breaks."""
        name, space = self.op.name, self.space
        if isinstance(factors, str):
            factors = parse_label(factors, space.dims)
        rank = len(self.out.shape)
        if not 0 <= stick < rank:
            raise PlanError(f"op {name!r}: stick dim {stick} out of range for output rank {rank}")
        if self.op.kind in ("matmul", "reshape") and stick != rank - 1:
            raise PlanError(
                f"op {name!r}: a {self.op.kind} writes its output stick-on-last (dim {rank - 1}), not {stick}"
            )
        if len(factors) != len(space.dims):
            raise PlanError(f"op {name!r}: division has {len(factors)} factors, iteration space {space.dims}")
        required = self._required(stick)
        units = self._units(stick, required)
        named = label(dict(zip(space.dims, factors)))
        if prod(factors) > self.hw.cores:
            raise PlanError(f"op {name!r}: division {named} uses {prod(factors)} cores, more than {self.hw.cores}")
        splits = [d for d, f, red in zip(space.dims, factors, space.reduction) if red and f > 1]
        if len(splits) > 1:
            raise PlanError(f"op {name!r}: division splits {len(splits)} reduction dims {splits}; at most one")
        for d, f, e, u, red, ok in zip(
            space.dims, factors, space.extents, units, space.reduction, space.splittable_reduction
        ):
            if red and not ok and f > 1:
                raise PlanError(f"op {name!r}: division splits reduced dim {d} of a {self.op.kind}")
            what = f"{-(-e // u)} sticks" if u > 1 else f"{e} elements"
            if not fills(e, u, f):
                raise PlanError(f"op {name!r}: factor {f} on dim {d} leaves a part empty ({what} in {f} parts)")
            if f not in legal_factors(e, u, self.hw.cores):
                raise PlanError(
                    f"op {name!r}: factor {f} on dim {d} does not divide its extent ({what}) and is not a power "
                    f"of two up to the core count"
                )
        chunks = tuple(chunk(e, u, f) for e, u, f in zip(space.extents, units, factors))
        lay = self._layout(Division(tuple(factors), chunks), stick, required)
        if lay is None:
            raise PlanError(f"op {name!r}: division {named} gives a core a span above {self.hw.span_limit_bytes} bytes")
        return lay

    # ---- stick rules -------------------------------------------------------
    def _required(self, stick: int) -> tuple[int | None, ...]:
        """Stick dim each operand must be in (base coords), given the output stick dim."""
        out = []
        for j, ref in enumerate(self.refs):
            rank = len(self.g.tensors[self.op.inputs[j]].shape)
            if self.op.kind == "matmul":
                view_dim: int | None = rank - 1
            elif self.op.kind == "reshape":
                view_dim = rank - 1
            else:
                dim_map = self.space.operand_maps[j]
                view_dim = dim_map.index(stick) if stick in dim_map else None
                if view_dim is not None and self.g.tensors[self.op.inputs[j]].shape[view_dim] == 1:
                    view_dim = None
            out.append(None if view_dim is None else ref.perm[view_dim])
        return tuple(out)

    def _units(self, stick: int, required: tuple[int | None, ...]) -> tuple[int, ...]:
        """Elements per split unit of each iteration dim: a stick where a tensor is stuck on it."""
        stick_bytes = self.hw.stick_bytes
        units = [1] * len(self.space.extents)
        out_it = self.space.output_map[stick]
        if out_it is not None:
            units[out_it] = max(units[out_it], elems_per_stick(self.out.elem_bytes, stick_bytes))
        for j, ref in enumerate(self.refs):
            if required[j] is None or self.space.reshape_input:
                continue
            view_dim = ref.perm.index(required[j])
            it = self.space.operand_maps[j][view_dim]
            if it is not None:
                eb = self.g.tensors[ref.base].elem_bytes
                units[it] = max(units[it], elems_per_stick(eb, stick_bytes))
        return tuple(units)

    # ---- enumeration -------------------------------------------------------
    def _enumerate(self, max_layouts: int) -> list[Layout]:
        rank = len(self.out.shape)
        # matmuls and reshapes write stick-on-last; pointwise ops and reductions may also
        # keep the second-to-last dim innermost (a transposed flow, or a reduction off the stick)
        sticks = [rank - 1] if self.op.kind in ("matmul", "reshape") or rank < 2 else [rank - 1, rank - 2]
        kept: list[Layout] = []
        for stick in sticks:
            if self.out.shape[stick] == 1 and stick != rank - 1:
                continue
            required = self._required(stick)
            units = self._units(stick, required)
            divisions = enumerate_divisions(self.space, units, self.hw.cores)
            split = {True: [], False: []}
            for d in divisions:
                split[_even(d, self.space.extents, units)].append(d)
            # uneven divisions are extra candidates with their own (smaller) quota: they never displace the
            # even ones, so a shape that has good even divisions keeps every candidate it had without them
            even, uneven = split[True], split[False]
            kept.extend(self._best(even, stick, required, max_layouts))
            kept.extend(self._best(uneven, stick, required, max(max_layouts // 2, 1)))
        return kept

    def is_even(self, lay: Layout) -> bool:
        """The layout's division splits every dim into equal parts (no shorter last part)."""
        return _even(lay.division, self.space.extents, self._units(lay.stick, lay.required))

    def _best(self, divisions: list[Division], stick: int, required, max_layouts: int) -> list[Layout]:
        """The layouts worth keeping among ``divisions``: the largest core counts (within 4x of the best
        legal one), then the ``max_layouts`` fastest alone and the half as many fastest in compute."""
        divisions = sorted(divisions, key=lambda d: (-d.cores, round(self._compute_ns(d, stick), 6), d.factors))
        group: list[Layout] = []
        top = None
        for div in divisions:
            if top is not None and div.cores * 4 < top:
                break
            lay = self._layout(div, stick, required)
            if lay is not None:
                top = top or div.cores
                group.append(lay)
        # two rankings, so both kinds of good layout survive: fastest alone with every operand
        # read from device memory (replication counted), and fastest compute (best when operands are on chip)
        by_alone = sorted(group, key=lambda lay: (round(self._isolated_ns(lay), 6), lay.division.factors))
        by_compute = sorted(
            group,
            key=lambda lay: (round(lay.compute_ns + lay.psum_ns + lay.write_bytes / 1e4, 6), lay.division.factors),
        )
        chosen = by_alone[:max_layouts]
        chosen += [lay for lay in by_compute[: max(max_layouts // 2, 1)] if lay not in chosen]
        return chosen

    def _isolated_ns(self, lay: Layout) -> float:
        """The op's time with every operand read from device memory (replicated reads counted): a ranking key
        (once per layout the memo built: enumerations and tiled rankings sort the same layouts again)."""
        t = memo.token(lay)
        if t is None:
            return self._new_isolated_ns(lay)
        if ("isolated", t) not in self.memo.derived:
            self.memo.derived[("isolated", t)] = self._new_isolated_ns(lay)
        return self.memo.derived[("isolated", t)]

    def _new_isolated_ns(self, lay: Layout) -> float:
        reads = requests = 0
        for j, r in enumerate(self.refs):
            stick = lay.required[j] if lay.required[j] is not None else len(self.g.tensors[r.base].shape) - 1
            reads += self.hbm_read_bytes(lay, j, stick)
            requests += self.hbm_read_requests(lay, j, stick)
        coef = self.coef
        mem = cm.transfer_ns(coef, reads + lay.write_bytes, requests + lay.write_requests)
        mem += cm.mixed_ns(coef, reads, lay.write_bytes)
        return float(cm.overlap(coef, lay.compute_ns, mem, cm.overlap_fraction(coef, lay.stream_bytes)) + lay.psum_ns)

    def _layout(self, div: Division, stick: int, required: tuple[int | None, ...]) -> Layout | None:
        """The layout of a division and output stick dim (``required`` follows from the stick), None when a
        span is over the limit; built once per op key."""
        return self.memo.layout((div.factors, div.chunks, stick), lambda: self._new_layout(div, stick, required))

    def _new_layout(self, div: Division, stick: int, required: tuple[int | None, ...]) -> Layout | None:
        """Cores in row-major order over the factors (``division.core_index``); spans, padded sizes and DMA
        requests computed once per distinct slice (most cores' slices repeat, or share their extents)."""
        hw, coef, space = self.hw, self.coef, self.space
        limit, sb = hw.span_limit_bytes, hw.stick_bytes
        ranges = [
            [(i * c, min((i + 1) * c, e)) for i in range(f)] for f, c, e in zip(div.factors, div.chunks, space.extents)
        ]
        boxes = list(itertools.product(*ranges))  # == [iteration_box(space, div, c) for c in range(div.cores)]
        red = [d for d, r in enumerate(space.reduction) if r]
        out_map = space.output_map
        wide = [box + ((0, 1),) for box in boxes]  # index len(dims): the (0, 1) of a dim the iteration lacks
        projected = _project(wide, out_map)  # == project(box, out_map)
        own = {c: projected[c] for c, box in enumerate(boxes) if all(box[d][0] == 0 for d in red)}  # k index 0
        eb = self.out.elem_bytes
        own_sizes = {}
        for box in own.values():
            if box not in own_sizes:
                if span_bytes(box, self.out.shape, stick, eb, sb) > limit:
                    return None
                own_sizes[box] = box_padded_bytes(box, stick, eb, sb)
        reads = []
        streamed = [0] * div.cores
        for j, ref in enumerate(self.refs):
            base = self.g.tensors[ref.base]
            rstick = required[j] if required[j] is not None else len(base.shape) - 1
            if space.reshape_input:
                per_core = [(c, self._read_box(j, ref, box, div)) for c, box in enumerate(boxes)]
            else:  # to_base(project(box, map)): base dim d is view dim perm.index(d), iteration dim map[...]
                src = [space.operand_maps[j][ref.perm.index(d)] for d in range(len(ref.perm))]
                per_core = list(enumerate(_project(wide, src)))
            padded = {}
            for _, rbox in per_core:
                if rbox not in padded:
                    if span_bytes(rbox, base.shape, rstick, base.elem_bytes, sb) > limit:
                        return None
                    padded[rbox] = box_padded_bytes(rbox, rstick, base.elem_bytes, sb)
            for c, rbox in per_core:
                streamed[c] += padded[rbox]
            reads.append(tuple(per_core))
        footprint = max(own_sizes[b] for b in own.values())
        write = sum(own_sizes[b] for b in own.values())
        distinct = Counter(own.values())  # owners of equal boxes issue equal requests
        write_requests = sum(dma_requests(b, self.out.shape, stick, eb, hw) * n for b, n in distinct.items())
        compute = self._compute_ns(div, stick)
        k = reduction_split(space, div)
        psum = float(cm.psum_ns(coef, footprint, k)) if self.op.kind == "matmul" else 0.0
        stream = max(max(streamed, default=0), footprint)
        return Layout(div, stick, compute, psum, own, footprint, write, tuple(reads), required, write_requests, stream)

    def _read_box(self, j: int, ref: OperandRef, box: Box, div: Division) -> Box:
        base_shape = self.g.tensors[ref.base].shape
        if self.space.reshape_input:
            return self._reshape_read(box, div, base_shape)
        return ref.to_base(project(box, self.space.operand_maps[j]))

    def _reshape_read(self, box: Box, div: Division, in_shape: tuple[int, ...]) -> Box:
        """A reshape split only along dim 0 reads a dim-0 block when the blocks line up; else everything."""
        whole = tuple((0, d) for d in in_shape)
        out_shape = self.out.shape
        if any(f > 1 for f in div.factors[1:]):
            return whole
        f = div.factors[0]
        inner_out = prod(out_shape[1:])
        inner_in = prod(in_shape[1:])
        lo, hi = box[0][0] * inner_out, box[0][1] * inner_out
        if f == 1 or lo % inner_in or hi % inner_in:
            return whole
        return ((lo // inner_in, hi // inner_in),) + whole[1:]

    def compute_terms(self, div: Division, stick: int) -> tuple[bool, int, int, bool, bool]:
        """(matmul, work per core, rows per core, transcendental, reduces along the stick): what
        ``analytic.compute_ns`` turns into time."""
        space = self.space
        part = largest(space, div)  # core 0's slice: the largest, which sets the op's time
        per_core = prod(part)
        if self.op.kind == "matmul":
            return True, per_core, part[len(space.dims) - 3], False, False
        fn = self.op.attrs.get("fn", "copy")
        stick_reduce = self.op.kind == "reduce" and stick in self.op.attrs["dims"]
        return False, per_core, 1, fn in TRANSCENDENTAL and self.op.kind == "pointwise", stick_reduce

    def _compute_ns(self, div: Division, stick: int) -> float:
        """Once per (division, stick) of the op key: the enumeration ranks divisions by it, then builds them."""
        key = ("compute", div.factors, div.chunks, stick)
        if key not in self.memo.derived:
            self.memo.derived[key] = float(cm.compute_ns(self.coef, *self.compute_terms(div, stick)))
        return self.memo.derived[key]

    # ---- reads from device memory -----------------------------------------
    def hbm_read_bytes(self, lay: Layout, j: int, base_stick: int) -> int:
        """Total padded bytes all cores read of operand j (replicated reads counted per core)."""
        return self._read_sizes(lay, j, base_stick)[0]

    def max_read_bytes(self, lay: Layout, j: int, base_stick: int) -> int:
        """Largest padded slice of operand j one core reads: the size of a consumer-side copy."""
        return self._read_sizes(lay, j, base_stick)[1]

    def hbm_read_requests(self, lay: Layout, j: int, base_stick: int) -> int:
        """DMA requests all cores issue to read operand j from device memory stored with stick ``base_stick``."""
        return self._read_sizes(lay, j, base_stick)[2]

    def _read_sizes(self, lay: Layout, j: int, base_stick: int) -> tuple[int, int, int]:
        """(total, largest, requests); inside a loop an operand without the tiled dim is read every iteration."""
        key = (lay.division.factors, lay.stick, lay.tile, j, base_stick)  # what the sizes depend on (not an id,
        if key not in self._sizes:  # which a discarded layout's successor may reuse)
            once = ("once", lay.division.factors, lay.stick, j, base_stick)  # a tiled layout reads as its base
            if once not in self._sizes:
                base = self.g.tensors[self.refs[j].base]
                total = largest = requests = 0
                for b, n in Counter(b for _, b in lay.reads[j]).items():  # each distinct slice once, times readers
                    size = box_padded_bytes(b, base_stick, base.elem_bytes, self.hw.stick_bytes)
                    total, largest = total + size * n, max(largest, size)
                    requests += dma_requests(b, base.shape, base_stick, base.elem_bytes, self.hw) * n
                self._sizes[once] = (total, largest, requests)
            total, largest, requests = self._sizes[once]
            again = rereads(self.space, lay.tile, j)
            if lay.tile is not None and not invariant(self.space, lay.tile, j):
                requests = self._tile_requests(lay, j, base_stick)  # a tile's blocks: shorter runs, more requests
            self._sizes[key] = (total * again, largest, requests * again)
        return self._sizes[key]

    def _tile_requests(self, lay: Layout, j: int, base_stick: int) -> int:
        """DMA requests to read operand j one tile at a time: each core's block cut along the tiled dim."""
        tile, ref = lay.tile, self.refs[j]
        base = self.g.tensors[ref.base]
        view_dim = self.space.operand_maps[j].index(tile.dim)
        blocks = Counter(first_tile(b, ref.perm[view_dim], tile.tiles) for _, b in lay.reads[j])
        per_tile = sum(dma_requests(b, base.shape, base_stick, base.elem_bytes, self.hw) * n for b, n in blocks.items())
        return per_tile * tile.tiles


def _project(wide: list[tuple], dims) -> list[tuple]:
    """Each box's ranges of ``dims`` in order, ``(0, 1)`` where a dim is None (boxes widened by a last
    ``(0, 1)``): ``division.project`` over every core at once, by ``itemgetter``."""
    idx = [len(wide[0]) - 1 if d is None else d for d in dims]
    if len(idx) < 2:
        return [tuple(box[i] for i in idx) for box in wide]
    get = itemgetter(*idx)
    return [get(box) for box in wide]


def _even(div: Division, extents: tuple[int, ...], units: tuple[int, ...]) -> bool:
    """Every factor divides its dim's whole units: all parts equal."""
    return all(-(-e // u) % f == 0 for e, u, f in zip(extents, units, div.factors))


def dma_requests(
    part: Box, shape: tuple[int, ...], stick: int, elem_bytes: int, hw: HardwareSpec, whole: Box | None = None
) -> int:
    """DMA requests to move ``part`` of a stick-tiled tensor: each contiguous run, in bursts of at most
    ``hw.dma_burst_sticks`` sticks (``whole``: the block the part lies in, default the tensor)."""
    return _requests(part, shape, stick, elem_bytes, hw.stick_bytes, hw.dma_burst_sticks, whole)


@lru_cache(maxsize=1 << 16)
def _requests(part: Box, shape, stick: int, elem_bytes: int, stick_bytes: int, burst: int, whole: Box | None) -> int:
    whole = whole or tuple((0, d) for d in shape)
    runs = contiguous_runs(part, whole, stick, elem_bytes, stick_bytes)
    sticks = box_padded_bytes(part, stick, elem_bytes, stick_bytes) // stick_bytes
    return runs * ceil(sticks / runs / burst)


__all__ = ["Layout", "OpCandidates", "OperandRef", "box_extents", "dma_requests", "op_signature", "resolve"]
