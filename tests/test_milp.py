"""The MILP backend: exact on small instances, honest under time limits, both solvers."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import spyreopt as so
from spyreopt.calibrate.sampling import reference_coefficients
from spyreopt.errors import SolverError
from spyreopt.formats.iopddl import load_iopddl
from spyreopt.model.formulation import Edge, Formulation, Node, Placement, Solution
from spyreopt.solvers import greedy, milp
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solvers.milp.model import HUGE, MAX_COEFFICIENT, MilpModel, _maximal_steps, milp_domains
from spyreopt.testing.formulations import random_formulation


def brute_force(f: Formulation) -> int:
    """The optimum by enumeration: cheapest assignment that meets every constraint (and places)."""
    plain = dataclasses.replace(f, placement=None, _incident={})
    limit = f.placement.capacity if f.placement else None
    ranked = sorted(itertools.product(*(range(n.num_candidates) for n in f.nodes)), key=f.evaluate)
    for a in ranked:
        if plain.violations(a):
            continue
        if limit is not None and max(f.usage_profile(a), default=0) > limit:
            continue
        if f.placement is None or place_assignment(f, a, time_limit=5.0) is not None:
            return f.evaluate(a)
    raise AssertionError("no feasible assignment")


def zero_hint(f: Formulation) -> Solution:
    """A valid but poor start (every node on its zero-memory candidate), so the MILP has to work."""
    a = tuple(0 for _ in f.nodes)
    return Solution(a, place_assignment(f, a) or {}, "feasible", f.evaluate(a))


def assert_valid(f: Formulation, sol: Solution) -> None:
    assert f.violations(sol.assignment, sol.offsets) == []
    assert sol.objective == f.evaluate(sol.assignment)
    if sol.bound is not None:
        assert sol.bound <= sol.objective


FEATURES = [
    dict(),
    dict(max_terms=False, edge_usage=False, forbid_prob=0.0),
    dict(forbid_prob=0.5, tight=0.3),
    dict(tight=0.15, edge_prob=0.6),
    dict(tight=1.0, max_candidates=5),
    dict(placement=True, tight=0.4),
    dict(placement=True, tight=0.25, edge_prob=0.6),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("features", FEATURES, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()) or "all")
def test_optimal_equals_brute_force(seed, features):
    f = random_formulation(seed, num_nodes=6, **features)
    sol = milp.solve(f, time_limit=30, seed=0, hint=zero_hint(f))
    assert_valid(f, sol)
    assert sol.status == "optimal"
    assert sol.objective == brute_force(f) == sol.bound
    if sol.objective < zero_hint(f).objective:
        assert sol.stats["source"] == "milp"


@pytest.mark.parametrize("seed", range(6))
def test_never_worse_than_greedy(seed):
    f = random_formulation(seed, num_nodes=12, max_candidates=5, tight=0.3, placement=seed % 2 == 1)
    start = greedy.solve(f, time_limit=5, seed=0)
    sol = milp.solve(f, time_limit=20, seed=0)
    assert_valid(f, sol)
    assert sol.objective <= start.objective
    assert sol.stats["start"] == "greedy" and sol.stats["warm_start"]
    if sol.objective == start.objective:
        assert sol.stats["source"] == "greedy" and "nothing better" in sol.message


@pytest.mark.parametrize("seed", range(3))
def test_cbc_matches_brute_force(seed):
    f = random_formulation(seed, num_nodes=6, tight=0.3, placement=seed == 2)
    sol = milp.solve(f, time_limit=30, seed=0, solver="cbc", hint=zero_hint(f))
    assert_valid(f, sol)
    assert sol.status == "optimal" and sol.stats["solver"] == "cbc"
    assert sol.objective == brute_force(f)


def test_time_limit_returns_valid_unproven_solution():
    # 200 nodes: HiGHS needs far more than 20 s to prove this one (80 nodes it proved in 0.46 s on an idle machine)
    f = random_formulation(1, num_nodes=200, max_candidates=6, edge_prob=0.06, tight=0.3)
    sol = milp.solve(f, time_limit=0.5, seed=0)
    assert_valid(f, sol)
    assert sol.status in ("timeout", "feasible")
    assert sol.bound is None or sol.bound < sol.objective
    assert sol.seconds < 5


def test_deterministic():
    f = random_formulation(3, num_nodes=10, max_candidates=5, tight=0.3, placement=True)
    a, b = (milp.solve(f, time_limit=20, seed=7) for _ in range(2))
    assert (a.assignment, a.offsets, a.objective, a.status) == (b.assignment, b.offsets, b.objective, b.status)


def test_unknown_solver_lists_available_ones():
    f = random_formulation(0)
    with pytest.raises(SolverError, match="available solvers: highs, cbc"):
        milp.solve(f, time_limit=1, seed=0, solver="gurobi-please")
    with pytest.raises(SolverError, match="unknown option"):
        milp.solve(f, time_limit=1, seed=0, mip_gap=0.1)


def test_invalid_hint_is_ignored_and_said():
    f = random_formulation(2, tight=0.2)
    greedy_a = greedy.solve(f, time_limit=1, seed=0).assignment
    heavy = tuple(int(np.argmax(n.usages)) for n in f.nodes)
    assert f.violations(heavy)  # over the limit
    sol = milp.solve(f, time_limit=10, seed=0, hint=Solution(heavy, {}, "feasible", 0))
    assert "ignored" in sol.stats["hint"] and sol.stats["start"] == "greedy"
    assert_valid(f, sol)
    assert sol.objective <= f.evaluate(greedy_a)


def _fragmenting() -> Formulation:
    """Seven buffers whose bytes fit at every step but which cannot all be placed (capacity 4 blocks).

    Each node keeps its buffer (candidate 1, free) or spills it (candidate 0, a cost).
    """
    lifetimes = [(1, 4, 2), (3, 7, 2), (6, 8, 1), (6, 9, 1), (7, 9, 1), (8, 10, 2), (9, 10, 2)]
    nodes = tuple(
        Node(f"b{i}", np.array([5 + i, 0]), np.array([0, 128 * size]), (lo, hi))
        for i, (lo, hi, size) in enumerate(lifetimes)
    )
    return Formulation(nodes, (), usage_limit=512, placement=Placement(512, 128), name="fragmenting")


def test_placement_failure_adds_cuts_until_placeable():
    f = _fragmenting()
    assert place_assignment(f, (1,) * 7) is None  # everything resident fits in bytes but not in addresses
    sol = milp.solve(f, time_limit=30, seed=0, hint=zero_hint(f))
    assert_valid(f, sol)
    assert sol.stats["placement_rounds"] >= 2 and sol.stats["nogood_cuts"] >= 1
    assert sol.objective == brute_force(f)
    assert sol.status == ("optimal" if sol.stats["cuts_proven"] else "feasible")


def test_aligned_capacity_rows_exclude_unplaceable_byte_fits():
    # three co-live 80-byte buffers fit 256 bytes but not at 128-aligned addresses: the model knows it
    nodes = tuple(Node(f"n{i}", np.array([10, 0]), np.array([0, 80]), (0, 1)) for i in range(3))
    f = Formulation(nodes, (), usage_limit=None, placement=Placement(256, 128))
    sol = milp.solve(f, time_limit=10, seed=0, hint=zero_hint(f))
    assert_valid(f, sol)
    assert sol.status == "optimal" and sol.objective == 10
    assert sol.stats["placement_rounds"] == 1 and sol.stats["nogood_cuts"] == 0


def _huge_costs() -> Formulation:
    """IOPDDL-style: 1e18 marks strategies and pairs that must not be used; memory forces one onto node 1."""
    big = 10**18
    nodes = (
        Node("a", np.array([3, big, 7]), np.array([4, 0, 2]), (0, 2)),
        Node("b", np.array([big, 1, 2]), np.array([0, 3, 3]), (1, 3)),
        Node("c", np.array([5, 6]), np.array([1, 1]), (2, 3)),
    )
    edges = (
        Edge(0, 1, np.array([[1, big, 4], [2, 2, 2], [big, 0, 9]])),
        Edge(1, 2, np.array([[0, big], [3, 1], [big, 2]])),
    )
    return Formulation(nodes, edges, usage_limit=5)


def test_huge_costs_are_pruned_and_objective_exact():
    f = _huge_costs()
    sol = milp.solve(f, time_limit=10, seed=0)
    assert_valid(f, sol)
    assert sol.status == "optimal" and sol.objective == brute_force(f) < HUGE
    assert sol.stats["reductions"]["bound"] > 0


def test_huge_incumbent_still_proves_optimum():
    # the start uses a 1e18 cost: huge costs are dropped heuristically, and the floor proves it harmless
    f = _huge_costs()
    bad = next(
        a for a in itertools.product(range(3), range(3), range(2)) if not f.violations(a) and f.evaluate(a) >= HUGE
    )
    sol = milp.solve(f, time_limit=10, seed=0, hint=Solution(bad, {}, "feasible", f.evaluate(bad)))
    assert_valid(f, sol)
    assert sol.status == "optimal" and sol.objective == brute_force(f)


def test_forced_huge_cost_is_exact():
    # memory leaves node 1 only its 1e18 candidate: the answer is huge, exact, and still proven
    big = 10**18
    nodes = (
        Node("a", np.array([1, 2]), np.array([3, 3]), (0, 2)),
        Node("b", np.array([big + 5, 4]), np.array([0, 3]), (0, 2)),
    )
    f = Formulation(nodes, (), usage_limit=4)
    sol = milp.solve(f, time_limit=10, seed=0)
    assert_valid(f, sol)
    assert sol.objective == big + 6 == brute_force(f)
    assert sol.status == "optimal"


def test_reduce_domains_is_exact_against_incumbent():
    f = random_formulation(5, num_nodes=7, forbid_prob=0.4, tight=0.3)
    best = brute_force(f)
    dom = milp_domains(f, best)
    optimal = [
        a
        for a in itertools.product(*(range(n.num_candidates) for n in f.nodes))
        if not f.violations(a) and f.evaluate(a) == best
    ]
    assert optimal and all(dom.masks[i][s] for a in optimal for i, s in enumerate(a))


def test_edge_linearisation_is_compact():
    s = 4
    nodes = tuple(Node(f"n{i}", np.arange(s), np.zeros(s, dtype=np.int64), (i, i + 1)) for i in range(2))
    allowed = ~np.eye(s, dtype=bool)
    edges = (Edge(0, 1, np.ones((s, s), dtype=np.int64), allowed), Edge(0, 1, np.ones((s, s), dtype=np.int64)))
    f = Formulation(nodes, edges, usage_limit=None)
    model = MilpModel(f, milp_domains(f, None))
    size = model.size()
    # 2·4 one-hot x, 12 shared pair variables (no forbidden pair); 2 one-hot rows + 4 + 4 linking rows
    assert size == {"variables": 8 + 12, "integer_variables": 8, "constraints": 2 + 8}


def test_capacity_rows_cover_every_step():
    rng = np.random.default_rng(0)
    for _ in range(50):
        intervals = [(int(lo), int(lo + rng.integers(1, 5))) for lo in rng.integers(0, 10, size=6)]
        kept = _maximal_steps(intervals, keep_all=False)
        live = [{j for j, (lo, hi) in enumerate(intervals) if lo <= t < hi} for t in range(15)]
        assert all(any(live[t] <= live[k] for k in kept) for t in range(15))


def test_highs_prints_nothing():
    code = (
        "from spyreopt.testing.formulations import random_formulation\n"
        "from spyreopt.solvers import milp\n"
        "milp.solve(random_formulation(0), time_limit=5, seed=0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("letter, best", [("B", 532_843), ("G", 217_039)])
def test_iopddl_proven_optimal(letter, best):
    path = Path(__file__).parent / "data" / "iopddl" / f"asplos-2025-iopddl-{letter}.json.gz"
    f = load_iopddl(path)
    sol = milp.solve(f, time_limit=120, seed=0)
    assert_valid(f, sol)
    assert sol.status == "optimal" and sol.objective == sol.bound == best  # the contest's best is optimal


def test_swiglu_prefill_both_exact_backends_agree_at_the_cheaper_plan():
    """Issue 16's false optimum: at SwiGLU prefill shapes MILP returned its greedy start (3,957.65 µs) as optimal
    while CP-SAT's valid plan costs 3,738.84 µs. Raw picosecond times as epigraph coefficients made HiGHS declare
    the root LP infeasible, which with a MIP start reads as "the start is optimal"."""
    g = so.workloads.get("swiglu", tokens=512, d_model=4096, d_ff=14336)
    # the public figures, not the shipped fit: under them the greedy start (3,511.03 µs) is far from the optimum,
    # which is what this test needs whatever the shipped coefficients become
    problem = so.Problem(g, coefficients=reference_coefficients())
    plans = {b: so.solve(problem, backend=b, time_limit=60, seed=0) for b in ("cpsat", "milp")}
    start = so.solve(problem, backend="greedy", seed=0, window=1)  # descent alone: window moves reach 3738.84 too
    for plan in plans.values():
        plan.validate()
        assert plan.status == "optimal" and plan.bound_us == plan.cost_us
    assert plans["milp"].cost_us == plans["cpsat"].cost_us == pytest.approx(2756.834585)
    assert plans["milp"].cost_us < start.cost_us


def test_model_coefficients_are_differences_within_the_solver_range():
    """No objective or row coefficient handed to the solver is a raw time: all within MAX_COEFFICIENT."""
    f = so.Problem(so.workloads.get("swiglu", tokens=512, d_model=4096, d_ff=14336)).formulation
    model = MilpModel(f, milp_domains(f, None))
    assert model.unit > 1
    coefficients = [abs(c) for c in model.prob.objective.values()]
    for row in model.prob.constraints.values():
        if not row.name.startswith("cap"):  # capacity rows are bytes against the byte limit
            coefficients += [abs(c) for c in row.values()] + [abs(row.constant)]
    assert max(coefficients) <= MAX_COEFFICIENT
