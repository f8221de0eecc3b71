"""The quantities of tiled layouts (model.geometry, model.sharing) against their untiled bases, derived
again here: a tiled layout slices like its base, so every edge quantity its slices decide is its base's,
and it reads an operand without the tiled dim again every tile unless it stages it. The full Problem and
the one-candidate Problem of a plan (``check.plans.fixed_problem``) must price a tiled plan alike."""

from __future__ import annotations

from collections import Counter
from functools import cache

import spyreopt as so
from spyreopt.model.check.plans import fixed_problem
from spyreopt.model.edge_analysis import analyse_edge
from spyreopt.model.layout import box_padded_bytes
from spyreopt.model.problem import Problem


@cache
def _problem() -> Problem:
    """A matmul whose 64 MiB output its consumer reads: both may tile (rows or columns)."""
    g = so.Graph("mlp")
    h = g.matmul(g.input("x", (8192, 1024)), g.weight("w", (1024, 4096)), name="mm")
    g.output(g.pointwise("gelu", h, name="act"))
    return Problem(g)


def test_a_tiled_pair_has_the_slice_quantities_of_its_untiled_layouts():
    p = _problem()
    (k,) = range(len(p.edges))
    e = p.edges[k]
    q = p.edge_quantities(k)
    prod, cons = p.cands[e.producer], p.cands[e.consumer]
    tensor = p.graph.tensors[e.tensor]
    tiled = 0
    for a, lu in enumerate(prod.layouts):
        for b, lv in enumerate(cons.layouts):
            if (lu.tile is None and lv.tile is None) or q.restick[a, b] or q.inplace[a, b]:
                continue
            tiled += 1
            ea = analyse_edge(lu, cons, lv, e.operand, tensor, p.hw, p.coef)
            got = (q.runs[a, b], q.fan_in[a, b], q.link[a, b], q.hops[a, b], q.ingress[a, b], q.copy[a, b])
            assert got == (ea.runs, ea.fan_in, ea.link_bytes, ea.hops, ea.ingress_bytes, ea.copy_bytes), (a, b)
    assert tiled > 0 and q.ingress[q.relayout_legal & ~q.inplace].min() > 0


def test_an_unstaged_invariant_operand_is_read_again_every_tile():
    p = _problem()
    oc, lq = p.cands[0], p.layout_quantities(0)
    w = 1024 * 4096 * 2
    seen = set()
    for li, lay in enumerate(oc.layouts):
        t = lay.tile
        if t is None or oc.space.dims[t.dim] != "m":
            continue
        base = p.layout_quantities(0)
        b = t.base
        x = int(base.leaf_bytes[b]) - w  # x varies with the tile: read once over all tiles
        assert x > 0  # an n split reads each row block of x once (multicast to the cores sharing it)
        again = 1 if t.staged else t.tiles
        assert int(lq.leaf_bytes[li]) == x + again * w, (lay.division.factors, t)
        per_core: dict[int, int] = {}  # the bytes each core reads that other cores read too, every tile's counted
        for j, times in ((0, 1), (1, again)):
            readers = Counter(box for _, box in lay.reads[j])
            for c, box in lay.reads[j]:
                shared = box_padded_bytes(box, 1, 2, p.hw.stick_bytes) if readers[box] > 1 else 0
                per_core[c] = per_core.get(c, 0) + times * shared
        assert int(lq.leaf_shared[li]) == max(per_core.values())
        seen.add(t.staged)
    assert seen == {False, True}


def test_the_fixed_problem_prices_a_tiled_plan_as_the_planner_did():
    g = so.workloads.get("softmax")
    ops = [o.name for o in g.compute_ops()]
    pin = {n: {"tiling": {"dim": "d0", "tiles": 4}} for n in ops}
    plan = so.solve(g, backend="greedy", time_limit=10, pin=pin)  # validated: the same check, inside
    assert plan.loops and any(e.mode == "relayout" for e in plan.edges)  # tiles relaid out between the ops
    fp = fixed_problem(plan)
    assert abs(fp.total_ps(fp.normalize([0] * len(fp.ops))) * 1e-6 - plan.cost_us) < 1e-9


