"""CP-SAT backend: exact optimum on tiny instances, validity, determinism, warm start, sentinels, diagnosis."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from spyreopt.errors import SolverError
from spyreopt.model.formulation import Edge, Formulation, Node, Placement
from spyreopt.solvers import cpsat, greedy
from spyreopt.solvers.cpsat_model import reduce_formulation
from spyreopt.solvers.placement import Buffer, place
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import random_formulation

IOPDDL = Path(__file__).parent / "data" / "iopddl"


def _placeable(f: Formulation, a) -> bool:
    """Independent referee: the placement engine's exact search."""
    specs = f.buffers(a)
    if f.placement is None or not specs:
        return True
    bufs = [Buffer(f"{b.key[0]}{b.key[1]}", b.lower, b.upper, b.size, f.placement.alignment) for b in specs]
    result = place(bufs, f.placement.capacity, method="search", time_limit=10)
    assert result.status in ("placed", "infeasible"), result.status
    return result.status == "placed"


def brute_force(f: Formulation) -> int | None:
    """The optimum by enumeration (allowed pairs and usage limit, then placement, cheapest first)."""
    memory_ok = []
    for a in itertools.product(*(range(n.num_candidates) for n in f.nodes)):
        if not any("not allowed" in v or "exceeds" in v for v in f.violations(a, {})):
            memory_ok.append((f.evaluate(a), a))
    for value, a in sorted(memory_ok):
        if _placeable(f, a):
            return value
    return None


def check_valid(f: Formulation, sol) -> None:
    assert sol.objective == f.evaluate(sol.assignment)
    assert f.violations(sol.assignment, sol.offsets if f.placement else None) == []


FEATURES = [
    dict(),
    dict(max_terms=False, edge_usage=False),
    dict(forbid_prob=0.5, tight=0.3),
    dict(tight=0.0),
    dict(edge_prob=0.8, max_candidates=3),
]


@pytest.mark.parametrize("seed", range(20))
def test_optimal_against_brute_force(seed):
    f = random_formulation(seed, num_nodes=5, **FEATURES[seed % len(FEATURES)])
    sol = cpsat.solve(f, time_limit=10, seed=0)
    check_valid(f, sol)
    assert sol.status == "optimal"
    assert sol.objective == brute_force(f)
    assert sol.bound == sol.objective and sol.stats["gap"] == 0
    assert sol.stats["model_objective"] == sol.objective  # the CP-SAT objective is the evaluator's


@pytest.mark.parametrize("seed", range(12))
def test_optimal_with_placement_against_brute_force(seed):
    f = random_formulation(100 + seed, num_nodes=5, placement=True, tight=[0.3, 0.5, 0.7][seed % 3])
    sol = cpsat.solve(f, time_limit=10, seed=0)
    check_valid(f, sol)
    assert sol.status == "optimal"
    assert sol.objective == brute_force(f)
    assert set(sol.offsets) == {b.key for b in f.buffers(sol.assignment)}
    assert all(off % f.placement.alignment == 0 for off in sol.offsets.values())


def _pressure(limit: int) -> Formulation:
    """Two nodes live together; the cheap candidate of each needs 256 bytes, the other none."""
    nodes = tuple(Node(f"n{i}", np.array([100, 10]), np.array([0, 256]), (0, 2)) for i in range(2))
    edge = Edge(0, 1, np.array([[0, 5], [5, 0]]))
    return Formulation(nodes, (edge,), usage_limit=limit, placement=Placement(limit, 128))


def test_capacity_pressure_forces_zero_memory_candidate():
    sol = cpsat.solve(_pressure(256), time_limit=5, seed=0)
    check_valid(_pressure(256), sol)
    assert sorted(sol.assignment) == [0, 1] and sol.objective == 115 and sol.status == "optimal"
    sol = cpsat.solve(_pressure(128), time_limit=5, seed=0)
    assert sol.assignment == (0, 0) and sol.objective == 200 and sol.offsets == {}
    roomy = cpsat.solve(_pressure(512), time_limit=5, seed=0)
    assert roomy.assignment == (1, 1) and sorted(roomy.offsets.values()) == [0, 256]


