"""Loops: an Inductor ``ComputedBuffer`` (a fused ``Pointwise`` or ``Reduction`` body) as spyreopt ops.

A pointwise body becomes one ``pointwise`` op (Inductor has already fused the elementwise chain
into it), named after its first transcendental op (it sets the cost), else its first arithmetic
one, else a copy. A reduction becomes a ``reduce`` after a pointwise prologue when the body computes
more than a load. A load through an indirect index (an embedding lookup) is a device-memory read
of exactly the gathered rows. The loop's variables are grouped into spyreopt dims by ``groups``.
"""

from __future__ import annotations

from torch._inductor import ir

import spyreopt.integrations.inductor.access as acc
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.groups import Grouping, Read, group_loop
from spyreopt.integrations.inductor.lowered import Lowered
from spyreopt.integrations.inductor.operands import TInfo, out_dims

# Inductor ops -> the spyreopt pointwise fn that stands for a fused body: the first
# transcendental one (it sets the cost), else the first arithmetic one, else a copy.
TRANSCENDENTAL_OPS = {
    "erf": "gelu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "exp2": "exp", "expm1": "exp",
    "log": "log", "log2": "log", "log1p": "log", "rsqrt": "rsqrt", "sqrt": "sqrt", "pow": "pow",
    "truediv": "div", "div": "div", "reciprocal": "recip",
}  # fmt: skip
ARITHMETIC_OPS = {
    "mul": "mul", "add": "add", "sub": "sub", "maximum": "max", "minimum": "min", "neg": "neg",
    "relu": "relu", "square": "square", "where": "max", "abs": "max",
}  # fmt: skip
REDUCTIONS = {"sum": "sum", "max": "max", "min": "min"}


def computed(tr: Lowered, buf: ir.ComputedBuffer) -> None:
    """A computed buffer's loop as ops, at the dtype Inductor stores (a non-float one at its size)."""
    layout = buf.layout
    if not isinstance(layout, (ir.FixedLayout, ir.FlexibleLayout, ir.NonOwningLayout, ir.MutationLayoutSHOULDREMOVE)):
        raise Unsupported(f"writes through a {type(layout).__name__}")
    dtype = acc.planned_dtype(layout.dtype)
    if dtype is None:
        if layout.dtype.itemsize not in acc.STAND_IN:
            raise Unsupported(f"output dtype {layout.dtype} is not planned")
        dtype = acc.stand_in_dtype(layout.dtype)
        tr.notes.append(f"{tr.current}: dtype {layout.dtype} is planned as {dtype} (same size)")
    data = buf.data
    if type(data) in (ir.Pointwise, ir.Scatter):  # a scatter: the source's loop, stored at computed rows
        _pointwise(tr, buf, data, dtype)
    elif type(data) in (ir.Reduction, ir.WelfordReduction, ir.OnlineSoftmaxReduction):
        _reduction(tr, buf, data, dtype)
    else:
        raise Unsupported(f"{type(data).__name__} loops are not modelled")


def _loads(tr: Lowered, body: acc.Body, syms, ranges: tuple[int, ...]) -> list[tuple[TInfo, Read]]:
    """Each distinct load as (tensor, read); a gathered load reads the gathered rows as a leaf."""
    if body.masked:
        raise Unsupported("masked loads (padding, concatenation or a slice of a slice)")
    out, seen = [], set()
    for name, index in body.loads:
        if (name, index) not in seen:
            seen.add((name, index))
            info = tr.info(name)
            order = acc.gathered(index, syms, body.indirect)
            if order is None:
                out.append((info, acc.read_of(index, syms, info.read((0,) * len(syms)))))
            else:
                out.append(_gather(tr, info, order, ranges))
    return out