def test_a_tiled_layout_moves_each_tile_in_its_own_dma_requests():
    """A tile's blocks are the loop checker's ``tile_box`` of each core's block: where the cores also split
    the tiled dim the runs are shorter, so writing (and reading) tile by tile takes more requests than the
    untiled layout (the simulator charges each; the model had charged the untiled count, 5x fast on a
    Llama attention loop's device-memory write)."""
    from spyreopt.model.candidates import dma_requests
    from spyreopt.model.check.loop_dims import tile_box

    p = _problem()
    for i in (0, 1):
        oc = p.cands[i]
        out_dim = oc.space.output_map
        shorter = 0
        for lay in oc.layouts:
            t = lay.tile
            if t is None or t.accumulate:
                continue
            od = out_dim.index(t.dim)
            want = sum(
                dma_requests(tile_box(box, od, oc.out.shape[od], t.tiles, k), oc.out.shape, lay.stick, 2, p.hw)
                for box in lay.owner_boxes.values()
                for k in range(t.tiles)
            )
            assert lay.write_requests == want, (lay.division.factors, t)
            base = oc.layouts[t.base]
            assert lay.write_requests >= base.write_requests
            shorter += lay.write_requests > base.write_requests
        assert shorter  # some tiled layout splits its tiled dim over cores too


def test_uneven_divisions_never_displace_the_even_candidates():
    """Qwen2-0.5B's intermediate (76 sticks) gains uneven splits (8 and 16 ways); they come as extra
    candidates, so the even loop the planner found without them (m:8 x n:4 over 8 tiles) stays reachable
    and CP-SAT's optimum is no worse than that plan pinned."""
    g = so.workloads.get("prefill_swiglu")
    loop = {"dim": "m", "tiles": 8}
    pin = {
        "gate": {"division": {"m": 8, "n": 4}, "tiling": loop},
        "up": {"division": {"m": 8, "n": 4}, "tiling": loop},
        "silu": {"division": {"d0": 8, "d1": 4}, "tiling": {"dim": "d0", "tiles": 8}},
        "glu": {"division": {"d0": 8, "d1": 4}, "tiling": {"dim": "d0", "tiles": 8}},
        "down": {"division": {"m": 8, "n": 2, "k": 2}, "tiling": loop},
    }
    pinned = so.solve(g, backend="cpsat", seed=0, time_limit=20, pin=pin)
    free = so.solve(g, backend="cpsat", seed=0, time_limit=20)
    assert free.status == "optimal"
    assert free.cost_us <= pinned.cost_us + 1e-9
    oc = Problem(g).cands[0]
    assert any(not oc.is_even(lay) for lay in oc.layouts) and any(oc.is_even(lay) for lay in oc.layouts)


def test_a_loop_stages_only_operands_whose_stick_it_knows():
    """A staged operand is kept in the stick it is read in; another op's output read in any stick is stored
    in its producer's choice, which a layout cannot see, so its kept size would be a guess (a Llama-3-8B
    RMSNorm loop staged ``rsqrt`` at 16,384 bytes a core where the checker found 256: the stitched plan of
    ``spyreopt solve model:llama-3-8b --seq 4096`` was rejected). Such a tiling is not offered, and a pin
    asking for it is a PlanError naming the tensor."""
    import pytest

    from spyreopt.errors import PlanError
    from spyreopt.model.tiling import checked_tiled_layout, invariant_operands

    g = so.presets.get("llama-3-8b", phase="prefill", seq=4096, layers=1)
    p = Problem(g)
    staged_seen = 0
    for oc in p.cands:
        for lay in oc.layouts:
            t = lay.tile
            if t is None or not t.staged:
                continue
            staged_seen += 1
            for j in invariant_operands(oc, t.dim):
                assert lay.required[j] is not None or g.tensors[oc.refs[j].base].producer is None, oc.op.name
    assert staged_seen
    oc = next(c for c in p.cands if c.op.name == "l0.attn_norm.norm")
    d1 = oc.space.dims.index("d1")
    base = next(b for b, lay in enumerate(oc.layouts) if lay.tile is None and lay.required[1] is None)
    with pytest.raises(PlanError, match="l0.attn_norm.rsqrt"):
        checked_tiled_layout(oc, base, d1, 32, staged=True)
