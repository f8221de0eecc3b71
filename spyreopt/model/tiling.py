"""Tiled loops in the candidate space: tiled layouts, the pair rules, the loops (which ops may tile, and the
tile counts searched: ``model.tiling_scope``).

The loop decision is part of each op's candidate: a layout may carry a ``Tile``
(iteration dim, tile count). Nothing else in the Formulation knows about loops:

* a tiled layout's quantities are those of its op run ``T`` times on a tile
  (``costmodel.loops``); its output footprint is one tile (or, tiled over a
  matmul's k, the whole output slice: the accumulator);
* its output is ``lx`` (every consumer in the same loop) or ``hbm`` (the loop's
  output, written per tile); an accumulator only ``hbm`` (written once);
* an edge stays on chip (in place or relayout of the tile slices) only when both
  ends tile the same tensor dim with the same ``T``; any other edge touching a
  tiled op goes through device memory, and never restickifies;
* guard pairs make loops contiguous runs of the schedule: a tiled ``lx`` op
  forces every op up to its last consumer into its tile count, and a tiled
  ``hbm`` op ends its run (the next op does not share its tile count), as does
  an edge from a tiled ``hbm`` op to a consumer of the same tile count;
* an accumulator lives across iterations, so its buffer's interval starts at the
  first op that can share its loop.

A loop of the decoded plan is then a maximal run of consecutive ops tiled with
the same ``T``; the rules above make it connected by on-chip edges, with every
inner edge on chip and every edge in or out through device memory.
"""

from __future__ import annotations

from dataclasses import replace
from math import gcd

import numpy as np

from spyreopt.costmodel import loops as cl
from spyreopt.errors import PlanError
from spyreopt.model import memo
from spyreopt.model.candidates import Layout, OpCandidates, dma_requests
from spyreopt.model.formulation import Edge
from spyreopt.model.plan_data import LoopPlan
from spyreopt.model.tiling_rules import Tile, first_tile, tile_reason

KEEP_PER_TILING = 4  # tiled layouts kept per (dim, tile count, staged) besides the aligned ones, fastest alone
# first: a loop's best division is often not an op's fastest (a partial sum that fits only inside the loop, a
# division its neighbours can pass tiles to); one per tiling found no loop on a Llama-3-8B MLP, four does


def tiled_layout(oc: OpCandidates, base: int, dim: int, tiles: int, staged: bool = False) -> Layout | None:
    """Layout ``base`` of ``oc`` run over ``tiles`` tiles of iteration dim ``dim`` (None when illegal, or
    ``staged`` without an operand to stage)."""
    lay = oc.layouts[base]
    if tile_reason(oc.space, oc.op.kind, lay.division.factors, oc._units(lay.stick, lay.required), dim, tiles):
        return None
    if staged and (not invariant_operands(oc, dim) or _unsized_stage(oc, lay, dim)):
        return None
    return _tiled(oc, lay, base, dim, tiles, staged)


def checked_tiled_layout(oc: OpCandidates, base: int, dim: int, tiles: int, staged: bool = False) -> Layout:
    """As ``tiled_layout``, or PlanError naming the op and the rule."""
    lay = oc.layouts[base]
    why = tile_reason(oc.space, oc.op.kind, lay.division.factors, oc._units(lay.stick, lay.required), dim, tiles)
    if staged and not invariant_operands(oc, dim):
        why = "no operand is the same for every tile: nothing to stage"
    elif staged and (unsized := _unsized_stage(oc, lay, dim)):
        why = f"{unsized!r} is stored in the stick its producer chooses: its kept slices have no size"
    if why:
        raise PlanError(f"op {oc.op.name!r}: {tiles} tiles of dim {oc.space.dims[dim]}: {why}")
    return _tiled(oc, lay, base, dim, tiles, staged)


def invariant_operands(oc: OpCandidates, dim: int) -> list[int]:
    """Operands without the tiled dim: the same for every tile."""
    return [j for j, m in enumerate(oc.space.operand_maps) if dim not in m]


def _unsized_stage(oc: OpCandidates, lay: Layout, dim: int) -> str | None:
    """An operand to stage that is another op's output read in any stick: the stick it is stored (so kept)
    in is its producer's decision, unknown to this layout, so the footprint could not be exact. None if
    every one is a graph input (stored stick-last) or read in a required stick."""
    for j in invariant_operands(oc, dim):
        base = oc.refs[j].base
        if lay.required[j] is None and oc.g.tensors[base].producer is not None:
            return base
    return None