def _gather(tr: Lowered, info: TInfo, order: list[int], ranges: tuple[int, ...]) -> tuple[TInfo, Read]:
    """A gathered load: a device-memory read of exactly the rows gathered, as a dense leaf over
    the loop variables it follows (indexed rows outermost)."""
    shape = tuple(ranges[v] for v in order) or (1,)
    strides, step = [], 1
    for z in reversed(shape):
        strides.append(step)
        step *= z
    strides.reverse()
    coeffs = [0] * len(ranges)
    for v, st in zip(order, strides):
        coeffs[v] = st if ranges[v] > 1 else 0
    name = tr.fresh(f"{info.buffer}.rows@{tr.current}.")  # each fused kernel gathers on its own
    make = tr.g.weight if tr.g.tensors[info.name].role == "weight" else tr.g.input
    make(name, shape, info.dtype)
    tr.rows.add(name)
    if not info.leaf:
        tr.forced.add(info.name)
    tr.notes.append(f"{tr.current}: gathers {shape} from {info.buffer} (a device-memory read)")
    rows = TInfo(name, out_dims(shape, strides), True, name, info.dtype)
    return rows, rows.read(tuple(coeffs))


def _pointwise(tr: Lowered, buf: ir.ComputedBuffer, data: ir.Pointwise, dtype: str) -> None:
    ranges = acc.ints(data.ranges, "range")
    syms = acc.symbols("i", len(ranges))
    body = acc.record(data.inner_fn, syms)
    loads = _loads(tr, body, syms, ranges)
    out_coeffs = acc.ints(buf.get_layout().stride, "stride")
    if not ranges:  # a scalar: one unit dim, since spyreopt tensors have rank >= 1
        ranges, out_coeffs = (1,), (0,)
        loads = [(info, Read((0,), rd.dims, rd.offset, rd.affine, rd.flexible)) for info, rd in loads]
    gp = group_loop(ranges, ("x",) * len(ranges), [rd for _, rd in loads], out_coeffs, flatten=frozenset("x"))
    target = _spanned_last(gp, [rd for _, rd in loads])
    xs = _cover(tr, [tr.operand(info, rd, gp, j, target) for j, (info, rd) in enumerate(loads)], gp, target)
    tr.register(
        tr.op(tr.current, "pointwise", _pointwise_fn(body.ops), *xs, dtype=dtype),
        gp,
        target,
        out_coeffs,
        set(),
        dtype,
    )


def _cover(tr: Lowered, xs: list[str], gp: Grouping, target: list[int]) -> list[str]:
    """Add an index operand (an iota leaf) over the dims no operand spans, e.g. a concatenation
    written as a ``where`` over an index: the op's output must still have the loop's shape."""
    want = tuple(gp.size(g) for g in target)
    have = [1] * len(want)
    for x in xs:
        shape = tr.g.tensors[x].shape
        for p, z in enumerate(shape[::-1]):
            have[len(want) - 1 - p] = max(have[len(want) - 1 - p], z)
    if tuple(have) == want and xs:
        return xs
    iota = tuple(w if h != w else 1 for w, h in zip(want, have)) if xs else want
    name = f"{tr.current}.iota"
    tr.g.input(name, iota, "fp32")
    tr.notes.append(f"{tr.current}: no operand spans dims {iota}; an index operand {name} stands in for them")
    return xs + [name]


