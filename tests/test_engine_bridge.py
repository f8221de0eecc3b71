"""The bridge from a Formulation to the contest engine (``solvers.trws``, backend "trws")."""

from __future__ import annotations

import numpy as np
import pytest

from spyreopt.contest.reduce import BIG
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node
from spyreopt.solvers import greedy
from spyreopt.solvers import trws as es
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import random_formulation


def _assignments(f: Formulation, seed: int, count: int = 40):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield [int(rng.integers(n.num_candidates)) for n in f.nodes]


def _allowed(f: Formulation, a) -> bool:
    return all(e.is_allowed(a[e.u], a[e.v]) for e in f.edges)


@pytest.mark.parametrize("seed", range(8))
def test_conversion_is_exact_without_max_terms(seed):
    f = random_formulation(seed, num_nodes=9, max_terms=False)
    inst = es.to_instance(f)
    assert inst.usage_limit == f.usage_limit
    checked = 0
    for a in _assignments(f, seed):
        if _allowed(f, a):
            assert es.instance_cost(inst, a) == f.evaluate(a)
            checked += 1
        else:  # a forbidden pair costs the contest's "never"
            assert es.instance_cost(inst, a) >= BIG
    assert checked


@pytest.mark.parametrize("seed", range(8))
def test_max_terms_become_an_upper_bound(seed):
    f = random_formulation(seed, num_nodes=9, max_terms=True)
    inst = es.to_instance(f)
    for a in _assignments(f, seed):
        if _allowed(f, a):
            assert es.instance_cost(inst, a) >= f.evaluate(a)


def test_a_max_term_over_one_incident_edge_is_exact():
    costs = np.array([[0, 5], [7, 1]], np.int64)
    nodes = (
        Node("a", np.array([1, 2], np.int64), np.zeros(2, np.int64), (0, 1)),
        Node("b", np.array([3, 0], np.int64), np.zeros(2, np.int64), (1, 2)),
    )
    alts = (
        Affine(np.array([4, 0], np.int64), ((0, np.array([[1, 9], [2, 0]], np.int64)),)),
        Affine(np.array([0, 6], np.int64), ((0, np.array([[3, 0], [0, 8]], np.int64)),)),
    )
    f = Formulation(nodes, (Edge(0, 1, costs),), None, (MaxTerm(1, alts),))
    inst = es.to_instance(f)
    for a in ([0, 0], [0, 1], [1, 0], [1, 1]):
        assert es.instance_cost(inst, a) == f.evaluate(a)


@pytest.mark.parametrize("seed", range(4))
def test_the_bridged_start_is_valid_and_judged_by_evaluate(seed):
    f = random_formulation(seed, num_nodes=12, tight=0.4, placement=True)
    sol = es.engine_solution(f, seed=0, rounds=20, deadline=float("inf"))
    assert sol is not None
    assert f.violations(sol.assignment, sol.offsets) == []
    assert sol.objective == f.evaluate(sol.assignment)


@pytest.mark.parametrize("seed", range(3))
def test_never_worse_than_its_start(seed):
    f = random_formulation(seed, num_nodes=14, tight=0.5, placement=True)
    start = greedy.solve(f, time_limit=2.0, seed=0)
    alone = solve_formulation(f, "trws", time_limit=5.0, seed=0, hint=start, rounds=10, then_anneal=False)
    assert alone.objective <= start.objective
    full = solve_formulation(f, "trws", time_limit=5.0, seed=0, hint=start, rounds=10, steps=2000)
    assert full.objective <= alone.objective
    assert f.violations(full.assignment, full.offsets) == []
    assert full.stats["engine"]["rounds_budget"] == 10


def test_deterministic_for_a_seed():
    f = random_formulation(3, num_nodes=14, tight=0.5, placement=True)
    runs = [solve_formulation(f, "trws", time_limit=5.0, seed=1, rounds=15, steps=2000) for _ in range(2)]
    assert runs[0].assignment == runs[1].assignment
    assert runs[0].offsets == runs[1].offsets
    assert runs[0].objective == runs[1].objective


def test_rounds_must_be_positive():
    from spyreopt.errors import SolverError

    with pytest.raises(SolverError, match="rounds"):
        solve_formulation(random_formulation(0), "trws", time_limit=2.0, rounds=0)


def test_auto_starts_a_large_problem_from_the_engine_and_says_so():
    import spyreopt as so

    g = so.workloads.get("transformer_block")  # 30 compute ops: past auto's exact class
    plan = so.solve(g, time_limit=20, seed=0)  # at 10 s CP-SAT's floor comes first and leaves the engine no share
    plan.validate()
    stages = plan.stats["auto"]["stages"]
    assert [s["backend"] for s in stages][:3] == ["hbm", "greedy", "trws"]
    assert plan.stats["auto"]["method"].startswith("trws+anneal")  # "+lns" when CP-SAT's share is worth a stage
    assert "contest engine's start (trws) was kept in" in plan.message
    assert plan.stats["objective_units"] <= min(s["objective"] for s in stages[:2])


@pytest.mark.parametrize("seed", range(6))
def test_copies_priced_at_the_anchor_are_exact_there(seed):
    f = random_formulation(seed, num_nodes=9, max_terms=False, edge_usage=True)
    priced = 0
    for a in _assignments(f, seed, count=10):
        if not _allowed(f, a):
            continue
        inst = es.to_instance(f, anchor=a)
        priced += len(inst.k) - len(f.nodes)
        x = np.array(a + [a[int(v)] for v in inst.eu[len(f.edges) :]], np.int64)  # every copy follows its consumer
        assert es.instance_cost(inst, x) == f.evaluate(a)
        prof = np.zeros(max(f.num_steps, int(inst.hi.max(initial=0))) + 1, np.int64)
        for i, s in enumerate(x):
            prof[inst.lo[i] : inst.hi[i]] += inst.usage[inst.off[i] + s]
        assert prof[: f.num_steps].tolist() == f.usage_profile(a)
    assert priced  # some copy was live