def staged_tensors_of(oc: OpCandidates, dim: int) -> list[str]:
    """The tensors a layout tiled over ``dim`` would stage (base tensors, views resolved)."""
    return sorted({oc.refs[j].base for j in invariant_operands(oc, dim)})


def staged_tensors(oc: OpCandidates, lay: Layout) -> list[str]:
    """The tensors a staged layout loads on chip once."""
    return staged_tensors_of(oc, lay.tile.dim) if lay.tile is not None and lay.tile.staged else []


def _staged_parts(oc: OpCandidates, lay: Layout, dim: int) -> tuple[tuple[str, int], ...]:
    """Per staged tensor, the largest slice a core reads of it (in its required stick, else as stored)."""
    parts: dict[str, int] = {}
    for j in invariant_operands(oc, dim):
        base = oc.refs[j].base
        stick = lay.required[j] if lay.required[j] is not None else len(oc.g.tensors[base].shape) - 1
        parts[base] = max(parts.get(base, 0), oc.max_read_bytes(lay, j, stick))
    return tuple(sorted(parts.items()))


def _tiled(oc: OpCandidates, lay: Layout, base: int, dim: int, tiles: int, staged: bool) -> Layout:
    """The tiled layout, built once per (base layout, its index, tiling, staged tensors' names: a tile names
    them) when the base layout is the memo's (``model.memo``)."""
    t = memo.token(lay)
    if t is None:
        return _new_tiled(oc, lay, base, dim, tiles, staged)
    names = tuple(staged_tensors_of(oc, dim)) if staged else ()
    key = ("tiled", t, base, dim, tiles, staged, names)
    if key not in oc.memo.derived:
        oc.memo.derived[key] = oc.memo.register(_new_tiled(oc, lay, base, dim, tiles, staged))
    return oc.memo.derived[key]


