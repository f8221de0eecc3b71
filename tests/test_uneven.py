"""Uneven divisions: a factor that does not divide a dim's whole-stick count, the last part shorter.

A prime stick count (Granite's vocabulary, 769 sticks) has no even split but its own; these tests check
that such shapes plan, validate, simulate and execute, that costs take the largest part, that the checker
and the simulator agree on the parts' bytes, and that the exact backends still find the optimum.
"""

from __future__ import annotations

import numpy as np
import pytest

import spyreopt as so
from spyreopt.errors import PlanError
from spyreopt.hw.execute import reference
from spyreopt.model.candidates import OpCandidates
from spyreopt.model.division import chunk, fills, legal_factors
from spyreopt.model.problem import Problem
from spyreopt.solvers import cpsat, milp
from spyreopt.solving.fixed import plan_for
from spyreopt.testing.formulations import unplaced_optimum

HW = so.HardwareSpec()


def test_offered_factors_add_powers_of_two_that_fill_every_part():
    assert legal_factors(769 * 64, 64, 32) == [1, 2, 4, 8, 16]  # 769 sticks, a prime: 32 parts of 25 use 31
    assert legal_factors(32000, 64, 32) == [1, 2, 4, 5, 8, 10, 16, 20, 25, 32]  # 500 sticks: 32 parts of 16
    assert legal_factors(200, 1, 32) == [1, 2, 4, 5, 8, 10, 16, 20, 25]  # 16 uneven (13s); 32 parts of 7 use 29
    assert legal_factors(4096, 64, 32) == [1, 2, 4, 8, 16, 32]  # a power of two: exactly the divisors
    assert legal_factors(12, 1, 32) == [1, 2, 3, 4, 6, 12]  # 8 would leave parts of 2 for 6 cores only
    assert chunk(769 * 64, 64, 16) == 49 * 64 and fills(769 * 64, 64, 16) and not fills(769 * 64, 64, 32)
    assert not fills(20 * 64, 64, 32) and not fills(12, 1, 8)


def _prime_matmul(n_sticks: int = 19) -> so.Graph:
    g = so.Graph("prime")
    x = g.input("x", (128, 256), "fp16")
    g.output(g.matmul(x, g.weight("w", (256, n_sticks * 64)), name="mm"))
    return g


def test_prime_extent_matmul_plans_validates_and_simulates():
    g = _prime_matmul()
    for backend in ("greedy", "cpsat"):
        plan = so.solve(g, backend=backend, seed=0, time_limit=10)
        plan.validate()
        assert so.simulate(plan).time_us > 0
    cands = OpCandidates(g, g.ops["mm"], HW, Problem(g).coef, 64)
    assert any(lay.division.factors[1] in (4, 8, 16) for lay in cands.layouts)  # uneven n splits are offered


def test_uneven_split_costs_its_largest_part():
    """19 sticks over 4 cores: parts of 5, 5, 5, 4 sticks; the op's compute is the 5-stick part's, the same
    as an even split of 20 sticks over 4 cores."""
    g19, g20 = _prime_matmul(19), _prime_matmul(20)
    c19 = OpCandidates(g19, g19.ops["mm"], HW, Problem(g19).coef, 64, fixed=((1, 4, 1), 1))
    c20 = OpCandidates(g20, g20.ops["mm"], HW, Problem(g20).coef, 64, fixed=((1, 4, 1), 1))
    (a,), (b,) = c19.layouts, c20.layouts
    assert a.compute_ns == b.compute_ns
    assert c19.compute_terms(a.division, 1)[1] == 128 * 5 * 64 * 256
    assert a.footprint == b.footprint == 128 * 5 * 128  # the largest slice
    assert a.write_bytes == 128 * 19 * 128 < b.write_bytes  # every part once: the shorter last part counted as is


def test_simulator_and_checker_agree_on_uneven_part_bytes():
    g = so.Graph("pw")
    x = g.input("x", (64, 19 * 64), "fp16")
    a = g.pointwise("exp", x, name="a")
    g.output(g.pointwise("add", a, x, name="b"))
    plan = plan_for(g, {"a": ({"d1": 4}, 1, "lx"), "b": ({"d1": 4}, 1, "hbm")})
    assert plan.tensor("a").bytes_per_core == 64 * 5 * 128  # checked by plan.validate() in plan_for
    assert {e.mode for e in plan.edges if e.tensor == "a"} == {"inplace"}  # the same uneven slices
    sim = so.simulate(plan)
    peak = sim.peak_lx_bytes
    assert peak[0] == 64 * 5 * 128 and peak[3] == 64 * 4 * 128  # the simulator's own slices: 5,5,5,4 sticks
    assert sim.device_write_bytes == 64 * 19 * 128
    got, want = so.execute(plan), reference(g)
    np.testing.assert_allclose(got["b"], want["b"], rtol=1e-4, atol=1e-5)  # every part computed, none twice