def test_deterministic_for_a_seed():
    f = random_formulation(7, num_nodes=40, max_candidates=5, placement=True, tight=0.4)
    runs = [cpsat.solve(f, time_limit=4, seed=3) for _ in range(2)]
    assert runs[0].assignment == runs[1].assignment
    assert runs[0].offsets == runs[1].offsets
    assert runs[0].objective == runs[1].objective
    lns = [cpsat.solve(f, time_limit=4, seed=3, lns=True) for _ in range(2)]
    assert lns[0].assignment == lns[1].assignment and lns[0].offsets == lns[1].offsets
    two = [cpsat.solve(f, time_limit=4, seed=3, workers=2) for _ in range(2)]  # interleaved search
    assert two[0].assignment == two[1].assignment and two[0].offsets == two[1].offsets
    for sol in runs + lns + two:
        check_valid(f, sol)
        assert not sol.stats["wall_limit_hit"]


@pytest.mark.parametrize("seed", range(4))
def test_never_worse_than_greedy(seed):
    f = random_formulation(seed, num_nodes=60, max_candidates=6, placement=seed % 2 == 0, tight=0.3)
    g = greedy.solve(f, time_limit=2, seed=seed)
    for lns in (False, True):
        sol = cpsat.solve(f, time_limit=2, seed=seed, lns=lns)
        check_valid(f, sol)
        assert sol.objective <= g.objective
        assert sol.bound is not None and sol.bound <= sol.objective


def test_returns_the_greedy_plan_when_cpsat_finds_nothing(monkeypatch):
    f = random_formulation(3, num_nodes=8, placement=True)
    real = cpsat._Search._solve

    def nothing(self, *args, **kwargs):
        code, solver, _ = real(self, *args, **kwargs)
        return cpsat.cp_model.UNKNOWN, solver, None

    monkeypatch.setattr(cpsat._Search, "_solve", nothing)
    sol = cpsat.solve(f, time_limit=2, seed=0)
    check_valid(f, sol)
    assert sol.status == "feasible" and sol.stats["source"] == "greedy-hint"
    assert "greedy" in sol.message
    assert sol.objective <= greedy.solve(f, time_limit=2, seed=0).objective


def test_hint_option_and_invalid_hint():
    f = random_formulation(11, num_nodes=5)
    best = cpsat.solve(f, time_limit=5, seed=0)
    again = cpsat.solve(f, time_limit=5, seed=0, hint=best)
    assert again.objective == best.objective and again.stats["hint"] == "given"
    bad = [int(np.argmax(n.usages)) for n in f.nodes]  # the memory-hungriest plan: over a tight limit
    if f.violations(bad, {}):
        sol = cpsat.solve(f, time_limit=5, seed=0, hint=bad)
        assert sol.stats["hint"].startswith("invalid")
        assert sol.objective == best.objective


def _sentinel(zero_memory_cost: int) -> Formulation:
    """IOPDDL-style: 1e18 entries; node 1's only zero-memory candidate may itself be a sentinel."""
    huge = 10**18
    n0 = Node("n0", np.array([5, 3, huge]), np.array([0, 0, 0]), (0, 2))
    n1 = Node("n1", np.array([zero_memory_cost, 1]), np.array([0, 512]), (0, 2))
    n2 = Node("n2", np.array([huge, 7, 2]), np.array([256, 256, 256]), (1, 3))
    e01 = Edge(0, 1, np.array([[0, 4], [huge, 1], [0, 0]]))
    e12 = Edge(1, 2, np.array([[huge, 2, 9], [3, huge, 0]]))
    return Formulation((n0, n1, n2), (e01, e12), usage_limit=512)


