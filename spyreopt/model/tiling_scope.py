"""Which ops may run in a tiled loop, over which iteration dims, and the tile counts searched.

Only intermediates too large to keep whole on chip are worth a tile at a time (``large_tensors``); the ops
producing or reading them may tile (``tiling_scope``), and the counts searched follow the tiles the largest
of them needs (``tile_counts``). The tiled layouts themselves are ``model.tiling``'s.
"""

from __future__ import annotations

from math import log2

from spyreopt.model.candidates import OpCandidates, op_signature, resolve
from spyreopt.model.tiling_rules import TILE_COUNTS

LARGE_FRACTION = 0.5  # an intermediate is large when, split over every core, it takes more than this much
TILE_TARGET = 0.25  # the tile counts searched centre on one tile of a large intermediate taking this much
EXTRA_COUNTS = 2  # tile counts searched besides the powers of two: divisors of extents that are not powers of two


def output_footprints(graph, ops, hw, coef) -> dict[str, int]:
    """Per intermediate (an output some op reads), the per-core bytes its producer keeps of it: for a matmul
    its fastest layout alone, whose k split keeps a partial sum of the whole output slice per core, far above
    an even split; else (and for a tensor that whole takes at most ``LARGE_FRACTION`` of a scratchpad) the
    even split."""
    read = {resolve(graph, x).base for o in ops for x in o.inputs}
    seen: dict[tuple, int] = {}
    out = {}
    for o in ops:
        nbytes = graph.tensors[o.output].nbytes
        if o.output not in read or o.kind == "reshape":
            continue
        if o.kind != "matmul" or nbytes <= LARGE_FRACTION * hw.planner_lx_bytes:
            out[o.output] = -(-nbytes // hw.cores)
            continue
        sig = op_signature(graph, o)
        if sig not in seen:
            oc = OpCandidates(graph, o, hw, coef, 1)
            fastest = min(oc.layouts, key=lambda lay: (round(oc._isolated_ns(lay), 6), lay.division.factors))
            seen[sig] = fastest.footprint
        out[o.output] = max(seen[sig], -(-nbytes // hw.cores))
    return out


def tiling_plan(graph, ops, hw, refs, coef) -> tuple[dict[int, tuple[int, ...]], tuple[int, ...]]:
    """The ops that may tile (``tiling_scope``) and the tile counts searched (``tile_counts``)."""
    sizes = output_footprints(graph, ops, hw, coef)
    scope = tiling_scope(graph, ops, hw, refs, sizes)
    return scope, (tile_counts(graph, ops, hw, sizes) if scope else ())


def large_tensors(graph, ops, hw, sizes: dict[str, int]) -> set[str]:
    """Intermediates that, split over every core, take more than ``LARGE_FRACTION`` of a scratchpad, or that
    their producer's fastest layout cannot keep on chip at all: only these are worth a tile at a time."""
    half, cap = LARGE_FRACTION * hw.planner_lx_bytes, hw.planner_lx_bytes
    return {
        o.output
        for o in ops
        if o.output in sizes and (graph.tensors[o.output].nbytes / hw.cores > half or sizes[o.output] > cap)
    }


def tiling_scope(graph, ops, hw, refs, sizes: dict[str, int]) -> dict[int, tuple[int, ...]]:
    """Op index -> the iteration dims it may tile: ops with a large output, ops reading one (so the large
    tensor can stay on chip between them), and matmuls reducing over k the output of an op reading one (so the
    loop can go on to accumulate it, as a down projection after a gated product); a matmul's k only when it
    reads such an operand along k."""
    from spyreopt.model.opspace import op_space

    large = large_tensors(graph, ops, hw, sizes)
    near = {o.output for i, o in enumerate(ops) if any(r.base in large for r in refs[i])}
    out: dict[int, tuple[int, ...]] = {}
    for i, o in enumerate(ops):
        if o.kind == "reshape":
            continue
        space = op_space(graph, o)
        reduce_near = [j for j, r in enumerate(refs[i]) if r.base in near and o.kind == "matmul"]
        reduce_near = [  # a broadcast operand dim (None) maps to no iteration dim
            j for j in reduce_near if any(d is not None and space.reduction[d] for d in space.operand_maps[j])
        ]
        reads = [j for j, r in enumerate(refs[i]) if r.base in large] + reduce_near
        if o.output not in large and not reads:
            continue
        dims = []
        for d, (e, red) in enumerate(zip(space.extents, space.reduction)):
            if e < 2:
                continue
            if red and not (o.kind == "matmul" and any(d in space.operand_maps[j] for j in reads)):
                continue
            dims.append(d)
        if dims:
            out[i] = tuple(dims)
    return out


def tile_counts(graph, ops, hw, sizes: dict[str, int]) -> tuple[int, ...]:
    """The tile counts searched: around the count that brings one tile of the largest intermediate (as its
    producer's fastest layout keeps it) to ``TILE_TARGET`` of the scratchpad (a few powers of two, so the
    candidate count stays small).

    Tiles must divide their extent, so a large tensor none of whose dims a power of two in that range divides
    (scores of 8 x 4 heads over 1,000 tokens) gets no loop from them: then the ``EXTRA_COUNTS`` divisors of
    its dims in range nearest the need are searched too (20 and 25 for 1,000 rows). Only then: more counts
    are more candidates, and greedy's windows found worse loops among them on the 1,536-token attention."""
    large = large_tensors(graph, ops, hw, sizes)
    per_core = max((sizes[t] for t in large), default=0)
    need = next((t for t in TILE_COUNTS if per_core / t <= TILE_TARGET * hw.planner_lx_bytes), TILE_COUNTS[-1])
    lo, hi = need // 2, min(need * 2, TILE_COUNTS[-1])
    powers = [t for t in TILE_COUNTS if lo <= t <= hi]
    exact = per_core / (TILE_TARGET * hw.planner_lx_bytes)
    shapes = [graph.tensors[t].shape for t in sorted(large)]
    extents = sorted({e for shape in shapes if not any(e % t == 0 for e in shape for t in powers) for e in shape})
    others = sorted(
        {d for e in extents for d in range(max(lo, 3), hi + 1) if e % d == 0 and d & (d - 1)},
        key=lambda d: (abs(log2(d / max(exact, 1.0))), d),
    )
    return tuple(sorted(powers + others[:EXTRA_COUNTS]))
