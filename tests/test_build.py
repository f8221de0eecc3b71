"""The fast problem build: shared tables, the simulator's independent slicing, greedy's fast local costs."""

import numpy as np
import pytest

import spyreopt as so
from spyreopt.hw.sim_slices import slicing, space_of
from spyreopt.model.problem import Problem
from spyreopt.solvers.greedy import FastView
from spyreopt.solvers.local import LocalView


def test_depth_adds_no_distinct_tables():
    """Identical layers share layouts and cost tables: a deeper stack computes no new ones."""
    shallow, deep = (Problem(so.workloads.get("layer_stack", layers=n)) for n in (3, 7))
    assert shallow.formulation.nodes and deep.formulation.nodes  # build both
    assert len(deep.ops) > 2 * len(shallow.ops)
    assert len(deep._memo) == len(shallow._memo)
    f = deep.formulation
    assert len({id(n.costs) for n in f.nodes}) < len(f.nodes) / 3
    with pytest.raises(ValueError, match="read-only"):
        f.edges[0].costs[0, 0] = 1  # shared between edges: no backend may change one under another


@pytest.mark.parametrize("name", so.workloads.names())
def test_simulator_slices_every_candidate_like_the_planner(name):
    """The simulator's own reading of a division gives the planner's slices, for every candidate layout."""
    p = Problem(so.workloads.get(name))
    checked = 0
    for oc in p.cands:
        space = space_of(p.graph, oc.op)
        assert space.dims == oc.space.dims and space.extents == oc.space.extents
        for lay in oc.layouts:
            s = slicing(p.graph, oc.op, space, lay.division.factors, lay.stick, p.hw)
            assert s.owner_boxes == lay.owner_boxes and s.reads == lay.reads and s.required == lay.required
            checked += 1
    assert checked >= len(p.ops)


@pytest.mark.parametrize("name", ["transformer_block", "sdpa", "relayout"])
def test_fast_view_costs_equal_local_view(name):
    f = Problem(so.workloads.get(name)).formulation
    fast, slow = FastView(f), LocalView(f)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a = [int(rng.integers(n.num_candidates)) for n in f.nodes]
        for i in range(len(a)):
            assert np.array_equal(fast.candidate_costs(i, a), slow.candidate_costs(i, a))


def test_formulation_indexes_match_a_scan():
    f = Problem(so.workloads.get("mha")).formulation
    for i in range(len(f.nodes)):
        assert f.max_terms_of(i) == [t for t, m in enumerate(f.max_terms) if m.node == i]
    a = [int(np.argmax(n.usages)) for n in f.nodes]
    steps = [0] * f.num_steps
    for b in f.buffers(a):
        for t in range(b.lower, b.upper):
            steps[t] += b.size
    assert f.usage_profile(a) == steps and max(steps) > 0


def test_overlap_sweep_names_the_first_clashing_pair_of_a_full_scan():
    from spyreopt.errors import PlanError
    from spyreopt.model.check.plans import _check_overlaps

    rng = np.random.default_rng(3)
    clashes = 0
    for _ in range(200):
        bufs = []
        for n in range(12):
            lo = int(rng.integers(0, 10))
            bufs.append(
                (
                    f"b{n}",
                    int(rng.integers(0, 8)) * 128,
                    128 * int(rng.integers(1, 3)),
                    (lo, lo + int(rng.integers(1, 4))),
                )
            )
        first = next(
            ((x, y) for x in range(len(bufs)) for y in range(x + 1, len(bufs))
             if bufs[x][3][0] < bufs[y][3][1] and bufs[y][3][0] < bufs[x][3][1]
             and bufs[x][1] < bufs[y][1] + bufs[y][2] and bufs[y][1] < bufs[x][1] + bufs[x][2]),
            None,
        )  # fmt: skip
        if first is None:
            _check_overlaps(bufs)
            continue
        clashes += 1
        with pytest.raises(PlanError, match=rf"^{bufs[first[0]][0]} at .* and {bufs[first[1]][0]} at "):
            _check_overlaps(bufs)
    assert clashes > 50