def test_sentinel_costs_forbidden_exactly():
    f = _sentinel(2)
    sol = cpsat.solve(f, time_limit=5, seed=0)
    check_valid(f, sol)
    assert sol.stats["sentinel_threshold"] > 10**17  # an excess over the term minimum
    assert sol.status == "optimal" and sol.objective == brute_force(f)


def test_sentinel_rule_dropped_when_only_sentinels_fit():
    f = _sentinel(10**18)  # the only way to fit node 2 beside node 1 is node 1's sentinel candidate
    sol = cpsat.solve(f, time_limit=5, seed=0)
    check_valid(f, sol)
    assert "sentinel_rule" in sol.stats
    assert sol.objective == brute_force(f) and sol.objective >= 10**18


def test_infeasible_with_diagnosis():
    nodes = tuple(Node(f"n{i}", np.array([1, 2]), np.array([256, 384]), (0, 2)) for i in range(2))
    f = Formulation(nodes, (), usage_limit=384)
    sol = cpsat.solve(f, time_limit=5, seed=0)
    assert sol.status == "infeasible" and sol.objective is None
    d = sol.stats["diagnosis"]
    assert d["time_step"] == 0 and d["min_limit_at_least"] == 512 and d["over"] == 128
    assert "512" in sol.message


def test_dominated_and_duplicate_candidates_pruned():
    f = random_formulation(5, num_nodes=5)
    n0 = f.nodes[0]
    twin = Node(n0.name, np.append(n0.costs, n0.costs[0]), np.append(n0.usages, n0.usages[0]), n0.interval)
    edges = tuple(
        dataclasses.replace(
            e,
            costs=np.vstack([e.costs, e.costs[:1]]),
            allowed=None if e.allowed is None else np.vstack([e.allowed, e.allowed[:1]]),
            usages=None if e.usages is None else np.vstack([e.usages, e.usages[:1]]),
        )
        if e.u == 0
        else e
        for e in f.edges
    )
    assert not (any(e.v == 0 for e in f.edges) or f.max_terms_of(0)), "the generated instance lost the shape this test needs"
    g = dataclasses.replace(f, nodes=(twin,) + f.nodes[1:], edges=edges, _incident={})
    red = reduce_formulation(g)
    assert red.counts["merged"] + red.counts["dominated"] >= 1
    assert not red.masks[0][-1]  # the duplicate of candidate 0 is gone
    assert cpsat.solve(g, time_limit=5, seed=0).objective == cpsat.solve(f, time_limit=5, seed=0).objective


def test_options_checked_and_registry():
    f = random_formulation(1, num_nodes=4)
    with pytest.raises(SolverError):
        cpsat.solve(f, time_limit=1, seed=0, bogus=1)
    with pytest.raises(SolverError):
        cpsat.solve(f, time_limit=1, seed=0, workers=0)
    sol = solve_formulation(f, "cpsat", time_limit=5, seed=0, workers=2)
    check_valid(f, sol)
    assert sol.status == "optimal" and sol.stats["backend"] == "cpsat"
    for key in ("variables", "constraints", "deterministic_time", "source"):
        assert key in sol.stats
    free = cpsat.solve(f, time_limit=2, seed=0, deterministic=False)  # the wall clock only
    check_valid(f, free)
    assert free.objective == sol.objective


@pytest.mark.slow
@pytest.mark.parametrize("name", ["B", "G"])
def test_iopddl_instances(name):
    from spyreopt.formats.iopddl import load_iopddl

    path = IOPDDL / f"asplos-2025-iopddl-{name}.json.gz"
    assert path.exists(), f"{path} is missing: the vendored test data (tests/data/SOURCE.md) must be in the clone"
    f = load_iopddl(path)
    sol = cpsat.solve(f, time_limit=60, seed=0)
    check_valid(f, sol)
    assert sol.bound is not None and sol.bound <= sol.objective
