"""Iteration spaces of ops: which dims a division may split, and how each operand
and the output are indexed by them (so per-core slices follow exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op


@dataclass(frozen=True)
class OpSpace:
    dims: tuple[str, ...]  # iteration dim names
    extents: tuple[int, ...]
    reduction: tuple[bool, ...]  # True for dims summed over (matmul k, reduced dims)
    splittable_reduction: tuple[bool, ...]  # only matmul k may split (with a partial-sum reduction)
    operand_maps: tuple[tuple[int | None, ...], ...]  # per operand, per operand dim: iteration dim or None (broadcast)
    output_map: tuple[int | None, ...]  # per output dim: iteration dim or None (reduced, size 1)
    reshape_input: bool = False  # operand 0 is read through a reshape


def _right_aligned(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int | None, ...]:
    """Map a broadcast operand's dims to output dims (None where it broadcasts)."""
    offset = len(out_shape) - len(shape)
    return tuple(None if (d == 1 and out_shape[i + offset] != 1) else i + offset for i, d in enumerate(shape))


def op_space(g: Graph, op: Op) -> OpSpace:
    out_shape = g.tensors[op.output].shape
    if op.kind == "matmul":
        a, b = (g.tensors[x].shape for x in op.inputs)
        nb = len(out_shape) - 2
        dims = tuple(f"b{i}" for i in range(nb)) + ("m", "n", "k")
        extents = out_shape[:nb] + (out_shape[-2], out_shape[-1], a[-1])
        m, n, k = nb, nb + 1, nb + 2
        batch_out = out_shape[:nb]

        def batch_map(shape: tuple[int, ...]) -> tuple[int | None, ...]:
            return _right_aligned(shape[:-2], batch_out) if nb else ()

        amap = batch_map(a) + (m, k)
        bmap = batch_map(b) + (k, n)
        red = tuple(i == k for i in range(len(dims)))
        return OpSpace(dims, extents, red, red, (amap, bmap), tuple(range(nb)) + (m, n))
    if op.kind in ("pointwise", "reshape"):
        dims = tuple(f"d{i}" for i in range(len(out_shape)))
        none = tuple(False for _ in dims)
        if op.kind == "reshape":
            return OpSpace(dims, out_shape, none, none, ((),), tuple(range(len(out_shape))), reshape_input=True)
        maps = tuple(_right_aligned(g.tensors[x].shape, out_shape) for x in op.inputs)
        return OpSpace(dims, out_shape, none, none, maps, tuple(range(len(out_shape))))
    if op.kind == "reduce":
        in_shape = g.tensors[op.inputs[0]].shape
        reduced = set(op.attrs["dims"])
        dims = tuple(f"d{i}" for i in range(len(in_shape)))
        red = tuple(i in reduced for i in range(len(in_shape)))
        out_map = tuple(None if i in reduced else i for i in range(len(in_shape)))
        return OpSpace(dims, in_shape, red, tuple(False for _ in dims), (tuple(range(len(in_shape))),), out_map)
    raise ValueError(f"op {op.name!r}: kind {op.kind!r} has no iteration space (views are resolved away)")