def _reduction(tr: Lowered, buf: ir.ComputedBuffer, data: ir.Reduction, dtype: str) -> None:
    ranges = acc.ints(data.ranges, "range")
    rranges = acc.ints(data.reduction_ranges, "reduction range")
    xs, rs = acc.symbols("i", len(ranges)), acc.symbols("r", len(rranges))
    body = acc.record(data.inner_fn, xs, rs)
    fn, prologue = _reduce_kind(data)
    loads = _loads(tr, body, xs + rs, ranges + rranges)
    order = _reduction_order(ranges, rranges, next((rd for _, rd in loads if rd.affine), None))
    full = ranges + rranges
    kinds = tuple("r" if v >= len(xs) else "x" for v in order)
    reads = [Read(tuple(rd.coeffs[v] for v in order), rd.dims, rd.offset, rd.affine, rd.flexible) for _, rd in loads]
    stride = acc.ints(buf.get_layout().stride, "stride")
    out_coeffs = tuple(0 if v >= len(xs) else stride[v] for v in order)
    gp = group_loop(
        tuple(full[v] for v in order), kinds, reads, out_coeffs, reduced=frozenset("r"), flatten=frozenset("x")
    )
    target = list(range(len(gp.groups)))
    ops = _cover(
        tr, [tr.operand(info, rd, gp, j, target) for j, ((info, _), rd) in enumerate(zip(loads, reads))], gp, target
    )
    shape = tuple(gp.size(g) for g in target)
    if prologue is None and len(ops) == 1 and set(body.ops) <= {"to_dtype"} and tr.g.tensors[ops[0]].shape == shape:
        x = ops[0]
    else:
        src_dtype = acc.planned_dtype(data.src_dtype) or dtype
        x = tr.op(f"{tr.current}.pre", "pointwise", prologue or _pointwise_fn(body.ops), *ops, dtype=src_dtype)
    lead = len(target) - len(tr.g.tensors[x].shape)
    dims = [p - lead for p, g in enumerate(target) if kinds[gp.kind_var(g)] == "r" and p >= lead]
    tr.register(
        tr.op(tr.current, "reduce", fn, x, dims, dtype=dtype),
        gp,
        target,
        out_coeffs,
        {p + lead for p in dims},
        dtype,
    )


def _spanned_last(gp: Grouping, reads: list[Read]) -> list[int]:
    """Group order for an elementwise loop: groups that no read spans first, so that the
    operands broadcast into them (right-aligned) through views rather than copies."""

    def spanned(g: int) -> bool:
        return any(not rd.affine or any(rd.coeffs[gp.atoms[a].var] for a in gp.groups[g]) for rd in reads)

    groups = range(len(gp.groups))
    return [g for g in groups if not spanned(g)] + [g for g in groups if spanned(g)]


def _reduce_kind(data: ir.Reduction) -> tuple[str, str | None]:
    """(spyreopt reduction, pointwise prologue or None) of a reduction loop."""
    if isinstance(data, ir.WelfordReduction):
        index = getattr(data, "output_index", 0)
        if index == 2:
            raise Unsupported("the element count output of a Welford reduction is not modelled")
        return ("mean", None) if index == 0 else ("sum", "square")
    if isinstance(data, ir.OnlineSoftmaxReduction):
        return ("max", None) if getattr(data, "output_index", 0) == 0 else ("sum", "exp")
    if data.reduction_type not in REDUCTIONS:
        raise Unsupported(f"reduction type {data.reduction_type!r} is not modelled")
    return REDUCTIONS[data.reduction_type], None


def _reduction_order(ranges: tuple[int, ...], rranges: tuple[int, ...], primary: Read | None) -> list[int]:
    """Loop variable order for a reduction: each reduced variable (outermost first) takes the
    size-1 output dim (keepdim slot) that keeps the primary read's strides descending, so the
    reduce keeps Inductor's output shape and reads its operand without a transpose; a variable
    that fits no slot goes last."""
    nx = len(ranges)
    coeff = primary.coeffs if primary else (0,) * (nx + len(rranges))
    slots = [i for i, r in enumerate(ranges) if r == 1]
    placed: dict[int, int] = {}

    def disorder(pos: int, c: int) -> int:
        """Output variables on the wrong side of a reduced variable with stride ``c`` placed at ``pos``."""
        return sum(1 for i in range(nx) if ranges[i] > 1 and (coeff[i] > c) != (i < pos))

    for j in sorted(range(len(rranges)), key=lambda j: -coeff[nx + j]):
        c = coeff[nx + j]
        free = [i for i in slots if i not in placed]
        best = min(free, key=lambda i: (disorder(i, c), -i), default=None)
        if best is not None and disorder(best, c) <= disorder(nx, c):
            placed[best] = j
    order = [nx + placed[i] if i in placed else i for i in range(nx)]
    return order + [nx + j for j in range(len(rranges)) if j not in placed.values()]


def _pointwise_fn(ops: list[str]) -> str:
    for o in ops:
        if o in TRANSCENDENTAL_OPS:
            return TRANSCENDENTAL_OPS[o]
    for o in ops:
        if o in ARITHMETIC_OPS:
            return ARITHMETIC_OPS[o]
    return "copy"