def _new_tiled(oc: OpCandidates, lay: Layout, base: int, dim: int, tiles: int, staged: bool) -> Layout:
    c, space = oc.coef, oc.space
    acc = space.reduction[dim]
    matmul, work, rows, trans, sred = oc.compute_terms(lay.division, lay.stick)
    rows_tiled = matmul and dim == len(space.dims) - 3
    compute = float(cl.tiled_compute_ns(c, matmul, work, rows, trans, sred, tiles, rows_tiled))
    if acc:
        compute += float(cl.accumulate_ns(c, lay.footprint // oc.out.elem_bytes, tiles))
    overhead = lay.psum_ns + float(cl.iteration_ns(c, tiles, len(oc.refs) + 1))
    tile = lay.footprint if acc else lay.footprint // tiles
    held = _staged_parts(oc, lay, dim) if staged else ()
    return replace(
        lay,
        compute_ns=compute,
        psum_ns=overhead,
        write_requests=lay.write_requests if acc else _tile_write_requests(oc, lay, dim, tiles),
        footprint=tile + sum(b for _, b in held),  # the stream (so the overlap) is the untiled one: double buffered
        tile=Tile(dim, tiles, base, acc, staged, tile, held),
    )


def _tile_write_requests(oc: OpCandidates, lay: Layout, dim: int, tiles: int) -> int:
    """DMA requests to write the output one tile at a time: each owner's block cut along the tiled dim
    (shorter runs than the untiled write whenever the cores split that dim too)."""
    out_dim = oc.space.output_map.index(dim)
    out = oc.out
    per_tile = sum(
        dma_requests(first_tile(box, out_dim, tiles), out.shape, lay.stick, out.elem_bytes, oc.hw)
        for box in lay.owner_boxes.values()
    )
    return per_tile * tiles


# ---- which ops tile, and over what -------------------------------------------------------------
def tiled_layouts(oc: OpCandidates, dims: tuple[int, ...], counts: tuple[int, ...]) -> list[Layout]:
    """Per (dim, tile count, staged or not), the ``KEEP_PER_TILING`` legal tiled layouts fastest alone, and
    every legal tiled layout of a division putting all cores on one dim or one run of dims: the divisions ops
    of one loop share, so that its tiles pass in place. The aligned untiled layouts are appended to ``oc.layouts``.

    Memoised per (layout list, dims, counts, operand names: staged tiles name their tensors)."""
    held = memo.tokens(oc.layouts)
    if held is None:
        return _tiled_layouts(oc, dims, counts)
    key = ("tiled_layouts", held, dims, counts, tuple(r.base for r in oc.refs))
    if key not in oc.memo.derived:
        before = len(oc.layouts)
        extra = _tiled_layouts(oc, dims, counts)
        oc.memo.derived[key] = (tuple(oc.layouts[before:]), tuple(extra))
        return extra
    appended, extra = oc.memo.derived[key]
    oc.layouts.extend(appended)
    return list(extra)


def _tiled_layouts(oc: OpCandidates, dims: tuple[int, ...], counts: tuple[int, ...]) -> list[Layout]:
    bases = [b for b, lay in enumerate(oc.layouts) if lay.tile is None]
    aligned = set()
    for lay in aligned_layouts(oc):
        if lay not in oc.layouts:
            oc.layouts.append(lay)
        aligned.add(oc.layouts.index(lay))
    out: list[Layout] = []
    for dim in dims:
        for tiles in counts:
            for staged in (False, True):
                found = [
                    (b in aligned, lay)
                    for b in sorted(set(bases) | aligned)
                    if (lay := tiled_layout(oc, b, dim, tiles, staged)) is not None
                    and lay.tile.staged_bytes <= oc.hw.planner_lx_bytes
                ]
                found.sort(key=lambda x: (round(oc._isolated_ns(x[1]), 6), x[1].division.factors, x[1].stick))
                # uneven divisions have their own quota, as in the enumeration: they never displace even ones
                for keep, group in (
                    (KEEP_PER_TILING, [x for x in found if oc.is_even(x[1])]),
                    (KEEP_PER_TILING // 2, [x for x in found if not oc.is_even(x[1])]),
                ):
                    out.extend(lay for k, (pure, lay) in enumerate(group) if pure or k < keep)
    return out


def aligned_layouts(oc: OpCandidates) -> list[Layout]:
    """Untiled layouts with every core on one iteration dim, or on a run of dims from it (``run_factors``),
    each output stick dim the op allows."""
    out = []
    sticks = sorted({lay.stick for lay in oc.layouts})
    divisions = []
    for d in range(len(oc.space.dims)):
        factors = [1] * len(oc.space.dims)
        factors[d] = oc.hw.cores
        divisions.append(tuple(factors))
        if (run := run_factors(oc.space.extents, oc.space.reduction, d, oc.hw.cores)) not in (None, *divisions):
            divisions.append(run)
    for factors in divisions:
        for stick in sticks:
            try:
                out.append(oc.checked_layout(tuple(factors), stick))
            except PlanError:
                continue
    return out


def run_factors(extents: tuple[int, ...], reduction: tuple[bool, ...], start: int, cores: int) -> tuple | None:
    """Every core on the parallel dims from ``start`` on, each taking the largest share of the cores left that
    divides its extent, outer first: a head dim split in two (grouped-query attention's [kv heads, group]) is
    shared as a whole by the ops of a loop, as one dim of as many heads would be. None when fewer than two
    dims take cores, or the run does not take them all."""
    factors = [1] * len(extents)
    left = cores
    for d in range(start, len(extents)):
        if left == 1 or reduction[d]:
            break
        factors[d] = gcd(extents[d], left)
        left //= factors[d]
    return tuple(factors) if left == 1 and sum(f > 1 for f in factors) > 1 else None


def loop_residencies(lay: Layout, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A tiled op's output: ``lx`` (read only inside its loop) or ``hbm`` (written per tile); an accumulator
    is written once after the last tile."""
    keep = ("hbm",) if lay.tile is not None and lay.tile.accumulate else ("hbm", "lx")
    return tuple(r for r in allowed if r in keep)


# ---- pair rules ----------------------------------------------------------------------------------
def output_tile_dim(oc: OpCandidates, lay: Layout) -> int | None:
    """The output tensor dim a tiled layout's tile runs along (None: untiled, or an accumulator)."""
    if lay.tile is None or lay.tile.accumulate:
        return None
    return oc.space.output_map.index(lay.tile.dim)


def operand_tile_dim(oc: OpCandidates, lay: Layout, j: int) -> int | None:
    """The base tensor dim of operand j a tiled layout's tile runs along (None: untiled, or invariant)."""
    if lay.tile is None or lay.tile.dim not in oc.space.operand_maps[j]:
        return None
    return oc.refs[j].perm[oc.space.operand_maps[j].index(lay.tile.dim)]


def layout_tiles(oc: OpCandidates) -> np.ndarray:
    """Per layout its tile count (0: untiled)."""
    return np.array([0 if lay.tile is None else lay.tile.tiles for lay in oc.layouts], dtype=np.int64)


def edge_loop_classes(prod: OpCandidates, cons: OpCandidates, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Over (producer layout, consumer layout): ``inner`` (both tile the edge's tensor dim with the same
    count: one tile per iteration, on chip allowed) and ``touched`` (some end is tiled: device memory only
    unless inner)."""
    tu, tv = layout_tiles(prod), layout_tiles(cons)
    du = np.array([-1 if (d := output_tile_dim(prod, x)) is None else d for x in prod.layouts])
    dv = np.array([-1 if (d := operand_tile_dim(cons, x, j)) is None else d for x in cons.layouts])
    inner = (tu[:, None] > 0) & (tu[:, None] == tv[None, :]) & (du[:, None] >= 0) & (du[:, None] == dv[None, :])
    touched = (tu[:, None] > 0) | (tv[None, :] > 0)
    return inner, touched


def candidate_tiles(problem, i: int) -> np.ndarray:
    """Per candidate of op i its tile count (0: untiled)."""
    tiles = layout_tiles(problem.cands[i])
    return np.array([tiles[c.layout] for c in problem.candidates[i]], dtype=np.int64)


def guard_edges(problem) -> list[Edge]:
    """Zero-cost pairs that keep loops contiguous: a tiled ``lx`` op p forces every op in
    (p, last use of p] to its tile count; a tiled ``hbm`` op forbids its count to the next op. Pairs along a
    graph edge are already held by the edge's table."""
    out = []
    consumers = [{problem.edges[k].consumer for k in ks} for ks in problem.out_edges]
    tiles = [candidate_tiles(problem, i) for i in range(len(problem.ops))]
    for p in range(len(problem.ops)):
        tp = tiles[p]
        if not tp.any():
            continue
        res = np.array([c.residency for c in problem.candidates[p]])
        for x in range(p + 1, max(problem.last_use[p], p + 1) + 1):
            if x >= len(problem.ops) or x in consumers[p]:
                continue
            bad = np.zeros((len(tp), len(tiles[x])), dtype=bool)
            if x <= problem.last_use[p]:
                bad |= ((tp > 0) & (res == "lx"))[:, None] & (tp[:, None] != tiles[x][None, :])
            if x == p + 1:
                bad |= ((tp > 0) & (res == "hbm"))[:, None] & (tp[:, None] == tiles[x][None, :])
            if bad.any():
                zero = np.zeros(bad.shape, dtype=np.int64)
                out.append(Edge(p, x, zero, ~bad))
    return out + _staging_guards(problem, tiles, consumers, {(e.u, e.v) for e in out})


def _staging_guards(problem, tiles, consumers, taken) -> list[Edge]:
    """Two ops of one tile count reading the same tensor, the same for every tile, both stage it or neither
    (a loop stages a tensor once, for every op reading it)."""
    out = []
    readers: dict[str, list[int]] = {}
    for i, oc in enumerate(problem.cands):
        if tiles[i].any():
            for name in {r.base for r in oc.refs}:
                readers.setdefault(name, []).append(i)
    pairs = sorted({(a, b) for ops in readers.values() for a in ops for b in ops if a < b})
    staging: dict[int, tuple] = {}
    for a, b in pairs:
        if (a, b) in taken or b in consumers[a]:
            continue
        ta, inv_a, st_a = staging.get(a) or staging.setdefault(a, _staging_of(problem, a))
        tb, inv_b, st_b = staging.get(b) or staging.setdefault(b, _staging_of(problem, b))
        share = np.array([[bool(x & y) for y in inv_b[0]] for x in inv_a[0]], dtype=bool)
        bad = (ta[:, None] > 0) & (ta[:, None] == tb[None, :]) & (st_a[:, None] != st_b[None, :])
        bad &= share[np.ix_(inv_a[1], inv_b[1])]
        if bad.any():
            out.append(Edge(a, b, np.zeros(bad.shape, dtype=np.int64), ~bad))
    return out


def _staging_of(problem, i: int) -> tuple[np.ndarray, tuple[list[frozenset], np.ndarray], np.ndarray]:
    """Per candidate of op i: its tile count (0: untiled), the tensors the same for every tile (the distinct
    sets, and each candidate's index into them), and whether it stages them."""
    oc = problem.cands[i]
    per_layout = []
    for lay in oc.layouts:
        if lay.tile is None:
            per_layout.append((0, frozenset(), False))
        else:
            per_layout.append((lay.tile.tiles, frozenset(staged_tensors_of(oc, lay.tile.dim)), lay.tile.staged))
    rows = [per_layout[c.layout] for c in problem.candidates[i]]
    sets = list(dict.fromkeys(inv for _, inv, _ in rows))
    index = {x: n for n, x in enumerate(sets)}
    return (
        np.array([t for t, _, _ in rows], dtype=np.int64),
        (sets, np.array([index[inv] for _, inv, _ in rows], dtype=np.int64)),
        np.array([st for _, _, st in rows], dtype=bool),
    )


def node_interval(problem, i: int) -> tuple[int, int]:
    """Op i's buffer interval: producer to last use, widened to every op that can share its loop when one
    of its candidates holds a buffer across iterations (an accumulator, staged operands)."""
    lo, hi = i, problem.last_use[i]
    if any(lay.tile is not None and lay.tile.staged_bytes + lay.tile.accumulate for lay in problem.cands[i].layouts):
        while lo > 0 and candidate_tiles(problem, lo - 1).any():
            lo -= 1
        last = i
        while last + 1 < len(problem.ops) and candidate_tiles(problem, last + 1).any():
            last += 1
        hi = max(hi, last)
    return lo, hi + 1


# ---- the loops of an assignment ------------------------------------------------------------------
def decode_loops(problem, assignment, formulation) -> tuple[list[LoopPlan], list[int | None]]:
    """Maximal runs of consecutive ops tiled with the same count, and each op's loop index."""
    tiles = [problem.layout(i, s).tile for i, s in enumerate(assignment)]
    copies = None  # (step, bytes) of every edge copy, listed once for all loops
    loops: list[LoopPlan] = []
    of: list[int | None] = [None] * len(tiles)
    i = 0
    while i < len(tiles):
        if tiles[i] is None:
            i += 1
            continue
        j = i
        while j + 1 < len(tiles) and tiles[j + 1] is not None and tiles[j + 1].tiles == tiles[i].tiles:
            j += 1
        members = list(range(i, j + 1))
        if copies is None:
            edges = formulation.edges  # a tail of in-place reuse (``model.inplace``) is its tile's end, not a copy
            copies = [
                (b.lower, b.size)
                for b in formulation.buffers(assignment)
                if b.key[0] == "edge" and edges[b.key[1]].tail is None
            ]
        names = [problem.ops[x].name for x in members]
        dims = {problem.ops[x].name: problem.cands[x].space.dims[tiles[x].dim] for x in members}
        staged = sorted(
            {t for x in members for t in staged_tensors(problem.cands[x], problem.layout(x, assignment[x]))}
        )
        for x in members:
            of[x] = len(loops)
        loops.append(
            LoopPlan(
                ops=names,
                dim=dims[names[0]],
                op_dims=dims,
                tiles=tiles[i].tiles,
                footprint_bytes=loop_footprint(problem, assignment, copies, members),
                staged=staged,
                accumulate=any(tiles[x].accumulate for x in members),
            )
        )
        i = j + 1
    return loops, of


def loop_footprint(problem, assignment, copies: list[tuple[int, int]], members: list[int]) -> int:
    """Per core, the peak over the loop's ops of the tiles live there (an ``lx`` output from its producer to
    its last consumer) and the copies made there, plus what lives across iterations: accumulators and
    staged operands; ``copies``: (step, bytes) of every edge copy of the assignment."""
    across, tiles, staged = 0, [], {}
    for x in members:
        t = problem.layout(x, assignment[x]).tile
        across += t.tile_bytes if t.accumulate else 0
        for name, size in t.staged_parts:  # ops staging the same tensor share its one copy
            staged[name] = max(staged.get(name, 0), size)
        if problem.candidates[x][assignment[x]].residency == "lx":
            tiles.append((x, problem.last_use[x], t.tile_bytes))
    peak = 0
    for step in members:
        live = sum(size for x, last, size in tiles if x <= step <= last)
        live += sum(size for lower, size in copies if lower == step)
        peak = max(peak, live)
    return across + sum(staged.values()) + peak


def parse_tiling(oc: OpCandidates, spec) -> tuple[int, int] | None:
    """A pinned tiling ``{"dim": name, "tiles": T}`` (or None: untiled) as (iteration dim index, T)."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) != {"dim", "tiles"}:
        raise PlanError(f"op {oc.op.name!r}: tiling pin must be {{'dim': name, 'tiles': T}} or null, got {spec!r}")
    dims = oc.space.dims
    batch = [d for d in dims if d.startswith("b")]
    name = batch[0] if spec["dim"] == "b" and len(batch) == 1 else spec["dim"]
    if name not in dims:
        raise PlanError(f"op {oc.op.name!r}: tiling pin names dim {spec['dim']!r}; its dims are {', '.join(dims)}")
    t = spec["tiles"]
    if isinstance(t, bool) or not isinstance(t, int) or t < 2:
        raise PlanError(f"op {oc.op.name!r}: tiling pin needs an integer tile count >= 2, got {t!r}")
    return dims.index(name), t