def test_uneven_relayout_and_mismatch_validate_and_simulate():
    """A 2-way uneven producer (10, 9 sticks) read by a 4-way one (5, 5, 5, 4): the slices differ, no in place."""
    g = so.Graph("pw2")
    x = g.input("x", (64, 19 * 64), "fp16")
    a = g.pointwise("exp", x, name="a")
    g.output(g.pointwise("neg", a, name="b"))
    plan = plan_for(g, {"a": ({"d1": 2}, 1, "lx"), "b": ({"d1": 4}, 1, "hbm")})
    (edge,) = [e for e in plan.edges if e.tensor == "a"]
    assert edge.mode == "relayout"
    assert so.simulate(plan).time_us > 0
    np.testing.assert_allclose(so.execute(plan)["b"], reference(g)["b"], rtol=1e-4, atol=1e-5)


def test_pinned_uneven_division_and_pinned_empty_part():
    g = so.Graph("lm")
    x = g.input("x", (64, 256), "fp16")
    g.output(g.matmul(x, g.weight("w", (256, 32000)), name="lm_head"))  # 500 sticks: 32 parts of 16, the last 4
    plan = so.solve(g, backend="greedy", seed=0, time_limit=10, pin={"lm_head": {"division": {"n": 32}}})
    assert plan.op("lm_head").division["n"] == 32
    plan.validate()
    small = _prime_matmul(20)
    with pytest.raises(PlanError, match="'mm'.*empty"):
        so.solve(small, backend="greedy", seed=0, time_limit=10, pin={"mm": {"division": {"n": 32}}})


def test_plan_check_rejects_an_empty_part():
    plan = so.solve(_prime_matmul(20), backend="greedy", seed=0, time_limit=10)
    plan.op("mm").division = {**plan.op("mm").division, "n": 32, "m": 1, "k": 1}
    with pytest.raises(PlanError, match="'mm'"):
        plan.validate()
    with pytest.raises(PlanError, match="'mm'"):
        so.simulate(plan)


def test_exact_backends_find_the_optimum_on_an_uneven_shape():
    g = so.Graph("tiny")
    x = g.input("x", (64, 3 * 64), "fp16")
    a = g.pointwise("exp", x, name="a")
    g.output(g.pointwise("add", a, x, name="b"))
    hw = so.HardwareSpec(cores=2)  # 3 sticks: only 2 is an uneven factor (parts of 2 and 1 sticks)
    problem = Problem(g, hw, max_layouts=3, tiling=False)
    assert any(lay.division.factors == (1, 2) for lay in problem.cands[0].layouts)
    f = problem.formulation
    best = unplaced_optimum(f)
    for solve in (cpsat.solve, milp.solve):
        sol = solve(f, time_limit=20, seed=0)
        assert sol.objective == f.evaluate(sol.assignment) == best


def test_tiled_loop_over_an_uneven_division():
    """Tiles stay even (4 tiles x 2 parts of the 512 rows); the other dim splits unevenly inside the loop."""
    g = so.Graph("loop")
    x = g.input("x", (512, 256), "fp16")
    h = g.matmul(x, g.weight("w", (256, 31 * 64)), name="mm")  # 31 sticks: 16 parts, 15 of 2 sticks, the last 1
    g.output(g.pointwise("neg", g.pointwise("exp", h, name="e"), name="o"))
    ops = {"mm": ("m", {"n": 16}), "e": ("d0", {"d1": 16}), "o": ("d0", {"d1": 16})}
    pin = {n: {"tiling": {"dim": d, "tiles": 4}, "division": div} for n, (d, div) in ops.items()}
    plan = so.solve(g, backend="greedy", seed=0, time_limit=10, pin=pin)
    plan.validate()
    (loop,) = plan.loops
    assert loop.ops == ["mm", "e", "o"] and plan.op("mm").division["n"] == 16
    assert so.simulate(plan).time_us > 0
    np.testing.assert_allclose(so.execute(plan)["o"], reference(g)["o"], rtol=1e-4, atol=1e-5)
    with pytest.raises(PlanError, match="'mm'"):  # a tiled dim keeps even tiles: 31 sticks make no 4 tiles
        so.solve(g, backend="greedy", seed=0, time_limit=10, pin={"mm": {"tiling": {"dim": "n", "tiles": 4}}})
